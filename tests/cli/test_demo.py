"""`referee demo`: the bundled specs on the bundled rollouts, and its next commands."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from referee.cli import main
from tests.support.cli import run


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


def test_the_demos_are_those_demos_yaml_lists_in_its_order() -> None:
    """The demo's content is data: each demo of ``demos.yaml`` has its spec and its rollouts
    beside it, and is shown under its rule, in the file's order, before the next steps."""
    from referee.cli.demo import _DATA, Demos

    demos = Demos.read()
    names = [d.name for d in demos.demos]
    assert names == ["extraction", "math", "agent", "judge"]
    for name in names:
        assert (_DATA / f"{name}.yaml").is_file() and (_DATA / f"{name}.jsonl").is_file()
    code, output = run("demo")
    assert code == 0, output
    assert re.findall(r"^─+ (\w+):? ", output, re.M) == [*names, "next"]
    assert f"extraction: {demos.demos[0].about}" in output
    first = demos.next.text.splitlines()[0].partition("{folder}")[0]
    assert first == "The demo's specs and rollouts are in " and first in output


def test_the_judge_demo_runs_where_the_local_judge_is_installed_and_says_how_where_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from referee.judges import local

    code, output = run("demo")
    assert code == 0, output
    if local.missing("smollm2") is None:  # installed (make install): it ran on real tokens
        assert "paris-d" in output and "Not installed here" not in output
    monkeypatch.setattr(local, "missing", lambda name: "pip install the-thing")
    result = CliRunner().invoke(main, ["demo"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "judge: an LLM judge with no key" in result.output
    assert "Not installed here; to run it: pip install the-thing" in result.output
