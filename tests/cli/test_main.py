"""The `referee` group: its table of commands says what each command says, listing them
imports none, and every module of the package can be read in one sitting."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

import referee.cli
from referee.cli import COMMANDS, main

PACKAGE = Path(referee.cli.__file__).parent


def _command(name: str) -> click.Command:
    module, _, attribute = COMMANDS[name][0].partition(":")
    command = getattr(importlib.import_module(module), attribute)
    assert isinstance(command, click.Command), name
    return command


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_table_gives_each_commands_own_name_and_one_line_help(name: str) -> None:
    """The help `referee --help` lists without importing a command is the command's own (its
    docstring's first sentence), so the two cannot drift."""
    command = _command(name)
    assert command.name == name
    assert COMMANDS[name][1] == command.get_short_help_str(limit=10**6)


def test_every_verb_module_is_in_the_table() -> None:
    verbs = {p.stem for p in PACKAGE.glob("*.py") if not p.stem.startswith("_")}
    listed = {path.partition(":")[0].rpartition(".")[2] for path, _ in COMMANDS.values()}
    assert verbs == listed


def test_the_group_gives_the_real_commands() -> None:
    assert list(main.commands) == sorted(COMMANDS)
    assert main.commands["score"] is _command("score")


# In a fresh interpreter: `referee` imported, then what the command's help adds. The heavy
# units are what a verb needs (spec loading, the reward types, the readers, the reports, the
# servers); `import referee` itself is not the command's to make cheaper.
_IMPORTS = """
import json, sys
{setup}
before = set(sys.modules)
from click.testing import CliRunner
from referee.cli import main
result = CliRunner().invoke(main, {argv})
assert result.exit_code == 0, result.output
print(json.dumps(sorted(set(sys.modules) - before)))
"""

# The package's own __init__ not run: only what the command imports is imported.
_BARE = """
import types
bare = types.ModuleType("referee")
bare.__path__ = [{path!r}]
bare.__version__ = "0"
sys.modules["referee"] = bare
"""

_HEAVY = ("spec", "rewards", "registry", "rollouts", "report", "backends", "judges", "verifiers")


def _imported(argv: list[str], *, bare: bool = False) -> list[str]:
    setup = _BARE.format(path=str(PACKAGE.parent)) if bare else "import referee"
    code = _IMPORTS.format(setup=setup, argv=argv)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)  # fmt: skip
    imported: list[str] = json.loads(done.stdout.splitlines()[-1])
    return imported


def _verbs(modules: list[str]) -> set[str]:
    return {m for m in modules if m.startswith("referee.cli.") and m != "referee.cli._lazy"}


def test_help_imports_no_verb_no_rich_and_nothing_a_verb_needs() -> None:
    imported = _imported(["--help"])
    assert _verbs(imported) == set()
    assert not [m for m in imported if m.split(".")[0] == "rich"]
    assert not [
        m for m in imported if m.split(".")[0] == "referee" and m[8:].split(".")[0] in _HEAVY
    ]


def test_help_imports_no_reward_type_even_where_referee_would() -> None:
    """Whatever `import referee` imports: the command's help, alone, imports no referee
    module but the group's own two (so none of the reward types)."""
    imported = _imported(["--help"], bare=True)
    assert {m for m in imported if m.startswith("referee")} == {"referee.cli", "referee.cli._lazy"}


def test_a_verbs_help_imports_that_verb_alone() -> None:
    assert _verbs(_imported(["score", "--help"])) == {"referee.cli._common", "referee.cli.score"}


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.name)
def test_a_module_of_the_command_is_at_most_300_lines(path: Path) -> None:
    assert len(path.read_text().splitlines()) <= 300
