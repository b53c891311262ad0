"""The JSON Schema of spec files: it accepts every spec `referee.load` accepts, and catches typos.

The corpus of accepted specs is the spec files in the repository, the spec literals in the test
modules (dicts and YAML text), the options table that builds every built-in type, and the hand
list below; each is kept only where `load` accepts it, so the schema is never stricter than the
loader.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import textwrap
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

import referee
from referee import SpecError, registry
from referee._yaml import safe_load
from referee.reward import CheckReward, RewardResult
from referee.rollout import Rollout
from referee.spec.model import _options_schemas, builtin_types, json_schema, schema_text
from tests.support.options import OPTIONS

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "docs" / "spec.schema.json"
REGENERATE = "referee schema > docs/spec.schema.json"

HAND: list[dict[str, Any]] = [
    # a judge panel: the shared client options flat or nested, neither with a model of its own
    {"type": "reference_judge", "models": ["openai/a", {"model": "openai/b", "name": "b"}],
     "timeout": 5, "vote": "majority", "quorum": 2},
    {"type": "rubric_judge", "rubric": "helpfulness", "models": ["openai/a", "openai/b"],
     "client": {"api_base": "http://127.0.0.1:8000/v1", "timeout": 5}, "vote": "mean"},
    # every short form of a single reward
    {"type": "json_valid"},
    {"type": "json_valid", "name": "valid", "description": "strict JSON", "extract": "fenced"},
    {"type": "json_valid", "deadline": 2, "run_in": "thread"},
    {"type": "json_valid", "deadline": None},
    {"type": "json_valid", "run_in": "process", "scale": 2, "offset": -1, "clip": [0, None]},
    {"type": "json_valid", "name": 2024},  # a name is read as text
    {"type": "math_answer", "timeout": 5, "deadline": 30},  # its own timeout, and a deadline
    {"type": "exact_match", "timeout": 3},  # the deprecated spelling of deadline
    {"type": "exact_match", "timeout": None},
    # pydantic's lax coercions, which the loader accepts
    {"type": "length", "max_length": "4096", "cache_length": 512.0},
    {"type": "length", "max_length": True},
    {"type": "math_answer", "strict": "yes", "timeout": " 1e1 "},
    {"type": "math_answer", "strict": 0, "float_rounding": "6"},
    {"type": "repetition", "max_penalty": "-0.5", "ngram_size": " 3 "},
    # field_match's rule spellings
    {"type": "field_match", "fields": {"a": "text", "b": {"match": "number", "abs_tol": 1}}},
    {"type": "field_match", "fields": {"amount": {"number": {"rel_tol": 0.01}}}},
    {"type": "field_match", "fields": {"amount": {"number": None, "weight": 2}}},
    {"type": "field_match", "fields": {"d": {"date": {"date_formats": ["%d.%m.%Y"]}}}},
    {"type": "field_match", "fields": {"x": {"fuzzy": {"threshold": "0.8"}}}, "default": "text"},
    {"type": "field_match", "fields": {"a": {}}, "extra_fields": "ignore"},
    # judges: the client flat, nested, and its timeout (the client's, not the deadline)
    {"type": "rubric_judge", "rubric": "helpfulness", "model": "openai/x", "timeout": 30},
    {"type": "rubric_judge", "rubric": "helpfulness", "client": {"model": "openai/x", "rpm": 60}},
    {"type": "pairwise_judge", "model": "openai/x", "deadline": 100, "run_in": "inline"},
    # nested rewards
    {"type": "final_answer", "reward": {"type": "json_valid", "scale": 2}},
    {"type": "final_answer", "reward": {"combine": "min", "components": {"a": "json_valid"}}},
    # combinations
    {"components": {"a": "json_valid"}},
    {"combine": "mean", "components": {"a": "json_valid", "b": {"type": "format",
                                                               "preset": "think"}}},
    {
        "name": "extraction",
        "description": "fields and validity",
        "version": 3,
        "combine": "weighted",
        "on_failure": "value",
        "failure_value": 0.0,
        "floor": -1,
        "deadline": 10,
        "scale": 0.5,
        "components": {
            "valid": {"type": "json_valid", "weight": 0.2, "gate": True, "threshold": 1},
            "fields": {"type": "field_match", "weight": 0.8, "on_failure": "omit"},
            "judge": {"type": "exact_match", "on_failure": "value", "failure_value": 0.5},
        },
    },
    {
        "combine": "cascade",
        "on_none": "skip",  # deprecated
        "none_value": 0.0,
        "components": {
            "inner": {
                "combine": "product",
                "weight": 2,
                "on_failure": "omit",
                "clip": [None, 1],
                "components": {"a": "json_valid", "b": {"components": {"c": "contains"}}},
            },
            "last": "exact_match",
        },
    },
    {"combine": "max", "timeout": 4, "components": {"a": "json_valid"}},  # deprecated
    {"combine": "weighted", "on_failure": None, "components": {"a": {"type": "json_valid",
                                                                     "on_failure": None}}},
]  # fmt: skip

# Specs the loader rejects for a key or a value, each with what it gets wrong.
REJECTED: list[tuple[str, dict[str, Any]]] = [
    ("a panel with a model too", {"type": "reference_judge", "models": ["openai/a"],
                                   "model": "openai/b"}),
    ("a panel's nested client with a model", {"type": "reference_judge", "models": ["openai/a"],
                                              "client": {"model": "openai/b"}}),
    ("a panel's nested client with an unknown key", {"type": "reference_judge",
                                                     "models": ["openai/a"],
                                                     "client": {"timeot": 5}}),
    ("a single judge's nested client without a model", {"type": "reference_judge",
                                                         "client": {"timeout": 5}}),
    ("an unknown option", {"type": "json_valid", "extrct": "fenced"}),
    ("an unknown option value", {"type": "json_valid", "extract": "fencd"}),
    ("a misspelled type", {"type": "json_vaild"}),
    ("a misspelled type as a component", {"components": {"a": "json_vaild"}}),
    ("an unknown combine mode", {"combine": "meen", "components": {"a": "json_valid"}}),
    ("an unknown on_failure", {"on_failure": "skip", "components": {"a": "json_valid"}}),
    ("an unknown on_failure on a component",
     {"components": {"a": {"type": "json_valid", "on_failure": "ignore"}}}),
    ("an unknown run_in", {"type": "json_valid", "run_in": "gpu"}),
    ("run_in thread on an async type", {"type": "rubric_judge", "model": "m", "run_in": "thread"}),
    ("a component with an unknown key",
     {"components": {"a": {"type": "json_valid", "wieght": 2}}}),
    ("an unknown key in a combination",
     {"combine": "mean", "floors": 0, "components": {"a": "json_valid"}}),
    ("a component key on a single reward", {"type": "json_valid", "weight": 2}),
    ("a type beside combine", {"type": "json_valid", "combine": "mean",
                               "components": {"a": "json_valid"}}),
    ("no type and no components", {"name": "x"}),
    ("no components", {"combine": "mean"}),
    ("empty components", {"combine": "mean", "components": {}}),
    ("a missing required option", {"type": "length"}),
    ("a judge with no model", {"type": "rubric_judge"}),
    ("a judge's client flat and nested",
     {"type": "rubric_judge", "client": {"model": "m"}, "model": "m"}),
    ("an unknown client option", {"type": "rubric_judge", "model": "m", "tempreature": 0}),
    ("a gate that is not a boolean",
     {"components": {"a": {"type": "json_valid", "gate": "yes"}}}),
    ("a weight written as text", {"components": {"a": {"type": "json_valid", "weight": "2"}}}),
    ("a clip of one bound", {"type": "json_valid", "clip": [0]}),
    ("a negative deadline", {"type": "json_valid", "deadline": -1}),
    ("deadline and its old spelling", {"type": "json_valid", "deadline": 2, "timeout": 3}),
    ("on_failure and on_none",
     {"on_failure": "omit", "on_none": "skip", "components": {"a": "json_valid"}}),
    ("an unknown matcher", {"type": "field_match", "fields": {"a": "numbr"}}),
    ("an unknown matcher option",
     {"type": "field_match", "fields": {"a": {"number": {"rel_toll": 0.1}}}}),
    ("a typo in a nested reward", {"type": "final_answer", "reward": {"type": "json_valid",
                                                                      "extrct": "first"}}),
    ("an integer option written as a word", {"type": "length", "max_length": "long"}),
]  # fmt: skip


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json_schema())


def loads(spec: Mapping[str, Any], base: Path | None = None) -> bool:
    """Whether `referee.load` accepts `spec` (a file's folder `base` resolves relative paths)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if base is None:
                referee.load(spec)
            else:
                path = base / ".referee-schema-test.json"
                try:
                    path.write_text(json.dumps(spec))
                    referee.load(path)
                finally:
                    path.unlink(missing_ok=True)
    except (SpecError, TypeError, ValueError):
        return False
    return True


def errors(validator: jsonschema.Draft202012Validator, spec: Any) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(spec)]


