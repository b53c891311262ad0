"""The judge client against a real OpenAI-compatible server on 127.0.0.1, on both transports
(referee's own HTTP one, and litellm)."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from referee._aio import run_sync
from referee.judges import (
    BudgetExceeded,
    JudgeClient,
    JudgeError,
    JudgeTimeout,
    VerdictCache,
    set_spend_cap,
)
from referee.judges import client as client_module
from referee.judges.testing import FakeJudgeServer, Fault, Reply
from tests.support.extras import JUDGES
from tests.support.transports import each_transport  # noqa: F401 (autouse: both transports)

pytestmark = JUDGES


class Grade(BaseModel):
    score: int
    reason: str = ""


MESSAGES = [{"role": "user", "content": "Grade this answer: 42"}]


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The client's waits (backoff, Retry-After, rate limit), recorded instead of slept: a
    fake clock moves on by each wait."""
    seen: list[float] = []
    now = [1000.0]

    async def record(seconds: float) -> None:
        seen.append(seconds)
        now[0] += seconds

    monkeypatch.setattr(client_module, "_sleep", record)
    monkeypatch.setattr(client_module, "_clock", lambda: now[0])
    return seen


@pytest.fixture(autouse=True)
def no_cap() -> Iterator[None]:
    set_spend_cap(None)
    yield
    set_spend_cap(None)


def client(server: FakeJudgeServer, tmp_path: Path, **kw: Any) -> JudgeClient:
    options: dict[str, Any] = {
        "model": "openai/gpt-4.1-mini",
        "api_base": server.url,
        "cache_path": str(tmp_path / "cache.sqlite"),
        "timeout": 2.0,
    }
    options.update(kw)
    return JudgeClient(**options)


def judge(c: JudgeClient, messages: list[dict[str, Any]] = MESSAGES) -> Any:
    return run_sync(c.judge(messages, Grade, version="v1"))


def test_verdict_tokens_and_cost(tmp_path: Path) -> None:
    with FakeJudgeServer(lambda r: Reply('{"score": 7, "reason": "fine"}')) as server:
        v = judge(client(server, tmp_path))
    assert v.value == Grade(score=7, reason="fine")
    assert (v.prompt_tokens, v.completion_tokens) == (50, 10)
    assert v.cost > 0  # litellm's bundled price for gpt-4.1-mini
    assert not v.cached


def test_json_is_found_in_chatty_replies(tmp_path: Path) -> None:
    with FakeJudgeServer(
        lambda r: Reply('Sure! Here it is:\n```json\n{"score": 3}\n```')
    ) as server:
        assert judge(client(server, tmp_path, structured="prompt")).value.score == 3


def test_json_schema_output_is_requested(tmp_path: Path) -> None:
    with FakeJudgeServer(lambda r: Reply('{"score": 1}')) as server:
        judge(client(server, tmp_path, structured="json_schema"))
        fmt = server.requests[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"]["required"] == ["score"]


def test_cache_makes_a_second_scoring_free(tmp_path: Path) -> None:
    with FakeJudgeServer(lambda r: Reply('{"score": 5}')) as server:
        c = client(server, tmp_path)
        first, second = judge(c), judge(c)
        assert len(server.requests) == 1
    assert second.cached and second.cost == 0.0 and second.value == first.value
    other = [{"role": "user", "content": "Grade this answer: 43"}]
    with FakeJudgeServer(lambda r: Reply('{"score": 6}')) as server:
        assert judge(client(server, tmp_path), other).value.score == 6  # a new question is asked


def test_cache_is_shared_by_processes_writing_at_once(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    writer = (
        "import sys\nfrom referee.judges import VerdictCache\n"
        "c = VerdictCache(sys.argv[1])\n"
        "for i in range(200):\n    c.put(f'{sys.argv[2]}-{i}', {'raw': str(i)})\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", writer, str(path), name]) for name in "abc"]
    assert all(p.wait(60) == 0 for p in procs)
    cache = VerdictCache(path)
    assert len(cache) == 600 and cache.get("b-199") == {"raw": "199"}


def test_retries_server_errors_then_succeeds(tmp_path: Path, waits: list[float]) -> None:
    replies = iter([Fault(500), Fault(503), Reply('{"score": 9}')])
    with FakeJudgeServer(lambda r: next(replies)) as server:
        assert judge(client(server, tmp_path, backoff=0.5)).value.score == 9
        assert len(server.requests) == 3
    assert (
        len(waits) == 2 and 0.25 <= waits[0] <= 0.5 and 0.5 <= waits[1] <= 1.0
    )  # jittered, doubling


def test_honours_retry_after_on_429(tmp_path: Path, waits: list[float]) -> None:
    replies = iter([Fault(429, {"retry-after": "7"}), Reply('{"score": 2}')])
    with FakeJudgeServer(lambda r: next(replies)) as server:
        assert judge(client(server, tmp_path)).value.score == 2
    assert waits == [7.0]


def test_a_hanging_server_times_out(tmp_path: Path, waits: list[float]) -> None:
    with FakeJudgeServer(lambda r: Fault(0, delay=3.0)) as server:
        with pytest.raises(JudgeTimeout):
            judge(client(server, tmp_path, timeout=0.5, retries=1))
        assert len(server.requests) == 2


