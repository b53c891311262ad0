"""A process reward for agent trajectories: each assistant turn valued for how it used tools.

The trajectory (turns, calls, results, final answer) is parsed once per rollout by
`referee.trajectory`; the tool definitions travel with the rollout in ``metadata.tools``, in
OpenAI's shape (``{"type": "function", "function": {"name", "parameters"}}``) or BFCL's
(``{"name", "parameters"}``, with BFCL's type names such as ``dict`` and ``float``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from referee.errors import NotApplicable
from referee.registry import register
from referee.reward import CheckReward, Need
from referee.rollout import Rollout
from referee.scores import Score
from referee.steps import Fold, fold_steps
from referee.trajectory import Call, tool_definitions, toolset_of, trajectory
from referee.verifiers.schema import CompiledSchema, compile_schema, first_error
from referee.workers import RunIn

__all__ = ["ToolUse", "tool_schemas"]

# BFCL writes Python-flavoured type names in its function parameters.
_BFCL_TYPES = {"dict": "object", "float": "number", "tuple": "array", "list": "array",
               "int": "integer", "bool": "boolean", "str": "string", "any": None}  # fmt: skip


def _json_schema(parameters: Any) -> Any:
    """A tool's parameters as standard JSON Schema (BFCL's type names translated)."""
    if isinstance(parameters, list):
        return [_json_schema(p) for p in parameters]
    if not isinstance(parameters, Mapping):
        return parameters
    out: dict[str, Any] = {}
    for key, value in parameters.items():
        if key == "type" and isinstance(value, str) and value in _BFCL_TYPES:
            translated = _BFCL_TYPES[value]
            if translated is not None:
                out[key] = translated
        elif key in ("properties", "$defs", "definitions") and isinstance(value, Mapping):
            out[key] = {k: _json_schema(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "anyOf", "oneOf", "allOf", "not"):
            out[key] = _json_schema(value)
        else:
            out[key] = value
    return out


def _parameters_schema(definition: Mapping[str, Any]) -> Any:
    """A tool definition's parameters as JSON Schema (any object when it gives none)."""
    return _json_schema(definition.get("parameters") or {"type": "object"})


