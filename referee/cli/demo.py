"""`referee demo`: the bundled specs on the bundled rollouts (`referee/data/demo/`, whose
``demos.yaml`` says what is shown, in which order, and what to run next)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import click
from pydantic import BaseModel, ConfigDict
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from referee._aio import run_sync
from referee._yaml import safe_load
from referee.cli._common import fmt, load_spec, summary_tables
from referee.rollouts.jsonl import RowOk
from referee.rollouts.readers import read_rollouts
from referee.rollouts.run import RowList, score_rows

__all__ = ["demo"]

_DATA = resources.files("referee") / "data" / "demo"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Demo(_Frozen):
    """One demo: the spec ``NAME.yaml`` on the rollouts ``NAME.jsonl``, and what it is about."""

    name: str
    about: str
    needs: str | None = None  # a local judge model (referee.judges.local)


class Next(_Frozen):
    """What the demo says last: `text`, with the files of the demo named `demo` filled in."""

    demo: str
    text: str


class Demos(_Frozen):
    """``demos.yaml``: the demos in the order they run, and what to run next."""

    demos: list[Demo]
    next: Next

    @classmethod
    def read(cls) -> Demos:
        """The bundled ``demos.yaml``."""
        path = _DATA / "demos.yaml"
        return cls.model_validate(safe_load(path.read_text(), str(path)))


@click.command()
@click.option("--width", default=0, help="Cut each reason to this many characters (0: whole).")
def demo(width: int) -> None:
    """Score the bundled rollouts with the bundled specs and print the results."""
    console = Console()
    demos = Demos.read()
    for each in demos.demos:
        _show(console, each, width)
    with resources.as_file(_DATA) as folder:
        _next(console, demos.next, Path(folder))


def _show(console: Console, one: Demo, width: int) -> None:
    """One demo's scores, a row per rollout, and its summary."""
    name = one.name
    if one.needs is not None:
        from referee.judges.local import missing

        install = missing(one.needs)
        if install is not None:
            console.rule(f"[bold]{escape(name)}[/bold]: {escape(one.about)}")
            console.print(f"Not installed here; to run it: {install}", highlight=False,
                          soft_wrap=True)  # fmt: skip
            return
    with resources.as_file(_DATA / f"{name}.yaml") as spec_path:
        reward = load_spec(str(spec_path))
    rows = RowList()
    with resources.as_file(_DATA / f"{name}.jsonl") as rollouts_path:
        inputs = list(read_rollouts(rollouts_path, format="canonical"))
        run = run_sync(score_rows(inputs, reward, rows))
    notes = {
        r.rollout.id: str(r.rollout.metadata.get("note", ""))
        for r in inputs
        if isinstance(r, RowOk)
    }
    console.rule(f"[bold]{escape(name)}[/bold]: {escape(one.about)}")
    table = Table(show_lines=False)
    table.add_column("id")
    table.add_column("attempt")
    table.add_column("reward", justify="right")
    stepped = any(row.steps for row in rows)
    if stepped:
        table.add_column("per-turn")
    table.add_column("reason", overflow="fold")
    for row in rows:
        reason = row.reason or ""
        if 0 < width < len(reason):
            reason = reason[: width - 3] + "..."
        cells = [str(row.id), notes.get(str(row.id), ""), fmt(row.reward)]
        if stepped:
            cells.append(" ".join(fmt(v) for v in row.steps or ()))
        table.add_row(*cells, reason)
    console.print(table)
    for summary_table in summary_tables(run.summary):
        console.print(summary_table)


def _next(console: Console, next_: Next, folder: Path) -> None:
    """Where the demo's files are and what to run next, with those files."""
    spec, rollouts = folder / f"{next_.demo}.yaml", folder / f"{next_.demo}.jsonl"
    console.rule("[bold]next[/bold]")
    text = next_.text.format(folder=folder, spec=spec, rollouts=rollouts)
    console.print(text, highlight=False, soft_wrap=True)
