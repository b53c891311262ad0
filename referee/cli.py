"""The `referee` command: score rollout files, run the demo, list reward types."""

from __future__ import annotations

import contextlib
import difflib
import functools
import os
import sys
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.markdown import Markdown
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn
from rich.table import Table

from referee import __version__
from referee._aio import run_sync
from referee.errors import ClusterError, RefereeError
from referee.registry import registered_types
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
from referee.reward import Reward
from referee.rollouts.jsonl import RowOk
from referee.rollouts.output import write_output
from referee.rollouts.readers import FORMATS, FileFormat, parse_mapping, read_rollouts
from referee.rollouts.run import (
    DEFAULT_BATCH_SIZE,
    RowList,
    score_in_memory,
    score_rows,
    score_to,
)
from referee.rollouts.scored import read_scored
from referee.rollouts.summary import Summary
from referee.spec import load

if TYPE_CHECKING:
    from referee.backends.openrlhf import EndMarkers
    from referee.backends.service import Mount

__all__ = ["main"]

_PROGRESS_MIN_BYTES = 1 << 20
RAY_BATCH_SIZE = 4096  # files smaller than this finish before a bar is worth drawing


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def summary_tables(summary: Summary) -> list[Table]:
    """The summary as rich tables: one of component statistics, one of failures if any."""
    table = Table(title=f"{summary.rows} rows", title_justify="left")
    for column in ("component", "count", "mean", "std", "min", "max", "no value"):
        table.add_column(column, justify="left" if column == "component" else "right")
    for name, stats in summary.components.items():
        values = (stats.mean, stats.std, stats.min, stats.max) if stats.count else (None,) * 4
        no_value = stats.missing + summary.skipped.get(name, 0)
        table.add_row(name, str(stats.count), *map(_fmt, values), str(no_value))
    tables = [table]
    if summary.failures:
        failures = Table(title="failures by type", title_justify="left")
        failures.add_column("type")
        failures.add_column("count", justify="right")
        for kind, count in summary.failures.most_common():
            failures.add_row(kind, str(count))
        tables.append(failures)
    return tables


def _load_spec(spec: str) -> Reward:
    try:
        return load(spec)
    except RefereeError as exc:
        raise click.ClickException(str(exc)) from None


@contextlib.contextmanager
def _progress(path: Path, console: Console, quiet: bool) -> Iterator[Callable[[int], None] | None]:
    """A progress bar over `path`'s bytes, as the callback that advances it (None: no bar)."""
    size = path.stat().st_size if path.is_file() else 0
    if quiet or not console.is_terminal or size < _PROGRESS_MIN_BYTES:
        yield None
        return
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task(f"scoring {path.name}", total=size)
        yield lambda n: progress.advance(task, n)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="referee")
def main() -> None:
    """referee: rewards and verifiers for RL on LLMs."""


