"""`referee openrlhf-func`: a reward_func file for OpenRLHF's ``--reward.remote_url``."""

from __future__ import annotations

from pathlib import Path

import click

from referee.backends.protocols import OPENRLHF_OPTIONS, with_options
from referee.cli._common import end_markers, load_spec, write

__all__ = ["openrlhf_func"]


@click.command("openrlhf-func")
@click.argument("spec", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--output", "-o", required=True, type=click.Path(dir_okay=False, writable=True),
    help="Where to write the reward_func file (a .py path, for --reward.remote_url).",
)  # fmt: skip
@click.option(
    "--failure-value", default=0.0, show_default=True,
    help="The reward of a rollout that gets no score (with referee_failed set).",
)  # fmt: skip
@with_options(*OPENRLHF_OPTIONS)
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
    markers = end_markers(end_marker, tokenizer, strip_markers)
    reward = load_spec(spec)  # a spec that does not load fails here, not in the trainer
    text = reward_func_source(spec, end_markers=markers, failure_value=failure_value,
                              written_to=output)  # fmt: skip
    write(output, text)
    # Plain lines, never wrapped: the last is a command line to copy.
    said = f"referee: wrote {output}: {reward.name!r}, stripping {markers.describe()}"
    click.echo(said, err=True)
    click.echo(f"  OpenRLHF: --reward.remote_url {Path(output).resolve()}", err=True)
