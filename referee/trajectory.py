"""A multi-step completion as rewards need it: turns, tool calls, their results, the answer.

An agent's completion is a list of OpenAI-shaped messages: assistant turns (text and
``tool_calls``), ``tool`` messages with results, and a final assistant answer. `trajectory()`
parses it once per rollout (cached), so several rewards on one rollout do not re-parse it:

- ``steps``: one `Step` per assistant turn, in order; each has the turn's text, its calls (with
  arguments decoded from JSON text where they are a string) and the results answering them;
- ``calls``: every call in order, across turns;
- ``final_answer``: the text of the last assistant turn that made no call (or of the last
  assistant turn, if every turn called a tool); the text itself for a plain-text completion.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from referee.rollout import Message, Rollout

__all__ = ["Call", "Step", "Trajectory", "trajectory", "transcript"]


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call: the function's name, its decoded arguments, and what came back.

    Attributes:
        name: The function called.
        arguments: The arguments as an object; None when they were not valid JSON (then
            `raw_arguments` holds the text and `argument_error` why).
        raw_arguments: The arguments as the model wrote them.
        id: The call's id, where the model gave one.
        step: Index of the assistant turn that made the call.
        result: The text of the tool message that answered it (matched by id, else by order);
            None when none did.
        argument_error: Why the arguments could not be decoded.
    """

    name: str
    arguments: dict[str, Any] | None
    raw_arguments: Any
    id: str | None = None
    step: int = 0
    result: str | None = None
    argument_error: str | None = None


@dataclass(frozen=True, slots=True)
class Step:
    """One assistant turn: its text, the calls it made, and their results."""

    index: int
    text: str
    calls: tuple[Call, ...] = ()


@dataclass(frozen=True, slots=True)
class Trajectory:
    """A parsed completion (see the module docstring)."""

    steps: tuple[Step, ...] = ()
    final_answer: str = ""
    tools: tuple[dict[str, Any], ...] = field(default=())

    @property
    def calls(self) -> tuple[Call, ...]:
        return tuple(c for s in self.steps for c in s.calls)


def tool_definitions(tools: Any) -> dict[str, Mapping[str, Any]]:
    """Tool name -> its definition (``name``, ``parameters``, ...), from a list in OpenAI's
    shape (``{"type": "function", "function": {...}}``) or BFCL's (the definition itself)."""
    out: dict[str, Mapping[str, Any]] = {}
    for tool in tools if isinstance(tools, list | tuple) else ():
        if not isinstance(tool, Mapping):
            continue
        inner = tool.get("function")
        spec: Mapping[str, Any] = inner if isinstance(inner, Mapping) else tool
        name = spec.get("name")
        if isinstance(name, str):
            out[name] = spec
    return out


def _decode_arguments(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    if isinstance(raw, dict):
        return raw, None
    if raw is None or raw == "":
        return {}, None
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            return None, f"arguments are not valid JSON: {exc.msg}"
        if isinstance(value, dict):
            return value, None
        return None, f"arguments must be a JSON object, got {type(value).__name__}"
    return None, f"arguments must be an object, got {type(raw).__name__}"


def _parse(rollout: Rollout) -> Trajectory:
    tools = rollout.metadata.get("tools")
    tool_list = tuple(t for t in tools if isinstance(t, dict)) if isinstance(tools, list) else ()
    if isinstance(rollout.completion, str):
        text = rollout.completion
        return Trajectory((Step(0, text),), text, tool_list)
    messages: list[Message] = rollout.completion
    results_by_id: dict[str, str] = {}
    results_in_order: list[tuple[str | None, str]] = []
    for m in messages:
        if m.role == "tool":
            results_in_order.append((m.tool_call_id, m.text))
            if m.tool_call_id is not None:
                results_by_id[m.tool_call_id] = m.text
    unmatched = [text for call_id, text in results_in_order if call_id is None]
    steps: list[Step] = []
    final = ""
    last_text = ""
    for m in messages:
        if m.role != "assistant":
            continue
        index = len(steps)
        calls = []
        for tc in m.tool_calls or []:
            arguments, error = _decode_arguments(tc.arguments)
            if tc.id is not None and tc.id in results_by_id:
                result: str | None = results_by_id[tc.id]
            else:
                result = unmatched.pop(0) if unmatched else None
            calls.append(Call(tc.name, arguments, tc.arguments, tc.id, index, result, error))
        steps.append(Step(index, m.text, tuple(calls)))
        last_text = m.text
        if not calls:
            final = m.text
    if not final and steps and steps[-1].calls:
        final = last_text
    return Trajectory(tuple(steps), final, tool_list)


_CACHE_SIZE = 4096
_cache: OrderedDict[int, tuple[Rollout, Trajectory]] = OrderedDict()
_lock = threading.Lock()


def trajectory(rollout: Rollout) -> Trajectory:
    """The parsed trajectory of a rollout, parsed once and shared by every reward asking."""
    key = id(rollout)
    with _lock:
        hit = _cache.get(key)
        if hit is not None and hit[0] is rollout:
            _cache.move_to_end(key)
            return hit[1]
    parsed = _parse(rollout)
    with _lock:
        _cache[key] = (rollout, parsed)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return parsed


def transcript(rollout: Rollout) -> str:
    """The completion as a judge should read it: the text itself, or for a trajectory every
    assistant turn, the calls it made (name and arguments) and what each returned."""
    if isinstance(rollout.completion, str):
        return rollout.completion
    lines: list[str] = []
    for step in trajectory(rollout).steps:
        lines.append(f"[assistant, turn {step.index + 1}] {step.text}".rstrip())
        for call in step.calls:
            arguments = call.raw_arguments if call.arguments is None else call.arguments
            shown = arguments if isinstance(arguments, str) else json.dumps(arguments)
            lines.append(f"[call] {call.name}({shown})")
            if call.result is not None:
                lines.append(f"[result of {call.name}] {call.result}")
    return "\n".join(lines)
