"""Judge panels: several models judge one rollout on their own, and their values are voted.

A judge reward given ``models: [...]`` asks every member through its own `JudgeClient` (so the
cache, retries, rate limits and the spend cap apply to each call), at once, and decides:

- ``vote: majority``: the value more than half of *all* the members gave. Every member is in
  the denominator, members that gave no verdict included: three members, one of which failed
  and two that disagree, have no majority, and that is a ``judge`` Failure that says so,
  never the first member's value.
- ``vote: mean`` or ``median``: over the members that answered.

Before either, fewer answers than ``quorum`` is a ``judge`` Failure. A member whose call
failed (`JudgeError`, `JudgeTimeout`, a reply that is no valid verdict) abstains;
`BudgetExceeded` is no abstention: a run out of money fails the whole score (``budget``).

Each member's value is the component ``panel.<name>`` (None when it abstained) and its cost
``panel.<name>.cost`` (USD); the report's inter-judge agreement reads these.
"""

from __future__ import annotations

import asyncio
import re
import statistics
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from referee.errors import JudgeError
from referee.judges.client import JudgeClient
from referee.scores import Failure, Score

__all__ = ["Ballot", "Vote", "decide", "member_name", "member_names", "parse_member", "poll"]

Vote = Literal["majority", "mean", "median"]
"""How a panel's values become one: the strict majority of all members, or the mean or the
median of the members that answered."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_NAME = re.compile(r"[A-Za-z0-9_-]+")


def member_name(model: str) -> str:
    """A member's default name: its model after the provider prefix, every character outside
    ``[A-Za-z0-9_-]`` replaced by ``_`` (``openai/gpt-4.1-mini`` -> ``gpt-4_1-mini``)."""
    _, _, rest = model.partition("/")
    return _UNSAFE.sub("_", rest or model) or "judge"


def member_names(models: Sequence[str], given: Sequence[str | None]) -> list[str]:
    """Each member's name: the one `given`, else its model's (`member_name`), a repeated one
    suffixed ``_2``, ``_3``, ...

    Raises:
        ValueError: A given name is not ``[A-Za-z0-9_-]+``, or two members are given one name.
    """
    taken = {g for g in given if g is not None}
    for g in given:
        if g is not None and not _NAME.fullmatch(g):
            raise ValueError(f"a panel member's name must be letters, digits, _ or -: {g!r}")
    if len(taken) != sum(g is not None for g in given):
        raise ValueError(f"two panel members are given the same name: {list(given)!r}")
    out: list[str] = []
    used = set(taken)
    for model, g in zip(models, given, strict=True):
        if g is not None:
            out.append(g)
            continue
        base = name = member_name(model)
        n = 1
        while name in used:
            n += 1
            name = f"{base}_{n}"
        used.add(name)
        out.append(name)
    return out


@dataclass(frozen=True, slots=True)
class Ballot:
    """What one member gave: its Score (None when it abstained) and why it abstained."""

    name: str
    score: Score | None
    why: str | None = None

    @property
    def value(self) -> float | None:
        return None if self.score is None else self.score.value


async def poll(
    members: Sequence[tuple[str, JudgeClient]],
    ask: Callable[[JudgeClient], Awaitable[Score]],
) -> list[Ballot]:
    """Every member's ballot, asked at once. A member that raises `JudgeError` (its
    `JudgeTimeout` too) abstains; any other exception (`BudgetExceeded`, `NotApplicable`, a
    bug) is raised: it is no vote."""
    results = await asyncio.gather(*(ask(client) for _, client in members), return_exceptions=True)
    ballots = []
    for (name, _), result in zip(members, results, strict=True):
        if isinstance(result, JudgeError):
            ballots.append(Ballot(name, None, str(result)))
        elif isinstance(result, BaseException):
            raise result
        else:
            ballots.append(Ballot(name, result))
    return ballots


def _majority(values: Sequence[float | None], total: int) -> float | None:
    """The value more than half of `total` members gave, or None."""
    counts: dict[float, int] = {}
    for v in values:
        if v is not None:
            counts[v] = counts.get(v, 0) + 1
    for v, n in counts.items():
        if 2 * n > total:
            return v
    return None


def _central(values: Sequence[float | None], vote: Vote, total: int) -> float | None:
    answered = [v for v in values if v is not None]
    if vote == "majority":
        return _majority(values, total)
    if not answered:
        return None
    return statistics.fmean(answered) if vote == "mean" else float(statistics.median(answered))


def _votes(ballots: Sequence[Ballot]) -> str:
    """Each member's value, then each abstention and why."""
    votes = ", ".join(f"{b.name}={b.value:g}" for b in ballots if b.value is not None)
    abstained = "; ".join(f"{b.name} abstained: {b.why}" for b in ballots if b.score is None)
    return "; ".join(part for part in (votes, abstained) if part)


