"""Held-out cases (`referee.rewards.code._cases`): run, not paid, counted beside the paid ones,
on the real local sandbox. A program that special-cases the visible tests passes them and fails
the held-out ones; the score is the paid cases' alone; the reason never shows a held-out case."""

from __future__ import annotations

import textwrap

import pytest

import referee
from referee.errors import SpecError
from referee.rewards.code._cases import Tally, held_out_share
from tests.support.rollouts import make

# Sum of two integers read from stdin; the special-casing program knows the visible answers.
VISIBLE = [{"stdin": "1 2\n", "stdout": "3\n"}, {"stdin": "2 2\n", "stdout": "4\n"}]
HIDDEN = [{"stdin": "40 2\n", "stdout": "42\n"}, {"stdin": "-5 5\n", "stdout": "0\n"}]
HONEST = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
SPECIAL = '```python\nprint({"1 2": 3, "2 2": 4}.get(input().strip(), 7))\n```'


def _io(completion: str, reference: object, **options: object) -> referee.Score:
    reward = referee.load({"type": "io_tests", "timeout": 5, **options})
    return referee.score(reward, [make(completion=completion, reference=reference)])[0]


def test_the_share_follows_the_cases_not_their_order() -> None:
    keys = [f"case {i}" for i in range(10)]
    held = held_out_share(keys, 0.3)
    assert len(held) == 3
    flipped = held_out_share(keys[::-1], 0.3)
    assert {keys[i] for i in held} == {keys[::-1][i] for i in flipped}
    assert held_out_share(keys, None) == held_out_share(keys, 0.0) == frozenset()
    assert len(held_out_share(keys[:2], 0.01)) == 1  # at least one
    assert len(held_out_share(keys[:2], 0.99)) == 1  # never all
    assert held_out_share(keys[:1], 0.5) == frozenset()  # a lone case is paid


def test_a_stop_ends_the_paid_cases_only() -> None:
    tally = Tally(4, frozenset({3}), stop=True)
    assert tally.order == [0, 1, 2, 3]
    tally.record(0, False, "wrong answer")
    assert not tally.wants(1) and not tally.wants(2) and tally.wants(3)
    tally.record(3, True)
    s = tally.score("all")
    assert s.value == 0.0 and s.components == {
        "passed": 0.0, "cases": 3.0, "held_out_passed": 1.0, "held_out_cases": 1.0,
    }  # fmt: skip


def test_special_casing_the_visible_cases_is_paid_and_shows_in_the_held_out_count() -> None:
    reference = {"cases": VISIBLE, "held_out": HIDDEN}
    special = _io(SPECIAL, reference)
    assert special.value == 1.0, special.reason
    assert special.components == {
        "passed": 2.0, "cases": 2.0, "held_out_passed": 0.0, "held_out_cases": 2.0,
    }  # fmt: skip
    assert special.reason == "2/2 cases passed; held out (not paid): 0/2 passed"
    honest = _io(HONEST, reference)
    assert honest.value == 1.0 and honest.components["held_out_passed"] == 2.0
    # no held-out case: the components and reason as before
    plain = _io(HONEST, {"cases": VISIBLE})
    assert plain.components == {"passed": 2.0, "cases": 2.0} and plain.reason == "2/2 cases passed"


def test_a_held_out_share_of_the_reference_cases() -> None:
    reference = {"cases": VISIBLE + HIDDEN}
    s = _io(SPECIAL, reference, held_out=0.5)
    assert s.components["cases"] == 2.0 and s.components["held_out_cases"] == 2.0
    # which two are held out is fixed by the cases' text: the special-caser passes exactly
    # the visible ones among the paid cases
    held = held_out_share([f"{c['stdin']}\0{c['stdout']}" for c in VISIBLE + HIDDEN], 0.5)
    paid_visible = sum(i < 2 for i in range(4) if i not in held)
    assert s.components["passed"] == paid_visible
    assert s.components["held_out_passed"] == 2 - paid_visible


def test_held_out_cases_in_the_apps_shape_and_as_json_text() -> None:
    import json

    reference = json.dumps({"inputs": ["1 2", "2 2"], "outputs": ["3", "4"],
                            "held_out": {"inputs": ["40 2"], "outputs": ["42"]}})  # fmt: skip
    s = _io(SPECIAL, reference)
    assert (s.value, s.components["held_out_passed"], s.components["held_out_cases"]) == (
        1.0, 0.0, 1.0,
    )  # fmt: skip


