"""`tool_call_match`: the calls an agent made against the expected calls, as BFCL's AST checker
judges them (Python semantics).

The reference takes BFCL's possible-answer shape, one entry per expected call, each argument
with its list of acceptable values (``""`` among them marks an optional argument that may be
left out)::

    [{"calculate_triangle_area": {"base": [10], "height": [5], "unit": ["units", ""]}}]

(or BFCL's whole answer row, ``{"ground_truth": [...]}``). The function definitions travel
with the rollout in ``metadata.tools`` (OpenAI shape) or ``metadata.function`` (BFCL's list);
they give each argument's type and the required arguments.

A call matches an expected one when the function name is the same, every required argument is
there, no argument is unknown to the definition or to the answer, each value has the declared
type (an int is accepted for a float; a value of the answer's type stands for a variable) and is
among the acceptable values (strings compared after BFCL's standardisation: case, spaces and
``,./-_*^`` ignored; lists, dicts and lists of dicts compared element by element), and every
argument left out is optional. With ``order: any`` (BFCL's parallel checker) each expected call
takes the first unmatched call that matches it; with ``order: strict`` the i-th call must match
the i-th expected one. The number of calls must equal the number expected.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, NamedTuple, cast

from referee.errors import NotApplicable
from referee.registry import register
from referee.reward import CheckReward, Need
from referee.rewards._common import reference_of
from referee.rollout import Rollout
from referee.scores import Score
from referee.trajectory import trajectory
from referee.workers import RunIn

__all__ = ["ToolCallMatch", "check_call"]

_PY_TYPES: dict[str, type] = {
    "string": str, "integer": int, "float": float, "boolean": bool, "array": list,
    "tuple": list, "dict": dict, "any": str,
}  # fmt: skip
# JSON Schema type names (OpenAI tool definitions) as BFCL's.
_FROM_JSON_SCHEMA = {"object": "dict", "number": "float", "integer": "integer",
                     "string": "string", "boolean": "boolean", "array": "array"}  # fmt: skip
_STANDARDIZE = re.compile(r"[ ,./\-_*^]")


def _standardize(text: str) -> str:
    return _STANDARDIZE.sub("", text).lower().replace("'", '"')


def _type_name(details: Mapping[str, Any]) -> str:
    kind = details.get("type", "any")
    if isinstance(kind, list):  # ["string", "null"]: the first non-null
        kind = next((k for k in kind if k != "null"), "any")
    return _FROM_JSON_SCHEMA.get(kind, kind) if isinstance(kind, str) else "any"


def _answer_type(acceptable: Sequence[Any]) -> type | None:
    return next((type(a) for a in acceptable if a != ""), None)


def _type_ok(
    value: Any, acceptable: Sequence[Any], expected: type, nested: type | None,
    answer_type: type | None,
) -> tuple[bool, bool]:  # fmt: skip
    """(valid, is_variable), as BFCL's type_checker: one level of nesting for arrays; a value
    of the answer's own type (a string where a number is declared) stands for a variable.
    `answer_type` is `_answer_type(acceptable)`."""
    is_variable = answer_type is not None and answer_type is not expected
    if type(value) is expected:
        if nested is None:
            return True, is_variable
        for option in acceptable:
            if type(option) is not list:
                return True, is_variable
            items = cast(list[Any], value)
            item_type = _answer_type(option)
            if all(_type_ok(item, option, nested, None, item_type)[0] for item in items):
                return True, is_variable
        return False, is_variable
    if answer_type is not None and type(value) is answer_type:
        return True, True
    return False, is_variable


def _std(value: Any) -> Any:
    return _standardize(value) if type(value) is str else value


def _dict_ok(value: Mapping[str, Any], acceptable: Sequence[Any]) -> bool:
    for option in acceptable:
        if option == "" or not isinstance(option, Mapping):
            continue
        if all(k in option and _std(v) in [_std(a) for a in option[k]] for k, v in value.items()) \
                and all(k in value or "" in opts for k, opts in option.items()):  # fmt: skip
            return True
    return False


def _list_dict_ok(value: Sequence[Any], acceptable: Sequence[Any]) -> bool:
    for option in acceptable:
        if (
            isinstance(option, list)
            and len(option) == len(value)
            and all(
                isinstance(v, Mapping) and _dict_ok(v, [o])
                for v, o in zip(value, option, strict=True)
            )
        ):
            return True
    return False


class _Param(NamedTuple):
    kind: str  # BFCL's type name
    expected: type  # the Python type a value must have
    nested: type | None  # for arrays, the type of their items


class _Signature(NamedTuple):
    required: tuple[str, ...]
    params: dict[str, _Param]


def _signature(definition: Mapping[str, Any]) -> _Signature:
    """A function definition's parameters as the checker uses them (built once per toolset)."""
    parameters = definition.get("parameters") or {}
    params = {}
    for param, details in (parameters.get("properties") or {}).items():
        if not isinstance(details, Mapping):
            details = {}
        kind = _type_name(details)
        nested = None
        if kind in ("array", "tuple"):
            items = details.get("items")
            nested = _PY_TYPES.get(_type_name(items if isinstance(items, Mapping) else {}), str)
        params[param] = _Param(kind, _PY_TYPES.get(kind, str), nested)
    return _Signature(tuple(parameters.get("required") or ()), params)


