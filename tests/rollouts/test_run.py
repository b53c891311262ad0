"""`score_file`, the Python twin of ``referee score``: the same reading, the same rows."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import referee
from referee.rollouts import score_file
from tests.conftest import write_jsonl

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
