from __future__ import annotations

from typing import Any

import pytest

import referee
from referee.rewards import Length, Repetition
from tests.support.rollouts import make


@pytest.mark.parametrize(
    ("n", "value"),
    [
        (0, 0.0),
        (80, 0.0),  # up to max - cache: no penalty
        (90, -0.5),  # halfway through the soft band
        (100, -1.0),  # at the limit
        (150, -1.0),  # beyond
    ],
)
def test_dapo_overlong_penalty(n: int, value: float) -> None:
    reward = Length(max_length=100, cache_length=20, unit="tokens")
    s = referee.score(reward, [make("x", metadata={"completion_ids": list(range(n))})])[0]
    assert s.value == pytest.approx(value)


@pytest.mark.parametrize(
    ("unit", "text", "metadata", "value"),
    [
        ("chars", "x" * 12, {}, -1.0),
        ("words", "a b c", {}, 0.0),
        ("tokens", "", {"completion_tokens": 11}, -1.0),
    ],
)
def test_units(unit: str, text: str, metadata: dict[str, Any], value: float) -> None:
    reward = Length(max_length=10, cache_length=5, unit=unit)  # type: ignore[arg-type]
    assert referee.score(reward, [make(text, metadata=metadata)])[0].value == value


def test_tokens_without_token_info_is_not_applicable_and_says_how_to_fix() -> None:
    s = referee.score(Length(max_length=10), [make("abc")])[0]
    assert s.value is None and s.failure is not None and s.failure.type == "not_applicable"
    assert "unit: words" in s.failure.message


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("the cat sat on the mat", 0.0),  # every trigram distinct
        ("a b a b a b a b", -(1 - 2 / 6)),  # 2 distinct of 6 trigrams
        ("hi", 0.0),  # too short to repeat
    ],
)
def test_repetition(text: str, value: float) -> None:
    assert referee.score(Repetition(), [make(text)])[0].value == pytest.approx(value)
