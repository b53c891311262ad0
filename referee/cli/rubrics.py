"""`referee rubrics`: the rubrics judges grade with, or one rubric criterion by criterion."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from referee.errors import RefereeError

__all__ = ["rubrics"]


@click.group(invoke_without_command=True)
@click.pass_context
def rubrics(ctx: click.Context) -> None:
    """List the rubrics judges grade with (as `referee types` lists reward types); `referee
    rubrics show NAME` shows one."""
    if ctx.invoked_subcommand is None:
        _list_rubrics()


@rubrics.command("list", hidden=True)
def rubrics_list() -> None:
    """List the shipped rubrics (what `referee rubrics` alone does)."""
    _list_rubrics()


def _list_rubrics() -> None:
    from referee.judges.rubric import available_rubrics, load_rubric

    table = Table()
    for column in ("name", "version", "criteria", "reference", "what it grades"):
        table.add_column(column)
    for name in available_rubrics():
        rubric = load_rubric(name)
        table.add_row(
            name,
            rubric.version,
            str(len(rubric.criteria)),
            "required" if rubric.requires_reference else "-",
            rubric.description,
        )
    Console().print(table)


@rubrics.command("show")
@click.argument("rubric")
def rubrics_show(rubric: str) -> None:
    """Show RUBRIC (a shipped rubric's name, or a rubric file) criterion by criterion."""
    from referee.judges.rubric import load_rubric

    try:
        loaded = load_rubric(rubric)
    except RefereeError as exc:
        raise click.ClickException(str(exc)) from None
    console = Console()
    reference = "a reference answer is required" if loaded.requires_reference else "no reference"
    console.print(
        f"[bold]{loaded.name}[/bold] v{loaded.version}: {loaded.description} ({reference})"
    )
    table = Table()
    for column in ("criterion", "weight", "graded as", "description"):
        table.add_column(column)
    for c in loaded.criteria:
        kind = f"{c.scale.min}..{c.scale.max}" if c.scale else "pass/fail"
        table.add_row(c.id, f"{c.weight:g}", kind, c.description)
    console.print(table)
