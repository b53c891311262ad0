"""Hostile completions never crash a built-in reward: each gives a value or a Failure."""

from __future__ import annotations

import pytest

import referee
from tests.conftest import make
from tests.test_pickle import OPTIONS

HOSTILE = {
    "10 MB of words": "lorem ipsum dolor " * 600_000,
    "10 MB without spaces": "x" * 10_000_000,
    "JSON nested 100,000 deep": "[" * 100_000 + "]" * 100_000,
    "object nested 100,000 deep": '{"a":' * 100_000 + "1" + "}" * 100_000,
    "NaN and Infinity": '{"a": NaN, "b": Infinity, "c": -Infinity}',
    "duplicate keys": '{"a": 1, "a": 2}',
    "lone surrogates (undecodable bytes)": "answer \udcff\udcfe \\boxed{1}",
    "NUL and control characters": "\x00\x01\x1b[31m{}\x7f",
    "empty": "",
    "unbalanced boxed": "\\boxed{" * 10_000,
    "many braces": "{" * 200_000,
}
REFERENCE = {"a": 1, "b": [1, 2]}
# Every built-in with its test options, plus variants that send the whole completion to the
# checker (the test options of some narrow it with a pattern first).
CASES = [(kind, OPTIONS[kind]) for kind in sorted(OPTIONS)] + [
    ("math_answer", {}),
    ("exact_match", {"extract": "boxed"}),
    ("exact_match", {"extract": "last_number"}),
    ("field_match", {}),
]


@pytest.mark.parametrize(("kind", "options"), CASES, ids=[f"{k}{o}" for k, o in CASES])
@pytest.mark.parametrize("label", sorted(HOSTILE))
def test_never_crashes(kind: str, options: dict[str, object], label: str) -> None:
    options = dict(options)
    if kind == "math_answer":
        options["timeout"] = 2.0  # a pathological input may time out: that is a Failure
    reward = referee.load({"type": kind, **options})
    reference = "1" if kind in {"math_answer", "exact_match", "contains"} else REFERENCE
    [score] = referee.score(reward, [make(HOSTILE[label], reference)])
    assert (score.value is None) == (score.failure is not None)
    if score.failure is not None:
        # "judge": the test judge's server is unreachable on purpose (see test_pickle.OPTIONS)
        assert score.failure.type in {"timeout", "not_applicable", "judge"}, score.failure
