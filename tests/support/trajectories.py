"""Agent rollouts: a trajectory of turns and tool calls, with the tools it was given."""

from __future__ import annotations

from referee import Rollout

TOOLS = [{"type": "function", "function": {
    "name": "get_weather",
    "parameters": {"type": "object", "required": ["city"],
                   "properties": {"city": {"type": "string"}}}}}]  # fmt: skip


def agent(*turns: dict) -> Rollout:
    return Rollout(prompt="weather in Paris?", completion=list(turns), metadata={"tools": TOOLS})


def call(name: str, arguments: str, call_id: str | None = None) -> dict:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": arguments}}  # fmt: skip
