from __future__ import annotations

from typing import Any

import pytest

import referee
from referee.rewards import Contains, ExactMatch, Format, Regex
from tests.conftest import make


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