def decide(ballots: Sequence[Ballot], vote: Vote, quorum: int, where: str) -> Score:
    """The panel's Score from its members' ballots.

    The value is the vote's; every component the members give is voted the same way (under
    ``majority``, None where no value of it has a strict majority); ``panel.<name>`` and
    ``panel.<name>.cost`` are each member's value and cost. The cost and tokens are the
    members' sums, the latency their longest. Fewer answers than `quorum`, or no strict
    majority, is a Score with no value and a ``judge`` Failure that says so (with the
    members' components and costs still on it).
    """
    total = len(ballots)
    answered = [b for b in ballots if b.score is not None]
    scores = [b.score for b in answered if b.score is not None]
    components: dict[str, float | None] = {}
    keys: list[str] = []
    for s in scores:
        keys.extend(k for k in s.components if k not in keys)
    for key in keys:
        values = [b.score.components.get(key) if b.score else None for b in ballots]
        components[key] = _central(values, vote, total)
    for b in ballots:
        components[f"panel.{b.name}"] = b.value
        components[f"panel.{b.name}.cost"] = (b.score.cost or 0.0) if b.score else 0.0
    cost = sum((s.cost or 0.0) for s in scores)
    tokens = sum((s.tokens or 0) for s in scores)
    latency = max((s.latency or 0.0) for s in scores) if scores else None
    message: str | None = None
    value: float | None = None
    if len(answered) < quorum:
        message = (
            f"only {len(answered)} of {total} judges answered, fewer than the quorum of "
            f"{quorum}: {_votes(ballots)}"
        )
    else:
        value = _central([b.value for b in ballots], vote, total)
        if value is None:
            message = (
                f"no strict majority: no value was given by more than {total // 2} of the "
                f"{total} judges ({_votes(ballots)}); for a scale, use vote: mean or median"
            )
    if message is not None or value is None:
        message = message or "no value"
        return Score(
            value=None,
            components=components,
            reason=message,
            failure=Failure("judge", message, where),
            cost=cost,
            latency=latency,
            tokens=tokens,
        )
    if vote == "majority":
        agree = sum(1 for b in answered if b.value == value)
        head = f"panel {agree}/{total} majority: {value:g}"
    else:
        head = f"panel {vote} of {len(answered)}/{total}: {value:g}"
    return Score(
        value=value,
        components=components,
        reason=f"{head} ({_votes(ballots)})",
        cost=cost,
        latency=latency,
        tokens=tokens,
    )


def parse_member(member: str | Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """A member's client options over the panel's shared ones (at least its ``model``) and
    the name it is given (None: from its model).

    Raises:
        ValueError: A mapping without ``model``, with an option the client does not have, or
            a member that is neither a model string nor a mapping.
    """
    if isinstance(member, str):
        if not member:
            raise ValueError("a panel member's model is empty")
        return {"model": member}, None
    if not isinstance(member, Mapping):
        raise ValueError(
            f"a panel member is a model string or a mapping of client options: {member!r}"
        )
    options = {k: v for k, v in member.items() if k != "name"}
    if not isinstance(options.get("model"), str) or not options["model"]:
        raise ValueError(f"a panel member's mapping needs a model: {dict(member)!r}")
    name = member.get("name")
    if name is not None and not isinstance(name, str):
        raise ValueError(f"a panel member's name must be text: {name!r}")
    return options, name
