"""`referee serve`, run as users run it (the CLI in its own process), over real HTTP."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import signal
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip(
    "aiohttp", reason="the serve extra is not installed (pip install 'referee[serve]')"
)

import referee
from referee import Rollout
from referee.judges.testing import FakeJudgeServer, Reply
from tests.support.judges import letter_judge
from tests.support.serving import ROLLOUTS, SPEC, Server, request, running


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    started: list[Server] = []

    def start(spec: dict[str, Any], *args: str) -> Server:
        path = tmp_path / f"spec{len(started)}.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))  # in order: gates first
        started.append(Server(path, *args))
        return started[-1]

    yield start
    for server in started:
        server.stop()


def test_health_and_score_give_what_referee_score_gives(serve: Any) -> None:
    server = serve(SPEC)
    assert request(server.url + "/health", method="GET") == (
        200, {"status": "ok", "reward": "answer", "in_flight": 0}
    )  # fmt: skip
    status, body = request(server.url + "/score", {"rollouts": ROLLOUTS})
    assert status == 200
    want = referee.score(referee.load(SPEC), [Rollout.model_validate(r) for r in ROLLOUTS])
    assert [s["reward"] for s in body["scores"]] == [w.value for w in want]
    assert [s["id"] for s in body["scores"]] == ["a", "b", "c"]
    assert body["scores"][0]["components"] == dict(want[0].components)
    failed = body["scores"][2]
    assert failed["reward"] is None and failed["failure"] == want[2].failure.to_dict()  # type: ignore[union-attr]


def test_openrlhf_protocol(serve: Any) -> None:
    server = serve(SPEC, "--failure-value", "-1")
    prompts = ["Q: 2+2?\nA: ", "Q: 3+3?\nA: ", "Q: x?\nA: "]
    answers = ["\\boxed{4}", "\\boxed{7}", "I don't know"]
    status, body = request(
        server.url + "/get_reward",
        {"query": [p + a for p, a in zip(prompts, answers, strict=True)], "prompts": prompts,
         "labels": ["4", "6", "1"]},
    )  # fmt: skip
    assert status == 200
    want = referee.score(
        referee.load(SPEC),
        [Rollout(prompt=p, completion=a, reference=r)
         for p, a, r in zip(prompts, answers, ["4", "6", "1"], strict=True)],
    )  # fmt: skip
    assert body["rewards"] == [want[0].value, want[1].value, -1.0]
    assert body["scores"] == body["rewards"]
    assert body["extra_logs"]["referee_failed"] == [0.0, 0.0, 1.0]
    assert set(body["extra_logs"]) == {
        "referee_failed", "referee/boxed", "referee/short",
        "referee/boxed/skipped", "referee/short/skipped",
    }  # fmt: skip


def test_openrlhf_labels_that_are_json_objects_are_decoded(serve: Any) -> None:
    spec = {"type": "field_match", "fields": {"a": "number"}}
    server = serve(spec)
    status, body = request(
        server.url + "/get_reward", {"query": ['{"a": 2}'], "labels": ['{"a": 2}']}
    )
    assert status == 200 and body["rewards"] == [1.0]


def test_errors_are_json_with_the_right_status(serve: Any) -> None:
    server = serve(SPEC, "--max-batch", "2")
    status, body = request(server.url + "/score", raw=b"{not json")
    assert status == 400 and body["error"]["type"] == "invalid_json"
    status, body = request(server.url + "/score", [1, 2])
    assert status == 400 and "JSON object" in body["error"]["message"]
    status, body = request(server.url + "/score", {"rollouts": "x"})
    assert status == 400 and "'rollouts' must be a list" in body["error"]["message"]
    status, body = request(server.url + "/score", {"rollouts": [{"completion": "x"}, {"id": "z"}]})
    assert status == 422 and body["error"]["message"].startswith("rollouts[1].completion")
    status, body = request(server.url + "/score", {"rollouts": ROLLOUTS})
    assert status == 413 and "max_batch 2" in body["error"]["message"]
    status, body = request(server.url + "/get_reward", {"query": ["a"], "prompts": ["a", "b"]})
    assert status == 400 and "2 prompts for 1 queries" in body["error"]["message"]
    status, body = request(server.url + "/nowhere", {})
    assert status == 404 and body["error"]["type"] == "not_found"
    status, body = request(server.url + "/score", method="GET")
    assert status == 405
    # After all that, it still serves.
    assert request(server.url + "/score", {"rollouts": ROLLOUTS[:1]})[0] == 200


GATED = {
    "name": "gated",
    "combine": "weighted",
    "components": {
        "valid": {"type": "json_valid", "weight": 0.2, "gate": True},
        "fields": {"type": "field_match", "fields": {"a": "number"}, "weight": 0.8},
    },
}


def test_openrlhf_extra_logs_say_skipped_not_zero(serve: Any) -> None:
    """A component a gate skipped has no value: NaN in extra_logs (it read 0.0, which dragged
    OpenRLHF's batch mean of the component down), with a per-sample skipped flag; every key
    keeps one number per query, as OpenRLHF needs."""
    server = serve(GATED, "--failure-value", "-1")
    queries = ['{"a": 1}', "not json", '{"a": 2}']
    status, body = request(
        server.url + "/get_reward", {"query": queries, "labels": ['{"a": 1}'] * 3}
    )
    assert status == 200
    extra = body["extra_logs"]
    assert set(extra) == {"referee_failed", "referee/valid", "referee/valid/skipped",
                          "referee/fields", "referee/fields/skipped"}  # fmt: skip
    assert all(len(values) == len(queries) for values in extra.values())
    assert extra["referee/valid"] == [1.0, 0.0, 1.0]
    assert extra["referee/valid/skipped"] == [0.0, 0.0, 0.0]
    fields = extra["referee/fields"]
    assert fields[0] == 1.0 and math.isnan(fields[1]) and fields[2] == 0.0
    assert extra["referee/fields/skipped"] == [0.0, 1.0, 0.0]
    assert body["rewards"] == [1.0, 0.0, 0.2]  # the gate's floor: a real reward, not a failure
    assert extra["referee_failed"] == [0.0, 0.0, 0.0]


NESTED = 100_000  # levels: Python's json gives up (RecursionError) near 1,000


def test_json_nested_too_deep_is_a_bad_request_not_a_crash(serve: Any) -> None:
    server = serve(SPEC)
    deep_array = b"[" * NESTED + b"]" * NESTED
    deep_object = b'{"a": ' * NESTED + b"1" + b"}" * NESTED
    for path in ("/score", "/get_reward"):
        for raw in (deep_array, deep_object):
            status, body = request(server.url + path, raw=raw)
            assert status == 400, body  # it was a 500 "internal"
            assert body["error"]["type"] == "invalid_json"
            assert "nested too deep" in body["error"]["message"]
    # A label is JSON text that /get_reward decodes: too deep there is the sender's error too.
    label = "[" * NESTED + "]" * NESTED
    status, body = request(server.url + "/get_reward", {"query": ["x"], "labels": [label]})
    assert status == 400 and body["error"]["message"].startswith("labels[0] is JSON nested too")
    assert request(server.url + "/score", {"rollouts": ROLLOUTS[:1]})[0] == 200


@referee.reward
async def slow(rollout: Rollout) -> float:
    await asyncio.sleep(0.5)
    return 1.0


@pytest.fixture
def in_process() -> Iterator[str]:
    """`referee serve` in a thread of this process, so that caplog sees what it logs."""
    with running(slow) as url:
        yield url


def wait_until(condition: Callable[[], bool], seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_client_that_leaves_costs_one_line_not_a_traceback(
    in_process: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    host, port = in_process.removeprefix("http://").split(":")
    body = json.dumps({"rollouts": [{"completion": "x"}]}).encode()
    head = b"POST /score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"

    # The client leaves while the reward is scoring its request.
    with socket.create_connection((host, int(port))) as client:
        client.sendall(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        wait_until(lambda: request(in_process + "/health", method="GET")[1]["in_flight"] > 0)
    wait_until(lambda: "before the answer" in caplog.text)

    # The client leaves halfway through its body, the handler reading it (the server's
    # "100 Continue" says the handler has started).
    with socket.create_connection((host, int(port))) as client:
        client.sendall(head + b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % 999)
        assert client.recv(64).startswith(b"HTTP/1.1 100")
        client.sendall(body)
    wait_until(lambda: "while sending" in caplog.text)  # it logged a traceback here

    assert request(in_process + "/score", json.loads(body))[0] == 200  # still serving
    lines = [r for r in caplog.records if "POST /score" in r.getMessage()]
    assert len(lines) == 2 and all(r.levelno == logging.INFO for r in lines)
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.WARNING]
    assert "Traceback" not in caplog.text


def judge_spec(judge: FakeJudgeServer) -> dict[str, Any]:
    return {"type": "rubric_judge", "rubric": "helpfulness", "model": "openai/j",
            "api_base": judge.url, "structured": "prompt", "cache": False}  # fmt: skip


def test_requests_wait_for_a_slot(serve: Any) -> None:
    starts: list[float] = []

    def slow(req: dict[str, Any]) -> Reply:
        starts.append(time.monotonic())
        return dataclasses.replace(letter_judge(req), delay=0.5)

    with FakeJudgeServer(slow) as judge:
        # --slow-after: the first request (a cold judge client) must not give its slot back.
        server = serve(judge_spec(judge), "--max-concurrent", "1", "--slow-after", "60")
        results: list[tuple[int, Any]] = []
        one = {"rollouts": [{"prompt": "q", "completion": "hello"}]}
        threads = [threading.Thread(target=lambda: results.append(request(server.url + "/score",
                   one))) for _ in range(2)]  # fmt: skip
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert [r[0] for r in results] == [200, 200]
    assert len(starts) == 2 and starts[1] - starts[0] >= 0.45  # the second waited its turn


def test_sigterm_finishes_requests_in_flight_then_exits(serve: Any) -> None:
    def slow(req: dict[str, Any]) -> Reply:
        return dataclasses.replace(letter_judge(req), delay=1.5)

    with FakeJudgeServer(slow) as judge:
        server = serve(judge_spec(judge))
        result: list[tuple[int, Any]] = []
        body = {"rollouts": [{"prompt": "q", "completion": "eee"}]}
        thread = threading.Thread(
            target=lambda: result.append(request(server.url + "/score", body))
        )
        thread.start()
        deadline = time.monotonic() + 10
        while request(server.url + "/health", method="GET")[1]["in_flight"] == 0:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        server.proc.send_signal(signal.SIGTERM)
        thread.join(timeout=30)
        assert server.proc.wait(timeout=30) == 0
    assert result and result[0][0] == 200
    assert result[0][1]["scores"][0]["reward"] is not None  # answered, not dropped
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(server.url + "/health", timeout=5)
