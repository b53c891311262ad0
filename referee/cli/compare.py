"""`referee compare`: two rewards on the same rollouts, where they agree and where they flip."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from referee.cli._common import deprecated, fmt, load_spec, pct, read_options, write
from referee.errors import RefereeError
from referee.rollouts.jsonl import RowOk
from referee.rollouts.readers import FileFormat, parse_mapping, read_rollouts
from referee.rollouts.run import score_in_memory
from referee.rollouts.scored import read_scored

__all__ = ["compare"]


@click.command()
@click.argument("scored", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--spec", "-s", "specs", multiple=True,
    help="Score --rollouts with this spec (give it twice, for the two rewards compared).",
)  # fmt: skip
@click.option(
    "--rollouts", "-r", type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The rollouts both --spec score.",
)  # fmt: skip
@click.option("--threshold", default=0.5, show_default=True,
              help="Reward at or above which a verdict is a pass.")  # fmt: skip
@click.option("--top", default=10, show_default=True, help="How many flipped rollouts to show.")
@read_options
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the comparison as JSON here.")  # fmt: skip
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the comparison as an HTML page here: both distributions, each "
              "rollout's two values, the rollouts that moved most side by side.")  # fmt: skip
def compare(
    scored: tuple[str, ...], specs: tuple[str, ...], rollouts: Path | None, threshold: float,
    top: int, format_: FileFormat | None, maps: tuple[str, ...], json_path: Path | None,
    html_path: Path | None,
) -> None:  # fmt: skip
    """Compare two rewards on the same rollouts: two files scored by `referee score`
    (SCORED SCORED), or two specs scoring the same rollouts (--spec A --spec B --rollouts R)."""
    from referee.report.compare import compare as compare_scores
    from referee.report.compare import pair_rows

    if rollouts is not None and not specs and len(scored) == 2:
        deprecated("referee compare A B --rollouts R",
                    "referee compare --spec A --spec B --rollouts R")  # fmt: skip
        scored, specs = (), scored
    if scored and specs:
        raise click.UsageError("give two scored files, or two --spec with --rollouts, not both")
    if not (len(scored) == 2 or (len(specs) == 2 and rollouts is not None)):
        raise click.UsageError(
            "give two scored files (SCORED SCORED), or --spec A --spec B with --rollouts"
        )
    a, b = scored or specs

    completions: dict[str, str] = {}
    try:
        if specs:
            assert rollouts is not None  # (the usage checks above)
            items = list(read_rollouts(rollouts, format=format_, mapping=parse_mapping(maps)))
            completions = {
                str(item.rollout.id): item.rollout.completion_text
                for item in items
                if isinstance(item, RowOk)
            }
            rows_a, rows_b = (
                score_in_memory(items, load_spec(spec), source=str(rollouts)) for spec in (a, b)
            )
        else:
            rows_a, rows_b = list(read_scored(a)), list(read_scored(b))
        pairs = pair_rows(rows_a, rows_b, (a, b))
    except RefereeError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(str(exc)) from None
    names = (Path(a).stem, Path(b).stem)
    if names[0] == names[1]:
        names = ("A", "B")
    result = compare_scores(pairs, threshold=threshold, top=top, names=names)
    console = Console()
    sp, kt = result.spearman, result.kendall_tau
    console.print(
        f"{result.compared} of {result.rows} rollouts scored by both; Spearman "
        f"{fmt(sp.value)} [{fmt(sp.ci_low)}, {fmt(sp.ci_high)}], Kendall tau "
        f"{fmt(kt.value)}"
    )
    console.print(
        f"verdicts (>= {threshold:g}) agree on {pct(result.verdict_agreement)} of them, "
        f"Cohen's kappa {fmt(result.cohen_kappa)}; {result.flipped} flipped"
    )
    if result.moved:
        console.print(
            f"{result.moved} rollouts moved: mean {names[1]} - {names[0]} "
            f"{fmt(result.mean_difference)}, mean |difference| {fmt(result.mean_abs_difference)}"
        )
    groups = result.within_groups
    if groups is not None:
        console.print(
            f"within {groups.groups} groups: mean Kendall tau "
            f"{fmt(groups.mean_within_group_kendall_tau)}, best attempt changed in "
            f"{100 * groups.best_attempt_changed_share:.1f}%, advantage sign differs for "
            f"{100 * groups.advantage_sign_differs_share:.1f}% of rollouts"
        )
    # The flips where verdicts differ; else the rollouts whose values moved.
    title, shown = (
        ("largest flips", result.top_flipped)
        if result.top_flipped
        else ("largest moves", result.top_moved)
    )
    if shown:
        table = Table(title=title, title_justify="left")
        for column in ("id", "group", names[0], names[1]):
            table.add_column(column)
        for row in shown:
            table.add_row(row.id, str(row.group), fmt(row.a), fmt(row.b))
        console.print(table)
    if json_path is not None:
        write(json_path, result.to_json(indent=2))
        console.print(f"wrote {json_path}")
    if html_path is not None:
        from referee.report.compare_html import render_comparison_html

        write(html_path, render_comparison_html(result, pairs, completions=completions))
        console.print(f"wrote {html_path}")
