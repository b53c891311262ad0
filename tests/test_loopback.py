"""`referee._loopback`, the scripted servers' common part: a client that hangs up before its
answer (a timeout, a cancelled request) is no error of the server's, and prints nothing."""

from __future__ import annotations

import json
import socket
import struct
import time
import urllib.request

import pytest

from referee.judges.testing import FakeJudgeServer, Reply


def test_a_client_that_hangs_up_before_its_answer_prints_nothing(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with FakeJudgeServer(lambda request: Reply('{"score": 7}', delay=0.3)) as server:
        host, port = server.url.split("//")[1].split("/")[0].split(":")
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        with socket.create_connection((host, int(port))) as client:
            client.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: "
                           f"application/json\r\ncontent-length: {len(body)}\r\n\r\n{body}"
                           .encode())  # fmt: skip
            # Gone at once, with a reset: the server's answer meets a closed socket.
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        deadline = time.monotonic() + 10
        while len(server.requests) < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.6)  # past the scripted delay: the answer was written, and failed
        request = urllib.request.Request(f"{server.url}/chat/completions", body.encode(),
                                         {"content-type": "application/json"})  # fmt: skip
        with urllib.request.urlopen(request, timeout=10) as answer:  # the server still serves
            assert json.loads(answer.read())["choices"][0]["message"]["content"] == '{"score": 7}'
    said = capfd.readouterr()
    assert "Traceback" not in said.err and "BrokenPipe" not in said.err, said.err


def test_a_script_that_raises_is_still_printed(capfd: pytest.CaptureFixture[str]) -> None:
    def broken(request: dict[str, object]) -> Reply:
        raise RuntimeError("the script's own bug")

    with FakeJudgeServer(broken) as server:
        body = json.dumps({"model": "m", "messages": []}).encode()
        request = urllib.request.Request(f"{server.url}/chat/completions", body,
                                         {"content-type": "application/json"})  # fmt: skip
        with pytest.raises(ConnectionError, match="without response"):  # dropped, unanswered
            urllib.request.urlopen(request, timeout=10)
    assert "RuntimeError: the script's own bug" in capfd.readouterr().err
