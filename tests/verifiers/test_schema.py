"""The fast validator (jsonschema-rs) never changes a verdict of the Python `jsonschema`."""

from __future__ import annotations

from typing import Any

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
