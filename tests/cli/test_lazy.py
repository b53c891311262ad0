"""`LazyGroup`: a command is imported when it is looked up, and the help that lists commands
not yet imported is the help click would print with them imported."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from referee.cli._lazy import LazyCommands, LazyGroup

# Three commands: a docstring of one sentence, of several, and one click shortens mid-word.
VERBS = '''
import click

@click.command()
def alpha() -> None:
    """Do the first thing."""

@click.command("beta-two")
@click.option("--n", default=1)
def beta(n: int) -> None:
    """Check each SPEC and say what it builds: the tree, what a rollout must carry, and what a
    server would refuse. Exit status 1 when one does not load.

    More, in a second paragraph that is never listed."""
    click.echo(f"beta {n}")

@click.command()
def gamma() -> None:
    """Serve a reward over HTTP: /score, /get_reward (OpenRLHF), NeMo Gym's /verify and
    /health, with a-very-long-hyphenated-word-that-click-does-not-split in it."""

not_a_command = 42
'''


@pytest.fixture
def verbs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A module of commands, importable, not imported yet; its name."""
    name = f"lazy_verbs_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(VERBS))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return name


def _groups(module: str) -> tuple[click.Group, click.Group]:
    """The same three commands in a lazy group and, imported, in a plain one."""
    names = {"alpha": "alpha", "beta-two": "beta", "gamma": "gamma"}
    lazy = {name: f"{module}:{attr}" for name, attr in names.items()}
    plain = click.Group("plain", help="The tool.")
    mod = __import__(module)
    for name, attr in names.items():
        plain.add_command(getattr(mod, attr), name)
    shorts = {n: plain.commands[n].get_short_help_str(limit=10**6) for n in names}
    del sys.modules[module]
    group = LazyGroup("plain", help="The tool.", lazy={n: (lazy[n], shorts[n]) for n in names})
    return group, plain


def test_a_command_is_imported_on_lookup_and_listing_imports_none(verbs: str) -> None:
    commands = LazyCommands({"alpha": f"{verbs}:alpha", "beta-two": f"{verbs}:beta"})
    assert list(commands) == ["alpha", "beta-two"] and len(commands) == 2
    assert "alpha" in commands and "zeta" not in commands
    assert verbs not in sys.modules and not commands.loaded("alpha")
    assert commands["alpha"].name == "alpha"
    assert verbs in sys.modules and commands.loaded("alpha") and not commands.loaded("beta-two")


def test_a_path_that_is_not_a_command_says_so(verbs: str) -> None:
    commands = LazyCommands({"x": f"{verbs}:not_a_command"})
    with pytest.raises(TypeError, match="not_a_command' is 42, not a click command"):
        commands["x"]
    with pytest.raises(KeyError):
        commands["y"]


def test_commands_can_be_added_and_removed_as_in_a_dict(verbs: str) -> None:
    commands = LazyCommands({"alpha": f"{verbs}:alpha"})
    commands["other"] = click.Command("other")
    assert list(commands) == ["alpha", "other"] and commands.loaded("other")
    del commands["alpha"]
    assert list(commands) == ["other"]
    with pytest.raises(KeyError):
        del commands["alpha"]


@pytest.mark.parametrize("width", [30, 50, 72, 80, 100, 140, 250])
def test_the_help_is_the_one_click_prints_with_the_commands_imported(
    verbs: str, width: int
) -> None:
    group, plain = _groups(verbs)
    lazy_help = CliRunner().invoke(group, ["--help"], terminal_width=width).output
    assert verbs not in sys.modules  # the help imported nothing
    assert lazy_help == CliRunner().invoke(plain, ["--help"], terminal_width=width).output


def test_a_command_runs_through_the_group_and_an_unknown_one_is_named(verbs: str) -> None:
    group, _ = _groups(verbs)
    assert CliRunner().invoke(group, ["beta-two", "--n", "3"]).output == "beta 3\n"
    result = CliRunner().invoke(group, ["alpah"])
    assert result.exit_code == 2 and "Did you mean 'alpha'?" in result.output
    # once imported, a command is listed from itself: the same help
    assert CliRunner().invoke(group, ["--help"]).output.count("beta-two") == 1
