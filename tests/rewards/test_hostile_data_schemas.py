"""A rollout's tool definitions are data: their ``$ref``s are never fetched or read."""

from __future__ import annotations

from pathlib import Path

import referee
from referee import Rollout
from tests.test_trajectory import call
from tests.verifiers.test_hostile_schema import SECRET, _Counting, _url, secret_file, server

__all__ = ["secret_file", "server"]  # the fixtures, used by name


def _tool_use_with_ref(ref: str) -> Rollout:
    tools = [{"type": "function", "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"$ref": ref}}}}}]  # fmt: skip
    turn = {"role": "assistant", "content": "", "tool_calls": [
        call("get_weather", '{"city": "Paris"}', "1")]}  # fmt: skip
    return Rollout(prompt="weather?", completion=[turn], metadata={"tools": tools})


def test_a_tool_schemas_remote_ref_is_not_fetched(server: _Counting) -> None:
    [score] = referee.score(referee.load({"type": "tool_use"}), [_tool_use_with_ref(_url(server))])
    assert server.hits == []
    assert SECRET not in (score.reason or "")


def test_a_tool_schemas_file_ref_is_not_read(secret_file: Path) -> None:
    [score] = referee.score(
        referee.load({"type": "tool_use"}), [_tool_use_with_ref(secret_file.as_uri())]
    )
    assert SECRET not in repr(score)
