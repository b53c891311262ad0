"""Where the attempts of a group meet when a trainer sends them one at a time.

A group reward (`group_rank`, a tournament) compares the attempts at one prompt, but some
trainers ask for one rollout's reward per call: verl's reward loop, NeMo Gym's ``/verify``.
`Cohorts` holds each arriving rollout until its group is whole (``expected`` members with the
same `Rollout.group`), or until ``timeout`` seconds after the group's first member, then
scores the members together and answers each its own score. It is what verl's
`referee.backends.verl.GroupCollector` runs (there in a Ray actor shared by every reward
worker) and what ``referee serve`` runs behind NeMo Gym's ``/verify``.

A member that arrives after its group was scored (verl pads a batch with copies of its first
samples; a client retries) gets the score of the identical member; a member that has no twin
(a straggler) is scored against the members its group was scored with, so it is compared as
they were (their scores, already answered, stand). A group scored short of ``expected`` is
logged, and its scores are what the reward gives that many members. A group of one (only one
member came before the timeout) cannot be compared at all: a comparative reward would pay it a
mid-scale value ("all attempts identical") whatever it wrote, so it is a Failure
(``not_applicable``, the infrastructure's: the trainer's group never met), masked, never paid.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable, Sequence

from referee.rollout import Rollout
from referee.scores import Score

__all__ = ["DEFAULT_GROUP_TIMEOUT", "Cohorts"]

logger = logging.getLogger("referee.cohort")

DEFAULT_GROUP_TIMEOUT = 300.0
"""Seconds a group waits for its members after the first arrives, then is scored as it is."""

_REMEMBERED = 100_000
"""Groups whose last round is kept for stragglers; past it the oldest half are forgotten."""


class Cohorts:
    """Groups that gather their members, then are scored together (module docstring).

    Attributes:
        score: Scores one group's members, in order (a `Bridge`'s ``score_async``, or a
            service's ``score_batch``).
        timeout: Seconds after a group's first member before it is scored with whatever
            arrived.
    """

    def __init__(
        self,
        score: Callable[[list[Rollout]], Awaitable[Sequence[Score]]],
        timeout: float = DEFAULT_GROUP_TIMEOUT,
    ) -> None:
        if not 0 < timeout < float("inf"):
            raise ValueError(f"group timeout must be a positive number of seconds, not {timeout!r}")
        self.score = score
        self.timeout = timeout
        self.pending: dict[str, _Round] = {}  # per group, the round still taking members
        self.closed: dict[str, _Round] = {}  # per group, the last round scored (or scoring)

    @property
    def waiting(self) -> int:
        """Members waiting for their group to be whole."""
        return sum(len(round_.members) for round_ in self.pending.values())

    async def submit(self, member: Rollout, expected: int) -> Score:
        """`member`'s score, once its group (of `expected` members) has been scored."""
        score, _ = await self.join(member, expected)
        return score

    async def join(self, member: Rollout, expected: int) -> tuple[Score, int]:
        """`member`'s score, once its group has been scored, and how many members the group
        was scored with (fewer than `expected` when it timed out; 1 for a straggler)."""
        group = member.group or ""
        key = _content_key(member)
        if group not in self.pending and group in self.closed:
            closed = self.closed[group]
            if key in closed.keys:
                scores = await asyncio.shield(closed.result)
                return scores[closed.keys.index(key)], len(closed.members)
            # A straggler of a group scored without it: compared with that group's members.
            scores = list(await self.score([*closed.members, member]))
            return scores[-1], len(closed.members) + 1
        round_ = self.pending.get(group)
        if round_ is None:
            loop = asyncio.get_running_loop()
            round_ = self.pending[group] = _Round(loop.create_future())
            round_.timer = loop.call_later(
                self.timeout, lambda: asyncio.ensure_future(self._close(group, round_, expected))
            )
        index = len(round_.members)
        round_.members.append(member)
        round_.keys.append(key)
        if len(round_.members) >= expected:
            await self._close(group, round_, expected)
        results = await asyncio.shield(round_.result)
        return results[index], len(round_.members)

    async def _close(self, group: str, round_: _Round, expected: int) -> None:
        if round_.closing:
            return
        round_.closing = True
        if round_.timer is not None:
            round_.timer.cancel()
        if self.pending.get(group) is round_:
            del self.pending[group]
        self.closed.pop(group, None)
        self.closed[group] = round_
        if len(self.closed) > _REMEMBERED:  # a long run: forget the oldest groups
            for old in list(self.closed)[: _REMEMBERED // 2]:
                del self.closed[old]
        if len(round_.members) < expected:
            logger.warning(
                "referee: group %r scored with %d of %d members after %g s",
                group, len(round_.members), expected, self.timeout,
            )  # fmt: skip
        if len(round_.members) < 2:  # nothing to compare it with: masked, never paid
            message = (
                f"group {group!r}: only 1 of {expected} members came within {self.timeout:g} s, "
                "and a group reward cannot compare an attempt with nothing"
            )
            lone = Score.failed("not_applicable", message, "group", "infrastructure")
            round_.result.set_result([lone])
            return
        try:
            scores = list(await self.score(round_.members))
        except BaseException as exc:  # the scorer refused (a closing service): every member hears
            round_.result.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        round_.result.set_result(scores)


class _Round:
    __slots__ = ("closing", "keys", "members", "result", "timer")

    def __init__(self, result: asyncio.Future[list[Score]]) -> None:
        self.members: list[Rollout] = []
        self.keys: list[str] = []
        self.result = result
        self.timer: asyncio.TimerHandle | None = None
        self.closing = False


def _content_key(rollout: Rollout) -> str:
    return hashlib.sha256(rollout.model_dump_json().encode()).hexdigest()