def tool_schemas(tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Tool name -> the JSON Schema of its parameters, from OpenAI or BFCL definitions."""
    return {name: _parameters_schema(spec) for name, spec in tool_definitions(tools).items()}


def _is_error(result: str | None, markers: tuple[str, ...]) -> bool:
    """Whether a tool result reports an error: text starting with one of `markers` (lower
    case), or a JSON object with a truthy ``error``."""
    if result is None:
        return False
    text = result.lstrip()
    if text[:32].lower().startswith(markers):
        return True
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except ValueError:
            return False
        return isinstance(value, dict) and bool(value.get("error"))
    return False


@register("tool_use")
@dataclass(kw_only=True)
class ToolUse(CheckReward):
    """A process reward: each assistant turn gets a value for how it used tools.

    A call earns 1 when its tool exists, its arguments validate against the tool's JSON Schema
    and the tool returned no error; `unknown_tool` when the tool does not exist;
    `invalid_arguments` when the arguments are not valid JSON or fail the schema; `tool_error`
    when the result is an error (text starting with one of `error_markers`, or a JSON object
    with an ``error``). A call identical to an earlier one (same name and arguments) loses
    `repeat_penalty`. A turn's value is the mean of its calls' (a turn without calls, such as
    the final answer, earns 1); turns past `max_steps` earn `over_budget`. A trajectory that
    makes no call at all earns `no_calls` on every turn: a task given tools is not paid for
    leaving them unused, unless `no_calls` says so. The per-turn values
    are `Score.steps`; they fold into the total by `fold` (with `gamma` for discounted).

    The completion is a trajectory (assistant turns with their tool calls, and the tools'
    results); the tool definitions come from `tools` or each rollout's ``metadata.tools``, in
    OpenAI's shape (``{"type": "function", "function": {"name", "parameters"}}``) or BFCL's
    (``{"name", "parameters"}``, with BFCL's type names such as ``dict`` and ``float``). A
    rollout that makes calls but has no definitions, or whose tool schema cannot be compiled,
    is ``not_applicable``. The components are ``calls`` and ``steps`` (counts); the reason
    lists what lost value.

    Attributes:
        tools: Tool definitions, when not in each rollout's ``metadata.tools``.
        unknown_tool: The value of a call to a tool that is not defined.
        invalid_arguments: The value of a call whose arguments are not valid JSON, or do not
            validate against the tool's parameters schema.
        tool_error: The value of a well-formed call whose result reports an error.
        repeat_penalty: Taken off a call's value (not below 0) when an earlier call in the
            trajectory had the same name and arguments.
        max_steps: The step budget: the first `max_steps` assistant turns are valued as
            above, and each turn after them earns `over_budget`. None: no budget.
        over_budget: The value of each turn past `max_steps`.
        no_calls: The value of each turn of a trajectory that makes no tool call. 0.0: an
            answer guessed without the tools earns nothing here (the other components
            judge the answer). 1.0: tools are optional, and a trajectory without calls earns
            full marks (the value before this option existed).
        error_markers: A tool result that starts with one of these (case ignored) is an
            error, as is a JSON object with a truthy ``error``.
        fold: How the per-turn values make the total: ``mean``, ``sum``, ``last``, ``min``,
            ``product``, or ``discounted`` (``sum(gamma**t * r_t)`` from the first turn).
            No turns: 0.0.
        gamma: The discount per turn of ``fold: discounted``.

    Example:
        ```yaml
        type: tool_use
        tool_error: 0.25
        repeat_penalty: 0.5
        max_steps: 12
        fold: mean
        ```

    Scores:
        ```yaml
        - prompt: What is the weather in Paris, and what time is it there?
          metadata: &tools
            tools:
              - type: function
                function:
                  name: get_weather
                  parameters:
                    type: object
                    required: [city]
                    properties: {city: {type: string}}
              - type: function
                function:
                  name: get_time
                  parameters:
                    type: object
                    required: [timezone]
                    properties: {timezone: {type: string}}
          completion:
            - role: assistant
              content: ""
              tool_calls: [{id: c1, name: get_weather, arguments: '{"city": "Paris"}'}]
            - {role: tool, tool_call_id: c1, content: "sunny, 21 C"}
            - role: assistant
              content: ""
              tool_calls: [{id: c2, name: get_time, arguments: '{"timezone": "Europe/Paris"}'}]
            - {role: tool, tool_call_id: c2, content: "14:05"}
            - {role: assistant, content: "It is sunny and 21 C in Paris, and 14:05 there."}
          value: 1.0
        - prompt: What is the weather in Paris, and what time is it there?
          metadata: *tools
          completion:
            - role: assistant
              content: ""
              tool_calls: [{id: c1, name: get_weather, arguments: '{"town": "Paris"}'}]
            - {role: tool, tool_call_id: c1, content: "Error: missing city"}
            - role: assistant
              content: ""
              tool_calls: [{id: c2, name: get_weather, arguments: '{"city": "Paris"}'}]
            - {role: tool, tool_call_id: c2, content: "Error: rate limited"}
            - role: assistant
              content: ""
              tool_calls: [{id: c3, name: get_clock, arguments: '{}'}]
            - {role: tool, tool_call_id: c3, content: "unknown tool"}
            - {role: assistant, content: "I could not find out."}
          value: 0.3125
        - prompt: What is the weather in Paris, and what time is it there?
          metadata: *tools
          completion:
            - {role: assistant, content: "Probably sunny, and about two in the afternoon."}
          value: 0.0
        ```
    """

    default_run_in: ClassVar[RunIn] = "inline"  # its cost is bounded

    tools: list[dict[str, Any]] | None = None
    unknown_tool: float = 0.0
    invalid_arguments: float = 0.0
    tool_error: float = 0.5
    repeat_penalty: float = 0.5
    max_steps: int | None = None
    over_budget: float = 0.0
    no_calls: float = 0.0
    error_markers: list[str] = field(default_factory=lambda: ["error", "exception", "traceback"])
    fold: Fold = "mean"
    gamma: float = 1.0
    name: str = "tool_use"

    def __post_init__(self) -> None:
        self._fixed = None if self.tools is None else toolset_of(self.tools)
        self._markers = tuple(m.lower() for m in self.error_markers)

    @staticmethod
    def _compile(
        definitions: Mapping[str, Mapping[str, Any]],
    ) -> dict[str, CompiledSchema | None]:
        """Tool name -> its compiled argument schema.

        Raises:
            NotApplicable: A tool's schema does not compile, or refers outside itself (a
                schema from data is never fetched): its calls could not be checked, and
                unchecked calls must not be paid as valid ones.
        """
        out: dict[str, CompiledSchema | None] = {}
        for name, spec in definitions.items():
            try:
                out[name] = compile_schema(_parameters_schema(spec))
            except Exception as exc:
                raise NotApplicable(
                    f"tool {name!r}: its parameters schema cannot be used to check calls: {exc}"
                ) from None
        return out

    def _call_value(self, call: Call, schemas: Mapping[str, CompiledSchema | None],
                    seen: dict[Any, list[Any]], notes: list[str]) -> float:  # fmt: skip
        if call.name not in schemas:
            notes.append(f"step {call.step}: unknown tool {call.name!r}")
            return self.unknown_tool
        arguments = call.arguments
        if arguments is None:
            notes.append(f"step {call.step}: {call.name}: {call.argument_error}")
            return self.invalid_arguments
        compiled = schemas[call.name]
        if compiled is not None:
            fast = compiled.fast
            if fast is None or not _fast_valid(fast, arguments):
                error = first_error(compiled, arguments)
                if error is not None:
                    notes.append(f"step {call.step}: {call.name} arguments {error}")
                    return self.invalid_arguments
        value = 1.0
        if _is_error(call.result, self._markers):
            notes.append(f"step {call.step}: {call.name} returned an error")
            value = self.tool_error
        if _repeated(call.name, arguments, seen):
            notes.append(f"step {call.step}: {call.name} repeated with the same arguments")
            value = max(0.0, value - self.repeat_penalty)
        return value

    def needs(self) -> frozenset[Need]:
        """The completion as chat messages: its turns, their calls and results."""
        return frozenset({"messages"})

    def check(self, rollout: Rollout) -> Score:
        traj = trajectory(rollout)
        toolset = self._fixed if self._fixed is not None else traj.toolset
        schemas = toolset.derive("tool_use.schemas", self._compile)
        if not schemas and traj.calls:
            raise NotApplicable(
                "tool_use needs the tool definitions: metadata.tools on the rollout, or tools "
                "in the spec"
            )
        n_calls = len(traj.calls)
        if n_calls == 0:
            steps = [self.no_calls] * len(traj.steps)
            return Score(
                value=fold_steps(steps, self.fold, self.gamma),
                steps=tuple(steps),
                components={"calls": 0.0, "steps": float(len(steps))},
                reason="no tool calls",
            )
        seen: dict[Any, list[Any]] = {}
        notes: list[str] = []
        steps = []
        value_of = self._call_value
        for step in traj.steps:
            if self.max_steps is not None and step.index >= self.max_steps:
                steps.append(self.over_budget)
                if step.index == self.max_steps:
                    notes.append(f"over the step budget of {self.max_steps}")
                continue
            calls = step.calls
            if not calls:
                steps.append(1.0)
            elif len(calls) == 1:
                steps.append(value_of(calls[0], schemas, seen, notes))
            else:
                values = [value_of(c, schemas, seen, notes) for c in calls]
                steps.append(sum(values) / len(values))
        return Score(
            value=fold_steps(steps, self.fold, self.gamma),
            steps=tuple(steps),
            components={"calls": float(n_calls), "steps": float(len(steps))},
            reason="; ".join(notes[:10]) or f"{n_calls} calls, all well formed",
        )


def _fast_valid(fast: Any, instance: Any) -> bool:
    """jsonschema-rs's verdict; False (the Python validator decides) when it cannot convert
    the instance."""
    try:
        return bool(fast.is_valid(instance))
    except Exception:
        return False


_canonical = json.JSONEncoder(sort_keys=True, default=str).encode


def _repeated(name: str, arguments: dict[str, Any], seen: dict[Any, list[Any]]) -> bool:
    """Whether a call with this name and these arguments (equal as canonical JSON) was seen
    before in the trajectory; records it.

    Keyed by the sorted argument items, which is cheap; canonical JSON (which tells 1 from
    true and 1.0) is computed only when that key was seen, or when a value is unhashable.
    """
    try:
        key: Any = (name, tuple(sorted(arguments.items())))
        earlier = seen.get(key)
    except TypeError:  # an unhashable value (a list, an object) or keys that do not sort
        key = (name, _canonical(arguments))
        earlier = seen.get(key)
        if earlier is None:
            seen[key] = [arguments]
        return earlier is not None
    if earlier is None:
        seen[key] = [arguments]
        return False
    mine = _canonical(arguments)
    if any(_canonical(e) == mine for e in earlier):
        return True
    earlier.append(arguments)
    return False
