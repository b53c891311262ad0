"""The canonical rollout file: JSON Lines, one ``{"id", "prompt", "completion", "reference",
"group", "metadata"}`` object per line.

Reading streams the file; a line that cannot be read (bad UTF-8, bad JSON, wrong shape) becomes
a `RowError` carrying its line number, so the run goes on and the row is not lost.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import ValidationError

from referee.rollout import Rollout

__all__ = [
    "RowError",
    "RowOk",
    "decode_lines",
    "read_jsonl",
    "rollout_from_row",
    "validation_message",
]


@dataclass(frozen=True, slots=True)
class RowOk:
    """A row that became a rollout. `line` is 1-based; `size` its length in bytes."""

    line: int
    rollout: Rollout
    size: int


@dataclass(frozen=True, slots=True)
class RowError:
    """A row that could not be read, with why and, where it was found, its id."""

    line: int
    message: str
    size: int
    id: str | None = None


def rollout_from_row(row: Any, line: int) -> Rollout:
    """Validate one decoded row as a `Rollout`; the id defaults to the line number.

    Raises:
        ValueError: The row is not an object or does not have the canonical shape; the message
            names the offending field.
    """
    if not isinstance(row, Mapping):
        raise ValueError(f"a row must be a JSON object, got {type(row).__name__}")
    if "completion" not in row:
        raise ValueError(f"row has no 'completion' (keys: {sorted(row)[:10]})")
    data = dict(row)
    if data.get("id") is None:
        data["id"] = str(line)
    try:
        return Rollout.model_validate(data)
    except ValidationError as exc:
        raise ValueError(validation_message(exc)) from None


def validation_message(exc: ValidationError) -> str:
    """A row's validation error in one line: the first offending field and what is wrong."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(row)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"field {where}: {first['msg']}{more}"


def _row_id(row: Any) -> str | None:
    if isinstance(row, Mapping):
        value = row.get("id")
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            return str(value)
    return None


def decode_lines(stream: BinaryIO) -> Iterator[tuple[int, int, Any, str | None]]:
    """The JSON value of each non-blank line: (line number, size in bytes, value, None), or
    (line number, size, None, why) where the line is not UTF-8 or not JSON."""
    for number, raw in enumerate(stream, start=1):
        size = len(raw)
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield number, size, None, f"not valid UTF-8 at byte {exc.start}"
            continue
        try:
            yield number, size, json.loads(text), None
        except json.JSONDecodeError as exc:
            yield number, size, None, f"not valid JSON: {exc.msg} at column {exc.colno}"
        except RecursionError:
            yield number, size, None, "not valid JSON: nested too deeply"


def _read_lines(stream: BinaryIO) -> Iterator[RowOk | RowError]:
    for number, size, row, error in decode_lines(stream):
        if error is not None:
            yield RowError(number, error, size)
            continue
        try:
            yield RowOk(number, rollout_from_row(row, number), size)
        except ValueError as exc:
            yield RowError(number, str(exc), size, _row_id(row))


def read_jsonl(path: str | Path) -> Iterator[RowOk | RowError]:
    """Stream the rows of a canonical JSONL rollout file, blank lines skipped.

    Raises:
        OSError: The file cannot be opened.
    """
    with open(path, "rb") as stream:
        yield from _read_lines(stream)