def _signatures(definitions: Mapping[str, Mapping[str, Any]]) -> dict[str, _Signature]:
    return {name: _signature(d) for name, d in definitions.items()}


def check_call(
    definition: Mapping[str, Any], call: Mapping[str, Mapping[str, Any]],
    expected: Mapping[str, Mapping[str, Sequence[Any]]],
) -> str | None:  # fmt: skip
    """None when `call` ({name: arguments}) matches `expected` ({name: {arg: acceptable}}) under
    `definition` (the function's definition), else why not."""
    name, answers = next(iter(expected.items()))
    if name not in call:
        return f"function {name!r} not called"
    return _match(_signature(definition), name, call[name], answers)


def _match(
    signature: _Signature, name: str, arguments: Mapping[str, Any],
    answers: Mapping[str, Sequence[Any]],
) -> str | None:  # fmt: skip
    """`check_call` for a call already known to be to `name`."""
    for param in signature.required:
        if param not in arguments:
            return f"{name}: missing required argument {param!r}"
    params = signature.params
    for param, value in arguments.items():
        rule = params.get(param)
        if rule is None or param not in answers:
            return f"{name}: unexpected argument {param!r}"
        kind, expected_type, nested = rule
        acceptable = answers[param]
        answer_type = _answer_type(acceptable)
        if type(value) is str and expected_type is str and answer_type in (None, str):
            # A string against string answers: compared after BFCL's standardisation (an
            # exact match needs none).
            if value not in acceptable and _standardize(value) not in [
                _standardize(a) for a in acceptable if type(a) is str
            ]:
                return f"{name}: {param!r} = {value!r} is not one of {list(acceptable)}"
            continue
        if kind == "tuple" and type(value) is tuple:
            value = list(value)
        if kind == "float" and type(value) is int:
            value = float(value)
        ok, is_variable = _type_ok(value, acceptable, expected_type, nested, answer_type)
        if not ok:
            return f"{name}: {param!r} has type {type(value).__name__}, expected {kind}"
        if not is_variable:
            if expected_type is dict:
                if not _dict_ok(value, acceptable):
                    return f"{name}: {param!r} = {value!r} is not an accepted value"
                continue
            if expected_type is list and nested is dict:
                if not _list_dict_ok(value, acceptable):
                    return f"{name}: {param!r} = {value!r} is not an accepted value"
                continue
            if expected_type is list:
                std_value = [_std(v) for v in value]
                # As BFCL: every acceptable value is iterated (so "" accepts an empty list).
                options = [[_std(v) for v in a] for a in acceptable if isinstance(a, (list, str))]
                if std_value not in options:
                    return f"{name}: {param!r} = {value!r} is not one of {list(acceptable)}"
                continue
        if value not in acceptable:
            return f"{name}: {param!r} = {value!r} is not one of {list(acceptable)}"
    for param, acceptable in answers.items():
        if param not in arguments and "" not in acceptable:
            return f"{name}: argument {param!r} left out but not optional"
    return None


def _expected(reference: Any) -> list[Mapping[str, Mapping[str, Sequence[Any]]]]:
    if isinstance(reference, Mapping) and "ground_truth" in reference:
        reference = reference["ground_truth"]
    if isinstance(reference, Mapping):
        reference = [{k: v} for k, v in reference.items()]
    if not isinstance(reference, list) or not all(map(_is_expected_call, reference)):
        raise NotApplicable(
            "tool_call_match needs BFCL's possible-answer shape: "
            '[{"function": {"arg": [acceptable, ...]}}, ...]'
        )
    return reference


def _is_expected_call(entry: Any) -> bool:
    if type(entry) is dict:
        if len(entry) != 1:
            return False
        for answers in entry.values():
            return type(answers) is dict or isinstance(answers, Mapping)
    return (
        isinstance(entry, Mapping)
        and len(entry) == 1
        and isinstance(next(iter(entry.values())), Mapping)
    )


