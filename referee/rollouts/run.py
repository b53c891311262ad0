"""Scoring a rollout file: read, score in batches, write one output row per input row, in order."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from referee._aio import run_sync
from referee.errors import RolloutError
from referee.reward import Reward
from referee.rollouts.jsonl import RowError, RowOk
from referee.rollouts.needs import check_rows
from referee.rollouts.output import check_output, open_output, write_output
from referee.rollouts.readers import Format, read_rollouts
from referee.rollouts.scored import ScoredRow, row_json
from referee.rollouts.summary import Summary
from referee.score import Failure, Score

__all__ = ["RowWriter", "ScoreRun", "row_writer", "score_file", "score_rows", "score_to_path"]

DEFAULT_BATCH_SIZE = 256


@dataclass
class ScoreRun:
    """The outcome of a file run: its summary, and how many rows failed to be read."""

    summary: Summary = field(default_factory=Summary)
    unreadable: int = 0


class RowWriter:
    """A `write` for `score_rows`: each output row as one JSON line on `stream`. `score_rows`
    hands it the score itself (`row`), which it writes without building a `ScoredRow`."""

    def __init__(self, stream: IO[str]) -> None:
        self._write = stream.write

    def __call__(self, row: ScoredRow) -> None:
        self._write(row.to_json() + "\n")

    def row(self, line: int, rollout_id: str | None, group: str | None, score: Score) -> None:
        """Write the row `ScoredRow.of(line, rollout_id, group, score)` would be."""
        self._write(row_json(line, rollout_id, group, score) + "\n")


def row_writer(stream: IO[str]) -> RowWriter:
    """A `write` for `score_rows`: each output row as one JSON line on `stream`."""
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


def _as_model(
    write: Callable[[ScoredRow], None],
) -> Callable[[int, str | None, str | None, Score], None]:
    def emit(line: int, rollout_id: str | None, group: str | None, score: Score) -> None:
        write(ScoredRow.of(line, rollout_id, group, score))

    return emit


async def score_rows(
    rows: Iterable[RowOk | RowError],
    reward: Reward,
    write: Callable[[ScoredRow], None],
    *,
    source: str = "<input>",
    batch_size: int = DEFAULT_BATCH_SIZE,
    concurrency: int | None = None,
    on_progress: Callable[[int], None] | None = None,
    flush: Callable[[], None] | None = None,
    run: ScoreRun | None = None,
) -> ScoreRun:
    """Score rows batch by batch and `write` one output row per input row, in input order.

    `flush` is called after each batch's rows are written (a resumable run makes them durable
    there); `run` carries a summary to continue.
    """
    run = run or ScoreRun()
    emit = write.row if isinstance(write, RowWriter) else _as_model(write)
    for batch in _batches(rows, batch_size):
        good = [r for r in batch if isinstance(r, RowOk)]
        scores = iter(await reward.score_batch([r.rollout for r in good], concurrency=concurrency))
        consumed = 0
        for row in batch:
            if isinstance(row, RowOk):
                score = next(scores)
                emit(row.line, row.rollout.id, row.rollout.group, score)
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


def score_file(
    path: str | Path,
    reward: Reward,
    out: IO[str],
    *,
    format: Format | None = None,
    mapping: Mapping[str, str] | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    concurrency: int | None = None,
    on_progress: Callable[[int], None] | None = None,
    check_inputs: bool = True,
) -> ScoreRun:
    """Score a rollout file into `out` (JSONL), one row per input row: what ``referee score``
    does, read the same way (`read_rollouts`: the shape detected or given by `format`, fields
    mapped by `mapping`, a canonical row's extra columns kept as metadata).

    With `check_inputs`, the first rows (`referee.rollouts.needs.SAMPLE_ROWS`) are read ahead
    first: where none has what a component needs (a reference), nothing is scored.

    Raises:
        OSError: The input cannot be opened.
        RolloutError: The format cannot be detected or the mapping is malformed.
        MissingInput: No row read ahead has what a component needs (a `RolloutError`).
    """
    rows = read_rollouts(path, format=format, mapping=mapping)
    return run_sync(
        score_rows(
            check_rows(reward, rows, source=path) if check_inputs else rows,
            reward,
            row_writer(out),
            source=str(path),
            batch_size=batch_size,
            concurrency=concurrency,
            on_progress=on_progress,
        )
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
    out = Path(output)
    partial = out.with_name(out.name + ".partial")
    meta_path = out.with_name(out.name + ".partial.json")
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
