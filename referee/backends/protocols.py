"""The protocols `referee serve` speaks beside ``/score``, each with its command-line options.

OpenRLHF's ``/get_reward`` (and ``referee openrlhf-func``'s file) strips end markers
(`OPENRLHF_OPTIONS`, read by `referee.backends.openrlhf.choose_markers`); NeMo Gym's resources
server (`NEMO_GYM_OPTIONS`, `referee.backends.nemo_gym`) and an Open Reward Standard
environment (`ORS_OPTIONS`, `referee.backends.ors`) are mounted by `mounts` from what their
options say. A protocol's options are declared here once, with its defaults and its help; the
CLI attaches them to its commands (`with_options`) and hands their values back. Importing this
module imports no protocol, nor aiohttp (``referee serve --help`` works without the ``serve``
extra).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import click

from referee.errors import RefereeError

if TYPE_CHECKING:
    from referee.backends.service import Mount
    from referee.reward import Reward

__all__ = [
    "NEMO_GYM_OPTIONS",
    "OPENRLHF_OPTIONS",
    "ORS_OPTIONS",
    "BadOption",
    "mounts",
    "with_options",
]

F = TypeVar("F", bound=Callable[..., None])

OPENRLHF_OPTIONS = (
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
)  # fmt: skip
"""What OpenRLHF's end-of-turn markers are: ``end_marker``, ``tokenizer``, ``strip_markers``."""

NEMO_GYM_OPTIONS = (
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
)  # fmt: skip
"""NeMo Gym's resources server: ``reference_field``, ``group_size``, ``group_timeout``."""

ORS_OPTIONS = (
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
)  # fmt: skip
"""An ORS environment: ``tasks``, ``env_name``, ``session_timeout``, ``max_sessions``."""


def with_options(*options: Callable[[F], F]) -> Callable[[F], F]:
    """A decorator that gives a command `options`, listed in the order given."""

    def decorate(command: F) -> F:
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


class BadOption(ValueError):
    """Protocol options that do not fit; `option` names the one at fault (None: the mix)."""

    def __init__(self, message: str, option: str | None) -> None:
        super().__init__(message)
        self.option = option


def mounts(
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
    """What `NEMO_GYM_OPTIONS` and `ORS_OPTIONS` ask `referee serve` to mount: NeMo Gym's
    resources server, and an ORS environment where a task file is given. With them, what to
    tell the user at start: a group reward without `group_size` serves /score and
    /get_reward, not /verify (which cannot know when a group is whole), rather than refusing
    to start.

    Raises:
        BadOption: The options do not fit (the task file cannot be read: ``--tasks``).
        MissingDependency: aiohttp is not installed (the ``serve`` extra).
    """
    from referee.backends.nemo_gym import ResourcesServer
    from referee.reward import needs_groups

    found: list[Mount] = []
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
        except ValueError as exc:
            raise BadOption(str(exc), None) from None
        found.append(server)
    if tasks is not None:
        from referee.backends.ors import OpenRewardEnvironment, environment_name

        try:
            found.append(OpenRewardEnvironment(
                tasks, env_name=env_name or environment_name(reward.name),
                session_timeout=session_timeout, max_sessions=max_sessions,
            ))  # fmt: skip
        except RefereeError as exc:
            raise BadOption(str(exc), "--tasks") from None
        except ValueError as exc:
            raise BadOption(str(exc), None) from None
    elif env_name is not None:
        raise BadOption("--env-name names the ORS environment of --tasks: give --tasks", None)
    return found, notes
