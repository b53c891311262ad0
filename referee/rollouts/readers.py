"""Reading the rollout files trainers and APIs write, streamed, into `Rollout`s.

Containers: JSON Lines (``.jsonl``, ``.json`` with one object per line, ``.gz`` of either) and
Parquet (``.parquet``, read in record batches: memory stays flat however long the file).
Parquet decodes a row group's columns at once, so a row group is checked against
`MAX_ROW_GROUP_BYTES` from the file's footer before any of it is read (and each batch again as
it is decoded, in case the footer understates it): one over it is a `RolloutError` naming the
row group and the fix, not the process's memory.

Shapes (``--format``; detected from the first row when not given):

- ``canonical``: ``{"id", "prompt", "completion", "reference", "group", "metadata"}``; other
  columns are kept in ``metadata``.
- ``verl``: verl's dataset rows, ``data_source``, ``prompt`` (chat messages),
  ``reward_model.ground_truth``, ``extra_info``, with the policy's output in ``responses`` (a
  list, as verl's ``main_generation`` writes it: one rollout per response, the row's responses
  one group), ``response`` or ``completion``.
- ``verl-dump``: what ``trainer.rollout_data_dir`` holds, ``{"input", "output", "gts",
  "score", "step", ...}``; the attempts at one prompt in one step form a group.
- ``trl``: TRL's logged completions (``output_dir/completions/completions_*.parquet``),
  ``step``, ``prompt``, ``completion``, one column per reward function, ``advantage``. TRL
  logs no ground truth: map one with ``--map reference=<column>`` if you logged it.
- ``openai``: chat-messages rows, ``{"messages": [...]}``: the messages up to the last
  assistant turn's run are the prompt, the assistant's turns (with tool calls and results) the
  completion; ``reference`` from the row's ``reference`` key where present.
- ``preference``: pairwise preference rows as TRL's preference datasets hold them,
  ``{"prompt", "chosen", "rejected"}`` (text or chat messages; without ``prompt``, the
  messages ``chosen`` and ``rejected`` share are the prompt). Each row is a group of two
  rollouts, ``metadata.preferred`` true for the chosen one, so ``referee report`` gives the
  reward's pairwise accuracy against the people who chose.

Rows that name no group (``canonical`` and ``openai``) are grouped by their prompt: the
attempts at one prompt form a group, as TRL's reward functions group them, under a key that
says so (``prompt:`` and a hash of the prompt); ``--map group=<column>`` sets another.

A mapping (``--map field=path``) sets any rollout field from a dotted path into the source row,
on top of the shape; a path indexes lists too (``-1`` the last item): ``--map
reference=reward_model.ground_truth``, ``--map metadata.label=human_score``, ``--map
completion=messages.-1.content``. A row that cannot become a rollout is a `RowError` with its row
number; it is never dropped.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, Literal, get_args

from pydantic import ValidationError

from referee._moved import renamed
from referee.errors import MissingDependency, RolloutError
from referee.rollout import Rollout
from referee.rollouts.jsonl import RowError, RowOk, decode_lines, rollout_from_row

__all__ = [
    "FORMATS",
    "MAX_ROW_GROUP_BYTES",
    "FileFormat",
    "decode_json_text",
    "detect_format",
    "parse_mapping",
    "read_rollouts",
    "rows_of",
]

FileFormat = Literal["canonical", "verl", "verl-dump", "trl", "openai", "preference"]
FORMATS: tuple[str, ...] = get_args(FileFormat)

PARQUET_BATCH = 2048
MAX_ROW_GROUP_BYTES = 1 << 30
"""The largest Parquet row group (uncompressed, as its footer says) or footer that is read."""
_PARQUET_BUFFER = 1 << 20  # column chunks are read through a buffer this size, not whole
_MAX_FOOTER = 64 << 20
ROLLOUT_FIELDS = ("id", "prompt", "completion", "reference", "group")

Row = Mapping[str, Any]
RawRow = tuple[int, int, Row | None, str | None]  # row number, size, decoded row, error


# --- containers ---------------------------------------------------------------------------


def _is_parquet(path: Path) -> bool:
    if path.suffix == ".parquet":
        return True
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"PAR1"
    except OSError:
        return False


def _open_text(path: Path) -> BinaryIO:
    if path.suffix == ".gz":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


def _object_rows(stream: BinaryIO, first: int = 1) -> Iterator[RawRow]:
    """The decoded lines of a stream, numbered from `first`, each a JSON object or an error."""
    for number, size, row, error in decode_lines(stream):
        if error is None and not isinstance(row, dict):
            error = f"a row must be a JSON object, got {type(row).__name__}"
        yield number + first - 1, size, row if error is None else None, error


def _jsonl_rows(path: Path) -> Iterator[RawRow]:
    with _open_text(path) as stream:
        yield from _object_rows(stream)


def _too_big(path: Path, what: str, size: int, limit: int, line: int | None) -> RolloutError:
    return RolloutError(
        f"{what} is {size} bytes, over the limit of {limit} read from a Parquet file at once; "
        "rewrite the file with smaller row groups (pyarrow.parquet.write_table(..., "
        "row_group_size=10_000)), or raise the limit (max_row_group_bytes)",
        source=str(path),
        line=line,
    )


def _footer_size(path: Path) -> int:
    """The length of a Parquet file's footer, from its last 8 bytes (-1: not Parquet)."""
    with open(path, "rb") as f:
        f.seek(0, io.SEEK_END)
        if f.tell() < 12:
            return -1
        f.seek(-8, io.SEEK_END)
        tail = f.read(8)
    return int.from_bytes(tail[:4], "little") if tail[4:] == b"PAR1" else -1


