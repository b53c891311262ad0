"""Scoring a rollout file: read, score in batches, write one output row per input row, in order."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from referee._aio import run_sync
from referee.report.summary import Summary
from referee.reward import Reward
from referee.rollouts.jsonl import RowError, RowOk, read_jsonl
from referee.score import Failure, Score

__all__ = ["ScoreRun", "output_row", "score_file", "score_rows"]

DEFAULT_BATCH_SIZE = 256


@dataclass
class ScoreRun:
    """The outcome of a file run: its summary, and how many rows failed to be read."""

    summary: Summary = field(default_factory=Summary)
    unreadable: int = 0


def output_row(
    line: int, rollout_id: str | None, group: str | None, score: Score
) -> dict[str, Any]:
    """The output row `referee score` writes for one input row."""
    return {"id": rollout_id, "line": line, "group": group, **score.to_dict()}


def _finite(value: Any) -> Any:
    """NaN and infinities (which JSON cannot carry) replaced by None, recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def dump_row(row: dict[str, Any]) -> str:
    try:
        return json.dumps(row, ensure_ascii=False, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(row), ensure_ascii=False, allow_nan=False)


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
    write: Callable[[dict[str, Any]], None],
    *,
    source: str = "<input>",
    batch_size: int = DEFAULT_BATCH_SIZE,
    concurrency: int | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> ScoreRun:
    """Score rows batch by batch and `write` one output row per input row, in input order."""
    run = ScoreRun()
    for batch in _batches(rows, batch_size):
        good = [r for r in batch if isinstance(r, RowOk)]
        scores = iter(await reward.score_batch([r.rollout for r in good], concurrency=concurrency))
        consumed = 0
        for row in batch:
            if isinstance(row, RowOk):
                score = next(scores)
                write(output_row(row.line, row.rollout.id, row.rollout.group, score))
            else:
                score = _error_score(row, source)
                run.unreadable += 1
                write(output_row(row.line, row.id, None, score))
            run.summary.add(score)
            consumed += row.size
        if on_progress is not None:
            on_progress(consumed)
    return run


def score_file(
    path: str | Path,
    reward: Reward,
    out: IO[str],
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    concurrency: int | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> ScoreRun:
    """Score a canonical JSONL rollout file into `out` (JSONL), one row per input row.

    Raises:
        OSError: The input cannot be opened.
    """

    def write(row: dict[str, Any]) -> None:
        out.write(dump_row(row))
        out.write("\n")

    return run_sync(
        score_rows(
            read_jsonl(path),
            reward,
            write,
            source=str(path),
            batch_size=batch_size,
            concurrency=concurrency,
            on_progress=on_progress,
        )
    )
