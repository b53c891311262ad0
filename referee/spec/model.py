"""The spec file as a pydantic model, and the JSON Schema that editors validate spec files with.

The keys the loader reads itself are models here (`TransformKeys`, `RewardKeys`,
`CombinationKeys`, `ComponentKeys`), and `referee.spec` takes its lists of keys from them. A
reward type's own options are its dataclass's fields: `json_schema` asks pydantic for each
registered type's schema (built-in and plugin) and joins them to the models, so the schema
describes what `referee.spec.load` accepts::

    referee schema > docs/spec.schema.json      # the published copy

Where a check of the loader's cannot be written in JSON Schema (a combination's deadline over
async components, NaN), the schema is the looser of the two: it never rejects a spec that
loads. Where pydantic's own schema for an option is stricter than what its validator takes
(shorthand forms, the lax coercion of ``"5"`` to 5), the option is loosened to match.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import PydanticOmit, core_schema

from referee.compose import CombineMode, FailurePolicy, NonePolicy
from referee.registry import BUILTIN, lookup, registered_types
from referee.reward import CheckReward, GroupReward, Reward, RewardBase, SyncReward
from referee.workers import RunIn

__all__ = [
    "COMBINE_KEYS",
    "COMPONENT_KEYS",
    "MODES",
    "NONE_POLICIES",
    "POLICIES",
    "POLICY_KEYS",
    "REWARD_TYPES",
    "SCHEMA_DIALECT",
    "TRANSFORM_KEYS",
    "CombinationKeys",
    "ComponentKeys",
    "RewardKeys",
    "TransformKeys",
    "builtin_types",
    "json_schema",
]

SCHEMA_DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"

_KEYS = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)


class TransformKeys(BaseModel):
    """What any reward or combination may add: its value scaled, offset and clipped."""

    model_config = _KEYS

    scale: float = 1.0
    """Multiplies the value (a finite number)."""
    offset: float = 0.0
    """Added after scaling (a finite number)."""
    clip: tuple[float | None, float | None] = (None, None)
    """``[low, high]``: the value is clipped into it last; either may be null (no bound)."""


class RewardKeys(BaseModel):
    """The keys of one reward that are not its type's options (``type`` names the type)."""

    model_config = _KEYS

    type: str
    """The reward type (`referee types` lists them)."""
    name: Any = None
    """Its name in components, failures and logs (read as text; default: the key or file)."""
    description: Any = None
    """Free text for people; the loader ignores it."""
    deadline: PositiveFloat | None = None
    """Seconds one rollout may take through it: past it a sync check scores 0
    (``fault: timeout``), an async reward (a judge) ``Failure("timeout")``."""
    run_in: RunIn = "inline"
    """Where its check runs: ``inline``, ``thread`` or ``process`` (check types only)."""
    timeout: PositiveFloat | None = Field(
        default=None, deprecated="timeout is the deprecated spelling of deadline here"
    )
    """Deprecated where the type has no ``timeout`` option of its own: write ``deadline``."""


class CombinationKeys(BaseModel):
    """A combination of named components (transforms aside: `TransformKeys`)."""

    model_config = _KEYS

    name: Any = None
    """Its name in components, failures and logs (read as text; default: the key or file)."""
    description: Any = None
    """Free text for people; the loader ignores it."""
    version: Any = None
    """Free text for people (a version of the spec); the loader ignores it."""
    combine: CombineMode = "weighted"
    """How component values become the total."""
    components: dict[str, Any] = Field(min_length=1)
    """Name -> component: a reward type's name, or a reward or combination mapping."""
    on_failure: FailurePolicy | None = None
    """What to do with a component that gives no value (the default of its components):
    ``fail`` the total, ``omit`` it, or count it as ``failure_value``."""
    failure_value: float = 0.0
    """The value of a failed component under ``on_failure: value``."""
    on_none: NonePolicy | None = Field(
        default=None, deprecated="on_none is deprecated: write on_failure (skip is omit)"
    )
    """Deprecated: ``on_failure`` (``skip`` is ``omit``)."""
    none_value: float = Field(default=0.0, deprecated="none_value is deprecated: failure_value")
    """Deprecated: ``failure_value``."""
    floor: float = 0.0
    """Where a gate's threshold is not met, the total is this."""
    deadline: PositiveFloat | None = None
    """Seconds one rollout may take through the whole combination (its components sync)."""
    timeout: PositiveFloat | None = Field(
        default=None, deprecated="timeout is the deprecated spelling of deadline here"
    )
    """Deprecated: ``deadline``."""


