"""The `referee` command: score rollout files, run the demo, list reward types."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn
from rich.table import Table

from referee import __version__
from referee._aio import run_sync
from referee.errors import RefereeError
from referee.registry import lookup, registered_types
from referee.report.summary import Summary
from referee.reward import Reward
from referee.rollouts.jsonl import RowError, RowOk, read_jsonl
from referee.rollouts.readers import FORMATS, Format, parse_mapping, read_rollouts
from referee.rollouts.run import (
    DEFAULT_BATCH_SIZE,
    ScoreRun,
    dump_row,
    score_rows,
    score_to_path,
)
from referee.spec import load

__all__ = ["main"]

_PROGRESS_MIN_BYTES = 1 << 20  # files smaller than this finish before a bar is worth drawing


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def summary_tables(summary: Summary) -> list[Table]:
    """The summary as rich tables: one of component statistics, one of failures if any."""
    table = Table(title=f"{summary.rows} rows", title_justify="left")
    for column in ("component", "count", "mean", "std", "min", "max", "no value"):
        table.add_column(column, justify="left" if column == "component" else "right")
    for name, stats in summary.components.items():
        d = stats.to_dict()
        table.add_row(
            name,
            str(stats.count),
            _fmt(d["mean"]),
            _fmt(d["std"]),
            _fmt(d["min"]),
            _fmt(d["max"]),
            str(stats.missing + summary.skipped.get(name, 0)),
        )
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
def _progress(path: Path, console: Console, quiet: bool) -> Iterator[Progress | None]:
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
        yield progress


def _score_stdout(
    path: Path, rows: Iterable[RowOk | RowError], reward: Reward, console: Console, quiet: bool,
    batch_size: int, concurrency: int | None,
) -> ScoreRun:  # fmt: skip
    def write(row: dict[str, Any]) -> None:
        sys.stdout.write(dump_row(row))
        sys.stdout.write("\n")

    with _progress(path, console, quiet) as progress:
        advance = None
        if progress is not None:
            task = progress.add_task(f"scoring {path.name}", total=path.stat().st_size)
            advance = lambda n: progress.advance(task, n)  # noqa: E731
        return run_sync(
            score_rows(
                rows,
                reward,
                write,
                source=str(path),
                batch_size=batch_size,
                concurrency=concurrency,
                on_progress=advance,
            )
        )


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
@click.option("--batch-size", default=DEFAULT_BATCH_SIZE, show_default=True, type=click.IntRange(1))
@click.option(
    "--concurrency", type=click.IntRange(1), help="Rollouts scored at once by async rewards."
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar and no summary.")
def score(
    rollouts: Path, spec: str, output: Path | None, resume: bool, format_: Format | None,
    maps: tuple[str, ...], batch_size: int, concurrency: int | None, quiet: bool,
) -> None:  # fmt: skip
    """Score ROLLOUTS (JSONL or Parquet, from referee, verl, TRL or OpenAI chat logs) with a
    reward spec; one output row per rollout, in order."""
    reward = _load_spec(spec)
    console = Console(stderr=True) if output is None else Console()
    err = Console(stderr=True)
    if resume and output is None:
        raise click.UsageError("--resume needs --output: the run continues into that file")
    try:
        mapping = parse_mapping(maps)
        rows = read_rollouts(rollouts, format=format_, mapping=mapping)
        kept = 0
        if output is None:
            run = _score_stdout(rollouts, rows, reward, err, quiet, batch_size, concurrency)
        else:
            with _progress(rollouts, err, quiet) as progress:
                advance = None
                if progress is not None:
                    task = progress.add_task(f"scoring {rollouts.name}",
                                             total=rollouts.stat().st_size)  # fmt: skip
                    advance = lambda n: progress.advance(task, n)  # noqa: E731
                run, kept = score_to_path(
                    rollouts, rows, reward, output, spec_text=Path(spec).read_text(),
                    options={"format": format_, "map": mapping}, resume=resume,
                    batch_size=batch_size, concurrency=concurrency, on_progress=advance,
                )  # fmt: skip
    except KeyboardInterrupt:
        where = f"; run the same command with --resume to finish {output}" if output else ""
        err.print(f"[yellow]interrupted{where}[/yellow]")
        sys.exit(130)
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


_DEMOS = (
    ("extraction", "press releases -> JSON: company, amount, date, provinces"),
    ("math", "math word problems: boxed final answer, think/answer format"),
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
        rows: list[dict[str, Any]] = []
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
        table.add_column("reason", overflow="fold")
        for row in rows:
            reason = str(row.get("reason") or "")
            if 0 < width < len(reason):
                reason = reason[: width - 3] + "..."
            reward_value = row.get("reward")
            table.add_row(
                str(row["id"]),
                notes.get(str(row["id"]), ""),
                _fmt(reward_value if isinstance(reward_value, float | int) else None),
                reason,
            )
        console.print(table)
        for summary_table in summary_tables(run.summary):
            console.print(summary_table)


@main.command()
@click.option("--spec", "-s", required=True, help="Reward spec file (YAML or JSON).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--max-concurrent", default=8, show_default=True, type=click.IntRange(1),
    help="Requests scored at once; more wait their turn.",
)  # fmt: skip
@click.option(
    "--max-batch", default=10_000, show_default=True, type=click.IntRange(1),
    help="The most rollouts one request may carry (413 beyond).",
)  # fmt: skip
@click.option(
    "--failure-value", default=0.0, show_default=True,
    help="What /get_reward (OpenRLHF) returns for a rollout with no score.",
)  # fmt: skip
def serve(
    spec: str, host: str, port: int, max_concurrent: int, max_batch: int, failure_value: float
) -> None:
    """Serve a reward over HTTP: /score, /get_reward (OpenRLHF) and /health."""
    import asyncio

    try:
        from referee.backends.server import serve as run_server
    except RefereeError as exc:
        raise click.ClickException(str(exc)) from None
    reward = _load_spec(spec)
    err = Console(stderr=True)

    def ready(url: str) -> None:
        err.print(f"referee: serving {reward.name!r} on {url} (Ctrl-C or SIGTERM to stop)")

    try:
        asyncio.run(
            run_server(
                reward,
                host=host,
                port=port,
                max_batch=max_batch,
                max_concurrent=max_concurrent,
                failure_value=failure_value,
                ready=ready,
            )
        )
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc}") from None
    err.print("referee: stopped")


@main.command("types")
def types_() -> None:
    """List the reward types a spec can use (built-in and plugins)."""
    console = Console()
    table = Table()
    table.add_column("type")
    table.add_column("what it does")
    for name in registered_types():
        cls = lookup(name)
        doc = (cls.__doc__ or "").strip().splitlines()[0] if cls is not None and cls.__doc__ else ""
        table.add_row(name, doc)
    console.print(table)


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
