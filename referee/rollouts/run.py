"""Scoring a rollout file: read, score in batches, write one output row per input row, in order."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from referee._aio import run_sync
from referee.errors import RolloutError
from referee.reward import Reward
from referee.rollouts.jsonl import RowError, RowOk
from referee.rollouts.needs import check_rows
from referee.rollouts.output import check_output, open_output, write_output
from referee.rollouts.readers import PROMPT_GROUP, FileFormat, read_rollouts
from referee.rollouts.scored import ScoredRow, row_json
from referee.rollouts.summary import Summary
from referee.scores import Failure, Score

__all__ = [
    "RowList",
    "RowSink",
    "RowWriter",
    "ScoreRun",
    "row_writer",
    "score_file",
    "score_in_memory",
    "score_rows",
    "score_to",
    "score_to_path",
]

DEFAULT_BATCH_SIZE = 256


@dataclass
class ScoreRun:
    """The outcome of a file run: its summary, and how many rows failed to be read."""

    summary: Summary = field(default_factory=Summary)
    unreadable: int = 0


class RowSink(Protocol):
    """Where `score_rows` puts each output row: the row's place and its score."""

    def row(self, line: int, rollout_id: str | None, group: str | None, score: Score) -> None: ...


class RowWriter:
    """Each output row as one JSON line on `stream` (`row_json`: written without building a
    `ScoredRow` where the score needs no coercion)."""

    def __init__(self, stream: IO[str]) -> None:
        self._write = stream.write

    def row(self, line: int, rollout_id: str | None, group: str | None, score: Score) -> None:
        """Write the row `ScoredRow.of(line, rollout_id, group, score)` would be."""
        self._write(row_json(line, rollout_id, group, score) + "\n")


class RowList(list[ScoredRow]):
    """Each output row kept in memory, as the `ScoredRow` it would be read back as."""

    def row(self, line: int, rollout_id: str | None, group: str | None, score: Score) -> None:
        self.append(ScoredRow.of(line, rollout_id, group, score))


def row_writer(stream: IO[str]) -> RowWriter:
    """A sink for `score_rows`: each output row as one JSON line on `stream`."""
    return RowWriter(stream)


def _error_score(row: RowError, source: str) -> Score:
    where = f"{source}:{row.line}"
    return Score(
        value=None,
        reason=f"line {row.line}: {row.message}",
        failure=Failure("invalid_input", f"line {row.line}: {row.message}", where),
    )


def _batches(rows: Iterable[RowOk | RowError], size: int) -> Iterator[list[RowOk | RowError]]:
    batch: list[RowOk | RowError] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


async def score_rows(
    rows: Iterable[RowOk | RowError],
    reward: Reward,
    sink: RowSink,
    *,
    source: str = "<input>",
    batch_size: int = DEFAULT_BATCH_SIZE,
    concurrency: int | None = None,
    on_progress: Callable[[int], None] | None = None,
    flush: Callable[[], None] | None = None,
    run: ScoreRun | None = None,
) -> ScoreRun:
    """Score rows batch by batch and put one output row per input row in `sink`, in order.

    `flush` is called after each batch's rows are written (a resumable run makes them durable
    there); `run` carries a summary to continue.
    """
    run = run or ScoreRun()
    emit = sink.row
    for batch in _batches(rows, batch_size):
        good = [r for r in batch if isinstance(r, RowOk)]
        scores = iter(await reward.score_batch([r.rollout for r in good], concurrency=concurrency))
        consumed = 0
        for row in batch:
            if isinstance(row, RowOk):
                score = next(scores)
                group = row.rollout.group
                emit(row.line, row.rollout.id, group, score)
                if group is not None and group.startswith(PROMPT_GROUP):
                    run.summary.prompt_grouped += 1
            else:
                score = _error_score(row, source)
                run.unreadable += 1
                emit(row.line, row.id, None, score)
            run.summary.add(score)
            consumed += row.size
        if flush is not None:
            flush()
        if on_progress is not None:
            on_progress(consumed)
    return run


