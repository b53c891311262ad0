"""A rollout's tool definitions are data: their ``$ref``s are never fetched or read."""

from __future__ import annotations

from pathlib import Path

import referee
from referee import Rollout
from tests.support.schema_host import SECRET, CountingServer, secret_file, server, url_of
from tests.support.trajectories import call

__all__ = ["secret_file", "server"]  # the fixtures, used by name


def _tool_use_with_ref(ref: str) -> Rollout:
    tools = [{"type": "function", "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"$ref": ref}}}}}]  # fmt: skip
    turn = {"role": "assistant", "content": "", "tool_calls": [
        call("get_weather", '{"city": "Paris"}', "1")]}  # fmt: skip
    return Rollout(prompt="weather?", completion=[turn], metadata={"tools": tools})


def test_a_tool_schemas_remote_ref_is_not_fetched(server: CountingServer) -> None:
    [score] = referee.score(
        referee.load({"type": "tool_use"}), [_tool_use_with_ref(url_of(server))]
    )
    assert server.hits == []
    assert SECRET not in (score.reason or "")
    # and the calls it could not check are not paid as valid ones
    assert score.value is None
    assert score.failure is not None and score.failure.type == "not_applicable"
    assert "get_weather" in score.failure.message


def test_a_tool_schema_that_does_not_compile_is_not_applicable() -> None:
    broken = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": 12}}}]
    rollout = _tool_use_with_ref("#/nowhere").model_copy(update={"metadata": {"tools": broken}})
    [score] = referee.score(referee.load({"type": "tool_use"}), [rollout])
    assert score.value is None
    assert score.failure is not None and score.failure.type == "not_applicable"


def test_a_tool_schemas_file_ref_is_not_read(secret_file: Path) -> None:
    [score] = referee.score(
        referee.load({"type": "tool_use"}), [_tool_use_with_ref(secret_file.as_uri())]
    )
    assert SECRET not in repr(score)
    assert score.value is None
