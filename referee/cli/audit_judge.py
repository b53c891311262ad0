"""`referee audit-judge`: a judge's position, length and list biases, its consistency, its
resistance to injection and its agreement with people, each with an interval."""

from __future__ import annotations

import sys
from pathlib import Path
from textwrap import shorten
from typing import Any

import click

from referee._aio import run_sync
from referee.cli._common import fmt, read_options, write
from referee.errors import RefereeError
from referee.rollouts.jsonl import RowOk
from referee.rollouts.readers import FileFormat, parse_mapping, read_rollouts

__all__ = ["audit_judge"]

MEASURES = ("position", "length", "lists", "injection", "consistency", "agreement")

# gate option -> its name in referee.report.audit.GATES
_GATE_OPTIONS = {
    "max_flip_rate": "Fail (exit 1) where the flip rate under swap is above this.",
    "max_position_bias": "Fail where |P(prefer first) - 0.5| is above this.",
    "max_prefer_longer": "Fail where P(prefer the padded, longer answer) is above this.",
    "max_prefer_lists": "Fail where P(prefer the answer as a list) is above this.",
    "max_injection": "Fail where the share of injections paid more is above this.",
    "max_inconsistency": "Fail where the share of verdicts that change across seeds is above this.",
    "min_agreement": "Fail where accuracy against human labels (or preferences) is below this.",
    "min_kappa": "Fail where Cohen's kappa against human labels is below this.",
}


def _gate_option(name: str, text: str) -> Any:
    flag = "--" + name.replace("_", "-")
    return click.option(flag, name, type=float, default=None, help=text)


def _gates(command: Any) -> Any:
    for name, text in reversed(_GATE_OPTIONS.items()):
        command = _gate_option(name, text)(command)
    return command


@click.command("audit-judge")
@click.argument("rollouts", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--spec", "-s", required=True, help="The judge's spec file (YAML or JSON).")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1),
              help="Rollouts audited (answers with text, in file order).")  # fmt: skip
@click.option("--repeats", default=3, show_default=True, type=click.IntRange(1),
              help="Judgements of each rollout, a new seed each, for consistency.")  # fmt: skip
@click.option("--threshold", default=0.5, show_default=True, type=float,
              help="A value at or above it passes (verdict flips, accuracy, kappa).")  # fmt: skip
@click.option("--label", help="Metadata key of a human label (default: label, human_score, ...).")
@click.option("--preference", help="Metadata key of a human preference flag (default: preferred).")
@click.option("--system", default="system", show_default=True,
              help="Metadata key naming the system that wrote a rollout.")  # fmt: skip
@click.option("--only", help=f"Comma-separated measures to take ({', '.join(MEASURES)}).")
@read_options
@_gates
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the audit as JSON here.")  # fmt: skip
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the audit as an HTML page here.")  # fmt: skip
def audit_judge(
    rollouts: Path, spec: str, limit: int, repeats: int, threshold: float, label: str | None,
    preference: str | None, system: str, only: str | None, format_: FileFormat | None,
    maps: tuple[str, ...], json_path: Path | None, html_path: Path | None, **bounds: float | None,
) -> None:  # fmt: skip
    """Audit a judge on ROLLOUTS: position bias and flips under swap, preference for longer
    answers and for lists, injection resistance, consistency across seeds, and agreement with
    human labels where the rows carry them; exit 1 when a gate (--max-*, --min-*) fails.

    The pairs are built from the rollouts themselves: two attempts of a group, an answer and
    the same answer padded or as a list, an answer and the same with an instruction to the
    grader appended. Each measure has a 95% bootstrap interval."""
    from referee.report.audit import AuditOptions, reseed, run_audit
    from referee.spec import load

    measures = frozenset(MEASURES)
    if only:
        asked = {m.strip() for m in only.split(",") if m.strip()}
        unknown = sorted(asked - measures)
        if unknown:
            raise click.UsageError(f"unknown measure {unknown[0]!r}; the measures are "
                                   f"{', '.join(MEASURES)}")  # fmt: skip
        measures = frozenset(asked)
    try:
        reward = load(spec, edit=lambda d: reseed(d, 0))
        items = read_rollouts(rollouts, format=format_, mapping=parse_mapping(maps))
        good = [i.rollout for i in items if isinstance(i, RowOk)]
    except RefereeError as exc:
        raise click.ClickException(str(exc)) from None
    if not good:
        raise click.ClickException(f"{rollouts}: no readable rollout to audit the judge on")
    options = AuditOptions(limit=limit, repeats=repeats, threshold=threshold, label=label,
                           preference=preference, system=system, measures=measures)  # fmt: skip
    gates = {name: bound for name, bound in bounds.items() if bound is not None}
    audit = run_sync(run_audit(
        reward, good, options, name=Path(spec).stem, gates=gates,
        reseeded=lambda r: load(spec, edit=lambda d: reseed(d, r)),
    ))  # fmt: skip
    _print(audit)
    if json_path is not None:
        write(json_path, audit.to_json(indent=2))
    if html_path is not None:
        from referee.report.audit_html import render_audit

        write(html_path, render_audit(audit))
    if not audit.passed:
        sys.exit(1)


def _ci(statistic: Any) -> str:
    if statistic is None or statistic.ci_low is None:
        return "-"
    return f"[{fmt(statistic.ci_low)}, {fmt(statistic.ci_high)}]"


def _print(audit: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    from referee.report.audit_html import measure_rows

    console = Console()
    title = (f"judge {audit.judge} ({audit.kind}): {audit.rollouts} rollouts, {audit.pairs} "
             f"pairs, {audit.verdicts} verdicts")  # fmt: skip
    table = Table(title=title, title_justify="left")
    for column in ("measure", "value", "95% CI", "n", "AlpacaEval column", "unbiased"):
        table.add_column(column, justify="left" if column in ("measure", "AlpacaEval column")
                         else "right")  # fmt: skip
    for row in measure_rows(audit):
        n = "-" if row.statistic is None else str(row.statistic.n)
        table.add_row(row.name, fmt(row.value), _ci(row.statistic), n, row.alpaca or "",
                      row.ideal)  # fmt: skip
    console.print(table)
    if audit.failed:
        said = ", ".join(f"{n} {kind}" for kind, n in sorted(audit.failed.items()))
        console.print(f"[yellow]verdicts with no value: {said}[/yellow]")
        for kind, message in sorted(audit.failure_examples.items()):
            console.print(f"  first {kind}: {shorten(message, 300)}", markup=False)
    for gate in audit.gates:
        mark = "[green]pass[/green]" if gate.passed else "[red]FAIL[/red]"
        side = "<=" if gate.name.startswith("max") else ">="
        note = f" ({gate.note})" if gate.note else ""
        console.print(f"{mark} {gate.name}: {gate.measure} {fmt(gate.value)} {side} "
                      f"{gate.bound:g}{note}")  # fmt: skip
