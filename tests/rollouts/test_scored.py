"""`ScoredRow`: the output row of ``referee score``, written as it always was and read back."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from referee.rollouts.scored import ScoredRow
from referee.score import Failure, Score

SCORES = [
    # the common row: the seven keys, nothing else
    Score(0.5, {"valid": 1.0, "fields": 0.0}, "valid: ok; fields: a: 0 != 1"),
    # a failure, and every optional key; integers stay integers
    Score(None, {"a": 1, "b": None}, "judge down", Failure("judge", "timed out", "judge"),
          skipped=("fields",), steps=(1, 0.25), cost=0.0, latency=1.5, tokens=12),
    # a reward returning an integer, and non-ASCII text
    Score(1, {}, "réponse juste ✓"),
]  # fmt: skip


@pytest.mark.parametrize("score", SCORES)
def test_a_row_is_written_as_score_to_dict_always_wrote_it(score: Score) -> None:
    row = ScoredRow.of(3, "r1", "g", score)
    old = json.dumps({"id": "r1", "line": 3, "group": "g", **score.to_dict()}, ensure_ascii=False)
    assert row.to_json() == old


@pytest.mark.parametrize("score", SCORES)
def test_a_row_round_trips_through_json(score: Score) -> None:
    row = ScoredRow.of(3, "r1", None, score)
    back = ScoredRow.model_validate_json(row.to_json())
    assert back == row and back.to_json() == row.to_json()
    assert back.score() == score


def test_values_json_cannot_carry_are_written_as_null() -> None:
    row = ScoredRow.of(1, "x", None, Score(0.5, {"a": float("nan")}, cost=float("inf")))
    written = json.loads(row.to_json())
    assert written["components"] == {"a": None} and written["cost"] is None


def test_rows_written_by_hand_are_read_leniently() -> None:
    row = ScoredRow.model_validate({"id": 7, "reward": 1, "source": "elsewhere"})
    assert row.id == "7" and row.reward == 1 and row.line is None and row.components == {}
    with pytest.raises(ValidationError, match="reward"):
        ScoredRow.model_validate({"id": "x", "reward": "high"})
    with pytest.raises(ValidationError, match="reward"):
        ScoredRow.model_validate({"id": "x"})
