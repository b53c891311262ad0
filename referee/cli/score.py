"""`referee score`: a spec's scores of a rollouts file, one output row per rollout."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

from referee.cli._common import FORMAT_HELP, MAP_HELP, load_spec, run_notes, summary_tables
from referee.errors import ClusterError, MissingInput, RefereeError
from referee.rollouts.readers import FORMATS, FileFormat, parse_mapping
from referee.rollouts.run import DEFAULT_BATCH_SIZE, score_to

__all__ = ["RAY_BATCH_SIZE", "score"]

_PROGRESS_MIN_BYTES = 1 << 20  # files smaller than this finish before a bar is worth drawing
RAY_BATCH_SIZE = 4096


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


@click.command()
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
    help=FORMAT_HELP,
)  # fmt: skip
@click.option(
    "--map", "-m", "maps", multiple=True, metavar="FIELD=COLUMN",
    help=MAP_HELP,
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
    Where every row failed, the command exits with status 1 after writing them, and says why
    (the first distinct reasons, with their counts); where most did, it says so.
    """
    reward = load_spec(spec)
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
    notes = run_notes(run.summary)
    if notes and (not quiet or run.summary.all_failed):
        style = "red" if run.summary.all_failed else "yellow"
        for line in notes:
            err.print(line, style=style if not line.startswith("  ") else None, highlight=False,
                      markup=False, soft_wrap=True)  # fmt: skip
    if run.summary.all_failed:
        sys.exit(1)
