"""How judge calls are routed, and referee's own HTTP transport on its own: pooled keep-alive
connections, one session per event loop closed with it, headers, errors, Retry-After."""

from __future__ import annotations

import asyncio
import gc
import logging
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from pydantic import BaseModel

import referee
from referee import _http
from referee._aio import run_sync
from referee.judges import JudgeClient, JudgeError, transport
from referee.judges.testing import FakeJudgeServer, Fault, Reply
from referee.judges.transport import Transport, retry_after, route
from referee.rewards import RubricJudge


class Grade(BaseModel):
    score: int


MESSAGES = [{"role": "user", "content": "Grade: 42"}]


def client(server: FakeJudgeServer, **kw: Any) -> JudgeClient:
    options: dict[str, Any] = {"model": "openai/gpt-4.1-mini", "api_base": server.url,
                               "cache": False, "structured": "prompt", "retries": 0}  # fmt: skip
    return JudgeClient(**{**options, **kw})


@pytest.mark.parametrize(
    ("model", "option", "expected"),
    [
        ("openai/gpt-4.1-mini", "auto", "http"),  # OpenAI itself, or any api_base
        ("hosted_vllm/Qwen/Qwen3-8B", "auto", "http"),  # litellm's name for a vLLM server
        ("anthropic/claude-sonnet-4", "auto", "litellm"),  # another protocol
        ("gpt-4.1-mini", "auto", "litellm"),  # no provider named: litellm infers one
        ("openai/gpt-4.1-mini", "litellm", "litellm"),  # the option overrides
        ("my-model", "http", "http"),
    ],
)
def test_routing(model: str, option: Transport, expected: str) -> None:
    assert route(model, option) == expected


def test_the_transport_is_a_spec_option() -> None:
    judge = referee.load(
        {
            "type": "rubric_judge",
            "rubric": "helpfulness",
            "model": "openai/x",
            "transport": "litellm",
        }
    )
    assert isinstance(judge, RubricJudge) and judge.client.transport == "litellm"
    with pytest.raises(referee.SpecError, match="transport"):
        referee.load({"type": "rubric_judge", "rubric": "helpfulness", "model": "openai/x",
                      "transport": "grpc"})  # fmt: skip


@pytest.mark.parametrize("chosen", ["http", "litellm"])
def test_each_transport_is_the_one_that_calls(chosen: Transport) -> None:
    with FakeJudgeServer(lambda r: Reply('{"score": 1}')) as server:
        run_sync(client(server, transport=chosen).judge(MESSAGES, Grade))
        agent = server.headers[0].get("user-agent", "")
    # litellm calls through the openai SDK, which names itself; referee's transport sends none
    assert ("OpenAI" in agent) == (chosen == "litellm")


def test_calls_share_one_keep_alive_connection_per_loop() -> None:
    with FakeJudgeServer(lambda r: Reply('{"score": 1}')) as server:
        judge = client(server)

        async def sequential() -> None:
            for _ in range(20):
                await judge.judge(MESSAGES, Grade)

        run_sync(sequential())
        assert len(server.requests) == 20 and server.connections == 1


def test_the_session_closes_with_its_loop(caplog: pytest.LogCaptureFixture) -> None:
    with FakeJudgeServer(lambda r: Reply('{"score": 1}')) as server:
        judge = client(server)

        async def once() -> tuple[Any, asyncio.AbstractEventLoop]:
            await judge.judge(MESSAGES, Grade)
            loop = asyncio.get_running_loop()
            return _http._sessions[loop][0], loop

        with caplog.at_level(logging.ERROR, logger="asyncio"):
            session, loop = run_sync(once())
            gc.collect()
        assert session.closed and loop not in _http._sessions
        assert "Unclosed" not in caplog.text
        run_sync(once())  # the next loop opens a session of its own
        assert server.connections == 2


def test_close_session_now() -> None:
    with FakeJudgeServer(lambda r: Reply('{"score": 1}')) as server:
        judge = client(server)

        async def close_midway() -> bool:
            await judge.judge(MESSAGES, Grade)
            session = _http._sessions[asyncio.get_running_loop()][0]
            await transport.close_session()
            await judge.judge(MESSAGES, Grade)  # opens another
            return bool(session.closed)

        assert run_sync(close_midway())
        assert server.connections == 2


def test_the_key_is_sent_as_a_bearer_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REFEREE_TEST_KEY", "sk-test")
    with FakeJudgeServer(lambda r: Reply('{"score": 1}')) as server:
        run_sync(client(server, api_key_env="REFEREE_TEST_KEY").judge(MESSAGES, Grade))
        assert server.headers[0]["authorization"] == "Bearer sk-test"
        assert server.requests[0]["model"] == "gpt-4.1-mini"  # the provider prefix is dropped


def test_openai_itself_gets_max_completion_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    # OpenAI's reasoning models refuse max_tokens; a server at an api_base gets max_tokens.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    with FakeJudgeServer(lambda r: Reply('{"score": 1}')) as server:
        monkeypatch.setattr(transport, "OPENAI_BASE", server.url)
        transport._endpoint.cache_clear()
        judge = JudgeClient(model="openai/gpt-4.1-nano", cache=False, structured="prompt")
        run_sync(judge.judge(MESSAGES, Grade))
        transport._endpoint.cache_clear()
        body, headers = server.requests[0], server.headers[0]
    assert body["max_completion_tokens"] == 1024 and "max_tokens" not in body
    assert headers["authorization"] == "Bearer sk-openai"


def test_openai_without_a_key_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    judge = JudgeClient(model="openai/gpt-4.1-nano", cache=False, structured="prompt")
    with pytest.raises(JudgeError, match="OPENAI_API_KEY"):
        run_sync(judge.judge(MESSAGES, Grade))


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (Fault(401), "AuthenticationError \\(HTTP 401\\): injected"),  # the server's own message
        (Fault(404), "NotFoundError"),
        (Fault(418), "APIError \\(HTTP 418\\)"),  # a status without a name of its own
    ],
)
def test_client_errors_name_the_status(fault: Fault, message: str) -> None:
    with FakeJudgeServer(lambda r: fault) as server:
        with pytest.raises(JudgeError, match=message):
            run_sync(client(server, retries=3).judge(MESSAGES, Grade))
        assert len(server.requests) == 1  # not retried


@pytest.mark.parametrize(
    "answer",
    [
        b"<html>proxy login</html>",  # not JSON
        b'{"object": "list", "data": []}',  # JSON, but not a chat completion
        b'{"choices": []}',
    ],
)
def test_an_answer_that_is_not_a_completion_is_an_error(answer: bytes) -> None:
    with pytest.raises(JudgeError, match="not a chat completion"):
        transport._completion(answer)


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "1500"}, 1.5),  # OpenAI's, preferred
        ({"retry-after-ms": "1500", "retry-after": "2"}, 1.5),
        ({"retry-after": "soon"}, None),  # unreadable: back off instead
        ({}, None),
        (None, None),
    ],
)
def test_retry_after(headers: dict[str, str] | None, seconds: float | None) -> None:
    assert retry_after(headers) == seconds


def test_retry_after_as_an_http_date() -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    wait = retry_after({"retry-after": when})
    assert wait is not None and 25 <= wait <= 31