class ComponentKeys(BaseModel):
    """What a component adds to its reward or combination."""

    model_config = _KEYS

    weight: float = 1.0
    """Its weight in the total (``combine: weighted`` takes weights as given)."""
    gate: bool = False
    """A gate: below ``threshold``, the components after it are skipped and the total is
    the combination's ``floor``."""
    threshold: float = 1.0
    """A gate's pass mark."""
    on_failure: FailurePolicy | None = None
    """Where it gives no value: ``fail`` the total, ``omit`` it, or count ``failure_value``
    (default: its combination's)."""
    failure_value: float = 0.0
    """Its value under ``on_failure: value`` (default: its combination's)."""


COMBINE_KEYS: Final = frozenset(CombinationKeys.model_fields)
POLICY_KEYS: Final = frozenset({"on_failure", "failure_value"})
COMPONENT_KEYS: Final = frozenset(ComponentKeys.model_fields)
TRANSFORM_KEYS: Final = frozenset(TransformKeys.model_fields)
MODES: Final[tuple[str, ...]] = get_args(CombineMode)
POLICIES: Final[tuple[str, ...]] = get_args(FailurePolicy)
NONE_POLICIES: Final[tuple[str, ...]] = get_args(NonePolicy)
REWARD_TYPES: Final = (Reward, GroupReward, SyncReward)
"""Option types that hold a reward: a spec writes a nested reward mapping there."""

# --- reward types' options --------------------------------------------------------------------

_REWARD_MARK = "x-referee-reward"  # stands for the $ref to a nested reward until defs are joined

# pydantic validates options in lax mode: "5" and true are integers, "1e3" a number, "yes" and
# 0 booleans. The schema accepts what the loader accepts; a word where a number goes still fails.
_NUMERIC_TEXT = r"^\s*[-+]?([0-9_.]|[iI][nN][fF]|[nN][aA][nN])"
_INTEGER_TEXT = r"^\s*[-+]?[0-9]"
_TRUTH = ("0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes")
_TRUTH_TEXT = "^({})$".format(
    "|".join("".join(f"[{c}{c.upper()}]" if c.isalpha() else c for c in w) for w in _TRUTH)
)

# Before-validators whose shorthand forms this module writes out itself (see `_field_rule` and
# `_judge_options`). Any other before- or wrap-validator (a plugin's) takes inputs that
# pydantic's schema cannot know, so its schema is loosened to any value.
_UNDERSTOOD: Final = frozenset(
    {
        ("referee.rewards.structured.fields", "FieldRule._short_forms"),
        ("referee.judges.options", "JudgeOptions.__get_pydantic_core_schema__.<locals>.<lambda>"),
        ("referee.judges.client", "_cache_option"),  # a better error; the shape is its own
        # the client's options flat, listed by _type_schema (`client_flat`)
        ("referee.rewards.judged.openai_graders", "_nest_flat_client"),
    }
)


