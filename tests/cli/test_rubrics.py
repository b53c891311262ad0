"""`referee rubrics`: the list, under its old spelling too."""

from __future__ import annotations

from tests.support.cli import run


def test_rubrics_alone_lists_them_as_types_lists_types() -> None:
    code, output = run("rubrics")
    assert code == 0 and "agent-trajectory" in output
    assert run("rubrics", "list") == (code, output)  # the old spelling, kept
