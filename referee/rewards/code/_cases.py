"""What `io_tests` and `function_tests` share: one sandbox job per case, and a rollout's deadline
that follows its cases.

Each case runs in a job of its own under the per-case ``timeout``, one after another, so a
program that sleeps in every case takes ``cases x timeout``. A deadline behind one case's limit
(`RewardBase.backstop` of ``timeout``) made enough slow cases a ``Failure("timeout")`` (140 at
0.5 s; 22 at the default 5 s, a normal count for APPS or CodeContests), and a trainer masks a
rollout with no score: the policy would learn to turn a wrong answer into a masked one. So a
rollout's deadline is the backstop behind all of its cases' limits, plus the build's where the
language compiles (`CaseJobs.deadline_for`), or the ``deadline`` the user set; and a case that
cannot start in time to end before it (a lower ``deadline``, a sandbox queue that long) is a
failed case, said in the reason: the program's verdict, never a rollout lost.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from abc import abstractmethod
from collections.abc import Callable
from typing import Generic, TypeVar

from referee.deadline import within
from referee.errors import VerifierTimeout
from referee.reward import coerce_result, failure_from_exception
from referee.rewards._sandboxed import SandboxedReward
from referee.rewards.code.languages import COMPILED
from referee.rollout import Rollout
from referee.scores import Score

__all__ = ["CASE_SLACK", "CaseJobs", "not_run", "out_of_time"]

CASE_SLACK = 1.0
"""Seconds a case's job may take beyond its limit (starting, cleaning up, the reply): a case
starts only while its limit and this fit before the rollout's deadline."""

R = TypeVar("R")
T = TypeVar("T")


def out_of_time(until: float | None, timeout: float) -> bool:
    """Whether a case started now, under `timeout`, could end past `until` (a monotonic
    time; None: no deadline of the rollout's own)."""
    return until is not None and time.monotonic() + timeout + CASE_SLACK > until


def not_run(index: int, total: int) -> str:
    """The reason's note for cases `index` (from 0) to the last, not run in time."""
    which = f"case {total}" if index + 1 == total else f"cases {index + 1}-{total}"
    return f"{which} not run: the rollout's deadline came first"


class CaseJobs(SandboxedReward, Generic[R]):
    """Base of the code rewards that run one sandbox job per case: a rollout's deadline
    follows its cases (see the module's docstring).

    A subclass reads its reference once (`read`, which also says how many cases it has) and
    grades it (`grade_cases`), starting no case that could end past the monotonic time it
    is given (`out_of_time`); each case not run is a failed case (`not_run`).
    """

    # declared by each subclass's dataclass, with its default
    timeout: float
    compile_timeout: float
    language: str

    @abstractmethod
    def read(self, rollout: Rollout) -> tuple[R, int]:
        """The rollout's reference, parsed, and its number of cases.

        Raises:
            NotApplicable: The reference is not one this reward reads.
        """

    @abstractmethod
    def grade_cases(self, rollout: Rollout, reference: R, until: float | None) -> Score:
        """Score one rollout, blocking, starting no case that could end past `until`."""

    def grade(self, rollout: Rollout) -> Score:
        """Score one rollout, blocking, with no deadline of the rollout's own (each case
        still under its limits)."""
        return self.grade_cases(rollout, self.read(rollout)[0], None)

    def deadline_for(self, cases: int) -> float:
        """Seconds a rollout with `cases` cases may take: ``deadline`` where it is set, else
        the backstop behind all of its cases' ``timeout`` (`RewardBase.backstop`), plus
        ``compile_timeout`` where the language compiles."""
        if self.deadline is not None:
            return self.deadline
        build = self.compile_timeout if self.language in COMPILED else 0.0
        return self.backstop(max(cases, 1) * self.timeout) + build

    def default_deadline(self) -> float | None:
        """The deadline of a rollout with one case; each rollout's follows its cases
        (`deadline_for`)."""
        return self.deadline_for(1)

    async def score(self, rollout: Rollout) -> Score:
        start = time.monotonic()
        try:
            reference, cases = await self._on_threads(self.read, rollout)
            seconds = self.deadline_for(cases)
            until = start + seconds
            graded = self._on_threads(self.grade_cases, rollout, reference, until)
            try:  # only where the sandbox holds a job past its limits
                result = await within(graded, max(until - time.monotonic(), 0.0), self.name)
            except VerifierTimeout:  # said with the rollout's whole deadline
                raise VerifierTimeout(
                    f"{self.name} ran past its deadline: stopped after "
                    f"{time.monotonic() - start:.2f}s (limit {seconds:g}s)"
                ) from None
            return coerce_result(result, self.name)
        except Exception as exc:
            return failure_from_exception(exc, self.name)

    async def _on_threads(self, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` on the reward's own threads (`ThreadedReward`), in this context."""
        loop = asyncio.get_running_loop()
        run = contextvars.copy_context().run
        return await loop.run_in_executor(self._executor(self.concurrency), run, fn, *args)
