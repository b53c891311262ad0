"""JSON Schema validation with validators compiled once per schema.

Validity is decided by jsonschema-rs (compiled Rust, about 100 times faster) where it is
installed and accepts the schema; an instance it rejects goes to the Python `jsonschema`
validator, which gives the error message and has the last word (so a dialect difference, for
example in `pattern` regexes, can only ever make referee agree with `jsonschema`). Formats are
not asserted, as in `jsonschema` by default.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator

__all__ = ["CompiledSchema", "compile_schema", "first_error"]

try:
    import jsonschema_rs
except ImportError:  # pragma: no cover - the Python validator does everything then
    jsonschema_rs = None  # type: ignore[assignment]

_lock = threading.Lock()
_compiled: dict[str, CompiledSchema] = {}


@dataclass(frozen=True, slots=True)
class CompiledSchema:
    """A schema's Python validator and, where available, its jsonschema-rs twin."""

    python: Validator
    fast: Any | None


def _fast_validator(schema: Mapping[str, Any] | bool) -> Any | None:
    if jsonschema_rs is None:
        return None
    try:
        plain = dict(schema) if isinstance(schema, Mapping) else schema
        return jsonschema_rs.validator_for(plain, validate_formats=False)
    except Exception:  # a schema it cannot take (a remote $ref, ...): Python alone, then
        return None


def compile_schema(schema: Mapping[str, Any] | bool) -> CompiledSchema:
    """Validators for `schema`, built once per distinct schema and shared.

    The draft comes from ``$schema``; Draft 2020-12 when the schema does not say.

    Raises:
        jsonschema.exceptions.SchemaError: The schema itself is invalid for its draft.
    """
    key = json.dumps(schema, sort_keys=True, default=str)
    compiled = _compiled.get(key)
    if compiled is not None:
        return compiled
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)  # type: ignore[arg-type]  # booleans are valid schemas too
    compiled = CompiledSchema(cls(schema), _fast_validator(schema))
    with _lock:
        _compiled.setdefault(key, compiled)
    return compiled


def first_error(schema: CompiledSchema, instance: Any) -> str | None:
    """None when `instance` is valid, else the most relevant error with its path."""
    fast = schema.fast
    if fast is not None:
        try:
            if fast.is_valid(instance):
                return None
        except Exception:  # a value it cannot convert (a huge integer, ...): Python decides
            pass
    # The first error only: a valid instance costs exactly what is_valid costs, and an invalid
    # one stops there too (ranking every error costs more than validating). best_match still
    # descends into the first error's anyOf/oneOf context for the most specific message.
    first = next(schema.python.iter_errors(instance), None)
    if first is None:
        return None
    error = best_match((first,))
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    message = error.message
    if len(message) > 300:
        message = message[:300] + "..."
    return f"at {where}: {message}"