@main.command()
@click.argument("rollouts", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--spec", "-s", required=True, help="Reward spec file (YAML or JSON).")
@click.option(
    "--output", "-o", type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write scored rows (JSONL). Default: standard output, summary on stderr.",
)  # fmt: skip
@click.option(
    "--resume", is_flag=True,
    help="Continue an interrupted run into the same --output (kept rows are not rescored).",
)  # fmt: skip
@click.option(
    "--format", "-f", "format_", type=click.Choice(FORMATS),
    help="The rows' shape; detected from the first row when not given.",
)  # fmt: skip
@click.option(
    "--map", "-m", "maps", multiple=True, metavar="FIELD=COLUMN",
    help="Set a rollout field from a (dotted) column, e.g. reference=reward_model.ground_truth.",
)  # fmt: skip
@click.option(
    "--batch-size", type=click.IntRange(1),
    help=f"Rollouts per batch (default {DEFAULT_BATCH_SIZE}; {RAY_BATCH_SIZE} with --engine ray).",
)  # fmt: skip
@click.option(
    "--concurrency", type=click.IntRange(1), help="Rollouts scored at once by async rewards."
)
@click.option(
    "--engine", type=click.Choice(["local", "ray"]), default="local", show_default=True,
    help="Score in this process, or fan batches out over Ray actors.",
)  # fmt: skip
@click.option("--address", help="With --engine ray: the cluster's address (default: local Ray).")
@click.option("--workers", type=click.IntRange(1), help="With --engine ray: how many actors.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar and no summary.")
def score(
    rollouts: Path, spec: str, output: Path | None, resume: bool, format_: FileFormat | None,
    maps: tuple[str, ...], batch_size: int | None, concurrency: int | None, engine: str,
    address: str | None, workers: int | None, quiet: bool,
) -> None:  # fmt: skip
    """Score ROLLOUTS (JSONL or Parquet, from referee, verl, TRL or OpenAI chat logs) with a
    reward spec; one output row per rollout, in order.

    Before scoring, the first 1,000 rows are read ahead: where none has what a component
    needs (a reference), nothing is scored and the command exits with status 2, naming the
    component, the missing field and the fix (--map reference=COLUMN, or on_failure: omit).
    """
    from referee.errors import MissingInput

    reward = _load_spec(spec)
    if engine == "ray":
        from referee.backends.distributed import RayReward

        try:
            reward = RayReward(reward, address=address, workers=workers)
        except RefereeError as exc:
            raise click.ClickException(str(exc)) from None
        batch_size = batch_size or RAY_BATCH_SIZE
    batch_size = batch_size or DEFAULT_BATCH_SIZE
    console = Console(stderr=True) if output is None else Console()
    err = Console(stderr=True)
    if resume and output is None:
        raise click.UsageError("--resume needs --output: the run continues into that file")
    try:
        mapping = parse_mapping(maps)
        with _progress(rollouts, err, quiet) as advance:
            run, kept = score_to(
                rollouts, reward, sys.stdout if output is None else output,
                format=format_, mapping=mapping, spec_text=Path(spec).read_text(),
                resume=resume, batch_size=batch_size, concurrency=concurrency,
                on_progress=advance,
            )  # fmt: skip
    except KeyboardInterrupt:
        where = f"; run the same command with --resume to finish {output}" if output else ""
        err.print(f"[yellow]interrupted{where}[/yellow]")
        sys.exit(130)
    except ClusterError as exc:
        # Every batch before the lost one is written to OUTPUT.partial; --resume keeps them.
        where = f"\n  once the cluster is back, the same command with --resume finishes {output}"
        raise click.ClickException(str(exc) + (where if output else "")) from None
    except MissingInput as exc:  # the input, not the run, is wrong: a usage error's status
        click.echo(f"Error: {exc}", err=True)
        sys.exit(2)
    except RefereeError as exc:
        raise click.ClickException(str(exc)) from None
    except BrokenPipeError:
        # The reader went away (`referee score ... | head`): stop quietly, as a Unix tool does.
        # Python's own recipe: point stdout at devnull so the flush at exit does not fail too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except OSError as exc:
        raise click.ClickException(f"{exc}") from None
    if not quiet:
        for table in summary_tables(run.summary):
            console.print(table)
        if run.unreadable:
            console.print(f"[yellow]{run.unreadable} unreadable rows kept as error rows[/yellow]")
        if kept:
            console.print(f"resumed: {kept} rows kept from the interrupted run")
        if output is not None:
            console.print(f"wrote {run.summary.rows} rows to {output}")


def _deprecated(old: str, new: str) -> None:
    """Say on stderr that a command line's form is deprecated, and its replacement."""
    click.echo(f"referee: deprecated: {old} (the same meaning: {new}); it will stop working",
               err=True)  # fmt: skip


def _write(path: Path | str, text: str) -> None:
    """Write an output file only where a regular file is or nothing is yet."""
    try:
        write_output(path, text)
    except OSError as exc:
        raise click.ClickException(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None


@main.command()
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
@click.option("--format", "-f", "format_", type=click.Choice(FORMATS))
@click.option("--map", "-m", "maps", multiple=True, metavar="FIELD=COLUMN")
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
@click.option("--panel-level", type=click.Choice(["nominal", "ordinal", "interval", "ratio"]),
              help="A panel's alpha level (default: nominal for 0/1, else interval).")  # fmt: skip
def report(
    scored: Path | None, rollouts: Path | None, spec: str | None, repeat: int, label: str | None,
    preference: str | None, threshold: float, format_: FileFormat | None, maps: tuple[str, ...],
    html_path: Path | None, json_path: Path | None, ks: str | None, correct_at: float,
    failed_attempts: FailedAs, subset_key: str | None, answer_key: str | None,
    math_answers: bool, panel_level: AlphaLevel | None,
) -> None:  # fmt: skip
    """Diagnose a reward on logged rollouts: distributions, failures, GRPO signal, length
    correlation, agreement with human labels, determinism, pass@k, maj@n and avg@n per group,
    judge panels' agreement (HTML, JSON and a terminal summary).

    SCORED is the output of `referee score` (with --rollouts, the rollouts it scored). Or
    score first: --rollouts FILE --spec SPEC, and no SCORED."""
    from referee.report.html import render_html

    if spec is not None and scored is not None and rollouts is None:
        _deprecated("referee report ROLLOUTS --spec SPEC",
                    "referee report --rollouts ROLLOUTS --spec SPEC")  # fmt: skip
        scored, rollouts = None, scored
    _scored_or_spec(scored, spec, rollouts)
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
            reward = _load_spec(spec)
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
        _write(json_path, result.to_json(indent=2))
        console.print(f"wrote {json_path}")
    if html_path is not None:
        _write(html_path, render_html(result, title=f"referee report: {shown.name}"))
        console.print(f"wrote {html_path}")


def _print_report(console: Console, result: Report) -> None:
    reward = result.reward
    console.print(
        f"[bold]{result.rows}[/bold] rollouts, {result.failed} without a score; "
        f"mean reward {_fmt(reward.mean)} (std {_fmt(reward.std)})"
    )
    for line in missing_lines(result):  # a component with no value: say it on the first screen
        console.print(line, style="yellow", markup=False, highlight=False)
    grpo = result.grpo
    if grpo is not None:
        share = grpo.zero_variance_share
        style = "yellow" if share > 0.5 else "default"
        console.print(
            f"[{style}]{100 * share:.1f}% of {grpo.groups} groups have zero reward variance"
            f"[/{style}] (mean within-group std {_fmt(grpo.mean_within_group_std)})"
        )
    length = result.length
    if length is not None:
        rho = length.spearman
        style = "yellow" if rho is not None and rho > 0.5 else "default"
        console.print(f"[{style}]reward vs completion length: Spearman {_fmt(rho)}[/{style}]")
    agreement = result.agreement
    if agreement is not None:
        statistics = [(k, getattr(agreement, k)) for k in AGREEMENT_STATISTICS]
        parts = [f"{k} {_fmt(stat.value)}" for k, stat in statistics if stat is not None]
        console.print(f"agreement with {agreement.label}: " + ", ".join(parts))
    prefs = result.preferences
    if prefs is not None:
        acc = prefs.pairwise_accuracy
        console.print(
            f"agreement with human preferences ({prefs.key}): pairwise accuracy "
            f"{_fmt(acc.value)} [{_fmt(acc.ci_low)}, {_fmt(acc.ci_high)}] over "
            f"{acc.n} pairs in {prefs.groups} groups"
        )
    steps = result.steps
    if steps is not None:
        means = ", ".join(f"{_fmt(p.mean)}" for p in steps.by_position[:10])
        console.print(
            f"per-step rewards on {steps.rollouts} trajectories "
            f"({_fmt(steps.mean_steps)} steps each): mean by step {means}"
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


@main.command()
@click.argument(
    "scored", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option(
    "--rollouts", "-r", type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The rollouts that were scored (adds prompts, completions and references); "
    "with --spec, the rollouts to score.",
)  # fmt: skip
@click.option("--spec", "-s", help="Score --rollouts with this spec first (then no SCORED).")
@click.option(
    "--output", "-o", type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the page. Default: NAME.view.html in this folder, NAME the file's.",
)  # fmt: skip
@click.option(
    "--limit", default=10_000, show_default=True, type=click.IntRange(0),
    help="Keep the N lowest-rewarded rollouts (failures first); 0 keeps all.",
)  # fmt: skip
@click.option("--threshold", default=0.5, show_default=True,
              help="A component value at or above it passes (the page's filter).")  # fmt: skip
@click.option("--format", "-f", "format_", type=click.Choice(FORMATS))
@click.option("--map", "-m", "maps", multiple=True, metavar="FIELD=COLUMN")
@click.option("--open", "open_", is_flag=True, help="Open the page in a browser once written.")
def view(
    scored: Path | None, rollouts: Path | None, spec: str | None, output: Path | None,
    limit: int, threshold: float, format_: FileFormat | None, maps: tuple[str, ...], open_: bool,
) -> None:  # fmt: skip
    """Read scored rollouts one by one: an HTML page, lowest reward first, with each
    rollout's prompt, completion, reference, components, reason and failure.

    SCORED is the output of `referee score` (with --rollouts, the rollouts it scored, for
    their text). Or score first: --rollouts FILE --spec SPEC, and no SCORED."""
    from referee.report.view import build_view, render_view

    _scored_or_spec(scored, spec, rollouts)
    if not abs(threshold) < float("inf"):
        raise click.BadParameter(f"{threshold!r} is not a finite number", param_hint="--threshold")
    shown = scored if scored is not None else rollouts
    assert shown is not None  # (the usage checks above)
    try:
        mapping = parse_mapping(maps)
        items = None if rollouts is None else read_rollouts(rollouts, format=format_,
                                                             mapping=mapping)  # fmt: skip
        if spec is not None:
            listed = list(items or ())
            items = iter(listed)
            scores = iter(score_in_memory(listed, _load_spec(spec), source=str(shown)))
        else:
            scores = read_scored(shown)
        result = build_view(scores, items, source=str(shown), limit=limit or None,
                            threshold=threshold)  # fmt: skip
    except RefereeError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        why = exc.strerror or exc
        raise click.ClickException(f"cannot read {exc.filename or shown}: {why}") from None
    path = output or Path(f"{shown.name.partition('.')[0] or shown.name}.view.html")
    _write(path, render_view(result, title=f"referee view: {shown.name}"))
    kept = len(result.records)
    of = f" of {result.rows}, the lowest-rewarded (--limit 0 keeps all)"
    click.echo(f"wrote {path}: {kept} rollouts{of if kept < result.rows else ''}")
    if open_:
        click.launch(str(path.resolve()))


def _scored_or_spec(scored: Path | None, spec: str | None, rollouts: Path | None) -> None:
    """The usage check of a command that reads a scored file or scores --rollouts first."""
    if spec is not None and scored is not None:
        raise click.UsageError("give SCORED (a scored file) or --spec with --rollouts, not both")
    if scored is None and (spec is None or rollouts is None):
        raise click.UsageError("give SCORED (a file referee score wrote), or --rollouts and --spec")


@main.command()
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
@click.option("--format", "-f", "format_", type=click.Choice(FORMATS))
@click.option("--map", "-m", "maps", multiple=True, metavar="FIELD=COLUMN")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the comparison as JSON here.")  # fmt: skip
def compare(
    scored: tuple[str, ...], specs: tuple[str, ...], rollouts: Path | None, threshold: float,
    top: int, format_: FileFormat | None, maps: tuple[str, ...], json_path: Path | None,
) -> None:  # fmt: skip
    """Compare two rewards on the same rollouts: two files scored by `referee score`
    (SCORED SCORED), or two specs scoring the same rollouts (--spec A --spec B --rollouts R)."""
    from referee.report.compare import compare as compare_scores
    from referee.report.compare import pair_rows

    if rollouts is not None and not specs and len(scored) == 2:
        _deprecated("referee compare A B --rollouts R",
                    "referee compare --spec A --spec B --rollouts R")  # fmt: skip
        scored, specs = (), scored
    if scored and specs:
        raise click.UsageError("give two scored files, or two --spec with --rollouts, not both")
    if not (len(scored) == 2 or (len(specs) == 2 and rollouts is not None)):
        raise click.UsageError(
            "give two scored files (SCORED SCORED), or --spec A --spec B with --rollouts"
        )
    a, b = scored or specs

    try:
        if specs:
            assert rollouts is not None  # (the usage checks above)
            items = list(read_rollouts(rollouts, format=format_, mapping=parse_mapping(maps)))
            rows_a, rows_b = (
                score_in_memory(items, _load_spec(spec), source=str(rollouts)) for spec in (a, b)
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
        f"{_fmt(sp.value)} [{_fmt(sp.ci_low)}, {_fmt(sp.ci_high)}], Kendall tau "
        f"{_fmt(kt.value)}"
    )
    console.print(
        f"verdicts (>= {threshold:g}) agree on {_fmt(result.verdict_agreement)}, Cohen's "
        f"kappa {_fmt(result.cohen_kappa)}; {result.flipped} flipped"
    )
    groups = result.within_groups
    if groups is not None:
        console.print(
            f"within {groups.groups} groups: mean Kendall tau "
            f"{_fmt(groups.mean_within_group_kendall_tau)}, best attempt changed in "
            f"{100 * groups.best_attempt_changed_share:.1f}%, advantage sign differs for "
            f"{100 * groups.advantage_sign_differs_share:.1f}% of rollouts"
        )
    if result.top_flipped:
        table = Table(title="largest flips", title_justify="left")
        for column in ("id", "group", names[0], names[1]):
            table.add_column(column)
        for flip in result.top_flipped:
            table.add_row(flip.id, str(flip.group), _fmt(flip.a), _fmt(flip.b))
        console.print(table)
    if json_path is not None:
        _write(json_path, result.to_json(indent=2))
        console.print(f"wrote {json_path}")


@main.command()
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
@click.option("--format", "-f", "format_", type=click.Choice(FORMATS))
@click.option("--map", "-m", "maps", multiple=True, metavar="FIELD=COLUMN")
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
    reward = _load_spec(spec)
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
        means = _fmt(r.mean_probe_reward), _fmt(r.mean_gold_reward)
        table.add_row(name, r.kind, str(r.tried), str(r.flagged), *means, status)
    console.print(table)
    if json_path is not None:
        _write(json_path, result.to_json(indent=2))
    if result.failed:
        console.print(f"[red]hacks that work: {', '.join(result.failed)}[/red]")
        sys.exit(1)
    console.print("no probe beat the bar")


_DEMOS = (
    ("extraction", "press releases -> JSON: company, amount, date, provinces"),
    ("math", "math word problems: boxed final answer, think/answer format"),
    ("agent", "a tool-using agent: per-turn tool use, the calls made, the final answer"),
)


@main.command()
@click.option("--width", default=0, help="Cut each reason to this many characters (0: whole).")
def demo(width: int) -> None:
    """Score the bundled rollouts with the bundled specs and print the results."""
    console = Console()
    data = resources.files("referee") / "data" / "demo"
    for name, description in _DEMOS:
        with resources.as_file(data / f"{name}.yaml") as spec_path:
            reward = _load_spec(str(spec_path))
        rows = RowList()
        with resources.as_file(data / f"{name}.jsonl") as rollouts_path:
            inputs = list(read_rollouts(rollouts_path, format="canonical"))
            run = run_sync(score_rows(inputs, reward, rows))
        notes = {
            r.rollout.id: str(r.rollout.metadata.get("note", ""))
            for r in inputs
            if isinstance(r, RowOk)
        }
        console.rule(f"[bold]{name}[/bold]: {description}")
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
            cells = [str(row.id), notes.get(str(row.id), ""), _fmt(row.reward)]
            if stepped:
                cells.append(" ".join(_fmt(v) for v in row.steps or ()))
            table.add_row(*cells, reason)
        console.print(table)
        for summary_table in summary_tables(run.summary):
            console.print(summary_table)
    with resources.as_file(data) as folder:
        _demo_next(console, Path(folder))


def _demo_next(console: Console, folder: Path) -> None:
    """Where the demo's files are and what to run next, with those files."""
    spec, rollouts = folder / "extraction.yaml", folder / "extraction.jsonl"
    console.rule("[bold]next[/bold]")
    console.print(
        f"The demo's specs and rollouts are in {folder}: copy one to start your own.\n"
        f"  1. referee score {rollouts} --spec {spec} -o scored.jsonl\n"
        "       score a log yourself: one row per rollout, reward, components, reason\n"
        f"  2. referee view scored.jsonl --rollouts {rollouts} -o view.html\n"
        "       read the rollouts one by one, lowest reward first, in a browser\n"
        "  3. referee types field_match\n"
        "       a reward type's options and an example spec (referee types lists them all)\n"
        "Docs: docs/getting-started.md (or `make docs` for the site).",
        highlight=False,
        soft_wrap=True,
    )


def _end_marker_options(command: Callable[..., None]) -> Callable[..., None]:
    """The options that say what OpenRLHF's end-of-turn markers are (`_end_markers`)."""
    options = [
        click.option(
            "--end-marker", "end_marker", multiple=True, metavar="TEXT",
            help="Strip TEXT from the end of each OpenRLHF response (repeatable). Replaces the "
            "built-in list: the end-of-turn, end-of-text and pad tokens of the common chat "
            "templates (ChatML, Llama 3, Mistral/Llama 2, Gemma, Phi, plain EOS).",
        ),
        click.option(
            "--tokenizer", type=click.Path(exists=True, file_okay=False),
            help="Strip the policy model's own markers, read from its tokenizer directory "
            "(EOS, pad, the chat template's end of turn). Replaces the built-in list; "
            "with --end-marker, both. Needs transformers.",
        ),
        click.option(
            "--strip-markers/--no-strip-markers", default=True, show_default=True,
            help="Strip end markers from OpenRLHF responses at all.",
        ),
    ]  # fmt: skip
    for option in reversed(options):
        command = option(command)
    return command


def _end_markers(end_marker: tuple[str, ...], tokenizer: str | None, strip: bool) -> EndMarkers:
    """What the marker options ask for, or a usage error that says why not."""
    from referee.backends.openrlhf import BadMarkers, choose_markers

    try:
        return choose_markers(end_marker, tokenizer, strip=strip)
    except BadMarkers as exc:
        if exc.option is None:
            raise click.UsageError(str(exc)) from None
        raise click.BadParameter(str(exc), param_hint=exc.option) from None


def _protocol_options(command: Callable[..., None]) -> Callable[..., None]:
    """The options of the protocols `referee serve` mounts (NeMo Gym's, ORS's), handed to
    the command as one keyword group for `_protocol_mounts`."""
    options = [
        click.option(
            "--reference-field", default="expected_answer", show_default=True, metavar="FIELD",
            help="NeMo Gym's /verify: the task field that holds the reference (NeMo Gym's math "
            "servers name it expected_answer).",
        ),
        click.option(
            "--group-size", type=click.IntRange(1), metavar="N",
            help="NeMo Gym's /verify with a group reward (group_rank, ...): the attempts per "
            "prompt (NeMo RL's num_generations_per_prompt); each /verify waits for its group's N "
            "attempts, then all N are scored together. Required for /verify when the spec "
            "compares attempts.",
        ),
        click.option(
            "--group-timeout", default=300.0, show_default=True,
            type=click.FloatRange(0, min_open=True),
            help="Seconds a group waits for its attempts after the first arrives, then is scored "
            "with those that came.",
        ),
        click.option(
            "--tasks", type=click.Path(exists=True, dir_okay=False), metavar="FILE",
            help="Serve an Open Reward Standard environment of these tasks (JSONL rows: id, "
            "prompt, reference, optional split): ORS's routes, sessions and one tool that "
            "submits an answer.",
        ),
        click.option(
            "--env-name", metavar="NAME",
            help="The ORS environment's name (with --tasks); default: the spec's name.",
        ),
        click.option(
            "--session-timeout", default=900.0, show_default=True,
            type=click.FloatRange(0, min_open=True),
            help="ORS: seconds a session may go without a request before it is closed.",
        ),
        click.option(
            "--max-sessions", default=4096, show_default=True, type=click.IntRange(1),
            help="ORS: sessions open at once; past it a new one is refused (503).",
        ),
    ]  # fmt: skip
    for option in reversed(options):
        command = option(command)
    return command


@main.command()
@click.option("--spec", "-s", required=True, help="Reward spec file (YAML or JSON).")
@click.option(
    "--host", default="127.0.0.1", show_default=True,
    help="Address to listen on. Anything but loopback (127.0.0.0/8, ::1, localhost) needs "
    "a token.",
)  # fmt: skip
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token", envvar="REFEREE_SERVE_TOKEN", show_envvar=True, metavar="TOKEN",
    help="Every request must send 'Authorization: Bearer TOKEN' (or TOKEN as its basic-auth "
    "password, as in http://referee:TOKEN@host:8000/get_reward); others get 401. Required "
    "beyond loopback; 16+ printable characters. Prefer the environment variable: an option "
    "shows in the process list.",
)  # fmt: skip
@click.option(
    "--trust-clients", is_flag=True,
    help="Serve a spec whose rewards act on the host on what a request's reference says "
    "(python_tests runs each reference's test code unsandboxed); refused without this flag. "
    "Only where everyone who can reach the server may run code as its user.",
)  # fmt: skip
@click.option(
    "--max-concurrent", default=8, show_default=True, type=click.IntRange(1),
    help="Requests scored at once; more wait their turn.",
)  # fmt: skip
@click.option(
    "--max-batch", default=10_000, show_default=True, type=click.IntRange(1),
    help="The most rollouts one request may carry (413 beyond).",
)  # fmt: skip
@click.option(
    "--max-body-mib", default=32.0, show_default=True, type=click.FloatRange(0, min_open=True),
    help="The most MiB a request body may have, counted decompressed (413 beyond).",
)  # fmt: skip
@click.option(
    "--max-connections", default=1024, show_default=True, type=click.IntRange(1),
    help="Connections open at once. Past it a new one closes the oldest idle one; with all "
    "busy with requests, it gets 503.",
)  # fmt: skip
@click.option(
    "--idle-timeout", default=30.0, show_default=True, type=click.FloatRange(0, min_open=True),
    help="Seconds a connection may stay open without sending a whole request's headers "
    "(idle keep-alive included) before it is closed.",
)  # fmt: skip
@click.option(
    "--io-timeout", default=60.0, show_default=True, type=click.FloatRange(0, min_open=True),
    help="Seconds a client has to send a request's body (408 past it), and again to read "
    "its answer (then its connection is closed).",
)  # fmt: skip
@click.option(
    "--failure-value", default=0.0, show_default=True,
    help="What /get_reward (OpenRLHF) returns for a rollout with no score.",
)  # fmt: skip
@click.option(
    "--slow-after", default=0.1, show_default=True, type=click.FloatRange(0, min_open=True),
    help="Seconds after which a request still being scored gives its slot back, so requests "
    "stuck until their deadline do not hold back fast ones.",
)  # fmt: skip
@_end_marker_options
@_protocol_options
def serve(
    spec: str,
    host: str,
    port: int,
    token: str | None,
    trust_clients: bool,
    max_concurrent: int,
    max_batch: int,
    max_body_mib: float,
    max_connections: int,
    idle_timeout: float,
    io_timeout: float,
    failure_value: float,
    slow_after: float,
    end_marker: tuple[str, ...],
    tokenizer: str | None,
    strip_markers: bool,
    **protocols: Any,
) -> None:
    """Serve a reward over HTTP: /score, /get_reward (OpenRLHF), NeMo Gym's /verify, the Open
    Reward Standard (with --tasks) and /health.

    Safe to expose: with a token (--token or REFEREE_SERVE_TOKEN, required beyond loopback)
    every endpoint wants it; a request's body is data, never a spec, an option or a file;
    a spec that would run what a request's reference carries on the host is refused unless
    started with --trust-clients; bodies, connections and slow clients are limited.
    """
    import asyncio

    try:
        from referee.backends.server import serve as run_server
        from referee.backends.server import serve_switch_intervals
    except RefereeError as exc:
        raise click.ClickException(str(exc)) from None
    reward = _load_spec(spec)
    markers = _end_markers(end_marker, tokenizer, strip_markers)
    mounts, notes = _protocol_mounts(reward, **protocols)
    err = Console(stderr=True)

    def ready(url: str) -> None:
        err.print(f"referee: serving {reward.name!r} on {url} (Ctrl-C or SIGTERM to stop)")
        for note in notes:
            err.print(f"referee: {note}", markup=False, soft_wrap=True)
        if trust_clients:
            err.print("referee: --trust-clients: requests' references are trusted", markup=False)
        if end_marker or tokenizer:
            err.print(f"referee: /get_reward strips {markers.describe()}", markup=False,
                      soft_wrap=True)  # fmt: skip

    stuck_switch_interval = serve_switch_intervals()  # the command's, for the whole process

    try:
        asyncio.run(
            run_server(
                reward,
                host=host,
                port=port,
                token=token,
                trust_clients=trust_clients,
                max_batch=max_batch,
                max_concurrent=max_concurrent,
                max_body=int(max_body_mib * 1024**2),
                max_connections=max_connections,
                idle_timeout=idle_timeout,
                io_timeout=io_timeout,
                failure_value=failure_value,
                slow_after=slow_after,
                stuck_switch_interval=stuck_switch_interval,
                end_markers=markers,
                mounts=mounts,
                ready=ready,
            )
        )
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc}") from None
    except ValueError as exc:  # refused before listening: exposure, trust, limits
        raise click.ClickException(str(exc)) from None
    err.print("referee: stopped")


def _protocol_mounts(
    reward: Reward,
    *,
    reference_field: str,
    group_size: int | None,
    group_timeout: float,
    tasks: str | None,
    env_name: str | None,
    session_timeout: float,
    max_sessions: int,
) -> tuple[list[Mount], list[str]]:
    """NeMo Gym's resources server, and an ORS environment where a task file is given; a
    usage error naming the option where the options do not fit. With them, what to tell the
    user at start: a group reward without --group-size serves /score and /get_reward, not
    /verify (which cannot know when a group is whole), rather than refusing to start."""
    from referee.backends.nemo_gym import ResourcesServer
    from referee.backends.ors import OpenRewardEnvironment, environment_name
    from referee.reward import needs_groups

    mounts: list[Mount] = []
    notes: list[str] = []
    if group_size is None and needs_groups(reward):
        notes.append(
            f"NeMo Gym's /verify is not served: {reward.name!r} compares the attempts at a "
            f"prompt, and /verify gets one at a time; give --group-size N to serve it"
        )
    else:
        try:
            server = ResourcesServer(
                reward, reference_field=reference_field, group_size=group_size,
                group_timeout=group_timeout,
            )  # fmt: skip
            mounts.append(server)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
    if tasks is not None:
        try:
            mounts.append(OpenRewardEnvironment(
                tasks, env_name=env_name or environment_name(reward.name),
                session_timeout=session_timeout, max_sessions=max_sessions,
            ))  # fmt: skip
        except RefereeError as exc:
            raise click.BadParameter(str(exc), param_hint="--tasks") from None
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
    elif env_name is not None:
        raise click.UsageError("--env-name names the ORS environment of --tasks: give --tasks")
    return mounts, notes


@main.command("openrlhf-func")
@click.argument("spec", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--output", "-o", required=True, type=click.Path(dir_okay=False, writable=True),
    help="Where to write the reward_func file (a .py path, for --reward.remote_url).",
)  # fmt: skip
@click.option(
    "--failure-value", default=0.0, show_default=True,
    help="The reward of a rollout that gets no score (with referee_failed set).",
)  # fmt: skip
@_end_marker_options
def openrlhf_func(
    spec: str, output: str, failure_value: float, end_marker: tuple[str, ...],
    tokenizer: str | None, strip_markers: bool,
) -> None:  # fmt: skip
    """Write a reward_func file for OpenRLHF's --reward.remote_url: scores SPEC as /get_reward does.

    OpenRLHF loads the file and calls its reward_func(queries, prompts, labels). The file
    imports referee and loads SPEC by its absolute path, so both must be on every node that
    runs OpenRLHF's rollouts.
    """
    from referee.backends.openrlhf import reward_func_source

    if not output.endswith(".py"):
        raise click.BadParameter(
            f"{output!r}: OpenRLHF loads a reward_func file only if its name ends in .py",
            param_hint="--output",
        )
    markers = _end_markers(end_marker, tokenizer, strip_markers)
    reward = _load_spec(spec)  # a spec that does not load fails here, not in the trainer
    text = reward_func_source(spec, end_markers=markers, failure_value=failure_value,
                              written_to=output)  # fmt: skip
    _write(output, text)
    # Plain lines, never wrapped: the last is a command line to copy.
    said = f"referee: wrote {output}: {reward.name!r}, stripping {markers.describe()}"
    click.echo(said, err=True)
    click.echo(f"  OpenRLHF: --reward.remote_url {Path(output).resolve()}", err=True)


@main.command()
@click.argument("specs", nargs=-1, required=True, metavar="SPEC...")
def check(specs: tuple[str, ...]) -> None:
    """Load each SPEC and show what it builds: the reward tree (types, weights, where each
    part runs, its deadline), what a rollout must carry, and what `referee serve` would
    refuse. Exit status 1 when a spec does not load (the error names the file and the key)."""
    from rich.tree import Tree

    from referee.reward import Composite, needs, reference_powers

    def node(tree: Tree, label: str, reward: Reward, depth: int = 0) -> None:
        mode = getattr(reward, "mode", None)
        kind = getattr(reward, "kind", None) or (f"combine: {mode}" if mode else "")
        kind = kind or type(reward).__name__
        where = _runs(reward)
        seconds = getattr(reward, "deadline_seconds", None)
        extra = f", deadline {seconds:g}s" if isinstance(seconds, int | float) else ""
        branch = tree.add(f"[bold]{label}[/bold]: {kind} ({where}{extra})")
        if isinstance(reward, Composite) and depth < 20:
            for part in reward.children():
                how = f"weight {part.weight:g}" + ("" if part.required else ", optional")
                node(branch, f"{part.name} [dim]{how}[/dim]", part.reward, depth + 1)

    console = Console()
    failed = False
    for spec in specs:
        try:
            reward = load(spec)
        except RefereeError as exc:
            Console(stderr=True, soft_wrap=True).print(f"[red]error[/red] {exc}", highlight=False)
            failed = True
            continue
        tree = Tree(f"{spec}: ok")
        node(tree, reward.name, reward)
        console.print(tree, highlight=False)
        wanted = needs(reward)
        if wanted:
            listed = ", ".join(f"{need} ({where})" for where, need in wanted)
            console.print(f"  each rollout needs: {listed}", highlight=False)
        powers = reference_powers(reward)
        if powers:
            listed = "; ".join(f"{name}: {what}" for name, what in powers)
            console.print(
                f"  trusts the reference ({listed}): `referee serve` needs --trust-clients",
                highlight=False,
            )
    if failed:
        sys.exit(1)


def _runs(reward: Reward) -> str:
    """Where a reward's work runs, as `referee types` says it (a check: its run_in)."""
    from referee.rewards import runs_where

    runs_in = getattr(reward, "runs_in", None)
    if isinstance(runs_in, str) and type(reward).__name__ not in ("Combined", "Transform"):
        where = runs_where(type(reward))
        return runs_in if where in ("inline", "thread", "process") else where
    return runs_where(type(reward))


@main.command()
@click.option("--plugins", is_flag=True, help="Include the installed plugins' types.")
def schema(plugins: bool) -> None:
    """Print the JSON Schema of spec files (docs/spec.schema.json is the built-in one): point
    an editor at it to check specs as you type."""
    from referee.spec.model import schema_text

    click.echo(schema_text(plugins=plugins))


@main.command("types")
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


@main.group(invoke_without_command=True)
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


if __name__ == "__main__":
    main()