def _parquet_rows(path: Path, limit: int) -> Iterator[RawRow]:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise MissingDependency("pyarrow", "parquet", "reading Parquet rollouts") from exc
    footer = _footer_size(path)
    if footer > _MAX_FOOTER:  # the footer is read whole, before any row group
        raise RolloutError(
            f"its Parquet footer is {footer} bytes, over the {_MAX_FOOTER} referee reads; "
            "a file of rollouts has a footer of kilobytes: rewrite it with pyarrow",
            source=str(path),
        )
    parquet = pq.ParquetFile(path, buffer_size=_PARQUET_BUFFER)
    meta = parquet.metadata
    number = 0
    for index in range(meta.num_row_groups):
        group = meta.row_group(index)
        declared = max(
            group.total_byte_size,
            sum(group.column(c).total_uncompressed_size for c in range(group.num_columns)),
            sum(group.column(c).total_compressed_size for c in range(group.num_columns)),
        )
        first = number + 1  # the row number the error is reported at
        if declared > limit:
            what = f"row group {index} ({group.num_rows} rows)"
            raise _too_big(path, what, declared, limit, first)
        decoded = 0
        for batch in parquet.iter_batches(batch_size=PARQUET_BATCH, row_groups=[index]):
            decoded += batch.nbytes
            if decoded > limit:  # the footer understated it
                raise _too_big(path, f"row group {index} as decoded", decoded, limit, first)
            for row in batch.to_pylist():
                number += 1
                yield number, 1, row, None


def rows_of(
    path: str | Path, *, max_row_group_bytes: int = MAX_ROW_GROUP_BYTES
) -> Iterator[RawRow]:
    """The decoded rows of a JSONL or Parquet file: (row number, size, row or None, error).

    Raises:
        RolloutError: A Parquet row group (or footer) is larger than `max_row_group_bytes`.
    """
    p = Path(path)
    return _parquet_rows(p, max_row_group_bytes) if _is_parquet(p) else _jsonl_rows(p)


# --- shapes -------------------------------------------------------------------------------


def detect_format(row: Row) -> FileFormat:
    """The shape of a row, from its keys."""
    keys = set(row)
    if "completion" in keys and keys <= {*ROLLOUT_FIELDS, "metadata"}:
        return "canonical"
    if "messages" in keys and "completion" not in keys:
        return "openai"
    if {"chosen", "rejected"} <= keys and "completion" not in keys:
        return "preference"
    if {"input", "output"} <= keys and ("gts" in keys or "score" in keys):
        return "verl-dump"
    if "reward_model" in keys or ("data_source" in keys and "prompt" in keys):
        return "verl"
    if {"prompt", "completion"} <= keys and ("advantage" in keys or "step" in keys):
        return "trl"
    if "completion" in keys:
        return "canonical"
    raise RolloutError(
        f"cannot tell the format of a row with keys {sorted(keys)[:12]}; pass --format "
        f"(one of {', '.join(FORMATS)}) and --map field=column for the rest"
    )