def test_client_errors_are_not_retried(tmp_path: Path, waits: list[float]) -> None:
    with FakeJudgeServer(lambda r: Fault(400)) as server:
        with pytest.raises(JudgeError, match="BadRequest"):
            judge(client(server, tmp_path))
        assert len(server.requests) == 1 and waits == []


def test_one_repair_attempt_then_failure(tmp_path: Path) -> None:
    replies = iter([Reply("I think it is good."), Reply('{"score": 4}')])
    with FakeJudgeServer(lambda r: next(replies)) as server:
        assert judge(client(server, tmp_path, structured="prompt")).value.score == 4
        assert "not valid" in server.requests[1]["messages"][-1]["content"]
    with FakeJudgeServer(lambda r: Reply('{"score": "high"}')) as server:
        with pytest.raises(JudgeError, match="not a valid verdict"):
            judge(client(server, tmp_path, structured="prompt", cache=False))
        assert len(server.requests) == 2  # the call and exactly one repair


def test_spend_cap_stops_further_calls(tmp_path: Path) -> None:
    with FakeJudgeServer(lambda r: Reply('{"score": 1}')) as server:
        c = client(server, tmp_path, cache=False)
        first = judge(c)
        set_spend_cap(first.cost / 2)  # already over
        with pytest.raises(BudgetExceeded):
            judge(c)
        assert len(server.requests) == 1


def test_missing_api_key_variable_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REFEREE_TEST_KEY", raising=False)
    with FakeJudgeServer(lambda r: Reply('{"score": 1}')) as server:
        with pytest.raises(JudgeError, match="REFEREE_TEST_KEY"):
            judge(client(server, tmp_path, api_key_env="REFEREE_TEST_KEY"))
        assert server.requests == []


def test_concurrency_limit_is_shared(tmp_path: Path) -> None:
    lock, state = threading.Lock(), {"now": 0, "peak": 0}

    def script(request: dict[str, Any]) -> Reply:
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        import time

        time.sleep(0.05)
        with lock:
            state["now"] -= 1
        return Reply('{"score": 1}')

    with FakeJudgeServer(script) as server:
        c = client(server, tmp_path, max_in_flight=3, cache=False, model="openai/gpt-4o-mini")

        async def many() -> None:
            await asyncio.gather(*(c.judge(MESSAGES, Grade) for _ in range(12)))

        run_sync(many())
    assert state["peak"] == 3


def test_rate_limit_waits(tmp_path: Path, waits: list[float]) -> None:
    with FakeJudgeServer(lambda r: Reply('{"score": 1}')) as server:
        c = client(server, tmp_path, rpm=60, cache=False, model="openai/gpt-4.1-nano")
        for _ in range(3):
            judge(c)
    assert waits == [pytest.approx(1.0), pytest.approx(1.0)]  # one request a second


def test_client_pickles(tmp_path: Path) -> None:
    import pickle

    c = JudgeClient(
        model="openai/x", api_base="http://127.0.0.1:1/v1", cache_path=str(tmp_path / "c")
    )
    assert pickle.loads(pickle.dumps(c)) == c
    assert json.loads(json.dumps({"m": c.model}))["m"] == "openai/x"


def test_tokens_per_minute_waits_once_overdrawn(tmp_path: Path, waits: list[float]) -> None:
    # Each reply costs 60 tokens (50 prompt + 10 completion); 60 tokens a minute allowed.
    with FakeJudgeServer(lambda r: Reply('{"score": 1}')) as server:
        c = client(server, tmp_path, tpm=60, cache=False, model="openai/gpt-3.5-turbo")
        for _ in range(3):
            judge(c)
    assert sum(waits) >= 59.9  # the third call waited for the bucket to refill a minute's worth


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    "failure",
    [
        "500",  # a server error (retryable: the retries are spent)
        "400",  # a client error (not retried)
        "refused",  # nothing listens on the port
        "no provider",  # litellm cannot tell the provider from the model string
    ],
)
def test_a_failed_call_prints_no_banner(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], failure: str
) -> None:
    """litellm prints "Give Feedback / Get Help" (or a provider list) on every failed call
    unless told not to; the failure is reported once, as a JudgeError."""
    if failure == "no provider" and client_module.route("no-such", "auto") == "http":
        pytest.skip("litellm's own failure: over HTTP, a model string names no provider")
    status = {"500": 500, "400": 400}.get(failure, 500)
    with FakeJudgeServer(lambda r: Fault(status)) as server:
        options: dict[str, Any] = {"retries": 0, "cache": False, "structured": "prompt"}
        if failure == "refused":
            options["api_base"] = f"http://127.0.0.1:{_closed_port()}/v1"
        if failure == "no provider":
            options.update(model="no-such-provider-model", api_base=None)
        with pytest.raises(JudgeError):
            judge(client(server, tmp_path, **options))
    out, err = capfd.readouterr()
    assert "Give Feedback" not in out + err and "Provider List" not in out + err
    assert (out, err) == ("", "")
