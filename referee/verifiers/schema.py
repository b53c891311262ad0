"""JSON Schema validation with validators compiled once per schema."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

import jsonschema
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator

__all__ = ["compile_schema", "first_error"]

_lock = threading.Lock()
_compiled: dict[str, Validator] = {}


def compile_schema(schema: Mapping[str, Any] | bool) -> Validator:
    """A validator for `schema`, built once per distinct schema and shared.

    The draft comes from ``$schema``; Draft 2020-12 when the schema does not say.

    Raises:
        jsonschema.exceptions.SchemaError: The schema itself is invalid for its draft.
    """
    key = json.dumps(schema, sort_keys=True, default=str)
    validator = _compiled.get(key)
    if validator is not None:
        return validator
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)  # type: ignore[arg-type]  # booleans are valid schemas too
    validator = cls(schema)
    with _lock:
        _compiled.setdefault(key, validator)
    return validator


def first_error(validator: Validator, instance: Any) -> str | None:
    """None when `instance` is valid, else the most relevant error with its path."""
    # The first error only: a valid instance costs exactly what is_valid costs, and an invalid
    # one stops there too (ranking every error costs more than validating). best_match still
    # descends into the first error's anyOf/oneOf context for the most specific message.
    first = next(validator.iter_errors(instance), None)
    if first is None:
        return None
    error = best_match((first,))
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    message = error.message
    if len(message) > 300:
        message = message[:300] + "..."
    return f"at {where}: {message}"
