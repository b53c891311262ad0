"""`score_file`, the Python twin of ``referee score``: the same reading, the same rows."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import referee
from referee.rollouts import score_file
from tests.support.rollouts import write_jsonl

SPEC = {"type": "exact_match"}


def test_score_file_reads_as_the_cli_does(tmp_path: Path) -> None:
    rows = [
        {"id": "a", "completion": "4", "reference": "4", "source": "gsm8k"},  # an extra column
        {"id": "b", "completion": "5", "reference": "4"},
        {"id": "c", "reference": "4"},  # no completion: an error row, not dropped
    ]
    path = tmp_path / "in.jsonl"
    write_jsonl(path, rows)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))

    out = io.StringIO()
    run = score_file(path, referee.load(SPEC), out)
    ours = [json.loads(line) for line in out.getvalue().splitlines()]
    cli_out = tmp_path / "out.jsonl"
    subprocess.run([sys.executable, "-m", "referee", "score", str(path), "--spec", str(spec),
                    "-o", str(cli_out)], check=False, capture_output=True)  # fmt: skip
    theirs = [json.loads(line) for line in cli_out.read_text().splitlines()]

    assert [r["reward"] for r in ours] == [1.0, 0.0, None]
    assert run.unreadable == 1 and "completion" in ours[2]["failure"]["message"]
    assert ours == theirs


def test_score_to_path_never_writes_through_a_link(tmp_path: Path) -> None:
    # Library callers get the check the CLI makes: no partial file, and no output, through
    # a symbolic link planted at any of the three paths.
    import pytest

    from referee.rollouts.jsonl import read_jsonl
    from referee.rollouts.run import score_to_path

    path = tmp_path / "in.jsonl"
    write_jsonl(path, [{"id": "a", "completion": "4", "reference": "4"}])
    outside = tmp_path / "outside.txt"
    for planted in ("out.jsonl", "out.jsonl.partial", "out.jsonl.partial.json"):
        outside.write_text("keep me")
        link = tmp_path / planted
        link.symlink_to(outside)
        with pytest.raises(OSError, match="symbolic link"):
            score_to_path(path, read_jsonl(path), referee.load(SPEC), tmp_path / "out.jsonl",
                          spec_text="{}")  # fmt: skip
        assert outside.read_text() == "keep me"
        link.unlink()


def test_the_summary_counts_failure_reasons_and_prompt_groups(tmp_path: Path) -> None:
    """What `referee score` prints when rows fail (issue 46): each distinct reason with its
    count (an unreadable row's line number dropped, so one cause counts once), whether every
    row failed, and how many rows were grouped by their prompt."""
    rows = [{"prompt": "p", "reference": "4"} for _ in range(3)]  # no completion
    rows.append({"prompt": "p", "completion": "4", "reference": "4"})
    path = write_jsonl(tmp_path / "in.jsonl", rows)
    summary = score_file(path, referee.load(SPEC), io.StringIO(), format="canonical").summary
    [(reason, count)] = summary.reasons.items()
    assert count == 3 and reason.startswith("invalid_input: ") and "line" not in reason[:20]
    assert summary.failed == 3 and not summary.all_failed and summary.prompt_grouped == 1
    path = write_jsonl(tmp_path / "bad.jsonl", rows[:3])
    run = score_file(path, referee.load(SPEC), io.StringIO(), format="canonical")
    assert run.summary.all_failed
