"""Hostile completions never crash or stall a built-in reward: each gives a value or a Failure.

The battery walks every registered built-in type (`tests.support.options.OPTIONS` must name
each, which tests/test_pickle.py enforces), so a new type is covered by adding its options there.
"""

from __future__ import annotations

import pytest

import referee
from tests.support.hostile import HOSTILE, score_guarded
from tests.support.options import OPTIONS

REFERENCE = {"a": 1, "b": [1, 2]}
# Every built-in with its test options, plus variants that send the whole completion to the
# checker (the test options of some narrow it with a pattern first).
CASES = [(kind, OPTIONS[kind]) for kind in sorted(OPTIONS)] + [
    ("math_answer", {}),
    ("exact_match", {"extract": "boxed"}),
    ("exact_match", {"extract": "last_number"}),
    ("exact_match", {"extract": "answer_tag"}),
    ("regex", {"regex": r"^(a+)+$"}),  # the catastrophic pattern itself, from a spec
    ("format", {"pattern": r"(\s*\w+\s*)+!$"}),
    ("field_match", {}),
    ("json_valid", {"extract": "fenced"}),
]


@pytest.mark.parametrize(("kind", "options"), CASES, ids=[f"{k}{o}" for k, o in CASES])
@pytest.mark.parametrize("label", sorted(HOSTILE))
def test_never_crashes_or_stalls(kind: str, options: dict[str, object], label: str) -> None:
    options = dict(options)
    if kind == "math_answer":
        options["timeout"] = 2.0  # a pathological input may time out: that is a Failure
    reward = referee.load({"type": kind, **options})
    reference = "1" if kind in {"math_answer", "exact_match", "contains"} else REFERENCE
    score = score_guarded(reward, HOSTILE[label], reference)
    assert (score.value is None) == (score.failure is not None)
    if score.failure is not None:
        # "judge": the test judge's server is unreachable on purpose (see tests.support.options)
        assert score.failure.type in {"timeout", "not_applicable", "judge"}, score.failure
