"""A multi-step completion as rewards need it: turns, tool calls, their results, the answer.

An agent's completion is a list of OpenAI-shaped messages: assistant turns (text and
``tool_calls``), ``tool`` messages with results, and a final assistant answer. `trajectory()`
parses it once per rollout (cached), so several rewards on one rollout do not re-parse it:

- ``steps``: one `Step` per assistant turn, in order; each has the turn's text, its calls (with
  arguments decoded from JSON text where they are a string) and the results answering them;
- ``calls``: every call in order, across turns;
- ``final_answer``: the text of the last assistant turn that made no call (or of the last
  assistant turn, if every turn called a tool); the text itself for a plain-text completion;
- ``toolset``: the tool definitions the rollout carries (``metadata.tools`` in OpenAI's shape,
  or ``metadata.function``, BFCL's list), interned so that rewards derive what they need from
  them (compiled schemas, ...) once per distinct set of tools.
"""

from __future__ import annotations

import functools
import io
import json
import pickle
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from referee.rollout import Rollout

__all__ = ["Call", "Step", "Toolset", "Trajectory", "toolset_of", "trajectory", "transcript"]

T = TypeVar("T")
_lock = threading.Lock()


class Call(NamedTuple):
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

    # Named tuples, not frozen dataclasses: as immutable, and three times cheaper to build
    # (a ten-step trajectory makes some twenty of them, once per rollout).
    name: str
    arguments: dict[str, Any] | None
    raw_arguments: Any
    id: str | None = None
    step: int = 0
    result: str | None = None
    argument_error: str | None = None


class Step(NamedTuple):
    """One assistant turn: its index, its text, the calls it made (with their results)."""

    index: int  # type: ignore[assignment]  # the turn's index, over tuple.index
    text: str
    calls: tuple[Call, ...] = ()


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


class Toolset:
    """The tool definitions a rollout carries, by name, interned.

    Rollouts carrying equal definitions share one Toolset, so what a reward derives from them
    (compiled argument schemas, parameter tables) is built once per distinct set of tools, not
    once per rollout: see `derive`.

    Attributes:
        definitions: Tool name -> its definition (``name``, ``parameters``, ...).
        source: The list the definitions came from (a private copy, when interned).
    """

    __slots__ = ("_derived", "definitions", "source")

    def __init__(self, source: list[Any]) -> None:
        self.source = source
        self.definitions = tool_definitions(source)
        self._derived: dict[str, Any] = {}

    def derive(self, key: str, build: Callable[[Mapping[str, Mapping[str, Any]]], T]) -> T:
        """`build(definitions)`, computed once per Toolset and `key` (a name the caller owns)."""
        try:
            return self._derived[key]  # type: ignore[no-any-return]
        except KeyError:
            return self._derived.setdefault(key, build(self.definitions))  # type: ignore[no-any-return]


_NO_TOOLS = Toolset([])


@dataclass(frozen=True, slots=True)
class Trajectory:
    """A parsed completion (see the module docstring)."""

    steps: tuple[Step, ...] = ()
    final_answer: str = ""
    calls: tuple[Call, ...] = ()
    toolset: Toolset = _NO_TOOLS


def toolset_of(tools: list[Any] | None) -> Toolset:
    """The interned Toolset of a list of definitions (OpenAI's shape or BFCL's)."""
    if not tools:
        return _NO_TOOLS
    # Each rollout holds its own copy of the definitions (pydantic copies JSON values), so the
    # key is their content: pickle's bytes, which are exact (true is not 1, 1.0 is not 1) and
    # about three times cheaper than JSON text or repr. Fast mode (no memo) makes the bytes
    # depend on the content alone, not on which strings happen to be shared objects.
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=5)
    pickler.fast = True
    try:
        pickler.dump(tools)
    except (pickle.PicklingError, TypeError, ValueError, RecursionError):
        return Toolset(tools)  # a value pickle cannot write: not interned
    return _interned(buffer.getvalue())


@functools.lru_cache(maxsize=1024)
def _interned(key: bytes) -> Toolset:
    return Toolset(pickle.loads(key))  # its own copy of the definitions


_raw_decode = json.JSONDecoder().raw_decode


def _decode_arguments(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    if type(raw) is str and raw:
        try:
            # raw_decode, then a check that nothing follows: json.loads less its two regex
            # scans for surrounding whitespace, which a model's arguments rarely have.
            value, end = _raw_decode(raw)
            if end != len(raw):
                value = json.loads(raw)
        except json.JSONDecodeError as exc:
            try:
                value = json.loads(raw)  # leading whitespace
            except json.JSONDecodeError:
                return None, f"arguments are not valid JSON: {exc.msg}"
        if type(value) is dict:
            return value, None
        return None, f"arguments must be a JSON object, got {type(value).__name__}"
    if isinstance(raw, dict):
        return raw, None
    if raw is None or raw == "":
        return {}, None
    return None, f"arguments must be an object, got {type(raw).__name__}"


def _parse(rollout: Rollout) -> Trajectory:
    meta = rollout.metadata
    tools = meta.get("tools")
    if tools is None:
        tools = meta.get("function")  # BFCL's name for the list
    toolset = toolset_of(tools) if type(tools) is list else _NO_TOOLS
    completion = rollout.completion
    if isinstance(completion, str):
        return Trajectory((Step(0, completion),), completion, (), toolset)
    results_by_id: dict[str, str] = {}
    unmatched: list[str] = []  # results without an id, answering calls in order
    for m in completion:
        if m.role == "tool":
            text = m.text
            if m.tool_call_id is None:
                unmatched.append(text)
            else:
                results_by_id[m.tool_call_id] = text
    unmatched.reverse()  # popped from the end
    steps: list[Step] = []
    all_calls: list[Call] = []
    final = ""
    text = ""
    for m in completion:
        if m.role != "assistant":
            continue
        index = len(steps)
        text = m.text
        tool_calls = m.tool_calls
        if not tool_calls:
            steps.append(Step(index, text))
            final = text
            continue
        first = len(all_calls)
        for tc in tool_calls:
            raw = tc.arguments
            arguments, error = _decode_arguments(raw)
            call_id = tc.id
            if call_id is not None and call_id in results_by_id:
                result: str | None = results_by_id[call_id]
            else:
                result = unmatched.pop() if unmatched else None
            all_calls.append(Call(tc.name, arguments, raw, call_id, index, result, error))
        steps.append(Step(index, text, tuple(all_calls[first:])))
    if not final and steps and steps[-1].calls:
        final = text  # every turn called a tool: the last turn's text
    return Trajectory(tuple(steps), final, tuple(all_calls), toolset)


# Small on purpose. Sync rewards score rollout by rollout (a combination runs its sync
# components per rollout, even beside async ones), so they find the parse with a cache of
# one; an async component reading trajectories (a judge reads the transcript) scores the whole
# batch after them and re-parses beyond this many, which costs microseconds beside a judge's
# call. A large cache kept thousands of parsed trajectories alive, and the garbage
# collector's passes over them cost a tenth of the scoring time of 10,000 trajectories.
_CACHE_SIZE = 256
_cache: OrderedDict[int, tuple[Rollout, Trajectory]] = OrderedDict()


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
