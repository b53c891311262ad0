"""`referee compare`: two specs by flag, and the old form."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from referee.cli import main
from tests.support.cli import four_rollouts, run


def test_compare_takes_two_specs_by_flag_and_the_old_form_says_so(
    tmp_path: Path, spec: Path
) -> None:
    rollouts = four_rollouts(tmp_path)
    other = tmp_path / "other.yaml"
    other.write_text("type: json_valid\n")
    new, old = tmp_path / "new.json", tmp_path / "old.json"
    args = ["--spec", str(spec), "--spec", str(other), "--rollouts", str(rollouts)]
    result = CliRunner().invoke(main, ["compare", *args, "--json", str(new)])
    assert result.exit_code == 0, result.output
    assert "deprecated" not in result.output
    result = CliRunner().invoke(main, ["compare", str(spec), str(other), "--rollouts",
                                       str(rollouts), "--json", str(old)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "deprecated: referee compare A B --rollouts R" in result.stderr
    assert json.loads(new.read_text()) == json.loads(old.read_text())
    code, output = run("compare", "--spec", str(spec), "--rollouts", str(rollouts))
    assert code == 2 and "give two scored files" in output