def score_in_memory(
    items: Iterable[RowOk | RowError], reward: Reward, *, source: str
) -> list[ScoredRow]:
    """The rows ``referee score`` would write for `items`, in memory (``referee report
    --spec``, ``referee compare --rollouts``)."""
    out = RowList()
    run_sync(score_rows(items, reward, out, source=source))
    return out


def score_to(
    source: str | Path,
    reward: Reward,
    out: str | os.PathLike[str] | IO[str],
    *,
    format: FileFormat | None = None,
    mapping: Mapping[str, str] | None = None,
    spec_text: str | None = None,
    resume: bool = False,
    batch_size: int = DEFAULT_BATCH_SIZE,
    concurrency: int | None = None,
    on_progress: Callable[[int], None] | None = None,
    check_inputs: bool = True,
) -> tuple[ScoreRun, int]:
    """Score the rollout file `source` into `out`, one row per input row, in order: what
    ``referee score`` does, with or without ``--output``.

    The file is read the one way (`read_rollouts`: the shape detected or given by `format`,
    fields mapped by `mapping`, a canonical row's extra columns kept as metadata). With
    `check_inputs`, the first rows (`referee.rollouts.needs.SAMPLE_ROWS`) are read ahead
    first: where none has what a component needs (a reference), nothing is scored.

    `out` is a stream (rows written as their batch is scored) or a path, written resumably
    (`score_to_path`: `spec_text` and the reader options identify the run; `resume` continues
    an interrupted one). Where `spec_text` is None the reward's repr stands for it.

    Returns:
        The run, and how many rows a resumed run kept (0 for a stream).

    Raises:
        OSError: The input cannot be opened, or an output path is not a regular file.
        RolloutError: The format cannot be detected, the mapping is malformed, or `resume`
            found a partial run of something else.
        MissingInput: No row read ahead has what a component needs (a `RolloutError`).
        ValueError: `resume` with a stream.
    """
    if isinstance(out, (str, os.PathLike)):
        output = Path(out)
        for path in _run_files(output):  # before reading: never a link, a device or a FIFO
            check_output(path)
        rows = read_rollouts(source, format=format, mapping=mapping)
        return score_to_path(
            source, rows, reward, output,
            spec_text=repr(reward) if spec_text is None else spec_text,
            options={"format": format, "map": None if mapping is None else dict(mapping)},
            resume=resume, batch_size=batch_size, concurrency=concurrency,
            on_progress=on_progress, check_inputs=check_inputs,
        )  # fmt: skip
    if resume:
        raise ValueError("resume needs an output path: the run continues into that file")
    rows = read_rollouts(source, format=format, mapping=mapping)
    run = run_sync(
        score_rows(
            check_rows(reward, rows, source=source) if check_inputs else rows,
            reward,
            RowWriter(out),
            source=str(source),
            batch_size=batch_size,
            concurrency=concurrency,
            on_progress=on_progress,
        )
    )
    return run, 0


def score_file(
    path: str | Path,
    reward: Reward,
    out: IO[str],
    *,
    format: FileFormat | None = None,
    mapping: Mapping[str, str] | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    concurrency: int | None = None,
    on_progress: Callable[[int], None] | None = None,
    check_inputs: bool = True,
) -> ScoreRun:
    """Score a rollout file into the stream `out` (JSONL): `score_to` with a stream."""
    run, _ = score_to(
        path, reward, out, format=format, mapping=mapping, batch_size=batch_size,
        concurrency=concurrency, on_progress=on_progress, check_inputs=check_inputs,
    )  # fmt: skip
    return run


def _run_files(output: Path) -> tuple[Path, ...]:
    """The files a path run writes: OUTPUT.partial and OUTPUT.partial.json, then OUTPUT."""
    return (
        output,
        output.with_name(output.name + ".partial"),
        output.with_name(output.name + ".partial.json"),
    )


# --- resumable runs -----------------------------------------------------------------------


def _fingerprint(source: Path, spec: str, options: Mapping[str, Any]) -> dict[str, Any]:
    stat = source.stat()
    return {
        "input": str(source.resolve()),
        "input_size": stat.st_size,
        "input_mtime_ns": stat.st_mtime_ns,
        "spec_sha256": hashlib.sha256(spec.encode()).hexdigest(),
        **options,
    }