class _Options(GenerateJsonSchema):
    """pydantic's schema of reward options, as the loader validates them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.loosened: list[str] = []

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False  # the key is its title

    def is_instance_schema(self, schema: core_schema.IsInstanceSchema) -> JsonSchemaValue:
        if schema["cls"] in REWARD_TYPES:
            return {_REWARD_MARK: True}
        raise PydanticOmit  # a Python object (a compiled pattern): no spec file can hold one

    def callable_schema(self, schema: core_schema.CallableSchema) -> JsonSchemaValue:
        raise PydanticOmit

    def int_schema(self, schema: core_schema.IntSchema) -> JsonSchemaValue:
        return self._lax(super().int_schema(schema), {"type": "string", "pattern": _INTEGER_TEXT})

    def float_schema(self, schema: core_schema.FloatSchema) -> JsonSchemaValue:
        return self._lax(super().float_schema(schema), {"type": "string", "pattern": _NUMERIC_TEXT})

    def bool_schema(self, schema: core_schema.BoolSchema) -> JsonSchemaValue:
        return {
            "anyOf": [
                {"type": "boolean"},
                {"enum": [0, 1]},
                {"type": "string", "pattern": _TRUTH_TEXT},
            ]
        }

    def _lax(self, base: JsonSchemaValue, text: JsonSchemaValue) -> JsonSchemaValue:
        return {"anyOf": [base, {"type": "boolean"}, text]}

    def function_before_schema(
        self, schema: core_schema.BeforeValidatorFunctionSchema
    ) -> JsonSchemaValue:
        return self._unless_understood(schema, super().function_before_schema)

    def function_wrap_schema(
        self, schema: core_schema.WrapValidatorFunctionSchema
    ) -> JsonSchemaValue:
        return self._unless_understood(schema, super().function_wrap_schema)

    def _unless_understood(
        self, schema: Any, inner: Callable[[Any], JsonSchemaValue]
    ) -> JsonSchemaValue:
        function = schema["function"]["function"]
        where = (getattr(function, "__module__", ""), getattr(function, "__qualname__", ""))
        if where in _UNDERSTOOD or "json_schema_input_schema" in schema:
            understood: JsonSchemaValue = inner(schema)
            return understood
        self.loosened.append(".".join(where))
        return {}

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        from referee.rewards.structured.fields import FieldRule

        full = super().model_schema(schema)
        return _field_rule(full) if schema["cls"] is FieldRule else full


def _field_rule(full: JsonSchemaValue) -> JsonSchemaValue:
    """A field_match rule in its three spellings (`FieldRule._short_forms`): a matcher's name
    (``amount: number``), a one-key mapping of a matcher to its options (``amount: {number:
    {rel_tol: 0.01}}``, with more rule keys beside it), or in full (``{match: number, ...}``)."""
    from referee.rewards.structured.fields import MatcherKind

    kinds: tuple[str, ...] = get_args(MatcherKind)
    options = dict(full["properties"])
    rest = {k: v for k, v in options.items() if k != "match"}
    one_key = {
        "type": "object",
        "properties": {
            **{
                kind: {
                    "anyOf": [
                        {"type": "object", "properties": options, "additionalProperties": False},
                        {"type": "null"},
                    ]
                }
                for kind in kinds
            },
            **rest,
        },
        "oneOf": [{"required": [kind]} for kind in kinds],
        "additionalProperties": False,
    }
    return {
        "description": full.get("description", ""),
        "anyOf": [{"enum": list(kinds)}, {k: v for k, v in full.items() if k != "description"},
                  one_key],
    }  # fmt: skip


def builtin_types() -> list[str]:
    """The registered reward types that referee itself defines, sorted (importing none)."""
    return sorted(BUILTIN)


def _class(name: str) -> type[Any]:
    cls = lookup(name)
    if cls is None:
        raise ValueError(f"unknown reward type {name!r}")
    return cls


def _keys_schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema(ref_template="#/$defs/{model}")


def _strict(model: type[BaseModel], *names: str) -> dict[str, Any]:
    """The schemas of `names` among `model`'s keys (read by the loader, strictly)."""
    properties = _keys_schema(model)["properties"]
    return {name: properties[name] for name in names}


_PANEL_CLIENT = "PanelClient"


def _panel_client(client: JsonSchemaValue) -> JsonSchemaValue:
    """A panel's shared client under ``client``: the client's options, but no ``model`` (each
    member names its own under ``models``)."""
    return {
        "description": "The judge client options a panel's members share (no model).",
        "type": "object",
        "properties": {**client["properties"], "model": False},
        "additionalProperties": False,
    }


