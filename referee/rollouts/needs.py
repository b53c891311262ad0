"""Say it before scoring: a rollout file that lacks what a component needs on every row.

A component that needs a reference (`math_answer`, `field_match`, the code rewards, ...) and
finds none cannot score; under ``on_failure: fail`` (the default) every rollout then fails,
and under ``omit`` the others are paid alone. When none of the first rows of a file has what
a component needs, the run stops before scoring, with an error naming the component, the
missing field, the keys the rows do have and the fix (`MissingInput`).

Only components whose failure fails the total count (`referee.reward.needs`): one the spec
lets go without its value (``on_failure: omit`` or ``value``) is the user's stated choice.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from referee.errors import MissingInput, RolloutError
from referee.reward import Need, Reward, needs
from referee.rollout import Rollout, token_count
from referee.rollouts.jsonl import RowError, RowOk
from referee.rollouts.readers import rows_of

__all__ = [
    "GROUP_GUESSES",
    "REFERENCE_GUESSES",
    "SAMPLE_ROWS",
    "check_rows",
    "describe_missing",
    "guess_column",
    "unmet",
]

SAMPLE_ROWS = 1000
"""How many rows are read ahead to see whether any has what the reward needs."""

REFERENCE_GUESSES = (
    "answer", "ground_truth", "solution", "gts", "gt", "target", "label", "expected", "gold",
    "reference_answer", "final_answer", "expected_output", "output",
)  # fmt: skip
"""Column names that usually hold the ground truth, in the order a fix suggests them."""

GROUP_GUESSES = ("uid", "prompt_id", "question_id", "task_id", "problem_id", "index")
"""Column names that usually identify the prompt a rollout answers."""

_PRESENT: dict[Need, Callable[[Rollout], bool]] = {
    "reference": lambda r: r.reference is not None,
    "group": lambda r: r.group is not None,
    "messages": lambda r: isinstance(r.completion, list),
    "tokens": lambda r: token_count(r) is not None,
}

_WHAT: dict[Need, str] = {
    "reference": "a reference",
    "group": "a group (the attempts at one prompt share one)",
    "messages": "a completion as chat messages",
    "tokens": "the response's token count (metadata.completion_ids or completion_tokens)",
}


def unmet(reward: Reward, rollouts: Sequence[Rollout]) -> list[tuple[str, Need]]:
    """The ``(component, need)`` pairs of `reward` (`referee.reward.needs`) that none of
    `rollouts` meets; none when there are no rollouts."""
    if not rollouts:
        return []
    wanted = needs(reward)
    met = {n: any(map(_PRESENT[n], rollouts)) for n in {n for _, n in wanted}}
    return [(component, n) for component, n in wanted if not met[n]]


def guess_column(keys: Iterable[str], guesses: Sequence[str]) -> str | None:
    """The first of `keys` (dotted paths allowed) whose last part is one of `guesses`, in the
    order of `guesses`."""
    by_last: dict[str, str] = {}
    for key in keys:
        by_last.setdefault(key.rsplit(".", 1)[-1].lower(), key)
    return next((by_last[g] for g in guesses if g in by_last), None)


def describe_missing(
    missing: Sequence[tuple[str, Need]],
    *,
    lacking: Callable[[Need], str],
    fix: Callable[[Need], str],
) -> str:
    """The error for `missing`: per need, the components that need it, what the input lacks
    (`lacking`), the fix (`fix`), and the spec's way to let a component go without it."""
    lines = []
    for need in dict.fromkeys(n for _, n in missing):
        names = [c for c, n in missing if n == need]
        quoted = ", ".join(repr(c) for c in names)
        who = f"component {quoted} needs" if len(names) == 1 else f"components {quoted} need"
        lines.append(f"{who} {_WHAT[need]}, and {lacking(need)}")
        lines.append(f"  fix: {fix(need)}")
        them = "it" if len(names) == 1 else "each"
        lines.append(
            f"  or, where {quoted} may go without it: on_failure: omit on {them} in the spec "
            "(left out of the total; on_failure: value counts failure_value instead)"
        )
    return "\n".join(lines)


def _keys(path: Path) -> list[str]:
    """The keys of the first readable row of `path`, and one level of nested keys."""
    try:
        for _, _, row, _ in rows_of(path):
            if row is None:
                continue
            keys = []
            for key, value in row.items():
                keys.append(str(key))
                if isinstance(value, Mapping):
                    keys.extend(f"{key}.{sub}" for sub in list(value)[:10])
            return keys[:30]
    except (OSError, RolloutError):
        pass
    return []


def _file_fix(keys: Sequence[str]) -> Callable[[Need], str]:
    def fix(need: Need) -> str:
        if need == "reference":
            column = guess_column(keys, REFERENCE_GUESSES)
            if column is not None:
                return f"--map reference={column} (the column that holds it)"
            return "--map reference=<column> (the column that holds it; dotted for nested)"
        if need == "group":
            column = guess_column(keys, GROUP_GUESSES) or "<column>"
            return (
                f"--map group={column} (the column shared by the attempts at one prompt; "
                "without one, each rollout is a group of one)"
            )
        if need == "tokens":
            return (
                "--map metadata.completion_tokens=<column> (the response's token count), "
                "or unit: words or unit: chars in the spec to measure the text instead"
            )
        return "read chat logs (--format openai), whose completions are messages"

    return fix


def check_rows(
    reward: Reward,
    rows: Iterable[RowOk | RowError],
    *,
    source: str | Path,
    sample: int = SAMPLE_ROWS,
) -> Iterator[RowOk | RowError]:
    """`rows`, all of them, once their first `sample` readable rollouts (read ahead, and kept)
    are checked against what `reward` needs.

    Raises:
        MissingInput: None of those rollouts has what a component needs (`unmet`); the
            message names the components, the missing field, the keys of the file's rows
            and the fix (``--map reference=<column>``, or ``on_failure: omit``).
    """
    it = iter(rows)
    ahead: list[RowOk | RowError] = []
    rollouts: list[Rollout] = []
    for row in it:
        ahead.append(row)
        if isinstance(row, RowOk):
            rollouts.append(row.rollout)
            if len(rollouts) >= sample:
                break
    missing = unmet(reward, rollouts)
    if missing:
        keys = _keys(Path(source))
        n = len(rollouts)
        checked = "the only row has none" if n == 1 else f"none of the {n} rows has one"
        if n >= sample:
            checked = f"none of the first {n} rows has one"
        shown = f" (their keys: {', '.join(keys)})" if keys else ""
        message = describe_missing(
            missing,
            lacking=lambda need: f"{checked}{shown}",
            fix=_file_fix(keys),
        )
        raise MissingInput(message, missing=missing, keys=keys, source=str(source))
    return itertools.chain(ahead, it)
