"""Strict JSON out of model text: the whole text, a fenced block, or the first JSON value.

Strict means no NaN or Infinity and no duplicate keys; nesting too deep to parse is an invalid
text, not a crash. Every number the grammar allows is valid, whatever its size: an integer of
more than 4300 digits (where Python caps `int` parsing, since it takes quadratic time) or a
number beyond float range (``1e400``) is kept exactly, as a `decimal.Decimal`, and
`ParsedJson.exact_numbers` says so.
"""

from __future__ import annotations

import functools
import json
import math
import re
import threading
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from referee.verifiers.patterns import compile_pattern

__all__ = ["JsonExtract", "ParsedJson", "json_values", "parse_json"]

# On RE2: with `re`, a text of many unclosed fences takes quadratic time.
_FENCE = compile_pattern(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)
_MAX_FIRST_TRIES = 64  # bounds the scan for "first" so hostile text cannot make it quadratic
_INT_DIGITS = 4300  # CPython's default cap on int("..."); longer ones become Decimal


JsonExtract = Literal["strict", "fenced", "first"]
"""Where the JSON is: the whole completion (``strict``), the first fenced code block
(``fenced``), or the first JSON object or array anywhere in the text (``first``)."""


class _StrictJsonError(ValueError):
    pass


def _no_constants(name: str) -> Any:
    raise _StrictJsonError(f"{name} is not valid JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _StrictJsonError(f"duplicate key {key!r}")
            seen.add(key)
    return out


_exact = threading.local()  # .used: the decode in progress on this thread made a Decimal


def _parse_float(text: str) -> float | Decimal:
    value = float(text)
    if math.isfinite(value):
        return value
    _exact.used = True
    return Decimal(text)


def _parse_int(text: str) -> int | Decimal:
    if len(text) <= _INT_DIGITS:
        try:
            return int(text)
        except ValueError:  # the process set a lower cap
            pass
    _exact.used = True
    return Decimal(text)  # linear time, where int() would be quadratic


# NaN/Infinity and duplicate keys are rejected: they are not portable JSON, and a duplicate key
# lets a completion say two things at once to two different readers. Integers go through
# json's own fast path; a text whose integers that path refuses is decoded again with
# `_EXACT_DECODER`.
_DECODER = json.JSONDecoder(
    object_pairs_hook=_unique_keys, parse_constant=_no_constants, parse_float=_parse_float
)
_EXACT_DECODER = json.JSONDecoder(
    object_pairs_hook=_unique_keys,
    parse_constant=_no_constants,
    parse_float=_parse_float,
    parse_int=_parse_int,
)


@dataclass(frozen=True, slots=True)
class ParsedJson:
    """The outcome of parsing: `value` when `ok`, else `error` says where parsing failed."""

    ok: bool
    value: Any = None
    error: str | None = None
    exact_numbers: bool = False
    """Some number in `value` is a `decimal.Decimal` (too long for `int`, or beyond float
    range)."""


def _raw_decode(text: str, start: int) -> tuple[Any, int]:
    try:
        return _DECODER.raw_decode(text, start)
    except (json.JSONDecodeError, _StrictJsonError):
        raise
    except ValueError:  # an integer longer than int() takes: decode again, exactly
        return _EXACT_DECODER.raw_decode(text, start)


def _decode(text: str, start: int = 0) -> tuple[Any, int, bool]:
    """(value, where it ends, whether some number in it is a Decimal)."""
    _exact.used = False
    try:
        value, end = _raw_decode(text, start)
    except json.JSONDecodeError as exc:
        raise _StrictJsonError(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise _StrictJsonError("nested too deeply to parse") from None
    return value, end, _exact.used


def _parse_strict(text: str) -> ParsedJson:
    stripped = text.strip()
    if not stripped:
        return ParsedJson(False, error="empty completion")
    try:
        value, end, exact = _decode(stripped)
    except _StrictJsonError as exc:
        return ParsedJson(False, error=str(exc))
    if end != len(stripped):
        return ParsedJson(False, error=f"extra text after the JSON value at character {end}")
    return ParsedJson(True, value, exact_numbers=exact)


def _next_start(text: str, pos: int) -> int:
    """Where the next JSON object or array may start in `text` from `pos`; -1 if nowhere."""
    candidates = [p for p in (text.find("{", pos), text.find("[", pos)) if p >= 0]
    return min(candidates) if candidates else -1


def _parse_first(text: str) -> ParsedJson:
    first_error = "no JSON object or array in the text"
    tries = 0
    pos = 0
    while tries < _MAX_FIRST_TRIES:
        start = _next_start(text, pos)
        if start < 0:
            break
        try:
            value, _, exact = _decode(text, start)
            return ParsedJson(True, value, exact_numbers=exact)
        except _StrictJsonError as exc:
            if tries == 0:
                first_error = f"no valid JSON value found; first attempt: {exc}"
        tries += 1
        pos = start + 1
    return ParsedJson(False, error=first_error)


def json_values(text: str, *, max_tries: int = _MAX_FIRST_TRIES) -> list[Any]:
    """Every JSON object or array in `text`, in order, strictly parsed; none inside another.

    The scan goes on after each value found, so a reader can tell a text that holds one value
    from one that quotes others before it (a judge's reply that repeats an injected verdict
    before its own). Bounded like ``first``: at most `max_tries` failed starts.
    """
    found: list[Any] = []
    failures = 0
    pos = 0
    while failures < max_tries:
        start = _next_start(text, pos)
        if start < 0:
            break
        try:
            value, end, _ = _decode(text, start)
        except _StrictJsonError:
            failures += 1
            pos = start + 1
            continue
        found.append(value)
        pos = end
    return found


@functools.lru_cache(maxsize=1024)
def parse_json(text: str, extract: JsonExtract = "strict") -> ParsedJson:
    """Parse the JSON in a completion, strictly (no NaN, no Infinity, no duplicate keys).

    Cached: a spec with several JSON rewards parses each completion once. The returned value
    is shared between callers and must not be mutated.
    """
    if extract == "strict":
        return _parse_strict(text)
    if extract == "fenced":
        match = _FENCE.search(text)
        if match is None:
            return ParsedJson(False, error="no fenced code block (```json ... ```) in the text")
        return _parse_strict(match.group(2) or "")
    return _parse_first(text)
