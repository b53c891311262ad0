from __future__ import annotations

import threading
from typing import Any

import pytest

import referee
from referee.rewards import Contains, ExactMatch, Format, Regex
from tests.support.rollouts import make


@pytest.mark.parametrize(
    ("options", "completion", "reference", "value"),
    [
        ({}, " Paris \n", "Paris", 1.0),  # stripped by default
        ({}, "paris", "Paris", 0.0),  # case matters unless normalised
        ({"normalize": "text"}, "PARIS.", "Paris", 1.0),
        ({"extract": "answer_tag"}, "<think>Lyon?</think><answer> Paris </answer>", "Paris", 1.0),
        (
            {"extract": "answer_tag"},
            "<answer>Lyon</answer> then <answer>Paris</answer>",
            "Paris",
            1.0,
        ),  # last tag wins
        ({"extract": "boxed"}, r"so \boxed{\frac{1}{2}}", r"\frac{1}{2}", 1.0),  # nested braces
        ({"extract": "last_line"}, "work\n\n42\n", "42", 1.0),
        ({"extract": "last_number"}, "between 3 and 1,024 items", "1024", 1.0),
        ({"pattern": r"Answer:\s*(\w+)"}, "Answer: B ... Answer: C", "C", 1.0),  # last match
        ({}, "B", ["A", "B"], 1.0),  # a list of acceptable answers
        ({}, "7", 7, 1.0),  # numeric reference
    ],
)
def test_exact_match(
    options: dict[str, Any], completion: str, reference: Any, value: float
) -> None:
    assert referee.score(ExactMatch(**options), [make(completion, reference)])[0].value == value


def test_exact_match_no_answer_is_zero_with_reason() -> None:
    s = referee.score(ExactMatch(extract="boxed"), [make("no box", "1")])[0]
    assert s.value == 0.0 and s.reason == "no answer found"


def test_exact_match_object_reference_is_not_applicable() -> None:
    s = referee.score(ExactMatch(), [make("x", {"a": 1})])[0]
    assert s.value is None and s.failure is not None and s.failure.type == "not_applicable"


@pytest.mark.parametrize(
    ("options", "completion", "reference", "value"),
    [
        ({"value": "refund"}, "We will issue a REFUND today.", None, 1.0),  # text-normalised
        ({"value": "refund"}, "No.", None, 0.0),
        ({}, "the capital is Paris, France", "paris", 1.0),  # from the reference
    ],
)
def test_contains(options: dict[str, Any], completion: str, reference: Any, value: float) -> None:
    assert referee.score(Contains(**options), [make(completion, reference)])[0].value == value


@pytest.mark.parametrize(
    ("options", "completion", "value"),
    [
        ({"regex": r"\d{3}-\d{4}"}, "call 555-1234", 1.0),
        ({"regex": r"\d{3}-\d{4}", "mode": "fullmatch"}, "call 555-1234", 0.0),
        ({"regex": "yes", "flags": ("IGNORECASE",)}, "YES", 1.0),
    ],
)
def test_regex(options: dict[str, Any], completion: str, value: float) -> None:
    assert referee.score(Regex(**options), [make(completion)])[0].value == value


@pytest.mark.parametrize(
    ("preset", "completion", "value", "why"),
    [
        ("think_answer", "<think>a</think>\n<answer>b</answer>", 1.0, "format ok"),
        ("think_answer", "<answer>b</answer><think>a</think>", 0.0, "out of order"),
        ("think_answer", "<think>a</think><answer>b", 0.0, "</answer> appears 0 times"),
        (
            "think_answer",
            "<think>a</think><think>x</think><answer>b</answer>",
            0.0,
            "<think> appears 2 times",
        ),  # no stuffing
        ("think", "<think>a</think> answer", 1.0, "format ok"),
        ("boxed", r"x \boxed{3}", 1.0, "format ok"),
    ],
)
def test_format_presets(preset: str, completion: str, value: float, why: str) -> None:
    s = referee.score(Format(preset=preset), [make(completion)])[0]  # type: ignore[arg-type]
    assert s.value == value and s.reason is not None and why in s.reason


def test_format_custom_pattern() -> None:
    reward = Format(pattern=r"Step \d+:.*Final: .+")
    assert referee.score(reward, [make("Step 1: x\nFinal: 3"), make("Final: 3")])[0].value == 1.0


@pytest.mark.parametrize("options", [{}, {"preset": "think", "pattern": "x"}])
def test_format_needs_exactly_one_of_preset_or_pattern(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="exactly one"):
        Format(**options)


# -- hostile patterns and texts: a value or a Failure, never a hang ---------------------------

REDOS = "a" * 34 + "!"  # exponential for a backtracking engine on ^(a+)+$
FALLBACK_REDOS = r"^(a|a)+\1b"  # needs a backreference, so it runs time-limited


def _score_within(reward: referee.Reward, completion: str, reference: Any = None) -> Any:
    """Score in a thread with a generous guard, so that a regression fails instead of hanging."""
    out: list[Any] = []
    thread = threading.Thread(
        target=lambda: out.extend(referee.score(reward, [make(completion, reference)])),
        daemon=True,
    )
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive(), "scoring hung"
    return out[0]


@pytest.mark.parametrize(
    "reward",
    [
        Regex(regex=r"^(a+)+$"),
        Regex(regex=r"^(a+)+$", mode="fullmatch"),
        Format(pattern=r"(a+)+$"),
        ExactMatch(pattern=r"^(a+)+$"),
        Contains(pattern=r"(a+)+b", value="a"),
    ],
    ids=["regex", "regex-fullmatch", "format", "exact_match", "contains"],
)
def test_catastrophic_patterns_answer_at_once(reward: referee.Reward) -> None:
    s = _score_within(reward, REDOS, "a")
    assert s.failure is None and s.value == 0.0


@pytest.mark.parametrize(
    "reward",
    [
        Regex(regex=FALLBACK_REDOS),
        Format(pattern=FALLBACK_REDOS),
        ExactMatch(pattern=FALLBACK_REDOS),
    ],
    ids=["regex", "format", "exact_match"],
)
def test_backtracking_pattern_times_out_as_the_policys_zero(reward: referee.Reward) -> None:
    s = _score_within(reward, "a" * 40 + "!", "a")
    # Its text made the check spin: the policy's verdict, never a masked Failure (issue 44).
    assert s.value == 0.0 and s.failure is None and s.fault == "timeout"
    assert "stopped after" in (s.reason or "") and "backreference" in (s.reason or "")


def test_backtracking_pattern_still_matches_ordinary_text() -> None:
    reward = Regex(regex=r"(\w)\1")  # a doubled letter
    assert referee.score(reward, [make("book"), make("bok")])[0].value == 1.0
    assert referee.score(reward, [make("bok")])[0].value == 0.0


def test_answer_tag_on_many_unclosed_tags_is_linear() -> None:
    # With `re`, 40,000 unclosed tags took a minute; RE2 reads them once.
    s = _score_within(ExactMatch(extract="answer_tag"), "<answer>" * 200_000, "1")
    assert s.value == 0.0 and s.reason == "no answer found"


def test_invalid_pattern_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match=r"invalid regular expression '\(a'"):
        Regex(regex="(a")
