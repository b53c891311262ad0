from __future__ import annotations

import pickle
from decimal import Decimal
from pathlib import Path

import pytest

import referee
from referee.rewards import JsonSchema, JsonValid
from referee.rewards._extract import parse_json
from referee.rollout import Rollout
from tests.support.rollouts import make


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


# -- numbers of any size ----------------------------------------------------------------------

BIG = "9" * 5_000  # past Python's 4300-digit limit on int("...")
HUGE = "9" * 100_000
LONG_DECIMAL = "0." + "3" * 5_000


@pytest.mark.parametrize(
    "number",
    [BIG, HUGE, "-" + BIG, "1e400", "-1e400", "1e-400", LONG_DECIMAL, BIG + ".5"],
    ids=["5k digits", "100k digits", "negative", "1e400", "-1e400", "1e-400", "long", "big.5"],
)
def test_json_valid_whatever_its_numbers(number: str) -> None:
    for text in (f'{{"n": {number}}}', f"[1, {number}, 2]"):
        s = referee.score(JsonValid(), [make(text)])[0]
        assert s.failure is None and s.value == 1.0, s


@pytest.mark.parametrize(
    ("schema", "number", "value", "why"),
    [
        ({"type": "integer"}, BIG, 1.0, "matches"),
        ({"type": "integer"}, HUGE, 1.0, "matches"),
        ({"type": "integer"}, "1e400", 1.0, "matches"),  # integral, as 1.0 is
        ({"type": "integer"}, LONG_DECIMAL, 0.0, "is not of type 'integer'"),
        ({"type": "integer", "maximum": 10}, BIG, 0.0, "is greater than the maximum of 10"),
        ({"type": "integer", "maximum": 10}, HUGE, 0.0, "is greater than the maximum of 10"),
        ({"type": "number", "minimum": 0}, "-1e400", 0.0, "is less than the minimum of 0"),
        ({"type": "number", "maximum": 1e308}, "1e400", 0.0, "is greater than the maximum"),
        ({"type": "number", "maximum": 1}, LONG_DECIMAL, 1.0, "matches"),
        ({"multipleOf": 3}, BIG, 1.0, "matches"),  # 10**5000 - 1, exactly
        ({"multipleOf": 7}, BIG, 0.0, "is not a multiple of 7"),
        ({"multipleOf": 0.5}, "1e400", 1.0, "matches"),
        ({"multipleOf": 0.3}, "1e999999999", 0.0, "is not a multiple of 0.3"),  # no 10**1e9
        ({"type": "string"}, BIG, 0.0, "is not of type 'string'"),
        ({"enum": [1, 2]}, "1e400", 0.0, "is not one of [1, 2]"),
    ],
)
def test_json_schema_whatever_its_numbers(
    schema: dict[str, object], number: str, value: float, why: str
) -> None:
    full = {"type": "object", "properties": {"n": schema}}
    s = referee.score(JsonSchema(schema=full), [make(f'{{"n": {number}}}')])[0]
    assert s.failure is None and s.value == value and s.reason is not None and why in s.reason


def test_parse_keeps_exact_numbers_and_says_so() -> None:
    parsed = parse_json(f'{{"big": {BIG}, "far": 1e400, "small": 2, "x": 1.5}}')
    assert parsed.ok and parsed.exact_numbers
    assert parsed.value == {"big": Decimal(BIG), "far": Decimal("1e400"), "small": 2, "x": 1.5}
    assert type(parsed.value["small"]) is int
    plain = parse_json('{"small": 2, "x": 1.5, "long": ' + LONG_DECIMAL + "}")
    assert plain.ok and not plain.exact_numbers  # a long decimal is a float, as before


def test_a_hostile_schema_pattern_times_out_as_the_policys_zero() -> None:
    schema = {"type": "string", "pattern": r"^(a|a)+\1b"}  # needs backtracking
    s = referee.score(JsonSchema(schema=schema), [make('"' + "a" * 40 + '!"')])[0]
    # Its text made the check spin: the policy's verdict, never a masked Failure (issue 44).
    assert s.value == 0.0 and s.failure is None and s.fault == "timeout"


def test_a_schema_read_from_a_file_pickles_as_read(tmp_path: Path) -> None:
    """A worker or a Ray actor gets the schema that was read when the spec loaded (it was an
    error to unpickle: both schema and schema_file were set)."""
    path = tmp_path / "release.schema.json"
    path.write_text('{"type": "object", "required": ["company"]}')
    reward = JsonSchema(schema_file=str(path))
    path.write_text('{"type": "array"}')  # changed after loading: the copy keeps what was read
    copy = pickle.loads(pickle.dumps(reward))
    rollout = Rollout(completion='{"company": "Acme"}')
    assert copy.check(rollout).value == 1.0
    assert copy.check(Rollout(completion="{}")).value == 0.0
    demo = referee.load(Path(referee.__file__).parent / "data" / "demo" / "extraction.yaml")
    pickle.loads(pickle.dumps(demo))
