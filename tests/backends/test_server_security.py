"""`referee serve` exposed to hostile clients: the token, trust, limits, the body as data.

Each test attacks a real server (the CLI in its own process, on loopback, with real sockets)
and asserts the honest outcome: the request refused with its 4xx, the server still answering
an honest client, or the server refusing to start with a message that says how to fix it.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import resource
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip(
    "aiohttp", reason="the serve extra is not installed (pip install 'referee[serve]')"
)

import referee
from referee.backends.server import RewardService, is_loopback
from referee.judges.testing import FakeJudgeServer, Reply
from tests.support.judges import letter_judge
from tests.support.serving import ROLLOUTS, SPEC, Server

TOKEN = "s3cret-token-for-tests-0123456789"
WAIT = 30.0
"""Seconds a socket waits for what should come at once (a bound, not a measured time)."""

CODE_SPEC = {"type": "python_tests", "timeout": 5}
CODE_ROLLOUT = {
    "completion": "```python\ndef add(a, b):\n    return a + b\n```",
    "reference": {"test": "assert add(1, 2) == 3\nassert add(2, 2) == 4", "entry_point": "add"},
}


def call(
    url: str,
    body: Any = None,
    *,
    method: str = "POST",
    headers: dict[str, str] | None = None,
    raw: bytes | None = None,
) -> tuple[int, Any, dict[str, str]]:
    """Status, JSON body and headers of one request (any status)."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    headers = {"content-type": "application/json", **(headers or {})}
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=WAIT) as response:
            return response.status, json.loads(response.read()), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), dict(exc.headers)


