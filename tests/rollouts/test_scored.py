"""`ScoredRow`: the output row of ``referee score``, written as it always was and read back."""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from referee.rollouts.scored import ScoredRow, row_json
from referee.scores import Failure, Score

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


# Values a reward may put in a Score, including what validation changes (a bool component is
# written as 1, a numpy float as a float) or refuses (a reason that is not a string).
ODD = st.sampled_from([True, False, np.float64(0.25), np.int64(3), "1", [1], 2**70])
NUMBER = st.one_of(
    st.none(), st.integers(-5, 5), st.floats(allow_nan=True, allow_infinity=True), ODD
)
TEXT = st.one_of(st.none(), st.text(max_size=8), st.integers(0, 3))
SCORE = st.builds(
    Score,
    value=NUMBER,
    components=st.dictionaries(st.one_of(st.text(max_size=4), st.integers(0, 2)), NUMBER),
    reason=TEXT,
    failure=st.one_of(
        st.none(), st.builds(Failure, type=st.sampled_from(["judge", "error"]), message=TEXT)
    ),
    skipped=st.lists(st.one_of(st.text(max_size=4), st.integers(0, 2)), max_size=2).map(tuple),
    steps=st.one_of(st.none(), st.lists(NUMBER, max_size=3).map(tuple)),
    cost=NUMBER,
    latency=NUMBER,
    tokens=st.one_of(st.none(), st.integers(0, 99), st.just(True)),
)


def _written(write: Callable[[], str]) -> str:
    try:
        return write()
    except (ValidationError, TypeError, ValueError) as exc:
        return f"raised {type(exc).__name__}"


@settings(max_examples=600, deadline=None)
@given(SCORE, st.one_of(st.none(), st.text(max_size=4), st.integers(0, 9)), TEXT)
def test_row_json_is_the_models_line_whatever_a_reward_returned(
    score: Score, rollout_id: str | None, group: str | None
) -> None:
    # `referee score` writes through row_json; a resumed run, report and compare read rows
    # back as ScoredRow: the bytes must be the model's, or fail as it fails.
    model = _written(lambda: ScoredRow.of(7, rollout_id, group, score).to_json())
    assert _written(lambda: row_json(7, rollout_id, group, score)) == model
