"""`referee score --resume`: killed at any point, the same command finishes the job, and every
input row is in the output exactly once, in order."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

SPEC = "name: m\ntype: math_answer\n"


def make_input(path: Path, n: int) -> Path:
    rng = random.Random(0)
    lines = []
    for i in range(n):
        a, b = rng.randrange(100), rng.randrange(100)
        answer = a + b if i % 3 else a + b + 1
        lines.append(
            json.dumps(
                {
                    "id": str(i),
                    "prompt": f"{a}+{b}",
                    "completion": f"\\boxed{{{answer}}}",
                    "reference": str(a + b),
                }
            )
        )
        if i % 500 == 250:
            lines.append("{broken json")  # error rows resume like any other
    path.write_text("\n".join(lines) + "\n")
    return path


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "referee.cli", "score", *args, "-q", "--batch-size", "50"]


def interrupted(
    command: list[str], partial: Path, past: int, sig: signal.Signals, **popen: Any
) -> subprocess.Popen[Any]:
    """Start `command` and send it `sig` once its partial output holds more than `past`
    bytes."""
    proc = subprocess.Popen(command, **popen)
    while not (partial.exists() and partial.stat().st_size > past):
        time.sleep(0.02)
        assert proc.poll() is None, "finished before it could be interrupted"
    proc.send_signal(sig)
    return proc


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str]]:
    """The input, the spec and an uninterrupted run's output: made once for the module (the
    tests only read them; each writes its own output in its own folder)."""
    root = tmp_path_factory.mktemp("resume")
    source = make_input(root / "in.jsonl", 4000)
    spec = root / "spec.yaml"
    spec.write_text(SPEC)
    reference = root / "reference.jsonl"
    subprocess.run(cli(str(source), "--spec", str(spec), "-o", str(reference)), check=True)
    return source, spec, reference.read_text().splitlines()


def test_killed_runs_resume_to_the_same_output(
    tmp_path: Path, setup: tuple[Path, Path, list[str]]
) -> None:
    source, spec, want = setup
    out = tmp_path / "out.jsonl"
    command = cli(str(source), "--spec", str(spec), "-o", str(out), "--resume")
    partial = out.with_name("out.jsonl.partial")
    total = sum(len(line) + 1 for line in want)
    rng = random.Random(1)
    kills = 0
    # Kill at random points of progress (a share of the final output written, plus a random
    # delay so some kills land mid-batch), several times, then let a last run finish.
    for target in sorted(rng.uniform(0.05, 0.9) for _ in range(4)):
        proc = subprocess.Popen(command)
        while proc.poll() is None and (
            not partial.exists() or partial.stat().st_size < target * total
        ):
            time.sleep(0.005)
        time.sleep(rng.uniform(0, 0.05))
        if proc.poll() is not None:
            continue
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
        assert not out.exists()  # never a half-written output
    subprocess.run(command, check=True)
    assert kills >= 3
    got = out.read_text().splitlines()
    assert got == want  # every row once, in order, scored the same
    assert not out.with_name("out.jsonl.partial").exists()


def test_a_torn_last_line_is_cut_and_rewritten(
    tmp_path: Path, setup: tuple[Path, Path, list[str]]
) -> None:
    source, spec, want = setup
    out = tmp_path / "out.jsonl"
    partial = out.with_name("out.jsonl.partial")
    meta = out.with_name("out.jsonl.partial.json")
    command = cli(str(source), "--spec", str(spec), "-o", str(out), "--resume")
    interrupted(command, partial, 20_000, signal.SIGKILL).wait()
    assert meta.exists()
    with open(partial, "ab") as f:
        f.write(b'{"id": "half a li')  # as if killed mid-write
    subprocess.run(command, check=True)
    assert out.read_text().splitlines() == want


def test_ctrl_c_leaves_a_resumable_state(
    tmp_path: Path, setup: tuple[Path, Path, list[str]]
) -> None:
    source, spec, want = setup
    out = tmp_path / "out.jsonl"
    partial = out.with_name("out.jsonl.partial")
    command = cli(str(source), "--spec", str(spec), "-o", str(out))
    proc = interrupted(command, partial, 0, signal.SIGINT, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "--resume" in err
    done = len(partial.read_text().splitlines())
    subprocess.run([*command, "--resume"], check=True, capture_output=True, text=True)
    assert out.read_text().splitlines() == want
    assert done > 0


def test_resume_refuses_a_partial_run_of_another_spec(
    tmp_path: Path, setup: tuple[Path, Path, list[str]]
) -> None:
    source, spec, _ = setup
    out = tmp_path / "out.jsonl"
    out.with_name("out.jsonl.partial").write_text("")
    out.with_name("out.jsonl.partial.json").write_text(json.dumps({"input": "elsewhere"}))
    run = subprocess.run(cli(str(source), "--spec", str(spec), "-o", str(out), "--resume"),
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode != 0 and "partial run of something else" in run.stderr
    # Without --resume, it starts over.
    subprocess.run(cli(str(source), "--spec", str(spec), "-o", str(out)), check=True)
    assert out.exists()


def test_resume_needs_an_output_file(setup: tuple[Path, Path, list[str]]) -> None:
    source, spec, _ = setup
    run = subprocess.run(cli(str(source), "--spec", str(spec), "--resume"),
                         capture_output=True, text=True, env={**os.environ})  # fmt: skip
    assert run.returncode == 2 and "--resume needs --output" in run.stderr
