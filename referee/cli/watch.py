"""`referee watch`: the training monitor run over a logged run, step by step."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from referee._aio import run_sync
from referee.cli._common import fmt, load_spec, read_options, write
from referee.errors import RefereeError
from referee.rollouts.jsonl import RowOk
from referee.rollouts.readers import FileFormat, parse_mapping, read_rollouts

__all__ = ["watch"]


@click.command()
@click.argument("log", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--spec", "-s", required=True, help="The proxy: the spec the run trained on.")
@click.option("--gold", "-g", help="A stricter spec scored on a sample of each step.")
@click.option("--gold-sample", default=16, show_default=True, type=click.IntRange(1),
              help="Rollouts of each step the gold spec scores.")  # fmt: skip
@click.option("--rules", "rules_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A YAML file of rules (default: gap 0.2, zero_variance 0.5, "
                   "length_correlation 0.5, held_out_gap 0.2, each for 3 steps).")  # fmt: skip
@click.option("--probe-every", type=click.IntRange(1),
              help="Run the probe battery on the best answers of every Nth step (as referee "
                   "probe does): the probes the proxy pays then.")  # fmt: skip
@click.option("--agree", "agree", multiple=True, metavar="A,B",
              help="Two of the proxy's components that should agree (repeatable): their "
                   "Spearman per step, and the min_agreement rule.")  # fmt: skip
@read_options
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write every step's figures and the alarms as JSON here.")  # fmt: skip
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the timeline page here: each figure over the steps, the alarms "
                   "marked (referee report --timeline draws a training run's).")  # fmt: skip
def watch(
    log: Path, spec: str, gold: str | None, gold_sample: int, rules_path: Path | None,
    probe_every: int | None, agree: tuple[str, ...], format_: FileFormat | None,
    maps: tuple[str, ...],
    json_path: Path | None, html_path: Path | None,
) -> None:  # fmt: skip
    """Replay the training monitor over LOG's rollouts in step order (metadata.step): each
    step's reward, spread, zero-variance groups, length correlation, failures, the
    proxy-gold gap, a code reward's held-out gap, the probes the proxy pays (with
    --probe-every); where each rule fired. Exit 1 when a
    rule whose action is stop fired."""
    from rich.console import Console
    from rich.table import Table

    from referee.monitor import DEFAULT_RULES, Monitor, Rules, by_step

    pairs: list[tuple[str, str]] = []
    for pair in agree:
        names = [p.strip() for p in pair.split(",")]
        if len(names) != 2 or not all(names):
            raise click.BadParameter(f"{pair!r}: two component names and a comma, such as "
                                     "--agree tests,judge", param_hint="--agree")  # fmt: skip
        pairs.append((names[0], names[1]))
    proxy = load_spec(spec)
    try:
        rules = Rules.read(rules_path) if rules_path else DEFAULT_RULES
        items = read_rollouts(log, format=format_, mapping=parse_mapping(maps))
        steps = by_step([i.rollout for i in items if isinstance(i, RowOk)])
    except RefereeError as exc:
        raise click.ClickException(str(exc)) from None
    if not steps:
        raise click.ClickException(f"{log}: no readable rollout to watch")
    monitor = Monitor(load_spec(gold) if gold else None, gold_sample=gold_sample, rules=rules,
                      probe_every=probe_every, agree=pairs)  # fmt: skip

    async def replay() -> None:
        for step, rollouts in steps.items():
            scores = await proxy.score_batch(rollouts)
            await monitor.observe(step, rollouts, scores, proxy)

    run_sync(replay())
    console = Console()
    table = Table(title=f"{len(steps)} steps of {log.name}", title_justify="left")
    columns = ["step", "rollouts", "reward", "std", "zero-var", "len rho", "failed"]
    if gold:
        columns += ["gold", "gap"]
    held = any(f.held_out for f in monitor.history)
    if held:
        columns += ["held-out gap"]
    if probe_every:
        columns += ["probes paid"]
    if pairs:
        columns += ["min agreement"]
    for column in (*columns, "alarm"):
        table.add_column(column, justify="left" if column == "alarm" else "right")
    fired = {a.step: a for a in monitor.alarms}
    for f in monitor.history:
        failed = str(sum(f.failures.values()))
        cells = [str(f.step), str(f.rollouts), fmt(f.reward.mean), fmt(f.reward.std),
                 fmt(f.zero_variance), fmt(f.length_correlation), failed]  # fmt: skip
        if gold:
            cells += [fmt(f.gold), fmt(f.gap)]
        if held:
            cells.append(fmt(f.held_out_gap))
        if probe_every:
            cells.append("" if f.probes is None else ", ".join(f.probes) or "none")
        if pairs:
            cells.append(fmt(f.min_agreement))
        alarm = fired.get(f.step)
        cells.append(f"[red]{alarm.rule} ({alarm.action})[/red]" if alarm else "")
        table.add_row(*cells)
    console.print(table)
    for alarm in monitor.alarms:
        console.print(f"step {alarm.step}: {alarm.action} {alarm.message}", highlight=False)
        probes = next((f.probes for f in monitor.history if f.step == alarm.step), None)
        if alarm.rule == "paying_probes" and probes:
            console.print(f"  the proxy pays: {', '.join(probes)} (referee probe --only "
                          f"{','.join(probes)} shows each)", highlight=False)  # fmt: skip
    if not monitor.alarms:
        console.print("no rule fired")
    if json_path is not None:
        write(json_path, monitor.watch().to_json(indent=2))
    if html_path is not None:
        from referee.monitor.timeline import render_timeline

        write(html_path, render_timeline(monitor.watch(), source=str(log)))
    if monitor.stopped is not None:
        sys.exit(1)