def _type_schema(
    name: str, cls: type[Any], options: JsonSchemaValue, client: JsonSchemaValue
) -> JsonSchemaValue:
    """What a reward of type `name` takes beside ``type``, ``name`` and its transforms."""
    from referee.judges.options import CLIENT_OPTIONS, JudgeOptions

    fields = {f.name: f for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else {}
    # The loader names the reward itself; a field not in __init__ is no option. InitVars are
    # options (pydantic lists them; dataclasses.fields does not).
    drop = {"name", *(n for n, f in fields.items() if not f.init)}
    properties = {k: v for k, v in options.get("properties", {}).items() if k not in drop}
    required = [k for k in options.get("required", []) if k not in drop]
    out: dict[str, Any] = {"properties": properties}
    if "properties" not in options:  # a validator of the whole type takes any shape
        out["additionalProperties"] = True
    if options.get("description"):
        # The docstring, less its scoring example (rollouts and values: the docs page's, not
        # an editor's tooltip).
        out["description"] = re.split(r"\n\s*Scores:\s*\n", options["description"])[0].rstrip()
    own = {n for n, f in fields.items() if f.init and n != "name"}
    # A judge takes its client's options flat beside its own, or under `client`; so does a
    # type that says it does (`client_flat`: openai_grader, whose graders name their models).
    judge = "client" in own and issubclass(cls, JudgeOptions)
    partial = "client" in own and not judge and getattr(cls, "client_flat", False)
    if judge or partial:
        flat = sorted(CLIENT_OPTIONS - own - ({"model"} if partial else set()))
        own |= set(flat)
        properties.update({k: client["properties"][k] for k in flat})
        required = [k for k in required if k != "client"]
        needs = [k for k in client.get("required", []) if k in flat]
        if needs:
            out["anyOf"] = [{"required": ["client"]}, {"required": needs}]
        out["dependentSchemas"] = {"client": {"properties": dict.fromkeys(flat, False)}}
        if "models" in own and needs:  # a panel names its models under `models`, not `model`
            out["anyOf"].append({"required": ["models"]})
            # ... so its client, flat or under `client`, has no model of its own
            out["dependentSchemas"]["models"] = {
                "properties": {"model": False, "client": {"$ref": f"#/$defs/{_PANEL_CLIENT}"}}
            }
            whole = properties.get("client")
            if whole is not None:
                properties["client"] = {}  # which client shape: decided by `models`, below
                out["if"] = {"required": ["models"]}
                out["else"] = {"properties": {"client": whole}}
    base = issubclass(cls, RewardBase)
    keys = _keys_schema(RewardKeys)["properties"]
    null: JsonSchemaValue = {"type": "null"}
    if "deadline" not in own:
        properties["deadline"] = keys["deadline"] if base else null
    if "timeout" not in own:
        properties["timeout"] = keys["timeout"] if base else null
        if "deadline" not in own:
            out["not"] = _both_deadlines()
    if "run_in" not in own and base:
        properties["run_in"] = (  # no default: the class's `default_run_in` is
            {k: v for k, v in keys["run_in"].items() if k != "default"}
            if issubclass(cls, CheckReward)
            else {"const": "inline", "description": f"{name} waits on the event loop: inline only"}
        )
    if required:
        out["required"] = required
    return out


def _both_deadlines() -> JsonSchemaValue:
    """A number under ``deadline`` beside ``timeout`` (its old spelling): the loader refuses."""
    return {"required": ["deadline", "timeout"], "properties": {"deadline": {"type": "number"}}}


def _options_schemas(types: list[str]) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """pydantic's schema of each type's options (by type name), the definitions they share,
    and the validators loosened to any value."""
    from referee.judges.client import JudgeClient

    inputs: list[tuple[str, Literal["validation"], TypeAdapter[Any]]] = [
        (name, "validation", TypeAdapter(_class(name))) for name in types
    ]
    inputs.append(("<client>", "validation", TypeAdapter(JudgeClient)))
    generator: list[_Options] = []

    def make(*args: Any, **kwargs: Any) -> _Options:
        generator.append(_Options(*args, **kwargs))
        return generator[-1]

    refs, top = TypeAdapter.json_schemas(
        inputs,
        ref_template="#/$defs/{model}",
        schema_generator=make,  # type: ignore[arg-type]
    )
    defs: dict[str, Any] = top.get("$defs", {})
    schemas = {}
    for (key, _), schema in refs.items():
        while "$ref" in schema:
            schema = defs[schema["$ref"].rsplit("/", 1)[1]]
        schemas[str(key)] = schema
    return schemas, defs, generator[0].loosened if generator else []


def json_schema(types: Iterable[str] | None = None) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a spec file, for editors and CI.

    Args:
        types: The reward types it knows; default every registered type, plugins included.

    Example:
        ```yaml
        # yaml-language-server: $schema=../docs/spec.schema.json
        type: math_answer
        ```
    """
    names = sorted(set(registered_types() if types is None else types))
    options, shared, _ = _options_schemas(names)
    defs: dict[str, Any] = copy.deepcopy(shared)

    def own(key: str, schema: JsonSchemaValue) -> None:
        if key in defs:
            raise ValueError(f"two definitions named {key!r} in the spec schema")
        defs[key] = schema

    for name in names:
        own(f"type-{name}", _type_schema(name, _class(name), options[name], options["<client>"]))
    own(_PANEL_CLIENT, _panel_client(options["<client>"]))
    transforms = _keys_schema(TransformKeys)["properties"]
    is_combination = {"anyOf": [{"required": ["combine"]}, {"required": ["components"]}]}
    combination = _keys_schema(CombinationKeys)
    combination["properties"]["components"].update(
        additionalProperties={"$ref": "#/$defs/component"}, propertyNames={"minLength": 1}
    )
    own("combination", {
        "description": combination["description"],
        "type": "object",
        "required": ["components"],
        "properties": {**combination["properties"], **transforms},
        "not": {"anyOf": [_both_deadlines(), {"required": ["on_failure", "on_none"]},
                          {"required": ["failure_value", "none_value"]}]},
    })  # fmt: skip
    reward_keys = _strict(RewardKeys, "type", "name", "description")
    reward_keys["type"] = {**reward_keys["type"], "enum": names}
    own("leaf", {
        "description": "One reward: its type, and that type's options.",
        "type": "object",
        "required": ["type"],
        "properties": {**reward_keys, **transforms},
        "allOf": [
            {"if": {"properties": {"type": {"const": name}}, "required": ["type"]},
             "then": {"$ref": f"#/$defs/type-{name}"}}
            for name in names
        ],
    })  # fmt: skip
    body = {"if": is_combination, "then": {"$ref": "#/$defs/combination"},
            "else": {"$ref": "#/$defs/leaf"}}  # fmt: skip
    own("reward", {
        "description": "A reward (type: ...) or a combination (combine: ..., components: ...).",
        "type": "object", **body, "unevaluatedProperties": False,
    })  # fmt: skip
    own("component", {
        "anyOf": [
            {"description": "A reward type with its default options.", "enum": names},
            {"type": "object", "properties": _keys_schema(ComponentKeys)["properties"],
             **body, "unevaluatedProperties": False},
        ],
    })  # fmt: skip
    schema = {
        "$schema": SCHEMA_DIALECT,
        "title": "referee spec",
        "description": "A referee reward spec: referee.load(path) builds the reward it describes.",
        "$ref": "#/$defs/reward",
        "$defs": defs,
    }
    return _prune(_resolve_marks(schema))


def _resolve_marks(node: Any) -> Any:
    if isinstance(node, Mapping):
        if node.get(_REWARD_MARK):
            return {"$ref": "#/$defs/reward"}
        return {k: _resolve_marks(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_resolve_marks(v) for v in node]
    return node


def _prune(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` without the definitions nothing refers to (fields that are no options)."""
    defs = schema["$defs"]
    seen: set[str] = set()
    stack: list[Any] = [{k: v for k, v in schema.items() if k != "$defs"}]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                key = ref.removeprefix("#/$defs/")
                if key not in seen:
                    seen.add(key)
                    stack.append(defs[key])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    schema["$defs"] = {k: defs[k] for k in sorted(seen)}
    return schema


def schema_text(*, plugins: bool = False) -> str:
    """The schema as `referee schema` prints it (and docs/spec.schema.json holds): sorted,
    indented JSON. Built-in types only unless `plugins`, so the published copy does not
    depend on what is installed."""
    schema = json_schema(None if plugins else builtin_types())
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False)
