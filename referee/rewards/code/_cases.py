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

Held-out cases (`held_out`) run as the others do, after them, but are not paid: the score is
the paid cases' alone, and ``held_out_passed`` / ``held_out_cases`` beside ``passed`` /
``cases`` let the monitor (`referee.monitor`) compare the two pass rates. A program that
passes the cases it can see and fails the ones it cannot is special-casing the visible tests
(the classic sign EvilGenie's held-out tests look for). The reason gives the held-out count
only, never which case failed or why: a reason can reach the policy (multi-turn feedback).
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import time
from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Generic, TypeVar

from referee.deadline import within
from referee.errors import VerifierTimeout
from referee.reward import coerce_result, failure_from_exception
from referee.rewards._sandboxed import SandboxedReward
from referee.rewards.code.languages import COMPILED
from referee.rollout import Rollout
from referee.scores import Score

__all__ = [
    "CASE_SLACK",
    "CaseJobs",
    "Tally",
    "check_held_out",
    "held_out_share",
    "out_of_time",
    "with_held_out",
]

CASE_SLACK = 1.0
"""Seconds a case's job may take beyond its limit (starting, cleaning up, the reply): a case
starts only while its limit and this fit before the rollout's deadline."""

R = TypeVar("R")
T = TypeVar("T")


def out_of_time(until: float | None, timeout: float) -> bool:
    """Whether a case started now, under `timeout`, could end past `until` (a monotonic
    time; None: no deadline of the rollout's own)."""
    return until is not None and time.monotonic() + timeout + CASE_SLACK > until


def held_out_share(keys: Sequence[str], share: float | None) -> frozenset[int]:
    """The indices of the cases a ``held_out`` share holds out: ``round(share x n)`` of the
    `keys` (each case's text), at least one and never all (none of a single case), those whose
    SHA-256 is smallest. So the choice follows the cases, not their order, and is the same for
    every attempt at a prompt."""
    n = len(keys)
    if not share or n < 2:
        return frozenset()
    k = min(max(1, round(share * n)), n - 1)
    ranked = sorted(range(n), key=lambda i: (hashlib.sha256(keys[i].encode()).digest(), i))
    return frozenset(ranked[:k])


def with_held_out(score: Score, passed: int, total: int) -> Score:
    """`score` with `passed` of `total` held-out cases beside it, not paid: their counts
    only (which failed, and why, stay out of the reason: it can reach the policy)."""
    components = {**score.components, "held_out_passed": float(passed),
                  "held_out_cases": float(total)}  # fmt: skip
    reason = f"{score.reason}; held out (not paid): {passed}/{total} passed"
    return replace(score, components=components, reason=reason)


def check_held_out(share: float | None) -> None:
    """Refuse a ``held_out`` share outside [0, 1)."""
    if share is not None and not 0.0 <= share < 1.0:
        raise ValueError(f"held_out is the share of cases not paid, in [0, 1), got {share!r}")


def _numbers(cases: Sequence[int]) -> str:
    """``case 3``, ``cases 3-5`` (a run), or ``cases 2, 5, 7``."""
    shown = [i + 1 for i in cases]
    if len(shown) == 1:
        return f"case {shown[0]}"
    if shown == list(range(shown[0], shown[-1] + 1)):
        return f"cases {shown[0]}-{shown[-1]}"
    return "cases " + ", ".join(map(str, shown))


class Tally:
    """The outcomes of a rollout's cases, paid and held out, and its score.

    Cases run in `order`: the paid ones first, then the held-out ones. A stop (a failing
    paid case under ``stop_on_failure`` or ``scoring: all``) ends the paid cases only: the
    held-out ones still run, or their pass rate would follow the paid one's.
    """

    def __init__(self, total: int, held_out: frozenset[int], stop: bool) -> None:
        self.total = total
        self.held_out = held_out
        self.stop = stop
        self.order = [i for i in range(total) if i not in held_out] + sorted(held_out)
        self.passed = self.held_passed = 0
        self.notes: list[str] = []
        self._stopped = False
        self._not_run: list[int] = []

    @classmethod
    def of(cls, keys: Sequence[str], held_out: int, share: float | None, stop: bool) -> Tally:
        """The tally of a reference's cases (each one's text in `keys`) followed by the
        `held_out` cases it lists itself: those, and the `share` of its own that
        `held_out_share` picks, are held out."""
        own = len(keys)
        held = held_out_share(keys, share) | frozenset(range(own, own + held_out))
        return cls(own + held_out, held, stop)

    @property
    def paid(self) -> int:
        return self.total - len(self.held_out)

    def wants(self, i: int) -> bool:
        """Whether case `i` is to run (a paid case after a stop is not)."""
        return i in self.held_out or not self._stopped

    def record(self, i: int, ok: bool, why: str = "") -> None:
        """Case `i` passed (`ok`) or failed, `why`."""
        if i in self.held_out:
            self.held_passed += ok
            return
        if ok:
            self.passed += 1
            return
        if len(self.notes) < 5:
            self.notes.append(f"case {i + 1}: {why}")
        self._stopped = self._stopped or self.stop

    def cut(self, i: int) -> None:
        """The rollout's deadline came before case `i` and every case after it in `order`:
        all failed, said in the reason."""
        self._not_run = self.order[self.order.index(i) :]

    def score(self, scoring: str, *notes: str) -> Score:
        """The paid cases' score (``fraction`` or ``all``), `notes` after the counts."""
        paid = self.paid
        value = self.passed / paid if scoring == "fraction" else float(self.passed == paid)
        components = {"passed": float(self.passed), "cases": float(paid)}
        reason = [f"{self.passed}/{paid} cases passed"]
        cut = [i for i in self._not_run if i not in self.held_out]
        if cut:
            reason.append(f"{_numbers(cut)} not run: the rollout's deadline came first")
        if self.held_out:
            n = len(self.held_out)
            components |= {"held_out_passed": float(self.held_passed), "held_out_cases": float(n)}
            held = f"held out (not paid): {self.held_passed}/{n} passed"
            skipped = sum(i in self.held_out for i in self._not_run)
            reason.append(held + (f", {skipped} not run in time" if skipped else ""))
        return Score(value=value, components=components,
                     reason="; ".join([*reason, *notes, *self.notes]))  # fmt: skip


class CaseJobs(SandboxedReward, Generic[R]):
    """Base of the code rewards that run one sandbox job per case: a rollout's deadline
    follows its cases (see the module's docstring).

    A subclass reads its reference once (`read`, which also says how many cases it has) and
    grades it (`grade_cases`), starting no case that could end past the monotonic time it
    is given (`out_of_time`); each case not run is a failed case (`Tally.cut`).
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
