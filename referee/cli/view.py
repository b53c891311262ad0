"""`referee view`: scored rollouts one by one, as an HTML page, lowest reward first."""

from __future__ import annotations

from pathlib import Path

import click

from referee.cli._common import load_spec, read_options, scored_or_spec, write
from referee.errors import RefereeError
from referee.rollouts.readers import FileFormat, parse_mapping, read_rollouts
from referee.rollouts.run import score_in_memory
from referee.rollouts.scored import read_scored

__all__ = ["view"]


@click.command()
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
@read_options
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

    scored_or_spec(scored, spec, rollouts)
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
            scores = iter(score_in_memory(listed, load_spec(spec), source=str(shown)))
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
    write(path, render_view(result, title=f"referee view: {shown.name}"))
    kept = len(result.records)
    of = f" of {result.rows}, the lowest-rewarded (--limit 0 keeps all)"
    click.echo(f"wrote {path}: {kept} rollouts{of if kept < result.rows else ''}")
    if open_:
        click.launch(str(path.resolve()))
