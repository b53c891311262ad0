"""A scored output row: what ``referee score`` writes for one input row, one JSON object a line.

``{"id", "line", "group", "reward", "components", "reason", "failure"}``, then ``skipped``,
``steps``, ``cost``, ``latency`` and ``tokens`` where the score has them. `ScoredRow` is the row
as a model: written from a `Score` (`ScoredRow.of`, `to_json`) and read back from a scored file
(`ScoredRow.model_validate`) by ``referee report``, ``referee compare`` and a resumed run.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_serializer

from referee.errors import RolloutError
from referee.rollouts.jsonl import validation_message
from referee.rollouts.readers import rows_of
from referee.scores import POLICY_FAULTS, Failure, Score

__all__ = ["FailureRecord", "Number", "ScoredRow", "read_scored", "row_json"]

Number = int | float
"""A number as written: `int | float` rather than `float`, because pydantic would turn an
integer a reward returned (``1``) into ``1.0`` and change the bytes of a row or report read
back and written again."""


class FailureRecord(BaseModel):
    """A `Failure` as a scored row carries it: why the row has no reward."""

    model_config = ConfigDict(frozen=True)

    type: str
    message: str = ""
    where: str | None = None
    blame: str | None = None  # a row written before blame existed: the type's (`Failure`)

    def failure(self) -> Failure:
        """The `Failure` again (a type referee does not know reads as ``error``)."""
        return Failure.from_dict(self.model_dump())


class ScoredRow(BaseModel):
    """One output row of ``referee score``: the input row's id, line and group, and its score.

    Attributes:
        id: The rollout's id (None for an unreadable row whose id could not be found).
        line: The 1-based line (or row) of the input it was read from.
        group: The rollout's group, where it has one.
        reward: The total, or None when it could not be computed (`failure` says why).
        components: Named parts of the reward, dotted for nesting.
        reason: Why this value, for a person.
        failure: Set when `reward` is None.
        skipped: Components a failed gate kept from running (written only when some were).
        steps: Dense per-turn rewards (written only where the reward gives them).
        cost: Money spent on this row in US dollars (written only where known).
        latency: Seconds spent on this row (written only where measured).
        tokens: Model tokens spent on this row (written only where a judge was called).
    """

    # Scored files are also written by hand and by other tools: extra keys are ignored and an
    # integer id is read as a string.
    model_config = ConfigDict(frozen=True, coerce_numbers_to_str=True)

    id: str | None = None
    line: int | None = None
    group: str | None = None
    reward: Number | None
    components: dict[str, Number | None] = Field(default_factory=dict)
    reason: str | None = None
    failure: FailureRecord | None = None
    skipped: tuple[str, ...] = ()
    steps: tuple[Number, ...] | None = None
    cost: Number | None = None
    latency: Number | None = None
    tokens: int | None = None
    fault: str | None = None

    @classmethod
    def of(cls, line: int, rollout_id: str | None, group: str | None, score: Score) -> ScoredRow:
        """The row for `score` of the input row at `line`: read from `Score.to_dict`, the
        shape the file has, as a row read back from the file is."""
        return cls.model_validate(
            {"id": rollout_id, "line": line, "group": group, **score.to_dict()}
        )

    def score(self) -> Score:
        """The `Score` this row was written from (sharing its components: treat both as
        immutable)."""
        return Score(
            value=self.reward,
            components=self.components,
            reason=self.reason,
            failure=None if self.failure is None else self.failure.failure(),
            skipped=self.skipped,
            steps=self.steps,
            cost=self.cost,
            latency=self.latency,
            tokens=self.tokens,
            fault=self.fault if self.fault in POLICY_FAULTS else None,  # type: ignore[arg-type]
        )

    @model_serializer(mode="plain")
    def _written(self) -> dict[str, Any]:
        """The keys `referee score` writes, in its order: the row's place, then the score as
        `Score.to_dict` writes it (the optional keys only where set)."""
        score = self.score().to_dict()
        if self.failure is not None:  # as read, even a type referee does not know
            score["failure"] = {**self.failure.model_dump(), "blame": score["failure"]["blame"]}
        return {"id": self.id, "line": self.line, "group": self.group, **score}

    def to_json(self) -> str:
        """The row as one line of JSON (no newline); NaN and infinities, which JSON cannot
        carry, written as null."""
        return _line(self._written())  # model_dump's dict, without model_dump's microsecond


def _line(data: dict[str, Any]) -> str:
    """The one way a scored row becomes text: one line of JSON, NaN and infinities as null."""
    try:
        return json.dumps(data, ensure_ascii=False, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(data), ensure_ascii=False, allow_nan=False)


def row_json(line: int, rollout_id: str | None, group: str | None, score: Score) -> str:
    """``ScoredRow.of(line, rollout_id, group, score).to_json()``: the same line, written the
    same way (`_line`), without building the model (half a row's writing time) when every
    value in `score` is already what validation would keep: numbers as ints or floats (not
    bools), strings as strings. Anything else takes the model's way, to be coerced."""
    if _plain(rollout_id, group, score):
        return _line({"id": rollout_id, "line": line, "group": group, **score.to_dict()})
    return ScoredRow.of(line, rollout_id, group, score).to_json()


def _number(value: object) -> bool:
    kind = type(value)
    return kind is float or kind is int or value is None


def _text(value: object) -> bool:
    return value is None or type(value) is str


def _plain(rollout_id: object, group: object, score: Score) -> bool:
    """Whether ScoredRow's validation would keep every value of the row as it is."""
    failure = score.failure
    return (
        _text(rollout_id)
        and _text(group)
        and _number(score.value)
        and _text(score.reason)
        and all(type(k) is str and _number(v) for k, v in score.components.items())
        and (
            failure is None
            or (type(failure.type) is str and type(failure.message) is str and _text(failure.where))
        )
        and all(type(name) is str for name in score.skipped)
        and (score.steps is None or all(v is not None and _number(v) for v in score.steps))
        and _number(score.cost)
        and _number(score.latency)
        and (score.tokens is None or type(score.tokens) is int)
    )


def _finite(value: Any) -> Any:
    """NaN and infinities replaced by None, recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def read_scored(path: str | Path) -> Iterator[ScoredRow]:
    """The rows of a file ``referee score`` wrote, in order.

    Raises:
        RolloutError: A row that is not a scored row, naming its line and why.
        OSError: The file cannot be read.
    """
    for number, _, row, error in rows_of(path):
        why = error or "no reward key"
        if row is not None and "reward" in row:
            try:
                scored = ScoredRow.model_validate(row)
            except ValidationError as exc:
                why = validation_message(exc)
            else:
                yield scored
                continue
        raise RolloutError(
            f"not a scored row ({why}); pass the output of referee score, or rollouts with --spec",
            source=str(path), line=number,
        )  # fmt: skip
