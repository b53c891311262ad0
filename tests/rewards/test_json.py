from __future__ import annotations

import pytest

import referee
from referee.rewards import JsonSchema, JsonValid
from referee.rewards._extract import parse_json
from tests.conftest import make


@pytest.mark.parametrize(
    ("text", "extract", "valid", "why"),
    [
        ('{"a": 1}', "strict", True, None),
        ("  [1, 2]\n", "strict", True, None),  # surrounding whitespace is fine
        ('{"a": 1} trailing', "strict", False, "extra text after the JSON value"),
        ('{"a": NaN}', "strict", False, "NaN is not valid JSON"),  # not portable JSON
        ('{"a": Infinity}', "strict", False, "Infinity is not valid JSON"),
        ('{"a": 1, "a": 2}', "strict", False, "duplicate key 'a'"),  # says two things at once
        ("", "strict", False, "empty completion"),
        ('{"a": }', "strict", False, "line 1 column 7"),  # says where parsing failed
        ('Here:\n```json\n{"a": 1}\n```\nDone', "fenced", True, None),
        ("```\n[1]\n```", "fenced", True, None),  # a fence without a language
        ('{"a": 1}', "fenced", False, "no fenced code block"),
        ('The result is {"a": 1} as asked', "first", True, None),
        ('set {x} then {"a": [1]} ok', "first", True, None),  # skips a brace that is not JSON
        ("no json here", "first", False, "no JSON object or array"),
        ("[" * 100_000 + "]" * 100_000, "strict", False, "nested too deeply"),  # hostile depth
    ],
)
def test_json_valid(text: str, extract: str, valid: bool, why: str | None) -> None:
    s = referee.score(JsonValid(extract=extract), [make(text)])[0]  # type: ignore[arg-type]
    assert s.value == (1.0 if valid else 0.0)
    if why:
        assert s.reason is not None and why in s.reason


@pytest.mark.parametrize(
    ("require", "text", "value"),
    [("object", "{}", 1.0), ("object", "[]", 0.0), ("array", "[]", 1.0), (None, "3", 1.0)],
)
def test_json_valid_require(require: str | None, text: str, value: float) -> None:
    assert referee.score(JsonValid(require=require), [make(text)])[0].value == value  # type: ignore[arg-type]


SCHEMA = {
    "type": "object",
    "required": ["name", "n"],
    "properties": {"name": {"type": "string"}, "n": {"type": "integer", "minimum": 0}},
}


@pytest.mark.parametrize(
    ("text", "value", "why"),
    [
        ('{"name": "x", "n": 1}', 1.0, "matches schema"),
        ('{"name": "x", "n": -1}', 0.0, "at n: -1 is less than the minimum of 0"),
        ('{"name": "x"}', 0.0, "'n' is a required property"),
        ('{"name": 1, "n": 1}', 0.0, "at name:"),
        ("not json", 0.0, "invalid JSON"),
    ],
)
def test_json_schema(text: str, value: float, why: str) -> None:
    s = referee.score(JsonSchema(schema=SCHEMA), [make(text)])[0]
    assert s.value == value
    assert s.reason is not None and why in s.reason


def test_draft_comes_from_dollar_schema() -> None:
    # "const" arrived in Draft 6: a Draft 4 validator ignores it as an unknown keyword.
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "const": 1}
    draft2020 = {"const": 1}
    assert referee.score(JsonSchema(schema=draft4), [make("2")])[0].value == 1.0
    assert referee.score(JsonSchema(schema=draft2020), [make("2")])[0].value == 0.0


def test_validator_is_compiled_once_per_schema() -> None:
    a, b = JsonSchema(schema=dict(SCHEMA)), JsonSchema(schema=dict(SCHEMA))
    assert a._validator is b._validator


def test_parse_cache_returns_same_result() -> None:
    assert parse_json('{"x": 1}') is parse_json('{"x": 1}')
