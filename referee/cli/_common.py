"""What several verbs share: loading a spec as a usage error, writing an output file, the
options that say how to read rollouts, and rendering a number or a run's summary."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from referee.errors import RefereeError

if TYPE_CHECKING:
    from rich.table import Table

    from referee.backends.openrlhf import EndMarkers
    from referee.reward import Reward
    from referee.rollouts.summary import Summary

__all__ = [
    "bad_option",
    "deprecated",
    "end_markers",
    "fmt",
    "load_spec",
    "pct",
    "read_options",
    "scored_or_spec",
    "summary_tables",
    "write",
]

F = TypeVar("F", bound=Callable[..., None])


def fmt(value: float | None) -> str:
    """A value as the tables print it: 4 significant digits, ``-`` for none."""
    return "-" if value is None else f"{value:.4g}"


def pct(value: float | None) -> str:
    """A share as a percentage (``100.0%``), ``-`` for none."""
    return "-" if value is None else f"{100 * value:.1f}%"


def load_spec(spec: str) -> Reward:
    """The reward of a spec file, or the error that names the file and the key."""
    from referee.spec import load

    try:
        return load(spec)
    except RefereeError as exc:
        raise click.ClickException(str(exc)) from None


FORMAT_HELP = "The rows' shape; detected from the first row when not given."
MAP_HELP = (
    "Set a rollout field from a dotted path into the row (repeatable), e.g. "
    "reference=reward_model.ground_truth, completion=messages.-1.content, group=prompt_id."
)


def read_options(command: F) -> F:
    """``--format`` and ``--map``: how the rows of a rollouts file are read."""
    from referee.rollouts.readers import FORMATS

    command = click.option(
        "--map", "-m", "maps", multiple=True, metavar="FIELD=COLUMN", help=MAP_HELP
    )(command)
    return click.option("--format", "-f", "format_", type=click.Choice(FORMATS), help=FORMAT_HELP)(
        command
    )


def deprecated(old: str, new: str) -> None:
    """Say on stderr that a command line's form is deprecated, and its replacement."""
    click.echo(f"referee: deprecated: {old} (the same meaning: {new}); it will stop working",
               err=True)  # fmt: skip


def write(path: Path | str, text: str) -> None:
    """Write an output file only where a regular file is or nothing is yet."""
    from referee.rollouts.output import write_output

    try:
        write_output(path, text)
    except OSError as exc:
        raise click.ClickException(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None


def scored_or_spec(scored: Path | None, spec: str | None, rollouts: Path | None) -> None:
    """The usage check of a command that reads a scored file or scores --rollouts first."""
    if spec is not None and scored is not None:
        raise click.UsageError("give SCORED (a scored file) or --spec with --rollouts, not both")
    if scored is None and (spec is None or rollouts is None):
        raise click.UsageError("give SCORED (a file referee score wrote), or --rollouts and --spec")


def bad_option(message: str, option: str | None) -> click.UsageError:
    """A usage error naming the option at fault, or the command line where none is."""
    if option is None:
        return click.UsageError(message)
    return click.BadParameter(message, param_hint=option)


def end_markers(end_marker: tuple[str, ...], tokenizer: str | None, strip: bool) -> EndMarkers:
    """What OpenRLHF's marker options ask for, or a usage error that says why not."""
    from referee.backends.openrlhf import BadMarkers, choose_markers

    try:
        return choose_markers(end_marker, tokenizer, strip=strip)
    except BadMarkers as exc:
        raise bad_option(str(exc), exc.option) from None


def summary_tables(summary: Summary) -> list[Table]:
    """The summary as rich tables: one of component statistics, one of failures if any."""
    from rich.table import Table

    table = Table(title=f"{summary.rows} rows", title_justify="left")
    for column in ("component", "count", "mean", "std", "min", "max", "no value"):
        table.add_column(column, justify="left" if column == "component" else "right")
    for name, stats in summary.components.items():
        values = (stats.mean, stats.std, stats.min, stats.max) if stats.count else (None,) * 4
        no_value = stats.missing + summary.skipped.get(name, 0)
        table.add_row(name, str(stats.count), *map(fmt, values), str(no_value))
    tables = [table]
    if summary.failures:
        failures = Table(title="failures by type", title_justify="left")
        failures.add_column("type")
        failures.add_column("count", justify="right")
        for kind, count in summary.failures.most_common():
            failures.add_row(kind, str(count))
        tables.append(failures)
    return tables


def run_notes(summary: Summary, *, reasons: int = 5) -> list[str]:
    """What a person must see of a run besides its tables: how many rows failed, with the first
    `reasons` distinct reasons and their counts, and whether rows were grouped by prompt."""
    notes: list[str] = []
    if summary.failed:
        share = summary.failed / summary.rows
        head = (
            f"every row failed ({summary.rows})"
            if summary.all_failed
            else f"{summary.failed} of {summary.rows} rows failed"
            + (" (most of them)" if share > 0.5 else "")
        )
        notes.append(head + ("; the reasons:" if summary.reasons else ""))
        shown = summary.reasons.most_common(reasons)
        notes += [f"  {count} x {reason}" for reason, count in shown]
        more = len(summary.reasons) - len(shown)
        if more > 0:
            notes.append(f"  and {more} other reasons (each row's is in its output row)")
    if summary.prompt_grouped:
        notes.append(
            f"{summary.prompt_grouped} rows grouped by their prompt (the file names no group; "
            "--map group=COLUMN sets one)"
        )
    return notes
