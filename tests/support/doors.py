"""The entry points of the conformance matrix (tests/backends/test_matrix.py): every door a
rollout can reach referee through, what each carries of a rollout, and the table the docs show.

Plain data, importing nothing heavy: the docs hook (docs/hooks.py) draws the table from it
and the registry, and `tests.support.matrix` runs each door.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

Carried = Literal["messages", "metadata", "tokens", "group"]
"""What of a rollout a door may lose: a completion as chat messages (a trajectory), its
metadata, the response's token count (``metadata.completion_tokens``), its group."""


Refused = Literal["group", "messages", "tokens"]
"""What a spec may need that a door cannot carry (`referee.reward.Need`, a reference aside)."""


@dataclass(frozen=True)
class Door:
    """One entry point.

    Attributes:
        name: The matrix's name for it (a test id).
        title: What it is, for the table.
        loses: What of a rollout it cannot carry (the matrix says so when a cell differs).
        refuses: What a spec may need that this door cannot give a reward: a spec that needs
            it (a group reward, a trajectory reward, a token count) must be refused at load,
            with a clear error (`referee.backends.contract.refuse_unfit`), where it would
            score every rollout wrong.
        f32: The value reaches the trainer as float32: compared after that cast.
    """

    name: str
    title: str
    loses: frozenset[Carried] = frozenset()
    refuses: frozenset[Refused] = frozenset()
    f32: bool = False


# A text protocol: a completion string, no metadata.
_TEXT: Final = frozenset({"messages", "metadata", "tokens"})
_ALL: Final[frozenset[Refused]] = frozenset({"group", "messages", "tokens"})
_GROUP: Final[frozenset[Refused]] = frozenset({"group"})
_SCRIPT: Final[frozenset[Refused]] = frozenset({"group", "tokens"})

_TRL = "TRL: `reward_funcs(...)` (sync or async, as the reward is)"
_NEMO = "`referee serve`: NeMo Gym's `POST /verify` (`--group-size`)"
_NAIVE = "verl: `NaiveRewardManager` + `compute_score`"
_LEGACY = "verl: `RefereeRewardManager` (legacy; `per_turn` for trajectories)"
_MESSAGES: Final = frozenset({"messages"})
_TOKENS: Final = frozenset({"tokens"})  # no dataset holds a response's token count

DOORS: Final = (
    Door("api", "`referee.score` (the reference)"),
    Door("score_batch", "`await reward.score_batch(...)`"),
    Door("cli", "`referee score` (a process)"),
    Door("serve", "`referee serve`: `POST /score`"),
    Door("serve_openrlhf", "`referee serve`: OpenRLHF's `POST /get_reward`", _TEXT, _ALL),
    Door("serve_nemo_gym", _NEMO, frozenset({"metadata"})),  # but tools and the token count
    Door("serve_ors", "`referee serve --tasks`: an ORS episode", _TEXT, _ALL),
    Door("trl", _TRL),
    Door("verl_compute_score", "verl: `compute_score` (from a user's script)", _TOKENS, _SCRIPT),
    Door(
        "verl_compute_score_async",
        "verl: `compute_score_async` (from a user's script)",
        _TOKENS,
        _SCRIPT,
    ),
    Door("verl_naive", _NAIVE, _MESSAGES | _TOKENS, _ALL, f32=True),
    Door(
        "verl_loop",
        "verl: the reward loop + `compute_score_async`",
        _MESSAGES | _TOKENS,
        _ALL,
        f32=True,
    ),
    Door("verl_referee", _LEGACY, f32=True),
    Door(
        "verl_referee_loop",
        "verl: the reward loop + `RefereeRewardLoopManager` (`per_turn` for trajectories)",
        f32=True,
    ),
    Door("openrlhf_func", "OpenRLHF: `RewardFunc` (`reward_func.py`)", _TEXT, _ALL),
    Door("ray", "`RayReward` (`referee score --engine ray`)"),
    # PrimeIntellect's verifiers 0.4 (referee.backends.prime_verifiers): a Task's reward. Its
    # Rubric of 0.3 is gone; a group reward is an Env's finalize (EpisodeScorer), not a Task's.
    Door("verifiers", "verifiers: `Task.score` with a `RefereeReward`", refuses=_GROUP),
)
"""Every door, in the table's order."""


def door(name: str) -> Door:
    return next(d for d in DOORS if d.name == name)


def cell(door: Door, needs: Iterable[str]) -> str:
    """What the matrix checks at a door for a type whose example spec needs `needs`: the same
    number, or a refusal."""
    return "refused" if door.refuses & set(needs) else "same"


def refusal_words(door: Door, needs: Iterable[str]) -> list[str]:
    """What a door's refusal must say: each need it cannot carry, in words."""
    said = {"group": "group", "messages": "messages", "tokens": "token"}
    return [said[n] for n in sorted(door.refuses & set(needs))]


def matrix_markdown(types: Iterable[tuple[str, frozenset[str]]]) -> str:
    """The table of types (name, what its example spec needs) by doors."""
    doors = [d for d in DOORS if d.name != "api"]
    head = "| type | " + " | ".join(f"[{i + 1}]" for i in range(len(doors))) + " |"
    out = [head, "|---|" + "---|" * len(doors)]
    marks = {"same": "✓", "refused": "refused"}
    for name, needs in types:
        row = [marks[cell(d, needs)] for d in doors]
        out.append(f"| [`{name}`](../reference/types/{name}.md) | " + " | ".join(row) + " |")
    legend = [f"{i + 1}. {d.title}" for i, d in enumerate(doors)]
    return "\n".join(out) + "\n\n" + "\n".join(legend) + "\n"
