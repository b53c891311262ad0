"""docs/guides/python-rewards.md runs as written: its files (the fenced blocks titled with a
file name) go into an empty folder, the page's `referee score` command writes what the page
shows, and its Python prints what its comments say."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "guides" / "python-rewards.md"
VENV_BIN = Path(sys.executable).parent


def blocks() -> list[tuple[str, str]]:
    """(info string, content) of every fenced block on the page, in order."""
    tokens = MarkdownIt("commonmark").parse(PAGE.read_text(encoding="utf-8"))
    return [(t.info.strip(), t.content) for t in tokens if t.type == "fence"]


def titled(name: str) -> str:
    """The first block titled `name` (``` ```yaml title="spec.yaml" ```)."""
    for info, content in blocks():
        match = re.search(r'title="([^"]+)"', info)
        if match and match.group(1) == name:
            return content
    raise AssertionError(f"the page has no block titled {name!r}")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """The page's files, written as a reader would save them."""
    for name in ("rewards.py", "spec.yaml", "rollouts.jsonl", "try_it.py"):
        (tmp_path / name).write_text(titled(name), encoding="utf-8")
    return tmp_path


def test_referee_score_writes_what_the_page_shows(folder: Path) -> None:
    commands = [
        line for info, content in blocks() if info == "bash"
        for line in content.splitlines() if line.startswith("referee score ")
    ]  # fmt: skip
    command = shlex.split(commands[0])  # the first: the one the example runs
    assert "--engine" not in command
    done = subprocess.run(
        [str(VENV_BIN / "referee"), *command[1:]], cwd=folder, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    written = [json.loads(line) for line in (folder / "scored.jsonl").read_text().splitlines()]
    shown = [json.loads(line) for line in titled("scored.jsonl").splitlines()]
    assert written == shown


def test_the_python_prints_what_its_comments_say(folder: Path) -> None:
    source = titled("try_it.py")
    expected = re.findall(r"^print\(.*\)\s+#\s*(.+)$", source, re.MULTILINE)
    assert expected, "try_it.py says what it prints in comments"
    done = subprocess.run(
        [sys.executable, "try_it.py"], cwd=folder, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == expected


def test_the_spec_on_the_page_names_the_files_on_the_page() -> None:
    spec = titled("spec.yaml")
    named = set(re.findall(r"function: ([\w./-]+\.py):", spec))
    assert named == {"rewards.py"}