def bearer(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def no_token_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REFEREE_SERVE_TOKEN", raising=False)


@pytest.fixture
def spec_path(tmp_path: Path) -> Any:
    def write(spec: dict[str, Any]) -> Path:
        path = tmp_path / f"spec{len(list(tmp_path.glob('spec*')))}.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        return path

    return write


@pytest.fixture
def serve(spec_path: Any, no_token_env: None) -> Iterator[Any]:
    started: list[Server] = []

    def start(spec: dict[str, Any], *args: str) -> Server:
        started.append(Server(spec_path(spec), *args))
        return started[-1]

    yield start
    for server in started:
        server.stop()


def refused_start(spec: Path, *args: str) -> str:
    """Run `referee serve` expecting it to refuse to start; its error output."""
    environ = {k: v for k, v in os.environ.items() if k != "REFEREE_SERVE_TOKEN"}
    proc = subprocess.run(
        [sys.executable, "-m", "referee.cli", "serve", "--spec", str(spec), "--port", "0",
         *args],
        capture_output=True, text=True, timeout=120, env=environ,
    )  # fmt: skip
    assert proc.returncode != 0, f"it started: {proc.stderr}"
    assert "serving" not in proc.stderr
    return proc.stderr


# --- the token -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.3.4.5", True),  # all of 127.0.0.0/8
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("::ffff:127.0.0.1", True),  # IPv4-mapped loopback
        ("0.0.0.0", False),  # every interface
        ("::", False),
        ("", False),  # aiohttp and asyncio read it as every interface
        ("10.0.0.5", False),
        ("myhost.example", False),  # a name resolves to whatever the resolver says
        ("localhost.example", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_a_bind_beyond_loopback_without_a_token_does_not_start(spec_path: Any, host: str) -> None:
    err = refused_start(spec_path(SPEC), "--host", host)
    assert f"refusing to listen on {host!r} without a token" in err
    assert "REFEREE_SERVE_TOKEN=" in err and "--token" in err  # how to set one
    assert "Traceback" not in err


def test_a_short_token_is_refused_without_being_echoed(spec_path: Any) -> None:
    err = refused_start(spec_path(SPEC), "--token", "hunter2")
    assert "at least 16" in err and "7 characters" in err
    assert "hunter2" not in err  # a secret is never printed


def test_every_endpoint_wants_the_token(serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REFEREE_SERVE_TOKEN", TOKEN)  # the environment variable's way
    server = serve(SPEC, "--host", "0.0.0.0")  # beyond loopback: with a token, it starts
    url = server.url.replace("0.0.0.0", "127.0.0.1")
    score = {"rollouts": ROLLOUTS[:1]}
    reward = {"query": ["\\boxed{4}"], "labels": ["4"]}
    endpoints = [("GET", "/health", None), ("POST", "/score", score),
                 ("POST", "/get_reward", reward), ("GET", "/nowhere", None)]  # fmt: skip
    wrong = [
        {},  # no header
        bearer("wrong-token-wrong-token-wrong"),
        bearer(TOKEN[:-1]),  # a prefix of the token
        bearer(TOKEN + "x"),
        {"Authorization": TOKEN},  # no scheme
        {"Authorization": "Basic " + base64.b64encode(f"{TOKEN}:".encode()).decode()},  # user
        {"Authorization": "Basic !!!not-base64"},
    ]
    for method, path, body in endpoints:
        for headers in wrong:
            status, answer, got = call(url + path, body, method=method, headers=headers)
            assert status == 401, (path, headers)
            assert answer["error"]["type"] == "unauthorized"
            assert "Authorization: Bearer <token>" in answer["error"]["message"]
            assert got["WWW-Authenticate"].startswith("Bearer")
    reward_spec = referee.load(SPEC)
    want_score = referee.score(reward_spec, [referee.Rollout.model_validate(ROLLOUTS[0])])
    want_reward = referee.score(reward_spec, [referee.Rollout(completion="\\boxed{4}",
                                                              reference="4")])  # fmt: skip
    basic = "Basic " + base64.b64encode(f"referee:{TOKEN}".encode()).decode()
    for headers in (bearer(), {"Authorization": basic}, {"authorization": f"bearer {TOKEN}"}):
        assert call(url + "/health", method="GET", headers=headers)[0] == 200
        status, answer, _ = call(url + "/score", score, headers=headers)
        assert status == 200 and answer["scores"][0]["reward"] == want_score[0].value
        status, answer, _ = call(url + "/get_reward", reward, headers=headers)
        assert status == 200 and answer["rewards"] == [want_reward[0].value]
        assert call(url + "/nowhere", method="GET", headers=headers)[0] == 404


@pytest.fixture(scope="module")
def agent() -> Any:
    pytest.importorskip("transformers", reason="the family tokenizers need transformers")
    return pytest.importorskip(
        "openrlhf.utils.agent", reason="openrlhf is not installed (pip install --no-deps "
        "openrlhf==0.11.2)",
    )  # fmt: skip


def test_openrlhf_s_own_client_sends_the_token_in_its_url(
    agent: Any, serve: Any, tmp_path: Path
) -> None:
    """OpenRLHF's HTTP client (aiohttp, no headers of its own) sends the URL's userinfo as
    basic authentication: --reward.remote_url http://referee:TOKEN@host/get_reward works."""
    from tests.support.openrlhf import ANSWERS, FAMILIES, clean_scores, run_openrlhf
    from tests.support.openrlhf import SPEC as EXTRACTION

    server = serve(EXTRACTION, "--token", TOKEN)
    fam = FAMILIES["chatml"]
    tok = fam.make()
    prompt = fam.prompt(tok)
    target = server.url.replace("http://", f"http://referee:{TOKEN}@") + "/get_reward"
    got = [run_openrlhf(agent, target, tok, prompt, a, fam.stop)["reward"] for a in ANSWERS]
    assert got == [[v] for v in clean_scores(prompt)]
    assert got[0] == [1.0]


# --- trust ---------------------------------------------------------------------------------


def test_a_spec_that_runs_references_code_is_refused_without_trust(spec_path: Any) -> None:
    short = {"type": "length", "unit": "chars", "max_length": 400, "weight": 0.1}
    tests = {**CODE_SPEC, "weight": 0.9}
    spec = {"name": "code", "combine": "weighted", "components": {"tests": tests, "short": short}}
    err = refused_start(spec_path(spec))
    assert "refusing to serve this spec to clients it does not trust" in err
    assert "'tests' runs the test code" in err  # the component, and what it would do
    assert "'short'" not in err  # a reward that reads references as data is not named
    assert "--trust-clients" in err
    assert "Traceback" not in err


def test_a_spec_that_runs_references_code_is_served_when_trusted(serve: Any) -> None:
    server = serve(CODE_SPEC, "--trust-clients")
    status, body, _ = call(server.url + "/score", {"rollouts": [CODE_ROLLOUT]})
    assert status == 200 and body["scores"][0]["reward"] == 1.0


def test_the_service_refuses_and_keeps_its_trust_setting() -> None:
    """For a library caller, and for later checks per request: the trust is on the object."""
    reward = referee.load(CODE_SPEC)
    with pytest.raises(ValueError, match="'reward' runs the test code"):
        RewardService(reward)
    assert RewardService(reward, trust_clients=True).trust_clients is True
    assert RewardService(referee.load(SPEC)).trust_clients is False  # no powers: no question


# --- the body is data ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "key"),
    [
        # a spec, a reward or options a client hopes the server will take
        ("/score", {"rollouts": ROLLOUTS[:1], "spec": "/etc/passwd"}, "spec"),
        ("/score", {"rollouts": ROLLOUTS[:1], "reward": {"type": "python_tests"}}, "reward"),
        ("/score", {"rollouts": ROLLOUTS[:1], "options": {"timeout": 1e9}}, "options"),
        ("/get_reward", {"query": ["\\boxed{4}"], "labels": ["4"], "spec_file": "/x"}, "spec_file"),
        ("/get_reward", {"query": ["\\boxed{4}"], "trust_clients": True}, "trust_clients"),
    ],
)
def test_a_request_cannot_choose_what_scores_it(serve: Any, path: str, body: Any, key: str):
    server = serve(SPEC)
    status, answer, _ = call(server.url + path, body)
    assert status == 400, answer  # it was scored with the key ignored
    assert answer["error"]["message"].startswith(f"unknown key {key!r}")
    assert "cannot choose the spec" in answer["error"]["message"]


# --- limits ----------------------------------------------------------------------------------


def test_a_body_over_the_limit_gets_413_on_every_endpoint(serve: Any) -> None:
    server = serve(SPEC, "--max-body-mib", "0.01")  # 10,485 bytes
    big = {"rollouts": [{**ROLLOUTS[0], "prompt": "x" * 20_000}]}
    for path, body in (("/score", big), ("/get_reward", {"query": ["x" * 20_000]})):
        status, answer, headers = call(server.url + path, body)
        assert status == 413, answer
        assert answer["error"]["type"] == "body_too_large"
        assert "max_body of 10485 bytes" in answer["error"]["message"]
        assert "--max-body-mib" in answer["error"]["message"]
        assert headers["Connection"] == "close"
    assert call(server.url + "/score", {"rollouts": ROLLOUTS[:1]})[0] == 200


def test_a_compressed_body_is_limited_by_its_decompressed_size(serve: Any) -> None:
    """A gzip bomb: 50 kB on the wire, 50 MB once inflated (the limit's count)."""
    server = serve(SPEC, "--max-body-mib", "1")
    inflated = json.dumps({"rollouts": [{**ROLLOUTS[0], "prompt": " " * 50_000_000}]})
    bomb = gzip.compress(inflated.encode(), compresslevel=9)
    assert len(bomb) < 100_000
    status, answer, _ = call(server.url + "/score", raw=bomb,
                             headers={"Content-Encoding": "gzip"})  # fmt: skip
    assert status == 413 and answer["error"]["type"] == "body_too_large"
    small = gzip.compress(json.dumps({"rollouts": ROLLOUTS[:1]}).encode())
    status, answer, _ = call(server.url + "/score", raw=small, headers={"Content-Encoding": "gzip"})
    plain = call(server.url + "/score", {"rollouts": ROLLOUTS[:1]})
    assert status == 200 and answer == plain[1]  # a small one is read as sent uncompressed


def test_a_body_that_does_not_decompress_is_a_bad_request(serve: Any) -> None:
    server = serve(SPEC)
    status, answer, _ = call(server.url + "/score", raw=b"\x1f\x8b not gzip at all",
                             headers={"Content-Encoding": "gzip"})  # fmt: skip
    assert status == 400 and answer["error"]["type"] == "invalid_body"
    assert answer["error"]["message"].startswith("the request body cannot be read")
    assert call(server.url + "/score", {"rollouts": ROLLOUTS[:1]})[0] == 200


def test_a_chunked_body_over_the_limit_gets_413(serve: Any) -> None:
    """No Content-Length to refuse up front: counted as it arrives."""
    server = serve(SPEC, "--max-body-mib", "0.01")
    chunk = b"x" * 4096
    head = (b"POST /score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")  # fmt: skip
    with connect(server) as client:
        client.sendall(head)
        for _ in range(4):  # 16 kB
            client.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        status, body = read_answer(client)
    assert status == 413 and body["error"]["type"] == "body_too_large"


def connect(server: Server) -> socket.socket:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=WAIT)
    return sock


def read_answer(sock: socket.socket) -> tuple[int, Any]:
    """The status and JSON body of the one answer on `sock` (until the server closes it)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = [int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:")]  # fmt: skip
        if length and len(body) >= length[0]:
            break
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def test_a_body_that_trickles_gets_408_and_its_connection_closed(serve: Any) -> None:
    server = serve(SPEC, "--io-timeout", "1")
    with connect(server) as client:
        client.sendall(b"POST /score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"Content-Length: 100\r\n\r\n{\"rollouts\": ")  # fmt: skip
        status, body = read_answer(client)  # it would wait for the rest for good
        assert status == 408 and body["error"]["type"] == "request_timeout"
        assert client.recv(1) == b""  # closed
    assert call(server.url + "/score", {"rollouts": ROLLOUTS[:1]})[0] == 200


def test_a_connection_that_never_finishes_its_headers_is_closed(serve: Any) -> None:
    """Slowloris: headers sent a line at a time, never ended, are not waited for an hour."""
    server = serve(SPEC, "--idle-timeout", "1")
    with connect(server) as silent, connect(server) as slow:
        slow.sendall(b"POST /score HTTP/1.1\r\nHost: x\r\n")
        slow.sendall(b"X-Slow: 1\r\n")
        assert silent.recv(1) == b""  # closed by the server (aiohttp's default was 3630 s)
        assert slow.recv(1) == b""


@pytest.fixture
def many_files() -> Iterator[int]:
    """Room in this process for the connections a test opens."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 3000
    if hard != resource.RLIM_INFINITY and hard < want:
        pytest.skip(f"this process may open {hard} files; the test needs {want}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    yield want
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def low_files_server(spec: Path, *args: str) -> Server:
    """A server whose process starts with a soft limit of 512 open files, as many hosts give."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (512, hard))  # inherited by the child
    try:
        return Server(spec, *args)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_thousand_idle_connections_do_not_lock_out_a_new_client(
    many_files: int, spec_path: Any, no_token_env: None
) -> None:
    """Half never send a byte, half send half a request's headers; then an honest client
    scores. Unlimited, the server ran out of files and stopped accepting anyone."""
    server = low_files_server(spec_path(SPEC), "--max-connections", "200")
    idle: list[socket.socket] = []
    try:
        for i in range(1000):
            sock = connect(server)
            if i % 2:
                sock.sendall(b"POST /score HTTP/1.1\r\nHost: x\r\n")
            idle.append(sock)
        status, body, _ = call(server.url + "/score", {"rollouts": ROLLOUTS})
        assert status == 200
        assert [s["reward"] for s in body["scores"]] == [
            s.value for s in referee.score(referee.load(SPEC), [
                referee.Rollout.model_validate(r) for r in ROLLOUTS])
        ]  # fmt: skip
        # The oldest were given up for newer ones: the server holds at most its limit.
        deadline = time.monotonic() + WAIT
        while sum(map(_closed, idle)) < 1000 - 200:
            assert time.monotonic() < deadline, f"{sum(map(_closed, idle))} closed"
            time.sleep(0.1)
    finally:
        for sock in idle:
            sock.close()
        server.stop()


def _closed(sock: socket.socket) -> bool:
    """Whether the server closed `sock` (without waiting)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def test_the_default_limits_fit_the_files_a_process_is_given(
    many_files: int, spec_path: Any, no_token_env: None
) -> None:
    """With the defaults and a soft limit of 512 files, a thousand idle connections fit: the
    server raises its own limit to what --max-connections needs."""
    server = low_files_server(spec_path(SPEC))
    idle = []
    try:
        idle = [connect(server) for _ in range(1000)]
        assert call(server.url + "/score", {"rollouts": ROLLOUTS[:1]})[0] == 200
    finally:
        for sock in idle:
            sock.close()
        server.stop()


def test_more_connections_than_the_hard_file_limit_allows_is_refused(spec_path: Any) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard limit on open files here")
    err = refused_start(spec_path(SPEC), "--max-connections", str(hard))
    assert f"max_connections {hard} needs" in err and "lower --max-connections" in err


def test_with_every_connection_busy_a_new_one_gets_503_and_the_server_recovers(
    serve: Any,
) -> None:
    """Two requests held by a judge fill --max-connections 2: a third connection is answered
    503 at once rather than queued; once they finish, requests are served again. The judge
    holds them until the third has its answer (a fixed delay could run out first on a loaded
    machine, and the third would be served)."""

    asked: list[float] = []
    release = threading.Event()

    def slow(req: dict[str, Any]) -> Reply:
        asked.append(time.monotonic())
        release.wait(WAIT)
        return letter_judge(req)

    with FakeJudgeServer(slow) as judge:
        spec = {"type": "rubric_judge", "rubric": "helpfulness", "model": "openai/j",
                "api_base": judge.url, "structured": "prompt", "cache": False}  # fmt: skip
        server = serve(spec, "--max-connections", "2", "--slow-after", "60")
        one = {"rollouts": [{"prompt": "q", "completion": "hello"}]}
        results: list[int] = []
        threads = [threading.Thread(target=lambda: results.append(call(server.url + "/score",
                   one)[0])) for _ in range(2)]  # fmt: skip
        for t in threads:
            t.start()
        # Both are busy once the judge has both requests (a probe over HTTP would take a
        # connection itself); a third connection is then answered 503 and closed at once.
        deadline = time.monotonic() + WAIT
        while len(asked) < 2:
            assert time.monotonic() < deadline, "the two requests never reached the judge"
            time.sleep(0.02)
        try:
            with connect(server) as third:
                status, body = read_answer(third)
        finally:
            release.set()
        assert status == 503 and body["error"]["type"] == "too_many_connections"
        for t in threads:
            t.join()
    assert results == [200, 200]
    assert call(server.url + "/health", method="GET")[0] == 200