def _get(row: Row, path: str) -> Any:
    """The value at a dotted path into a row: keys of objects, and indexes of lists
    (``messages.1.content``; ``-1`` is the last item). A column whose own name has the dots
    wins."""
    if path in row:
        return row[path]
    value: Any = row
    for part in path.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and re.fullmatch(r"-?\d+", part):
            index = int(part)
            if not -len(value) <= index < len(value):
                raise KeyError(path)
            value = value[index]
        else:
            raise KeyError(path)
    return value


PROMPT_GROUP = "prompt:"
"""The start of a group key read from the prompt: the rows carried none (`prompt_group`)."""


def prompt_group(prompt: Any) -> str | None:
    """The group of a rollout whose row names none: its prompt's, so the attempts at one
    prompt form a group, as TRL's reward functions group them. None for no prompt."""
    if prompt in (None, "", []):
        return None
    return PROMPT_GROUP + _short_hash(prompt)


def _text_key(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _short_hash(value: Any) -> str:
    return hashlib.sha256(_text_key(value).encode()).hexdigest()[:16]


def _canonical(row: Row, number: int) -> list[dict[str, Any]]:
    data = {k: v for k, v in row.items() if k in ROLLOUT_FIELDS or k == "metadata"}
    others = {k: v for k, v in row.items() if k not in data}
    if others:  # columns beyond the canonical ones are kept, as metadata
        data["metadata"] = {**others, **dict(row.get("metadata") or {})}
    if data.get("group") is None and (group := prompt_group(data.get("prompt"))) is not None:
        data["group"] = group
    return [data]


def decode_json_text(value: Any) -> Any:
    """A reference sent as text: decoded when it is a JSON object or array, else as given.

    Trainers pass ground truth as strings (verl parquet columns, OpenRLHF labels); an object
    stored as JSON text is what a field comparison needs. Plain answers ("42", "x = 2") stay
    text: only text starting with ``{`` or ``[`` is decoded, and only when it parses.
    """
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        with contextlib.suppress(json.JSONDecodeError):
            return json.loads(value)
    return value


def _verl(row: Row, number: int) -> list[dict[str, Any]]:
    extra = row.get("extra_info") or {}
    reward_model = row.get("reward_model") or {}
    base = {
        "prompt": row.get("prompt", ""),
        # decoded as verl's compute_score decodes it (referee.backends.verl), so the score is
        # the number verl trained on
        "reference": decode_json_text(reward_model.get("ground_truth"))
        if isinstance(reward_model, Mapping)
        else None,
        "metadata": {
            "data_source": row.get("data_source"),
            **({"extra_info": extra} if extra else {}),
        },
    }
    index = extra.get("index", number) if isinstance(extra, Mapping) else number
    responses = row.get("responses")
    if isinstance(responses, list):
        return [
            {**base, "id": f"{index}-{i}", "completion": r, "group": str(index)}
            for i, r in enumerate(responses)
        ]
    completion = row.get("response", row.get("completion"))
    if completion is None:
        raise ValueError(
            "a verl row needs the policy's output in 'responses', 'response' or 'completion' "
            "(a dataset row alone has nothing to score); or --map completion=<column>"
        )
    return [{**base, "id": str(index), "completion": completion}]


def _verl_dump(row: Row, number: int) -> list[dict[str, Any]]:
    step = row.get("step")
    known = {"input", "output", "gts", "score", "step"}
    metadata = {k: v for k, v in row.items() if k not in known}
    metadata["step"] = step
    metadata["trainer_score"] = row.get("score")
    return [{
        "id": str(row.get("request_id") or f"{step}-{number}"),
        "prompt": row.get("input", ""),
        "completion": row.get("output", ""),
        "reference": decode_json_text(row.get("gts")),
        "group": f"{step}-{_short_hash(row.get('input', ''))}",
        "metadata": metadata,
    }]  # fmt: skip


def _trl(row: Row, number: int) -> list[dict[str, Any]]:
    step = row.get("step")
    known = {"prompt", "completion", "step"}
    return [{
        "id": f"{step}-{number}",
        "prompt": row.get("prompt", ""),
        "completion": row.get("completion", ""),
        "reference": row.get("reference"),
        "group": f"{step}-{_short_hash(row.get('prompt', ''))}",
        "metadata": {k: v for k, v in row.items() if k not in known and k != "reference"},
    }]  # fmt: skip


def _openai(row: Row, number: int) -> list[dict[str, Any]]:
    messages = row.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("an openai row needs a non-empty 'messages' list")
    # The completion starts after the last user (or system) message: the assistant turns and
    # the tool results between them.
    start = len(messages)
    for i in range(len(messages) - 1, -1, -1):
        role = messages[i].get("role") if isinstance(messages[i], Mapping) else None
        if role in ("user", "system", "developer"):
            break
        start = i
    if start >= len(messages):
        raise ValueError("an openai row's messages end with no assistant turn to score")
    known = {"messages", "reference", "id", "group", "metadata"}
    metadata = dict(row.get("metadata") or {})
    metadata.update({k: v for k, v in row.items() if k not in known})
    return [{
        "id": row.get("id") if row.get("id") is not None else str(number),
        "prompt": messages[:start],
        "completion": messages[start:],
        "reference": row.get("reference"),
        "group": row["group"] if row.get("group") is not None else prompt_group(messages[:start]),
        "metadata": metadata,
    }]  # fmt: skip


def _preference(row: Row, number: int) -> list[dict[str, Any]]:
    chosen, rejected = row.get("chosen"), row.get("rejected")
    for name, side in (("chosen", chosen), ("rejected", rejected)):
        if not isinstance(side, str | list):
            raise ValueError(
                f"a preference row's {name!r} must be text or chat messages, got "
                f"{type(side).__name__}"
            )
    prompt = row.get("prompt")
    if prompt is None and isinstance(chosen, list) and isinstance(rejected, list):
        # Implicit prompt (TRL's other preference shape): the messages both sides share.
        shared = 0
        while shared < min(len(chosen), len(rejected)) - 1 and chosen[shared] == rejected[shared]:
            shared += 1
        prompt, chosen, rejected = chosen[:shared], chosen[shared:], rejected[shared:]
    base = str(row["id"]) if row.get("id") is not None else str(number)
    known = {"prompt", "chosen", "rejected", "reference", "id", "metadata"}
    metadata = {
        **dict(row.get("metadata") or {}),
        **{k: v for k, v in row.items() if k not in known},
    }
    return [
        {
            "id": f"{base}-{side}",
            "prompt": prompt if prompt is not None else "",
            "completion": completion,
            "reference": row.get("reference"),
            "group": base,
            "metadata": {**metadata, "preferred": side == "chosen"},
        }
        for side, completion in (("chosen", chosen), ("rejected", rejected))
    ]


SHAPES: dict[str, Callable[[Row, int], list[dict[str, Any]]]] = {
    "canonical": _canonical,
    "verl": _verl,
    "verl-dump": _verl_dump,
    "trl": _trl,
    "openai": _openai,
    "preference": _preference,
}


def parse_mapping(items: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``["reference=gts", ...]`` as a mapping, checked: rollout field -> source path."""
    out: dict[str, str] = {}
    for item in items:
        field, sep, source = item.partition("=")
        field, source = field.strip(), source.strip()
        if not sep or not field or not source:
            raise RolloutError(f"--map {item!r}: expected field=column, e.g. reference=answer")
        if field not in ROLLOUT_FIELDS and not field.startswith("metadata."):
            raise RolloutError(
                f"--map {item!r}: {field!r} is not a rollout field; use one of "
                f"{', '.join(ROLLOUT_FIELDS)} or metadata.<name>"
            )
        out[field] = source
    return out


def _apply_mapping(data: dict[str, Any], row: Row, mapping: Mapping[str, str]) -> None:
    for field, source in mapping.items():
        try:
            value = _get(row, source)
        except KeyError:
            raise ValueError(f"--map {field}={source}: the row has no {source!r}") from None
        if field.startswith("metadata."):
            data.setdefault("metadata", {})
            data["metadata"] = {**data["metadata"], field[len("metadata.") :]: value}
        else:
            data[field] = value


def read_rollouts(
    path: str | Path,
    *,
    format: FileFormat | None = None,
    mapping: Mapping[str, str] | None = None,
    max_row_group_bytes: int = MAX_ROW_GROUP_BYTES,
) -> Iterator[RowOk | RowError]:
    """Stream the rollouts of a file, whatever trainer or API wrote it.

    Each yielded item carries the source row's number; a row that yields several rollouts
    (verl's ``responses``) yields several items with the same number.

    Args:
        path: The file (JSONL, gzipped JSONL, or Parquet).
        format: Its shape; detected from the first row when None.
        mapping: Rollout fields set from dotted paths into each row.
        max_row_group_bytes: The largest Parquet row group read (uncompressed), checked
            before it is read.

    Raises:
        OSError: The file cannot be opened.
        RolloutError: The format cannot be detected (pass `format`), a mapping is malformed,
            or a Parquet row group is larger than `max_row_group_bytes`.
    """
    mapping = dict(mapping or {})
    if not mapping and format in (None, "canonical") and not _is_parquet(Path(path)):
        first = _first_row(Path(path))
        if format == "canonical" or (first is not None and detect_format(first) == "canonical"):
            yield from _canonical_jsonl(Path(path))
            return
    shape: Callable[[Row, int], list[dict[str, Any]]] | None = (
        None if format is None else SHAPES[format]
    )
    for number, size, row, error in rows_of(path, max_row_group_bytes=max_row_group_bytes):
        if shape is None and row is not None:
            shape = SHAPES[detect_format(row)]
        yield from _items(number, size, row, error, shape or _canonical, mapping)


def _items(
    number: int,
    size: int,
    row: Row | None,
    error: str | None,
    shape: Callable[[Row, int], list[dict[str, Any]]],
    mapping: Mapping[str, str],
) -> Iterator[RowOk | RowError]:
    """The rollouts of one decoded row (or the error row that stands for it)."""
    if row is None:
        yield RowError(number, error or "unreadable row", size)
        return
    try:
        items = shape(row, number)
        for i, data in enumerate(items):
            _apply_mapping(data, row, mapping)
            yield RowOk(number, rollout_from_row(data, number), size if i == 0 else 0)
    except (ValueError, TypeError) as exc:
        rid = row.get("id")
        yield RowError(number, str(exc), size, str(rid) if rid is not None else None)


def _first_row(path: Path) -> Row | None:
    """The first decodable row of a JSONL file, for detection; None if there is none."""
    for _, _, row, _ in _jsonl_rows(path):
        if row is not None:
            return row
    return None


def _canonical_jsonl(path: Path) -> Iterator[RowOk | RowError]:
    """Canonical JSONL, validated by pydantic straight from the bytes (no intermediate dicts);
    a line that does not validate takes the general path, which says precisely why."""
    validate = Rollout.model_validate_json
    with _open_text(path) as stream:
        for number, raw in enumerate(stream, start=1):
            if not raw.strip():
                continue
            try:
                rollout = validate(raw)
            except ValidationError:
                for _, size, row, error in _object_rows(io.BytesIO(raw), first=number):
                    yield from _items(number, size, row, error, _canonical, {})
                continue
            update: dict[str, Any] = {}
            if not rollout.id:
                update["id"] = str(number)
            if rollout.group is None and (group := prompt_group(rollout.prompt)) is not None:
                update["group"] = group
            yield RowOk(number, rollout.model_copy(update=update) if update else rollout, len(raw))


def __getattr__(name: str) -> object:
    if name == "Format":  # referee.rewards.Format is the format reward
        return renamed("referee.rollouts.readers", "Format", "FileFormat", FileFormat)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