# --- the corpus -------------------------------------------------------------------------------


def _spec_files() -> Iterator[Path]:
    for folder in ("examples", "referee/data", "benchmarks", "tests"):
        for pattern in ("*.yaml", "*.yml", "*.json"):
            yield from sorted((ROOT / folder).rglob(pattern))


def _is_spec(data: Any) -> bool:
    return isinstance(data, Mapping) and bool({"type", "combine", "components"} & set(data))


def _literals(path: Path) -> Iterator[Any]:
    """The dict literals in a test module, and its strings that parse as YAML mappings."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Dict):
            try:
                yield ast.literal_eval(node)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
        elif isinstance(node, ast.Constant) and _looks_like_yaml_spec(node.value):
            try:  # referee's loader: a test's "billion laughs" is refused, not expanded
                yield safe_load(textwrap.dedent(node.value), str(path))
            except (yaml.YAMLError, SpecError):
                continue


def _looks_like_yaml_spec(value: object) -> bool:
    return isinstance(value, str) and any(k in value for k in ("type:", "combine:", "components:"))


def _collected() -> list[tuple[str, Any]]:
    found: dict[str, tuple[str, Any]] = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for data in _literals(path):
            if _is_spec(data):
                key = repr(data)
                found.setdefault(key, (str(path.relative_to(ROOT)), data))
    return list(found.values())


def test_every_spec_file_that_loads_validates(validator: jsonschema.Draft202012Validator) -> None:
    checked = 0
    for path in _spec_files():
        text = path.read_text(encoding="utf-8")
        try:
            data = safe_load(text, str(path))
        except (yaml.YAMLError, SpecError):
            continue
        if not _is_spec(data) or not loads(data, path.parent):
            continue  # not a spec (a dataset schema, a trainer's config), or one load rejects
        assert not errors(validator, data), (path, errors(validator, data))
        checked += 1
    assert checked >= 3  # the demo specs under referee/data, and examples/verl's


def test_every_spec_in_the_readme_and_the_docs_that_loads_validates(
    validator: jsonschema.Draft202012Validator, tmp_path: Path
) -> None:
    (tmp_path / "release.schema.json").write_text('{"type": "object"}')  # the example's file
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    checked = 0
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for block in re.findall(r"```ya?ml\n(.*?)```", text, re.DOTALL):
            data = safe_load(block, page.name)
            if _is_spec(data) and loads(data, tmp_path):
                assert not errors(validator, data), (page.name, block, errors(validator, data))
                checked += 1
    assert checked >= 7


def test_every_spec_literal_in_the_tests_that_loads_validates(
    validator: jsonschema.Draft202012Validator,
) -> None:
    checked = 0
    for where, data in _collected():
        if not loads(data):
            continue  # a spec a test expects to fail, or one that names files or test types
        assert not errors(validator, data), (where, data, errors(validator, data))
        checked += 1
    assert checked >= 30


@pytest.mark.parametrize("kind", sorted(OPTIONS))
def test_every_type_with_its_test_options_validates(
    validator: jsonschema.Draft202012Validator, kind: str
) -> None:
    spec = {"type": kind, **OPTIONS[kind]}
    assert loads(spec)
    assert not errors(validator, spec)
    component = {"components": {"only": {**spec, "weight": 2, "on_failure": "omit"}}}
    assert not errors(validator, component)


@pytest.mark.parametrize("spec", HAND, ids=lambda spec: json.dumps(spec)[:60])
def test_hand_written_specs_load_and_validate(
    validator: jsonschema.Draft202012Validator, spec: dict[str, Any]
) -> None:
    assert loads(spec), spec
    assert not errors(validator, spec)


def test_the_corpus_covers_every_built_in_type() -> None:
    assert set(OPTIONS) == set(builtin_types())


# --- what it rejects --------------------------------------------------------------------------


@pytest.mark.parametrize(("why", "spec"), REJECTED, ids=[why for why, _ in REJECTED])
def test_what_load_rejects_for_a_key_or_value_the_schema_rejects(
    validator: jsonschema.Draft202012Validator, why: str, spec: dict[str, Any]
) -> None:
    assert not loads(spec), why
    assert errors(validator, spec), why


def test_a_typo_is_named_in_the_error(validator: jsonschema.Draft202012Validator) -> None:
    found = errors(validator, {"components": {"a": {"type": "json_valid", "wieght": 2}}})
    assert any("wieght" in message for message in found), found


# --- what it is -------------------------------------------------------------------------------


def test_the_schema_is_valid_draft_2020_12_json_and_deterministic() -> None:
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    text = json.dumps(schema, sort_keys=True)
    assert json.loads(text) == schema
    assert json.dumps(json_schema(), sort_keys=True) == text
    assert json.dumps(schema) == json.dumps(json_schema())  # the same key order too


def test_every_registered_type_is_in_the_schema() -> None:
    schema = json_schema()
    kinds = schema["$defs"]["leaf"]["properties"]["type"]["enum"]
    assert kinds == referee.registry.registered_types()
    for kind in kinds:
        assert f"type-{kind}" in schema["$defs"], kind
    assert schema["$defs"]["component"]["anyOf"][0]["enum"] == kinds


def test_built_in_types_need_no_validator_loosened_to_any_value() -> None:
    # Every before-validator of a built-in type is written out (model.py's _UNDERSTOOD); a new
    # one shows here, to be described there rather than accepting any value.
    assert _options_schemas(builtin_types())[2] == []


@dataclasses.dataclass(kw_only=True)
class _Loose(CheckReward):
    """A plugin type whose options pass a validator of its own first."""

    level: int = 1
    name: str = "loose"

    def check(self, rollout: Rollout) -> RewardResult:
        return 1.0

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[Any], handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_before_validator_function(_shorthand, handler(source))


def _shorthand(data: Any) -> Any:
    return {"level": data.pop("loud")} if isinstance(data, dict) and "loud" in data else data


def test_a_plugin_type_is_in_the_schema_and_its_own_validator_loosens_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(registry._types, "test_loose", _Loose)
    spec = {"type": "test_loose", "loud": 3}
    assert loads(spec)
    schema = json_schema()
    assert "type-test_loose" in schema["$defs"]
    assert not errors(jsonschema.Draft202012Validator(schema), spec)
    assert "test_loose" not in json.dumps(json_schema(builtin_types()))


def test_the_published_schema_is_current() -> None:
    current = schema_text() + "\n"
    published = PUBLISHED.read_text(encoding="utf-8") if PUBLISHED.exists() else ""
    assert published == current, f"docs/spec.schema.json is stale: run `{REGENERATE}`"
