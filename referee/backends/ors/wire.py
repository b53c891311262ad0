"""The Open Reward Standard's JSON shapes, as referee's environment answers them: the tool list,
the prompt's blocks and messages, a tool call's result, and server-sent events."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any, Literal

from referee.backends.contract import withheld
from referee.backends.ors.tasks import Task
from referee.scores import Score

__all__ = [
    "ANSWER_ARG",
    "TOOL_NAME",
    "ToolErrorReason",
    "dumps",
    "finite",
    "prompt_blocks",
    "prompt_messages",
    "sse",
    "sse_result",
    "tool_error",
    "tool_list",
    "tool_result",
]

TOOL_NAME = "submit_answer"
"""The environment's one tool: it submits the answer, is scored, and ends the episode."""
ANSWER_ARG = "answer"
SUBMITTED = "Your answer was submitted."
"""What the tool tells the policy, whatever its score: the score is the trainer's, in
``reward`` and ``metadata``, not a hint for the policy's next turn."""
CHUNK = 4096
"""Characters of a result per SSE event, as the reference server sends them (a client reads
events line by line, and a very long line is too long for it)."""

ToolErrorReason = Literal["not_found", "input_validation", "episode_finished"]

_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "SubmitAnswer",
    "properties": {
        ANSWER_ARG: {
            "type": "string",
            "title": "Answer",
            "description": "Your final answer to the task.",
        }
    },
    "required": [ANSWER_ARG],
    "additionalProperties": False,
}


def tool_list() -> dict[str, Any]:
    """``/{env}/tools`` and ``/{env}/task_tools``: one tool, no terminal tool, no group
    scoring (``ListToolsOutput``)."""
    return {
        "tools": [
            {
                "name": TOOL_NAME,
                "description": (
                    "Submit your final answer to the task. It is scored once, and ends the "
                    "episode: call it once, with the answer alone."
                ),
                "input_schema": _INPUT_SCHEMA,
            }
        ],
        "terminal_tool": None,
        "supports_score_group": False,
        "message_block_types": ["text"],
    }


def _text(text: str, detail: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "text", "text": text, "detail": detail}


def _role(role: str) -> str:
    # ORS has three roles; a developer message instructs as a system one does, and a tool
    # result is a user turn in ORS (Anthropic's placement).
    return {"developer": "system", "tool": "user"}.get(role, role)


def prompt_messages(task: Task) -> list[dict[str, Any]]:
    """``/{env}/messages``: the prompt as ORS messages, one text block each (tool calls a
    prompt's assistant turns made are not carried)."""
    if isinstance(task.prompt, str):
        return [{"role": "user", "blocks": [_text(task.prompt)], "detail": None}]
    return [{"role": _role(m.role), "blocks": [_text(m.text)], "detail": None} for m in task.prompt]


def prompt_blocks(task: Task) -> list[dict[str, Any]]:
    """``/{env}/prompt``: the prompt as blocks. Text is one block; messages are flattened as
    the reference server flattens a conversation (a single user message is its text, else a
    ``[role]`` block before each message's text)."""
    messages = prompt_messages(task)
    if len(messages) == 1 and messages[0]["role"] == "user":
        return list(messages[0]["blocks"])
    out = []
    for message in messages:
        out.append(_text(f"[{message['role']}]", {"role": message["role"]}))
        out.extend(message["blocks"])
    return out


def finite(value: Any) -> Any:
    """`value` with every NaN or infinity (JSON has neither) replaced by None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def tool_result(task: Task, score: Score) -> dict[str, Any]:
    """The submitted answer's result (``RunToolSuccess``): referee's value as the reward
    (null where it gave none), the whole score (``/score``'s item) as metadata with its
    texts withheld (they may quote the task's secret reference: `withheld`), and the
    episode finished."""
    value = score.value
    reward = float(value) if value is not None and math.isfinite(value) else None
    return {
        "ok": True,
        "output": {
            "blocks": [_text(SUBMITTED)],
            # The reference is the server's secret: no text that could quote it leaves.
            "metadata": finite({"id": task.id, **withheld(score, task.id)}),
            "reward": reward,
            "finished": True,
        },
    }


def tool_error(reason: ToolErrorReason, message: str) -> dict[str, Any]:
    """A call refused (``RunToolError``): the episode goes on, except after it finished."""
    return {"ok": False, "error": message, "reason": reason}


def dumps(value: Any) -> str:
    """JSON as ORS sends it; a NaN is a bug here, never a number on the wire."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def sse(event: str, data: str) -> bytes:
    """One server-sent event."""
    lines = "".join(f"data: {line}\r\n" for line in data.split("\n"))
    return f"event: {event}\r\n{lines}\r\n".encode()


def _pieces(text: str) -> list[str]:
    # The SDK strips the whitespace an event's data starts with: no piece may start with any
    # (a space inside a JSON string would be lost), so a cut moves back to before it.
    pieces, start = [], 0
    while start < len(text):
        end = min(start + CHUNK, len(text))
        while start < end < len(text) and text[end].isspace():
            end -= 1
        if end == start:  # whitespace all the way: a longer piece, ending after it
            end = start + CHUNK
            while end < len(text) and text[end].isspace():
                end += 1
        pieces.append(text[start:end])
        start = end
    return pieces or [""]


def sse_result(result: str) -> Iterator[bytes]:
    """A result as the reference server streams it: ``chunk`` events, the last ``end``."""
    pieces = _pieces(result)
    for i, piece in enumerate(pieces):
        yield sse("end" if i == len(pieces) - 1 else "chunk", piece)
