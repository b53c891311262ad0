"""JSON Schema validation with validators compiled once per schema.

Validity is decided by jsonschema-rs (compiled Rust, about 100 times faster) where it is
installed and accepts the schema; an instance it rejects goes to the Python `jsonschema`
validator, which gives the error message and has the last word (so a dialect difference, for
example in `pattern` regexes, can only ever make referee agree with `jsonschema`). Formats are
not asserted, as in `jsonschema` by default.

Two things differ from a plain `jsonschema` validator, both for hostile instances:

- Numbers that `referee.verifiers.jsontext` keeps as `decimal.Decimal` (integers of more than
  4300 digits, numbers beyond float range) are numbers, integers when integral, and compared
  exactly, including by ``multipleOf``; jsonschema-rs is not asked about them (it misreads
  integers it cannot convert).
- ``pattern`` and ``patternProperties`` run through `referee.verifiers.patterns` (RE2, or a
  time limit), so a schema's regex cannot hang on what the model wrote.
"""

from __future__ import annotations

import decimal
import functools
import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, cast

import jsonschema
from jsonschema.exceptions import ValidationError, best_match
from jsonschema.protocols import Validator

from referee.verifiers.patterns import compile_pattern

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
    compiled = CompiledSchema(_hardened(cls)(schema), _fast_validator(schema))
    with _lock:
        _compiled.setdefault(key, compiled)
    return compiled


def first_error(
    schema: CompiledSchema, instance: Any, *, exact_numbers: bool | None = None
) -> str | None:
    """None when `instance` is valid, else the most relevant error with its path.

    Args:
        schema: From `compile_schema`.
        instance: The JSON value.
        exact_numbers: Whether `instance` holds a `decimal.Decimal`, as
            `ParsedJson.exact_numbers` says. None looks through it, and also reads integers
            too long for jsonschema-rs (or for printing in a message) as Decimals.

    Raises:
        VerifierTimeout: A ``pattern`` that needs the backtracking engine ran out of time.
    """
    fast = schema.fast
    if exact_numbers is None:
        exact_numbers = _holds_exact_numbers(instance)
        if exact_numbers:
            instance = _long_ints_as_decimals(instance)
    if fast is not None and not exact_numbers:
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
    message = _shorten_instance(error.message, error.instance)
    if len(message) > 300:
        message = message[:300] + "..."
    return f"at {where}: {message}"


def _shorten_instance(message: str, instance: Any) -> str:
    """`message` with the long value it starts with (jsonschema's habit) cut short."""
    if isinstance(instance, Decimal):
        written = repr(instance)
        short = f"{instance:.12g}" if instance.adjusted() > 24 else str(instance)
    elif isinstance(instance, (int, float, str)) and not isinstance(instance, bool):
        try:
            written = repr(instance)
        except ValueError:  # an int Python refuses to print
            return message
        short = written if len(written) <= 80 else written[:60] + "..."
    else:
        return message
    return short + message.removeprefix(written) if message.startswith(written) else message


# Decimal arithmetic that neither rounds nor overflows (the default context does both).
_WIDE = decimal.Context(
    prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[]
)
_RS_MAX_INT_BITS = 14_000  # about 4200 digits: past 4300, jsonschema-rs cannot read an int


def _holds_exact_numbers(instance: Any) -> bool:
    stack = [instance]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, Decimal) or (
            isinstance(item, int) and item.bit_length() > _RS_MAX_INT_BITS
        ):
            return True
    return False


def _long_ints_as_decimals(instance: Any) -> Any:
    if isinstance(instance, dict):
        return {key: _long_ints_as_decimals(value) for key, value in instance.items()}
    if isinstance(instance, list):
        return [_long_ints_as_decimals(value) for value in instance]
    if isinstance(instance, int) and instance.bit_length() > _RS_MAX_INT_BITS:
        return Decimal(instance)
    return instance


# -- the Python validator, hardened ---------------------------------------------------------


@functools.cache
def _hardened(cls: Any) -> Any:
    """`cls` (a jsonschema validator class) taking Decimals and running patterns safely."""
    plain = cls.TYPE_CHECKER

    def is_integer(checker: Any, instance: Any) -> bool:
        if isinstance(instance, Decimal):
            return instance == instance.to_integral_value(decimal.ROUND_DOWN, _WIDE)
        return bool(plain.is_type(instance, "integer"))

    # A float step is read as written (0.01, not its binary neighbour), as a person means it.
    def multiple_of(validator: Any, step: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not isinstance(instance, Decimal):
            yield from plain_multiple_of(validator, step, instance, schema)
        elif not _is_multiple(instance, Decimal(str(step))):
            yield ValidationError(f"{instance!r} is not a multiple of {step}")

    name = "divisibleBy" if "divisibleBy" in cls.VALIDATORS else "multipleOf"  # draft 3's name
    plain_multiple_of = cls.VALIDATORS.get(name)
    overrides = {"pattern": _pattern, "patternProperties": _pattern_properties, name: multiple_of}
    return jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        cls,
        validators={k: v for k, v in overrides.items() if k in cls.VALIDATORS},
        type_checker=plain.redefine("integer", is_integer),
    )


def _is_multiple(value: Decimal, step: Decimal) -> bool:
    """Whether `value` / `step` is an integer, exactly, in time linear in their digits."""
    value, step = value.copy_abs(), step.copy_abs()  # exact, where abs() would round
    if value.is_zero():
        return True
    if value < step:
        return False
    v, s = value.as_tuple(), step.as_tuple()
    v_exp, s_exp = cast(int, v.exponent), cast(int, s.exponent)  # both are finite
    context = decimal.Context(
        prec=len(v.digits) + 1, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[]
    )
    # step = 2**a * 5**b * r * 10**e with a, b < 4 * its digits and r prime to ten: once value
    # carries that many more factors of ten, more of them cannot change the answer, so a huge
    # exponent (1e999999999) comes down to there before dividing.
    shift = (v_exp - s_exp) - 4 * len(s.digits)
    if shift > 0:
        value = context.scaleb(value, Decimal(-shift))
    lowest = min(v_exp - max(shift, 0), s_exp)
    context.prec = max(value.adjusted(), step.adjusted()) - lowest + 2
    return context.remainder(value, step).is_zero()


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not compile_pattern(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        compiled = compile_pattern(pattern)
        for key, value in instance.items():
            if compiled.search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)
