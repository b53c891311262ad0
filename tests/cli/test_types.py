"""`referee types`: every registered type, and where each runs."""

from __future__ import annotations

from tests.support.cli import run


def test_types_lists_builtins() -> None:
    code, output = run("types")
    assert code == 0 and "field_match" in output and "math_answer" in output


def test_types_says_where_each_runs() -> None:
    from referee.registry import lookup
    from referee.rewards import runs_where

    runs = {n: runs_where(lookup(n)) for n in ("json_valid", "reasoning_gym", "python_tests",
                                                   "rubric_judge", "final_answer")}  # fmt: skip
    assert runs == {"json_valid": "inline", "reasoning_gym": "process", "python_tests": "sandbox",
                    "rubric_judge": "event loop", "final_answer": "parts"}  # fmt: skip
    code, output = run("types")
    assert code == 0 and "runs" in output and "killed at the deadline" in output
