"""`referee probe`: reward hacks built from logged rollouts, tried against a spec."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from referee._aio import run_sync
from referee.cli._common import fmt, load_spec, read_options, write
from referee.errors import RefereeError
from referee.rollouts.jsonl import RowOk
from referee.rollouts.readers import FileFormat, parse_mapping, read_rollouts

__all__ = ["probe"]


@click.command()
@click.argument("rollouts", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--spec", "-s", required=True, help="Reward spec file (YAML or JSON).")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1),
              help="Gold answers (best attempt of a group) to build probes from.")  # fmt: skip
@click.option("--fraction", default=0.5, show_default=True, type=click.FloatRange(0, 1),
              help="A content probe fails where it earns more than this share of the gold "
                   "answer's reward.")  # fmt: skip
@click.option("--max-share", default=0.0, show_default=True, type=click.FloatRange(0, 1),
              help="Tolerated share of gold answers a probe may beat before it fails.")  # fmt: skip
@click.option("--only", help="Comma-separated probe names to run (default: all).")
@read_options
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the results as JSON here.")  # fmt: skip
def probe(
    rollouts: Path, spec: str, limit: int, fraction: float, max_share: float, only: str | None,
    format_: FileFormat | None, maps: tuple[str, ...], json_path: Path | None,
) -> None:  # fmt: skip
    """Try reward hacks built from ROLLOUTS against a spec; exit 1 when any works (for CI).

    Probes: empty answer, format without content, prompt copied back, the prompt's own example
    or template copied (which must earn nothing), hedged answers, an instruction to the grader,
    a fake verdict, a judge-fence escape, for code exit-0 / PASSED / always-equal; and the gold
    answer repeated or padded (which must not earn more)."""
    from referee.report.probes import probe_names, run_probes

    try:
        names = probe_names(only)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    reward = load_spec(spec)
    try:
        items = read_rollouts(rollouts, format=format_, mapping=parse_mapping(maps))
        good = [i.rollout for i in items if isinstance(i, RowOk)]
    except RefereeError as exc:
        raise click.ClickException(str(exc)) from None
    result = run_sync(run_probes(reward, good, limit=limit, fraction=fraction,
                                 max_share=max_share, only=names))  # fmt: skip
    console = Console()
    if result.golds == 0:
        raise click.ClickException(
            "no rollout earned a reward above 0, so there is no gold answer to build probes "
            "from; check the spec against these rollouts with referee score"
        )
    table = Table(title=f"probes against {result.golds} gold answers", title_justify="left")
    for column in ("probe", "kind", "tried", "beat the bar", "probe reward", "gold reward", ""):
        table.add_column(column, justify="left" if column in ("probe", "kind", "") else "right")
    for name, r in result.probes.items():
        status = "[red]FAIL[/red]" if r.failed else ("-" if not r.tried else "ok")
        means = fmt(r.mean_probe_reward), fmt(r.mean_gold_reward)
        table.add_row(name, r.kind, str(r.tried), str(r.flagged), *means, status)
    console.print(table)
    if json_path is not None:
        write(json_path, result.to_json(indent=2))
    if result.failed:
        console.print(f"[red]hacks that work: {', '.join(result.failed)}[/red]")
        sys.exit(1)
    console.print("no probe beat the bar")
