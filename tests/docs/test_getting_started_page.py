"""docs/getting-started.md run as a new user runs it: its files written as the page shows them,
each ``$`` command of its console blocks run in a shell in an empty folder, and every line of
output the page prints found in what the command printed, in order (a line ``...`` stands for
lines the page trimmed, as it says). The page's training part (examples/learn, minutes of
GRPO) has its own test in tests/models/test_pretrained.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PAGE = Path(__file__).parents[2] / "docs" / "getting-started.md"
_BLOCK = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.M | re.S)


def _blocks(kind: str, text: str) -> list[str]:
    return [body for lang, body in _BLOCK.findall(text) if lang == kind]


def _until(heading: str) -> str:
    text = PAGE.read_text()
    return text[: text.index(heading)]


def sessions() -> list[tuple[str, list[str]]]:
    """Each ``$`` command of the page before its training part, with the output it shows."""
    out: list[tuple[str, list[str]]] = []
    for block in _blocks("console", _until("## A real model learns from it")):
        for line in block.splitlines():
            if line.startswith("$ "):
                out.append((line[2:], []))
            elif out:
                out[-1][1].append(line)
    return out


def _matches(shown: list[str], printed: str, folder: Path) -> list[str]:
    """The shown lines not found in `printed`, in order (``...`` skips any lines)."""
    lines = [line.rstrip() for line in printed.replace(str(folder), "...").splitlines()]
    at, missing = 0, []
    for want in (line.rstrip() for line in shown):
        if want == "..." or not want:
            continue
        want = re.sub(r"\.\.\./referee/data/demo", "...", want)
        for i in range(at, len(lines)):
            if lines[i] == want or (want.startswith("The demo's") and lines[i].startswith(
                    want.split("...")[0])):  # fmt: skip
                at = i + 1
                break
        else:
            missing.append(want)
    return missing


def test_the_page_runs_as_printed(tmp_path: Path) -> None:
    text = _until("## A real model learns from it")
    spec = next(b for b in _blocks("yaml", text) if b.startswith("# spec.yaml"))
    (tmp_path / "spec.yaml").write_text(spec)
    rollouts = next(b for b in _blocks("json", text) if '"q1-a"' in b)
    (tmp_path / "rollouts.jsonl").write_text(rollouts)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "COLUMNS": "80", "NO_COLOR": "1", "TERM": "dumb"}  # fmt: skip
    commands = sessions()
    assert [c for c, _ in commands][:3] == ["referee --version", "referee demo",
                                            "referee check spec.yaml"]  # fmt: skip
    status = 0
    for command, shown in commands:
        if command == "echo $?":  # each command runs in a shell of its own: the last status
            printed = str(status)
        else:
            done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, text=True,
                                  capture_output=True, timeout=600, check=False)  # fmt: skip
            printed, status = done.stdout + done.stderr, done.returncode
        missing = _matches(shown, printed, tmp_path)
        assert not missing, f"$ {command}\nnot printed: {missing}\nprinted:\n{printed[-3000:]}"
    assert (tmp_path / "report.html").is_file() and (tmp_path / "view.html").is_file()


@pytest.mark.parametrize("name", ["spec.yaml", "rollouts.jsonl"])
def test_the_files_the_commands_name_are_on_the_page(name: str) -> None:
    commands = " ".join(c for c, _ in sessions())
    assert name in commands
