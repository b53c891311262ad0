"""`referee report`: a scored file, or rollouts scored first; the rows it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from referee.cli import main
from tests.support.cli import four_rollouts, run


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('{"id": "a", "completion": "x"}', "no reward key"),  # rollouts, not scored rows
        ('{"id": "a", "reward": "high"}', "field reward"),  # names the bad field
        ("{broken", "not valid JSON"),
    ],
)
def test_report_and_compare_say_which_scored_row_is_wrong(
    tmp_path: Path, line: str, why: str
) -> None:
    good = json.dumps({"id": "z", "line": 1, "reward": 1.0})
    scored = tmp_path / "scored.jsonl"
    scored.write_text(good + "\n" + line + "\n")
    for args in (["report", str(scored)], ["compare", str(scored), str(scored)]):
        code, output = run(*args)
        assert code == 1 and f"{scored}:2: not a scored row" in output and why in output


def test_report_scores_first_with_rollouts_and_spec_and_the_old_form_says_so(
    tmp_path: Path, spec: Path
) -> None:
    """`report --rollouts R --spec S` scores R; the old `report R --spec S` (the positional
    argument read as rollouts where --spec is given) still works, and says it is deprecated."""
    rollouts = four_rollouts(tmp_path)
    new, old = tmp_path / "new.json", tmp_path / "old.json"
    result = CliRunner().invoke(main, ["report", "--rollouts", str(rollouts), "--spec",
                                       str(spec), "--json", str(new)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "deprecated" not in result.output
    result = CliRunner().invoke(main, ["report", str(rollouts), "--spec", str(spec),
                                       "--json", str(old)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "deprecated: referee report ROLLOUTS --spec SPEC" in result.stderr
    assert json.loads(new.read_text()) == json.loads(old.read_text())
    assert json.loads(new.read_text())["rows"] == 4


@pytest.mark.parametrize(
    "args",
    [[], ["--spec", "S"], ["SCORED", "--spec", "S", "--rollouts", "R"]],
    ids=["nothing", "a spec without rollouts", "a scored file and a spec"],
)
def test_report_refuses_what_it_cannot_read_one_way(
    tmp_path: Path, spec: Path, args: list[str]
) -> None:
    rollouts = four_rollouts(tmp_path)
    paths = {"S": str(spec), "R": str(rollouts), "SCORED": str(rollouts)}
    code, output = run("report", *[paths.get(a, a) for a in args])
    assert code == 2 and "give SCORED" in output
