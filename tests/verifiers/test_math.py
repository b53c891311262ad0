"""math_answer reads the reference as math-verify reads it (issue 19): both sides parsed with the
extraction targets `answer` names, compared with math-verify's own parse + verify."""

from __future__ import annotations

import pytest

from referee import Rollout
from referee.rewards import MathAnswer
from referee.verifiers.math import AnswerKind


def _configs(kind: AnswerKind) -> tuple[object, ...]:
    """The extraction targets of each `answer` kind, built here as a math-verify user would."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig

    latex = LatexExtractionConfig(boxed_match_priority=0)
    return {
        "latex_or_expr": (latex, ExprExtractionConfig()),
        "latex": (latex,),
        "expr": (ExprExtractionConfig(),),
        "boxed": (LatexExtractionConfig(boxed_match_priority=0, try_extract_without_anchor=False),),
    }[kind]


def _direct(reference: str, completion: str, kind: AnswerKind) -> bool:
    """math-verify called directly: both sides parsed with the same targets, then verify."""
    from math_verify import parse, verify

    gold = parse(reference, extraction_config=_configs(kind))
    answer = parse(completion, extraction_config=_configs(kind))
    return bool(gold and answer and verify(gold, answer, float_rounding=6, strict=True))


def _referee(reference: str, completion: str, kind: AnswerKind) -> float | None:
    reward = MathAnswer(answer=kind)
    return reward.score_sync(Rollout(completion=completion, reference=reference)).value


# Symmetric pairs: each is tried as (reference, completion) and (completion, reference).
PAIRS = [
    ("1,22", "1.22"),  # decimal comma (the reported bug: reference 1,22 never matched)
    ("1,000", "1000"),  # thousands separator
    ("1,000,000", "1000000"),
    ("50%", "50"),  # percent
    ("0.5", "1/2"),
    ("3 cm", "3"),  # units
    ("x = 2", "2"),
    ("1,22", "1.23"),  # near misses stay wrong
    ("50%", "0.5"),
]


# LaTeX-only kinds read delimited LaTeX: references written so math-verify can read them too.
DELIMITED = [
    ("$1.22$", "$1.22$"),
    ("$\\frac{1}{2}$", "$0.5$"),
    ("\\boxed{1,22}", "\\boxed{1.22}"),
    ("\\boxed{1{,}000}", "\\boxed{1000}"),
    ("\\boxed{50\\%}", "\\boxed{50}"),
    ("\\boxed{3}", "\\boxed{4}"),
]


CASES = [
    *((kind, a, b) for kind in ("latex_or_expr", "expr") for a, b in PAIRS),
    *((kind, a, b) for kind in ("latex", "boxed", "latex_or_expr") for a, b in DELIMITED),
]


@pytest.mark.parametrize(("kind", "a", "b"), CASES)
def test_references_agree_with_math_verify_both_ways(kind: AnswerKind, a: str, b: str) -> None:
    for reference, completion in ((a, b), (b, a)):
        expected = _direct(reference, completion, kind)
        assert _referee(reference, completion, kind) == float(expected), (reference, completion)


@pytest.mark.parametrize(
    ("reference", "completion", "whole", "as_math_verify"),
    [
        # A bare reference in LaTeX, or a set or interval, is one expression
        # (whole_reference, the default) ...
        ("3\\sqrt{5}", "$\\boxed{3\\sqrt{5}}$", 1.0, 0.0),
        ("2\\pi", "$\\boxed{2\\pi}$", 1.0, 0.0),
        ("\\{1, 2\\}", "$\\{1, 2\\}$", 1.0, 0.0),
        ("[0, 1)", "$[0, 1)$", 1.0, 0.0),
        # ... where math-verify's own targets read one number out of it: the right answer
        # fails and the number alone pays.
        ("3\\sqrt{5}", "\\boxed{3}", 0.0, 1.0),
        ("2\\pi", "\\boxed{2}", 0.0, 1.0),
        ("\\{1, 2\\}", "2", 0.0, 1.0),
        ("[0, 1)", "1", 0.0, 1.0),
    ],
)
def test_whole_reference_is_the_one_departure_and_an_option(
    reference: str, completion: str, whole: float, as_math_verify: float
) -> None:
    rollout = Rollout(completion=completion, reference=reference)
    assert MathAnswer().score_sync(rollout).value == whole
    off = MathAnswer(whole_reference=False)
    assert off.score_sync(rollout).value == as_math_verify
    assert float(_direct(reference, completion, "latex_or_expr")) == as_math_verify


@pytest.mark.parametrize("kind", ["latex", "boxed"])
def test_a_bare_reference_for_a_latex_only_kind_falls_back_or_fails(kind: AnswerKind) -> None:
    rollout = Rollout(completion="so $\\boxed{0.5}$", reference="1/2")
    assert not _direct("1/2", "so $\\boxed{0.5}$", kind)  # math-verify cannot read the gold
    assert MathAnswer(answer=kind).score_sync(rollout).value == 1.0  # referee's fallback
    strict = MathAnswer(answer=kind, reference_fallback=False).score_sync(rollout)
    assert strict.value is None and strict.failure is not None
    assert strict.failure.type == "not_applicable"  # never a silent 0