@register("tool_call_match")
@dataclass(kw_only=True)
class ToolCallMatch(CheckReward):
    """Checks the tool calls an agent made against the expected calls, as BFCL's AST checker does.

    The reference takes BFCL's possible-answer shape, one entry per expected call, each
    argument with its list of acceptable values (``""`` among them marks an optional argument
    that may be left out): ``[{"calculate_triangle_area": {"base": [10], "height": [5],
    "unit": ["units", ""]}}]``, or BFCL's whole answer row, ``{"ground_truth": [...]}``. The
    function definitions travel with the rollout in ``metadata.tools`` (OpenAI shape) or
    ``metadata.function`` (BFCL's list); they give each argument's type and the required
    ones. A rollout without a reference, or without the definition of an expected function,
    is ``not_applicable``.

    A call matches an expected one when the function name is the same, every required
    argument is there, no argument is unknown to the definition or to the answer, each value
    has the declared type (an int is accepted for a float) and is among the acceptable values
    (strings compared after BFCL's standardisation: case, spaces and ``,./-_*^`` ignored;
    lists and dicts compared element by element), and every argument left out is optional.
    The number of calls must equal the number expected. The components are ``matched`` and
    ``expected`` (counts); the reason says why each unmatched call failed.

    Attributes:
        order: ``any`` (BFCL's parallel checker: each expected call takes the first unmatched
            call that matches it) or ``strict`` (the i-th call must match the i-th expected
            one).
        scoring: ``all`` (1 when every expected call is matched and there are no others, as
            BFCL's verdict) or ``fraction`` (the share of expected calls matched, counting any
            call beyond them as an unmatched expected one).
        reference_key: Take the expected calls from this key of an object reference.

    Example:
        ```yaml
        type: tool_call_match
        order: any
        scoring: fraction
        ```

    Scores:
        ```yaml
        - prompt: Find the area of a triangle with base 10 and height 5, and convert 5 km to miles.
          metadata: &tools
            tools:
              - type: function
                function:
                  name: triangle_area
                  parameters:
                    type: object
                    required: [base, height]
                    properties: {base: {type: number}, height: {type: number}, unit: {type: string}}
              - type: function
                function:
                  name: convert_length
                  parameters:
                    type: object
                    required: [value, from_unit, to_unit]
                    properties:
                      value: {type: number}
                      from_unit: {type: string}
                      to_unit: {type: string}
          completion:
            - role: assistant
              content: ""
              tool_calls:
                - id: c1
                  name: convert_length
                  arguments: '{"value": 5, "from_unit": "km", "to_unit": "miles"}'
                - {id: c2, name: triangle_area, arguments: '{"base": 10, "height": 5}'}
          reference: &calls
            - triangle_area: {base: [10], height: [5], unit: [units, ""]}
            - convert_length: {value: [5], from_unit: [km, kilometers], to_unit: [miles, mi]}
          value: 1.0
        - prompt: Find the area of a triangle with base 10 and height 5, and convert 5 km to miles.
          metadata: *tools
          completion:
            - role: assistant
              content: ""
              tool_calls:
                - {id: c1, name: triangle_area, arguments: '{"base": 5, "height": 10}'}
                - id: c2
                  name: convert_length
                  arguments: '{"value": 5, "from_unit": "km", "to_unit": "mi"}'
          reference: *calls
          value: 0.3333333333333333
        ```
    """

    default_run_in: ClassVar[RunIn] = "inline"  # its cost is bounded

    order: Literal["any", "strict"] = "any"
    scoring: Literal["all", "fraction"] = "all"
    reference_key: str | None = None
    name: str = "tool_call_match"

    def needs(self) -> frozenset[Need]:
        """The expected calls, and the completion as chat messages (calls, results)."""
        return frozenset({"reference", "messages"})

    def check(self, rollout: Rollout) -> Score:
        expected = _expected(reference_of(rollout, self.reference_key))
        traj = trajectory(rollout)
        signatures = traj.toolset.derive("tool_call_match.signatures", _signatures)
        missing_defs = [n for e in expected for n in e if n not in signatures]
        if missing_defs:
            raise NotApplicable(
                f"no definition for {missing_defs}: put the tools in metadata.tools (OpenAI "
                "shape) or metadata.function (BFCL's list)"
            )
        calls = traj.calls
        taken: set[int] = set()
        notes: list[str] = []
        by_name: dict[str, list[int]] = {}
        for j, call in enumerate(calls):
            by_name.setdefault(call.name, []).append(j)
        strict = self.order == "strict"
        for i, exp in enumerate(expected):
            [(name, answers)] = exp.items()
            # A call to another function cannot match: only same-named calls are tried, in
            # order, which is the order BFCL's checker would find the first match in.
            candidates = [i] if strict else by_name.get(name, ())
            why = "no call left to match"
            for j in candidates:
                if j in taken or j >= len(calls):
                    continue
                call = calls[j]
                if call.name != name:
                    why = f"function {name!r} not called"
                    continue
                arguments = (
                    call.arguments
                    if call.arguments is not None
                    else {"__invalid__": call.raw_arguments}
                )
                why = _match(signatures[name], name, arguments, answers) or ""
                if not why:
                    taken.add(j)
                    break
            else:
                notes.append(f"expected call {i + 1} ({name}): {why}")
        matched = len(taken)
        extra = len(calls) - matched
        if len(calls) != len(expected):
            notes.insert(0, f"{len(calls)} calls made, {len(expected)} expected")
        if self.scoring == "all":
            value = 1.0 if not notes else 0.0
        else:
            value = matched / (len(expected) + max(0, extra))
        return Score(
            value=value,
            components={"matched": float(matched), "expected": float(len(expected))},
            reason="; ".join(notes[:5]) or f"all {len(expected)} calls match",
        )
