from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from referee.cli import main

SPEC = """
name: t
components:
  valid: {type: json_valid, weight: 0.5, gate: true}
  fields: {type: field_match, weight: 0.5}
"""


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    return path


def row(i: int, completion: str, reference: object = None) -> str:
    return json.dumps({"id": f"r{i}", "completion": completion, "reference": reference or {"a": 1}})


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def read_out(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


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


def test_demo_runs_on_bundled_data() -> None:
    code, output = run("demo")
    assert code == 0, output
    assert "extraction" in output and "math" in output
    assert "rel1-c" in output and "invented" in output
    # the agent demo: per-turn values, an unknown tool and a repeat caught
    assert "per-turn" in output and "0.3 0.15 0.3 0.3" in output
    assert "'get_forecast';" in output and "repeated" in output


def test_the_demos_next_commands_run_as_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["demo"], terminal_width=1000)
    assert result.exit_code == 0, result.output
    commands = re.findall(r"^  \d\. referee (.+)$", result.output, re.M)
    assert len(commands) == 3, result.output
    for command in commands:
        code, output = run(*shlex.split(command))
        assert code == 0, f"referee {command}: {output}"
    assert (tmp_path / "scored.jsonl").is_file() and (tmp_path / "view.html").is_file()


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


def _rollouts(tmp_path: Path) -> Path:
    path = tmp_path / "in.jsonl"
    rows = [row(0, '{"a": 1}'), row(1, '{"a": 2}'), row(2, "not json"), row(3, '{"a": 1}')]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_report_scores_first_with_rollouts_and_spec_and_the_old_form_says_so(
    tmp_path: Path, spec: Path
) -> None:
    """`report --rollouts R --spec S` scores R; the old `report R --spec S` (the positional
    argument read as rollouts where --spec is given) still works, and says it is deprecated."""
    rollouts = _rollouts(tmp_path)
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
    rollouts = _rollouts(tmp_path)
    paths = {"S": str(spec), "R": str(rollouts), "SCORED": str(rollouts)}
    code, output = run("report", *[paths.get(a, a) for a in args])
    assert code == 2 and "give SCORED" in output


def test_compare_takes_two_specs_by_flag_and_the_old_form_says_so(
    tmp_path: Path, spec: Path
) -> None:
    rollouts = _rollouts(tmp_path)
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


def test_rubrics_alone_lists_them_as_types_lists_types() -> None:
    code, output = run("rubrics")
    assert code == 0 and "agent-trajectory" in output
    assert run("rubrics", "list") == (code, output)  # the old spelling, kept


def test_check_shows_the_tree_and_what_rollouts_need(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "components:\n"
        "  answer: {type: math_answer, weight: 0.8}\n"
        "  judge: {type: json_valid, weight: 0.2, on_failure: omit}\n"
    )  # fmt: skip
    code, output = run("check", str(spec))
    assert code == 0, output
    assert "answer weight 0.8: math_answer (process, deadline 6s)" in output
    assert "judge weight 0.2, optional: json_valid (inline" in output
    assert "each rollout needs: reference (answer)" in output


def test_check_says_what_serve_would_refuse_and_fails_on_a_bad_spec(tmp_path: Path) -> None:
    code_spec = tmp_path / "code.yaml"
    code_spec.write_text("type: python_tests\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("type: math_answr\n")
    code, output = run("check", str(code_spec), str(bad))
    assert code == 1
    assert "referee serve` needs --trust-clients" in output
    assert f"{bad}: type: unknown reward type" in output


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