def test_the_reason_never_shows_a_held_out_case() -> None:
    reference = {"cases": VISIBLE, "held_out": [{"stdin": "7 7\n", "stdout": "SECRET-14\n"}]}
    s = _io("```python\nprint(input())\n```", reference)
    assert s.value == 0.0
    assert "SECRET" not in (s.reason or "") and "7 7" not in (s.reason or ""), s.reason
    assert "case 3" not in (s.reason or "")


def test_stop_on_failure_still_runs_the_held_out_cases() -> None:
    reference = {"cases": [{"stdin": "9 9\n", "stdout": "18\n"}, *VISIBLE], "held_out": HIDDEN}
    s = _io(SPECIAL, reference, stop_on_failure=True)
    assert s.components["passed"] == 0.0  # stopped at the first paid case
    assert s.components["held_out_cases"] == 2.0 and "held out (not paid): 0/2" in (s.reason or "")
    honest = _io(HONEST, reference, scoring="all")
    assert honest.value == 1.0 and honest.components["held_out_passed"] == 2.0


def test_a_compile_error_fails_the_held_out_cases_too() -> None:
    reference = {"cases": VISIBLE, "held_out": HIDDEN}
    s = _io("```c\nint main( {\n```", reference, language="c")
    if s.failure is not None:
        pytest.skip(f"no C toolchain in the sandbox here: {s.failure.message}")
    assert s.value == 0.0 and s.components["held_out_passed"] == 0.0
    assert s.reason is not None and s.reason.startswith("0/2 cases passed; held out (not paid)")


@pytest.mark.parametrize("share", [1.0, -0.1])
def test_a_share_outside_zero_to_one_is_refused_at_load(share: float) -> None:
    for kind in ("io_tests", "function_tests"):
        with pytest.raises(SpecError, match="held_out is the share of cases not paid"):
            referee.load({"type": kind, "held_out": share})


def test_function_tests_hold_out_cases() -> None:
    reward = referee.load({"type": "function_tests", "timeout": 5})
    special = textwrap.dedent("""\
        ```python
        def add(a, b):
            return {(1, 2): 3, (2, 2): 4}.get((a, b), 7)
        ```""")
    reference = {"fn_name": "add", "inputs": [[1, 2], [2, 2]], "outputs": [3, 4],
                 "held_out": [{"args": [40, 2], "expected": 42}]}  # fmt: skip
    s = referee.score(reward, [make(completion=special, reference=reference)])[0]
    assert s.value == 1.0, s.reason
    assert s.components == {
        "passed": 2.0, "cases": 2.0, "held_out_passed": 0.0, "held_out_cases": 1.0,
    }  # fmt: skip
    shared = referee.load({"type": "function_tests", "timeout": 5, "held_out": 0.5})
    both = {"fn_name": "add", "inputs": [[1, 2], [2, 2], [40, 2], [-5, 5]],
            "outputs": [3, 4, 42, 0]}  # fmt: skip
    s = referee.score(shared, [make(completion=special, reference=both)])[0]
    assert s.components["cases"] == 2.0 and s.components["held_out_cases"] == 2.0


def test_python_tests_hold_out_test_code() -> None:
    reward = referee.load({"type": "python_tests"})
    special = "```python\ndef add(a, b):\n    return {(1, 2): 3, (2, 2): 4}.get((a, b), 0)\n```"
    reference = {
        "entry_point": "add",
        "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n"
                "    assert candidate(2, 2) == 4\n",
        "held_out": "def check(candidate):\n    assert candidate(40, 2) == 42\n",
    }  # fmt: skip
    s = referee.score(reward, [make(completion=special, reference=reference)])[0]
    assert s.value == 1.0, s.reason
    assert s.components == {
        "passed": 2.0, "cases": 2.0, "held_out_passed": 0.0, "held_out_cases": 1.0,
    }  # fmt: skip
    assert s.reason == "2/2 cases passed; held out (not paid): 0/1 passed"
    honest = "```python\ndef add(a, b):\n    return a + b\n```"
    s = referee.score(reward, [make(completion=honest, reference=reference)])[0]
    assert s.components["held_out_passed"] == 1.0