def _recover(partial: Path, run: ScoreRun) -> int:
    """Rows already written to a partial output: a torn last line (the process was killed
    while writing it) is cut off; the others are counted and added to the run's summary."""
    done = 0
    good_bytes = 0
    with open(partial, "rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                break  # torn: written in part when the process died
            try:
                row = ScoredRow.model_validate_json(raw)
            except ValueError:  # pydantic's ValidationError is one
                break
            run.summary.add(row.score())
            if row.group is not None and row.group.startswith(PROMPT_GROUP):
                run.summary.prompt_grouped += 1
            if row.failure is not None and row.failure.type == "invalid_input":
                run.unreadable += 1
            done += 1
            good_bytes += len(raw)
    if partial.stat().st_size != good_bytes:
        with open(partial, "r+b") as f:
            f.truncate(good_bytes)
    return done


def score_to_path(
    source: str | Path,
    rows: Iterable[RowOk | RowError],
    reward: Reward,
    output: str | Path,
    *,
    spec_text: str,
    options: Mapping[str, Any] | None = None,
    resume: bool = False,
    batch_size: int = DEFAULT_BATCH_SIZE,
    concurrency: int | None = None,
    on_progress: Callable[[int], None] | None = None,
    check_inputs: bool = True,
) -> tuple[ScoreRun, int]:
    """Score `rows` (read from `source`) into the file `output`, resumably.

    Rows go to ``OUTPUT.partial``, flushed batch by batch, beside ``OUTPUT.partial.json`` (what
    the run is: input file, its size and mtime, the spec's hash, reader options). When every
    row is written the partial file is fsynced and renamed to `output`, so `output` is never
    left half-written. With `resume`, a partial run of the same input, spec and options is
    continued: its rows are kept (a torn last line is cut off) and that many input rows are
    skipped, so every input row appears exactly once, in order. A partial run of something
    else is refused. Without `resume`, a partial run is started over.

    With `check_inputs`, the first rows are read ahead before anything is written, as
    `score_file` does.

    Returns:
        The run (its summary covers the kept rows too) and how many rows were kept.

    Raises:
        MissingInput: No row read ahead has what a component needs (a `RolloutError`).
        RolloutError: `resume` found a partial run of a different input, spec or options.
        OSError: A file cannot be read or written, or `output` (or its partial files) is
            not a regular file: a symbolic link, a device, a FIFO (`check_output`).
    """
    out, partial, meta_path = _run_files(Path(output))
    for path in (out, partial, meta_path):  # each a regular file or new: never a link or device
        check_output(path)
    if check_inputs:
        rows = check_rows(reward, rows, source=source)
    fingerprint = _fingerprint(Path(source), spec_text, dict(options or {}))
    run = ScoreRun()
    kept = 0
    if resume and partial.exists() and meta_path.exists():
        previous = json.loads(meta_path.read_text())
        if previous != fingerprint:
            changed = sorted(k for k in fingerprint if previous.get(k) != fingerprint[k])
            raise RolloutError(
                f"{partial} is a partial run of something else (changed: {', '.join(changed)}); "
                "delete it, or run without --resume to start over"
            )
        kept = _recover(partial, run)
    else:
        write_output(partial, "")
        write_output(meta_path, json.dumps(fingerprint))
    rows_iter = iter(rows)
    skipped_bytes = 0
    for row in itertools.islice(rows_iter, kept):
        skipped_bytes += row.size
    if on_progress is not None and skipped_bytes:
        on_progress(skipped_bytes)
    with open_output(partial, append=True) as stream:
        run_sync(
            score_rows(
                rows_iter,
                reward,
                row_writer(stream),
                source=str(source),
                batch_size=batch_size,
                concurrency=concurrency,
                on_progress=on_progress,
                flush=stream.flush,
                run=run,
            )
        )
        stream.flush()
        os.fsync(stream.fileno())
    check_output(out)  # (what a long run's output path holds now)
    partial.replace(out)
    meta_path.unlink(missing_ok=True)
    return run, kept
