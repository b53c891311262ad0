"""`referee report`: diagnostics of a reward on logged rollouts, in the terminal, HTML and JSON."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console

from referee.cli._common import deprecated, fmt, load_spec, read_options, scored_or_spec, write
from referee.errors import RefereeError
from referee.report.diagnostics import (
    AGREEMENT_STATISTICS,
    PassKOptions,
    ReportRow,
    build_report,
    join_rows,
    missing_lines,
)
from referee.report.panel import panel_lines
from referee.report.passk import FailedAs, parse_ks, passk_lines
from referee.report.results import Report
from referee.report.stats import AlphaLevel
from referee.rollouts.readers import FileFormat, parse_mapping, read_rollouts
from referee.rollouts.run import score_in_memory
from referee.rollouts.scored import read_scored

if TYPE_CHECKING:
    from referee.monitor import Watch

__all__ = ["report"]


@click.command()
@click.argument(
    "scored", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option(
    "--rollouts", "-r", type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The rollouts that were scored (adds completion lengths and human labels); "
    "with --spec, the rollouts to score.",
)  # fmt: skip
@click.option(
    "--spec", "-s", help="Score --rollouts with this spec first (then no SCORED is given)."
)
@click.option("--repeat", default=1, show_default=True, type=click.IntRange(1),
              help="With --spec: score N times and report how often verdicts flip.")  # fmt: skip
@click.option("--label", "-l", help="Metadata key of a human label (default: label, ...).")
@click.option(
    "--preference", "-p", help="Metadata key of a human preference flag (default: preferred)."
)
@click.option("--threshold", default=0.5, show_default=True,
              help="Reward at or above which a verdict is a pass.")  # fmt: skip
@read_options
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the self-contained HTML report here.")  # fmt: skip
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the report's numbers as JSON here.")  # fmt: skip
@click.option("--k", "ks", metavar="K,K,...",
              help="The k of pass@k (default: 1, 2, 4, ... up to the smallest group).")  # fmt: skip
@click.option("--correct-at", default=1.0, show_default=True,
              help="Reward at or above which an attempt is correct (pass@k, maj@n).")  # fmt: skip
@click.option("--failed-attempts", type=click.Choice(["incorrect", "excluded"]),
              default="incorrect", show_default=True,
              help="A failed attempt (no reward), for pass@k and maj@n.")  # fmt: skip
@click.option("--subset-key", help="Metadata key of a rollout's subset (default: subset, ...).")
@click.option("--answer-key", help="Metadata key of an attempt's extracted answer, for maj@n.")
@click.option("--math-answers", is_flag=True,
              help="For maj@n: extract each completion's final math answer.")  # fmt: skip
@click.option("--timeline", "timeline_path",
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Draw a training run's monitor timeline (the JSONL Monitor(timeline=...) "
                   "writes, or watch --json): alone, or after SCORED's report.")  # fmt: skip
@click.option("--panel-level", type=click.Choice(["nominal", "ordinal", "interval", "ratio"]),
              help="A panel's alpha level (default: nominal for 0/1, else interval).")  # fmt: skip
def report(
    scored: Path | None, rollouts: Path | None, spec: str | None, repeat: int, label: str | None,
    preference: str | None, threshold: float, format_: FileFormat | None, maps: tuple[str, ...],
    html_path: Path | None, json_path: Path | None, ks: str | None, correct_at: float,
    failed_attempts: FailedAs, subset_key: str | None, answer_key: str | None,
    math_answers: bool, timeline_path: Path | None, panel_level: AlphaLevel | None,
) -> None:  # fmt: skip
    """Diagnose a reward on logged rollouts: distributions, failures, GRPO signal, length
    correlation, agreement with human labels, determinism, pass@k, maj@n and avg@n per group,
    judge panels' agreement (HTML, JSON and a terminal summary).

    SCORED is the output of `referee score` (with --rollouts, the rollouts it scored). Or
    score first: --rollouts FILE --spec SPEC, and no SCORED. Or draw a monitor's timeline:
    --timeline FILE (with SCORED, after its report)."""
    from referee.report.html import render_html

    timeline = _timeline(timeline_path)
    if timeline is not None and scored is None and spec is None and rollouts is None:
        from referee.monitor.timeline import render_timeline

        if json_path is not None:
            write(json_path, timeline.to_json(indent=2))
        if html_path is not None:
            write(html_path, render_timeline(timeline, source=str(timeline_path)))
            Console().print(f"wrote {html_path}")
        return

    if spec is not None and scored is not None and rollouts is None:
        deprecated("referee report ROLLOUTS --spec SPEC",
                    "referee report --rollouts ROLLOUTS --spec SPEC")  # fmt: skip
        scored, rollouts = None, scored
    scored_or_spec(scored, spec, rollouts)
    if math_answers and answer_key:
        raise click.UsageError("--math-answers and --answer-key are two sources of the answers: "
                               "pass one")  # fmt: skip
    if (math_answers or answer_key) and rollouts is None:
        raise click.UsageError("--math-answers and --answer-key read the rollouts: pass "
                               "--rollouts too")  # fmt: skip
    join = functools.partial(join_rows, subset_key=subset_key, answer_key=answer_key,
                             math_answers=math_answers)  # fmt: skip
    try:
        k_values = None if ks is None else parse_ks(ks)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--k") from None
    found_subset = None
    try:
        mapping = parse_mapping(maps)
        repeats: list[list[float | None]] | None = None
        if spec is not None and rollouts is not None:
            reward = load_spec(spec)
            items = list(read_rollouts(rollouts, format=format_, mapping=mapping))
            runs = [score_in_memory(items, reward, source=str(rollouts)) for _ in range(repeat)]
            repeats = [[r.reward for r in run] for run in runs]
            rows, found, found_pref, found_subset = join(
                items, runs[0], label, preference, source=str(rollouts)
            )
        elif rollouts is not None and scored is not None:
            items_iter = read_rollouts(rollouts, format=format_, mapping=mapping)
            rows, found, found_pref, found_subset = join(
                items_iter, read_scored(scored), label, preference, source=str(scored)
            )
        else:
            assert scored is not None  # (the usage checks above)
            rows = [ReportRow.of(r) for r in read_scored(scored)]
            found = found_pref = None
    except RefereeError as exc:
        raise click.ClickException(str(exc)) from None
    shown = scored if scored is not None else rollouts
    assert shown is not None  # (the usage checks above)
    answers = f"metadata.{answer_key}" if answer_key else "math" if math_answers else None
    passk = PassKOptions(ks=k_values, threshold=correct_at, failed_as=failed_attempts,
                         answers=answers, subset_key=found_subset)  # fmt: skip
    result = build_report(rows, label=found, preference=found_pref, threshold=threshold,
                          repeats=repeats, source=str(shown), passk=passk,
                          panel_level=panel_level)  # fmt: skip
    console = Console()
    _print_report(console, result)
    if json_path is not None:
        write(json_path, result.to_json(indent=2))
        console.print(f"wrote {json_path}")
    if html_path is not None:
        sections: tuple[str, ...] = ()
        if timeline is not None:
            from referee.monitor.timeline import timeline_section

            sections = (timeline_section(timeline),)
        write(html_path, render_html(result, sections=sections))
        console.print(f"wrote {html_path}")


def _timeline(path: Path | None) -> Watch | None:
    """The timeline at `path`, with its summary printed; a usage error where it is none."""
    if path is None:
        return None
    from referee.monitor.timeline import read_timeline

    try:
        timeline = read_timeline(path)
    except RefereeError as exc:
        raise click.BadParameter(str(exc), param_hint="--timeline") from None
    console = Console()
    steps = timeline.steps
    console.print(f"monitor timeline: {len(steps)} steps ({steps[0].step} to {steps[-1].step}), "
                  f"{len(timeline.alarms)} alarms", highlight=False)  # fmt: skip
    for alarm in timeline.alarms:
        console.print(f"  step {alarm.step}: {alarm.action} {alarm.message}", highlight=False)
    return timeline


def _print_report(console: Console, result: Report) -> None:
    reward = result.reward
    console.print(
        f"[bold]{result.rows}[/bold] rollouts, {result.failed} without a score; "
        f"mean reward {fmt(reward.mean)} (std {fmt(reward.std)})"
    )
    for line in missing_lines(result):  # a component with no value: say it on the first screen
        console.print(line, style="yellow", markup=False, highlight=False)
    grpo = result.grpo
    if grpo is not None:
        share = grpo.zero_variance_share
        style = "yellow" if share > 0.5 else "default"
        console.print(
            f"[{style}]{100 * share:.1f}% of {grpo.groups} groups have zero reward variance"
            f"[/{style}] (mean within-group std {fmt(grpo.mean_within_group_std)})"
        )
    length = result.length
    if length is not None:
        rho = length.spearman
        style = "yellow" if rho is not None and rho > 0.5 else "default"
        console.print(f"[{style}]reward vs completion length: Spearman {fmt(rho)}[/{style}]")
    agreement = result.agreement
    if agreement is not None:
        statistics = [(k, getattr(agreement, k)) for k in AGREEMENT_STATISTICS]
        parts = [f"{k} {fmt(stat.value)}" for k, stat in statistics if stat is not None]
        console.print(f"agreement with {agreement.label}: " + ", ".join(parts))
    prefs = result.preferences
    if prefs is not None:
        acc = prefs.pairwise_accuracy
        console.print(
            f"agreement with human preferences ({prefs.key}): pairwise accuracy "
            f"{fmt(acc.value)} [{fmt(acc.ci_low)}, {fmt(acc.ci_high)}] over "
            f"{acc.n} pairs in {prefs.groups} groups"
        )
    steps = result.steps
    if steps is not None:
        means = ", ".join(f"{fmt(p.mean)}" for p in steps.by_position[:10])
        console.print(
            f"per-step rewards on {steps.rollouts} trajectories "
            f"({fmt(steps.mean_steps)} steps each): mean by step {means}"
        )
    det = result.determinism
    if det is not None:
        console.print(
            f"determinism over {det.repeats} scorings: value changed for "
            f"{100 * det.changed_share:.1f}%, verdict flipped for "
            f"{100 * det.verdict_flip_share:.1f}%"
        )
    for line in [*passk_lines(result), *panel_lines(result)]:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    if result.failures:
        console.print("failures: " + ", ".join(f"{k} {v}" for k, v in result.failures.items()))
