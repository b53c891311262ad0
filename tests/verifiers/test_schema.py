"""The fast validator (jsonschema-rs) never changes a verdict of the Python `jsonschema`."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from referee.verifiers.schema import compile_schema, first_error

SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer", "minimum": 0}},
     "additionalProperties": False},
    {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 3},
     "minItems": 1, "uniqueItems": True},
    {"anyOf": [{"type": "string", "pattern": "^[a-c]+$"},
               {"type": "number", "exclusiveMaximum": 5}]},
    {"oneOf": [{"type": "integer"}, {"type": "number", "multipleOf": 0.5}]},
    {"not": {"enum": [1, "1", None, True]}},
    {"$defs": {"pos": {"type": "number", "minimum": 0}},
     "type": "object", "properties": {"x": {"$ref": "#/$defs/pos"}}, "required": ["x"]},
    {"type": "object", "patternProperties": {"^n_": {"type": "number"}},
     "propertyNames": {"maxLength": 4}},
    {"const": {"k": [1, 2]}},
    {"type": "string", "pattern": "\\d"},
    {"type": "string", "format": "email"},  # formats are not asserted, by either
    {"$schema": "http://json-schema.org/draft-04/schema#", "type": "number",
     "maximum": 3, "exclusiveMaximum": True},
]  # fmt: skip

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-10, 10)
    | st.floats(-10, 10, allow_nan=False)
    | st.text(alphabet="abcdn_1٣@.", max_size=5),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "x", "n_1", "k", "long_key"]), children, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(range(len(SCHEMAS))), json_values)
def test_the_fast_path_agrees_with_jsonschema(index: int, instance: Any) -> None:
    compiled = compile_schema(SCHEMAS[index])
    assert compiled.fast is not None  # the fast path is really exercised
    assert (first_error(compiled, instance) is None) == compiled.python.is_valid(instance)


@pytest.mark.parametrize(
    ("instance", "valid"),
    [("٣", True), ("x", False), ("7", True)],  # Python's \\d takes any Unicode digit
)
def test_regex_dialects_end_as_jsonschema_says(instance: str, valid: bool) -> None:
    compiled = compile_schema({"type": "string", "pattern": "\\d"})
    assert (first_error(compiled, instance) is None) == valid


def test_errors_still_come_from_jsonschema() -> None:
    compiled = compile_schema(SCHEMAS[0])
    assert first_error(compiled, {"a": -1}) == "at a: -1 is less than the minimum of 0"


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(range(len(SCHEMAS))), json_values)
def test_the_hardened_validator_agrees_with_plain_jsonschema(index: int, instance: Any) -> None:
    schema = SCHEMAS[index]
    plain = jsonschema.validators.validator_for(schema)(schema)
    assert compile_schema(schema).python.is_valid(instance) == plain.is_valid(instance)


def test_numbers_jsonschema_rs_misreads_go_to_python() -> None:
    # jsonschema-rs calls an int past 4300 digits valid against any maximum.
    compiled = compile_schema({"type": "integer", "maximum": 10})
    huge = 10**5000
    assert first_error(compiled, huge) is not None  # found by looking through the instance
    assert first_error(compiled, Decimal(huge), exact_numbers=True) is not None
    assert first_error(compiled, Decimal("1e400")) is not None
    assert first_error(compiled, Decimal("7")) is None  # an integral Decimal is an integer


@pytest.mark.parametrize(
    ("value", "step", "multiple"),
    [
        ("1e400", "0.5", True),
        ("3e999999999", "3", True),  # decided without writing out 10**999999999
        ("1e999999999", "3", False),
        ("1e999999999", "0.3", False),
        ("1e-999999999", "0.5", False),
        ("12.5", "0.25", True),
        ("1.0000000001", "0.5", False),
        ("0", "7", True),
    ],
)
def test_multiple_of_is_exact_for_decimals(value: str, step: str, multiple: bool) -> None:
    compiled = compile_schema({"multipleOf": float(step)})
    assert (first_error(compiled, Decimal(value)) is None) == multiple


@settings(max_examples=300, deadline=None)
@given(st.integers(-(10**8), 10**8), st.integers(-8, 30), st.integers(1, 999), st.integers(-5, 5))
def test_multiple_of_agrees_with_fractions(digits: int, exp: int, step: int, step_exp: int) -> None:
    value, divisor = Decimal(digits).scaleb(exp), Decimal(step).scaleb(step_exp)
    compiled = compile_schema({"multipleOf": float(divisor)})
    expected = (Fraction(value) / Fraction(str(float(divisor)))).denominator == 1
    assert (first_error(compiled, value) is None) == expected


def test_schema_patterns_run_on_re2() -> None:
    compiled = compile_schema({"type": "string", "pattern": "^(a+)+$"})
    assert first_error(compiled, "a" * 34 + "!") is not None  # at once, not in minutes
    keys = compile_schema({"patternProperties": {"^(a+)+$": {"type": "integer"}}})
    assert first_error(keys, {"a" * 34 + "!": "x", "aa": 1}) is None
    assert first_error(keys, {"aa": "x"}) is not None
