"""`referee score`: one row per rollout, in order; hostile files; a pipe closed early."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import read_out, row, run


def test_one_output_row_per_input_row_in_order(tmp_path: Path, spec: Path) -> None:
    lines = [row(i, json.dumps({"a": i % 2})) for i in range(600)]  # crosses batch boundaries
    lines.insert(100, "{broken")
    lines.insert(300, "")  # blank lines are not rows
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    code, output = run("score", str(src), "--spec", str(spec), "-o", str(out))
    assert code == 0, output
    rows = read_out(out)
    assert len(rows) == 601
    assert [r["line"] for r in rows] == [i + 1 for i, line in enumerate(lines) if line]
    bad = rows[100]
    assert bad["reward"] is None and bad["failure"]["type"] == "invalid_input"  # type: ignore[index]
    assert "line 101" in bad["failure"]["message"]  # type: ignore[index]
    assert rows[0] == {
        "id": "r0", "line": 1, "group": None, "reward": 0.5,
        "components": {"valid": 1.0, "fields": 0.0, "fields.a": 0.0},
        "reason": "valid: valid JSON; fields: a: 0 != 1", "failure": None,
    }  # fmt: skip
    assert "601 rows" in output and "invalid_input" in output  # the summary table


def test_stdout_when_no_output_file(tmp_path: Path, spec: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(row(1, '{"a": 1}'))  # no trailing newline
    proc = subprocess.run(
        [sys.executable, "-m", "referee.cli", "score", str(src), "--spec", str(spec)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    [out] = [json.loads(line) for line in proc.stdout.splitlines()]
    assert out["reward"] == 1.0
    assert "1 rows" in proc.stderr  # the summary goes to stderr, rows to stdout


def test_spec_error_is_reported_with_path(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("components:\n  a: {type: json_valdi}\n")
    src = tmp_path / "in.jsonl"
    src.write_text(row(1, "{}"))
    code, output = run("score", str(src), "--spec", str(bad))
    assert code == 1
    assert "components.a.type: unknown reward type" in output and "json_valid" in output


# --- hostile inputs: never a crash, never a lost row ----------------------------------------


def hostile_inputs() -> list[tuple[str, bytes, int]]:
    deep = "[" * 100_000 + "]" * 100_000
    return [
        ("non-UTF-8 bytes", b'{"completion": "\xff\xfe"}\n' + row(2, "{}").encode(), 2),
        ("10 MB completion", (row(1, "x" * 10_000_000) + "\n").encode(), 1),
        ("100,000-deep JSON row", (deep + "\n" + row(2, "{}")).encode(), 2),
        ("100,000-deep JSON completion", (row(1, deep) + "\n").encode(), 1),
        (
            "NaN and Infinity literals",
            b'{"completion": "{\\"a\\": NaN}", "reference": {"a": Infinity}}\n',
            1,
        ),
        # (with a reference: a file where no row has one stops before scoring)
        (
            "duplicate keys",
            b'{"completion": "{\\"a\\": 1, \\"a\\": 2}", "completion": "{}",'
            b' "reference": {"a": 1}}\n',
            1,
        ),
        ("empty file", b"", 0),
        ("no trailing newline", row(1, "{}").encode(), 1),
    ]


@pytest.mark.parametrize(
    ("label", "data", "rows"), hostile_inputs(), ids=[h[0] for h in hostile_inputs()]
)
def test_hostile_inputs(tmp_path: Path, spec: Path, label: str, data: bytes, rows: int) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(data)
    out = tmp_path / "out.jsonl"
    code, output = run("score", str(src), "--spec", str(spec), "-o", str(out))
    assert code == 0, output
    scored = read_out(out)
    assert len(scored) == rows
    for r in scored:
        assert r["reward"] is not None or r["failure"] is not None  # never a silent value


def test_score_into_a_pipe_closed_early_stops_quietly(tmp_path: Path) -> None:
    """`referee score ... | head -1` printed "Error: [Errno 32] Broken pipe"."""
    rows = tmp_path / "many.jsonl"
    line = '{"id": "%d", "completion": "x", "reference": "x"}\n'
    rows.write_text("".join(line % i for i in range(20_000)))
    spec = tmp_path / "s.yaml"
    spec.write_text("type: exact_match\n")
    command = [sys.executable, "-m", "referee", "score", str(rows), "--spec", str(spec), "-q"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b'{"id": "0"')
    proc.stdout.close()  # the reader goes away, as head does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1
    assert "Broken pipe" not in err and "Traceback" not in err, err


def test_every_row_failing_exits_1_and_says_why(tmp_path: Path) -> None:
    """A Python reward that raises on every row (issue 46): the rows are written, the reasons
    are on the terminal with their counts, and the status is 1, not 0; where only some rows
    fail it is 0 and the count is said."""
    (tmp_path / "r.py").write_text(
        "def boom(rollout):\n"
        "    if rollout.completion != 'ok':\n"
        "        raise ValueError('no answer here')\n"
        "    return 1.0\n"
    )
    spec = tmp_path / "s.yaml"
    spec.write_text("type: python\nfunction: r.py:boom\n")
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"prompt": "p", "completion": c}) + "\n" for c in "abc"))
    out = tmp_path / "out.jsonl"
    code, output = run("score", str(src), "--spec", str(spec), "-o", str(out))
    assert code == 1 and len(read_out(out)) == 3
    assert "every row failed (3)" in output and "3 x error:" in output
    assert "no answer here" in output and "grouped by their prompt" in output
    code, output = run("score", str(src), "--spec", str(spec), "-o", str(out), "-q")
    assert code == 1 and "every row failed" in output  # said even when quiet
    src.write_text(src.read_text() + json.dumps({"prompt": "p", "completion": "ok"}) + "\n")
    code, output = run("score", str(src), "--spec", str(spec), "-o", str(out))
    assert code == 0 and "3 of 4 rows failed (most of them)" in output
