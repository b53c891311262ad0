"""The `referee` command: score rollout files, run the demo, list reward types."""

from __future__ import annotations

import contextlib
import itertools
import sys
from collections.abc import Callable, Iterable, Iterator
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn
from rich.table import Table

from referee import __version__
from referee._aio import run_sync
from referee.errors import ClusterError, RefereeError
from referee.registry import lookup, registered_types
from referee.report.diagnostics import (
    AGREEMENT_STATISTICS,
    ReportRow,
    build_report,
    label_value,
    missing_lines,
    preference_value,
)
from referee.report.results import Report
from referee.reward import Reward
from referee.rollouts.jsonl import RowError, RowOk, read_jsonl, validation_message
from referee.rollouts.output import check_output, write_output
from referee.rollouts.readers import FORMATS, Format, parse_mapping, read_rollouts, rows_of
from referee.rollouts.run import (
    DEFAULT_BATCH_SIZE,
    score_file,
    score_rows,
    score_to_path,
)
from referee.rollouts.scored import ScoredRow
from referee.rollouts.summary import Summary
from referee.spec import load

if TYPE_CHECKING:
    from referee.backends.openrlhf import EndMarkers

__all__ = ["main"]

_PROGRESS_MIN_BYTES = 1 << 20
RAY_BATCH_SIZE = 4096  # files smaller than this finish before a bar is worth drawing
SWITCH_INTERVAL = 0.001  # `referee serve`: seconds a thread holds the interpreter lock in turn
STUCK_SWITCH_INTERVAL = 0.0001  # the same, while a request is in the slow lane


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
    rollouts: Path, spec: str, output: Path | None, resume: bool, format_: Format | None,
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
        kept = 0
        with _progress(rollouts, err, quiet) as advance:
            if output is None:
                run = score_file(
                    rollouts, reward, sys.stdout, format=format_, mapping=mapping,
                    batch_size=batch_size, concurrency=concurrency, on_progress=advance,
                )  # fmt: skip
            else:
                # The run writes OUTPUT.partial and OUTPUT.partial.json, then renames the
                # first over OUTPUT: none may be a link, a device or a FIFO.
                for path in _run_files(output):
                    check_output(path)
                rows = read_rollouts(rollouts, format=format_, mapping=mapping)
                run, kept = score_to_path(
                    rollouts, rows, reward, output, spec_text=Path(spec).read_text(),
                    options={"format": format_, "map": mapping}, resume=resume,
                    batch_size=batch_size, concurrency=concurrency, on_progress=advance,
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


def _run_files(output: Path) -> tuple[Path, ...]:
    """The files `score_to_path` writes for `output`."""
    return (
        output,
        output.with_name(output.name + ".partial"),
        output.with_name(output.name + ".partial.json"),
    )


def _write(path: Path | str, text: str) -> None:
    """Write an output file only where a regular file is or nothing is yet."""
    try:
        write_output(path, text)
    except OSError as exc:
        raise click.ClickException(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None


def _output_rows(items: list[RowOk | RowError], reward: Reward, source: Path) -> list[ScoredRow]:
    """The rows `referee score` would write for `items`, in memory."""
    out: list[ScoredRow] = []
    run_sync(score_rows(items, reward, out.append, source=str(source)))
    return out


def _report_rows(
    items: Iterable[RowOk | RowError],
    scores: Iterable[ScoredRow],
    label: str | None,
    preference: str | None = None,
) -> tuple[list[ReportRow], str | None, str | None]:
    """Report rows from input items and their scored rows (in the same order), and the label
    and preference keys found."""
    rows: list[ReportRow] = []
    found: str | None = label
    found_pref: str | None = preference
    for i, (item, scored) in enumerate(itertools.zip_longest(items, scores)):
        if item is None or scored is None:
            raise click.ClickException(
                f"the scored file and the rollouts differ in length (at row {i + 1}); "
                "pass the rollouts file that was scored"
            )
        chars = None
        value = None
        preferred = None
        if isinstance(item, RowOk):
            if scored.id is not None and scored.id != item.rollout.id:
                raise click.ClickException(
                    f"row {i + 1}: the scored file has id {scored.id!r}, the rollouts "
                    f"{item.rollout.id!r}; pass the rollouts file that was scored"
                )
            chars = len(item.rollout.completion_text)
            key, value = label_value(item.rollout.metadata, label)
            found = found or key
            pkey, preferred = preference_value(item.rollout.metadata, preference)
            found_pref = found_pref or pkey
        rows.append(ReportRow.of(scored, chars=chars, label=value, preferred=preferred))
    return rows, found, found_pref


def _scored_rows(path: Path) -> Iterator[ScoredRow]:
    for number, _, row, error in rows_of(path):
        why = error or "no reward key"
        if row is not None and "reward" in row:
            try:
                scored = ScoredRow.model_validate(row)
            except ValidationError as exc:
                why = validation_message(exc)
            else:
                yield scored
                continue
        raise click.ClickException(
            f"{path}:{number}: not a scored row ({why}); "
            "pass the output of referee score, or rollouts with --spec"
        )


@main.command()
@click.argument("scored", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--rollouts", "-r", type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The rollouts that were scored: adds completion lengths and human labels.",
)  # fmt: skip
@click.option("--spec", "-s", help="Score SCORED (then rollouts) with this spec first.")
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
def report(
    scored: Path, rollouts: Path | None, spec: str | None, repeat: int, label: str | None,
    preference: str | None, threshold: float, format_: Format | None, maps: tuple[str, ...],
    html_path: Path | None, json_path: Path | None,
) -> None:  # fmt: skip
    """Diagnose a reward on logged rollouts: distributions, failures, GRPO signal, length
    correlation, agreement with human labels, determinism (HTML, JSON and a terminal summary).

    SCORED is the output of `referee score`; with --spec it is a rollouts file, scored here."""
    from referee.report.html import render_html

    try:
        mapping = parse_mapping(maps)
        repeats: list[list[float | None]] | None = None
        if spec is not None:
            reward = _load_spec(spec)
            items = list(read_rollouts(scored, format=format_, mapping=mapping))
            runs = [_output_rows(items, reward, scored) for _ in range(repeat)]
            repeats = [[r.reward for r in run] for run in runs]
            rows, found, found_pref = _report_rows(items, runs[0], label, preference)
        elif rollouts is not None:
            items_iter = read_rollouts(rollouts, format=format_, mapping=mapping)
            rows, found, found_pref = _report_rows(
                items_iter, _scored_rows(scored), label, preference
            )
        else:
            rows = [ReportRow.of(r) for r in _scored_rows(scored)]
            found = found_pref = None
    except RefereeError as exc:
        raise click.ClickException(str(exc)) from None
    result = build_report(rows, label=found, preference=found_pref, threshold=threshold,
                          repeats=repeats, source=str(scored))  # fmt: skip
    console = Console()
    _print_report(console, result)
    if json_path is not None:
        _write(json_path, result.to_json(indent=2))
        console.print(f"wrote {json_path}")
    if html_path is not None:
        _write(html_path, render_html(result, title=f"referee report: {scored.name}"))
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
    if result.failures:
        console.print("failures: " + ", ".join(f"{k} {v}" for k, v in result.failures.items()))


@main.command()
@click.argument("a")
@click.argument("b")
@click.option(
    "--rollouts", "-r", type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A and B are specs: score these rollouts with each. Otherwise A and B are scored files.",
)  # fmt: skip
@click.option("--threshold", default=0.5, show_default=True,
              help="Reward at or above which a verdict is a pass.")  # fmt: skip
@click.option("--top", default=10, show_default=True, help="How many flipped rollouts to show.")
@click.option("--format", "-f", "format_", type=click.Choice(FORMATS))
@click.option("--map", "-m", "maps", multiple=True, metavar="FIELD=COLUMN")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the comparison as JSON here.")  # fmt: skip
def compare(
    a: str, b: str, rollouts: Path | None, threshold: float, top: int, format_: Format | None,
    maps: tuple[str, ...], json_path: Path | None,
) -> None:  # fmt: skip
    """Compare two rewards on the same rollouts: two specs (with --rollouts) or two files
    scored by `referee score`."""
    from referee.report.compare import Compared
    from referee.report.compare import compare as compare_scores

    try:
        if rollouts is not None:
            items = list(read_rollouts(rollouts, format=format_, mapping=parse_mapping(maps)))
            rows_a, rows_b = (_output_rows(items, _load_spec(spec), rollouts) for spec in (a, b))
        else:
            rows_a, rows_b = list(_scored_rows(Path(a))), list(_scored_rows(Path(b)))
    except RefereeError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(str(exc)) from None
    if len(rows_a) != len(rows_b):
        raise click.ClickException(
            f"{a} has {len(rows_a)} rows and {b} {len(rows_b)}: compare scorings of the same "
            "rollouts"
        )
    pairs = []
    for i, (x, y) in enumerate(zip(rows_a, rows_b, strict=True)):
        if x.id != y.id:
            raise click.ClickException(
                f"row {i + 1}: id {x.id!r} in {a} but {y.id!r} in {b}: compare "
                "scorings of the same rollouts, in the same order"
            )
        pairs.append(Compared(str(x.id), x.group, x.reward, y.reward))
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
    format_: Format | None, maps: tuple[str, ...], json_path: Path | None,
) -> None:  # fmt: skip
    """Try reward hacks built from ROLLOUTS against a spec; exit 1 when any works (for CI).

    Probes: empty answer, format without content, prompt copied back, hedged answers, an
    instruction to the grader, a fake verdict, a judge-fence escape, for code exit-0 / PASSED /
    always-equal; and the gold answer repeated or padded (which must not earn more)."""
    from referee.report.probes import PROBES, run_probes

    names = None
    if only:
        names = [n.strip() for n in only.split(",") if n.strip()]
        unknown = sorted(set(names) - {p.name for p in PROBES})
        if unknown:
            raise click.UsageError(
                f"unknown probes {unknown}; known: {', '.join(p.name for p in PROBES)}"
            )
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
        rows: list[ScoredRow] = []
        with resources.as_file(data / f"{name}.jsonl") as rollouts_path:
            inputs = list(read_jsonl(rollouts_path))
            run = run_sync(score_rows(inputs, reward, rows.append))
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
    from referee.backends.openrlhf import EndMarkers

    if not strip:
        if end_marker or tokenizer:
            raise click.UsageError(
                "--no-strip-markers strips nothing: drop --end-marker/--tokenizer"
            )
        return EndMarkers.none()
    if not end_marker and tokenizer is None:
        return EndMarkers()
    found: tuple[str, ...] = ()
    if tokenizer is not None:
        try:
            found = EndMarkers.from_tokenizer(tokenizer).markers
        except (RefereeError, ValueError, OSError) as exc:
            raise click.BadParameter(str(exc), param_hint="--tokenizer") from None
    try:
        return EndMarkers((*end_marker, *found))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--end-marker") from None


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
) -> None:
    """Serve a reward over HTTP: /score, /get_reward (OpenRLHF) and /health.

    Safe to expose: with a token (--token or REFEREE_SERVE_TOKEN, required beyond loopback)
    every endpoint wants it; a request's body is data, never a spec, an option or a file;
    a spec that would run what a request's reference carries on the host is refused unless
    started with --trust-clients; bodies, connections and slow clients are limited.
    """
    import asyncio

    try:
        from referee.backends.server import serve as run_server
    except RefereeError as exc:
        raise click.ClickException(str(exc)) from None
    reward = _load_spec(spec)
    markers = _end_markers(end_marker, tokenizer, strip_markers)
    err = Console(stderr=True)

    def ready(url: str) -> None:
        err.print(f"referee: serving {reward.name!r} on {url} (Ctrl-C or SIGTERM to stop)")
        if trust_clients:
            err.print("referee: --trust-clients: requests' references are trusted", markup=False)
        if end_marker or tokenizer:
            err.print(f"referee: /get_reward strips {markers.describe()}", markup=False,
                      soft_wrap=True)  # fmt: skip

    # A sync check computing until its deadline holds the interpreter lock in turns with the
    # event loop: a shorter switch interval (5ms by default) hands it back sooner; shorter still
    # while a request is in the slow lane (STUCK_SWITCH_INTERVAL).
    sys.setswitchinterval(SWITCH_INTERVAL)

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
                stuck_switch_interval=STUCK_SWITCH_INTERVAL,
                end_markers=markers,
                ready=ready,
            )
        )
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc}") from None
    except ValueError as exc:  # refused before listening: exposure, trust, limits
        raise click.ClickException(str(exc)) from None
    err.print("referee: stopped")


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


