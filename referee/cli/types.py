"""`referee types`: the reward types a spec can use, or one type's reference."""

from __future__ import annotations

import difflib

import click
from rich.console import Console
from rich.markdown import Markdown
from rich.table import Table

from referee.registry import registered_types

__all__ = ["types_"]


@click.command("types")
@click.argument("type_name", metavar="[NAME]", required=False)
def types_(type_name: str | None) -> None:
    """List the reward types a spec can use (built-in and plugins); with NAME, that type's
    reference: its options (type, default, meaning) and an example spec, as the docs site's
    page for it says."""
    from referee.spec.reference import type_reference

    console = Console()
    if type_name is not None:
        try:
            reference = type_reference(type_name)
        except KeyError:
            close = difflib.get_close_matches(type_name, registered_types(), n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise click.BadParameter(
                f"no reward type {type_name!r}.{hint} `referee types` lists them.",
                param_hint="NAME",
            ) from None
        console.print(Markdown(reference.markdown()))
        return
    table = Table()
    table.add_column("type")
    table.add_column("runs")
    table.add_column("what it does")
    for name in registered_types():
        try:
            ref = type_reference(name)
        except Exception as exc:  # a plugin whose options have no schema: list it, say why
            table.add_row(name, "?", f"(no reference: {type(exc).__name__}: {exc})")
            continue
        table.add_row(name, ref.runs, ref.summary)
    console.print(table)
    console.print(
        "runs: inline (in the caller's thread: its cost is bounded), process (a worker process, "
        "killed at the deadline), sandbox (the code in the sandbox, graded on threads), event "
        "loop (it waits: a judge, a model), parts (where its inner reward runs). A check "
        "type takes run_in: inline | thread | process in a spec. `referee types NAME` shows "
        "a type's options."
    )