@main.command("types")
def types_() -> None:
    """List the reward types a spec can use (built-in and plugins)."""
    console = Console()
    table = Table()
    table.add_column("type")
    table.add_column("runs")
    table.add_column("what it does")
    for name in registered_types():
        cls = lookup(name)
        doc = (cls.__doc__ or "").strip().splitlines()[0] if cls is not None and cls.__doc__ else ""
        table.add_row(name, _where_it_runs(cls), doc)
    console.print(table)
    console.print(
        "runs: inline (in the caller's thread: its cost is bounded), process (a worker process, "
        "killed at the deadline), sandbox (the code in the sandbox, graded on threads), event "
        "loop (it waits: a judge, a model), parts (where its inner reward runs). A check "
        "type takes run_in: inline | thread | process in a spec."
    )


def _where_it_runs(cls: type[Any] | None) -> str:
    """Where a reward type's work runs, for `referee types` (docs/deadlines.md)."""
    from referee.reward import CheckReward, RewardBase
    from referee.rewards._sandboxed import SandboxedReward

    if not isinstance(cls, type):
        return "?"
    if issubclass(cls, CheckReward):
        return str(cls.default_run_in)
    if issubclass(cls, SandboxedReward):
        return "sandbox"
    if getattr(cls, "children", RewardBase.children) is not RewardBase.children:
        return "parts"
    return "event loop"


@main.group()
def rubrics() -> None:
    """The rubrics judges grade with."""


@rubrics.command("list")
def rubrics_list() -> None:
    """List the shipped rubrics."""
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
