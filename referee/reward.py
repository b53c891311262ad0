"""The `Reward` and `GroupReward` protocols, their base classes, and the `@reward` decorator.

A reward turns a `Rollout` into a `Score`. Three ways to write one:

- subclass `CheckReward` and implement `check(rollout)` for CPU-bound checks (JSON, math,
  string matching): plain synchronous code, wrapped once into the async protocol;
- subclass `AsyncReward` and implement `async evaluate(rollout)` for anything that waits
  (judges, sandboxes, HTTP);
- subclass `GroupRewardBase` and implement `async evaluate_group(rollouts)` for rewards that
  compare the attempts at one prompt;

or decorate a function with `@reward`. In every case an exception raised while scoring one
rollout becomes a `Failure` on that rollout's `Score`; it never escapes into the training loop
and is never turned into 0.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import sys
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, ClassVar, Protocol, TypeAlias, overload, runtime_checkable

from pydantic import ConfigDict

from referee._aio import run_sync
from referee.errors import RewardError
from referee.rollout import Rollout
from referee.score import Score, check_value

__all__ = [
    "DEFAULT_CONCURRENCY",
    "AsyncReward",
    "CheckReward",
    "GroupReward",
    "GroupRewardBase",
    "Reward",
    "RewardResult",
    "reward",
    "score",
]

logger = logging.getLogger("referee")

DEFAULT_CONCURRENCY = 64
"""How many rollouts an async reward scores at once when the caller does not say."""

RewardResult: TypeAlias = Score | float | bool | None
"""What a reward function may return: a Score, a number, a bool (1.0/0.0), or None (no score)."""


@runtime_checkable
class Reward(Protocol):
    """Anything that scores rollouts one at a time (and in batches)."""

    @property
    def name(self) -> str: ...

    async def score(self, rollout: Rollout) -> Score:
        """Score one rollout. Never raises for a problem with the rollout: returns a Failure."""
        ...

    async def score_batch(
        self, rollouts: Sequence[Rollout], *, concurrency: int | None = None
    ) -> list[Score]:
        """Score many rollouts, at most `concurrency` at a time; one Score per rollout, in order."""
        ...


@runtime_checkable
class GroupReward(Reward, Protocol):
    """A reward that scores the attempts at one prompt together (ranking, pairwise judges)."""

    async def score_group(self, rollouts: Sequence[Rollout]) -> list[Score]:
        """Score one group of attempts; one Score per rollout, in order."""
        ...


def coerce_result(result: object, where: str) -> Score:
    """Turn what a reward returned into a Score, rejecting NaN, infinities and non-numbers."""
    if type(result) is Score and type(result.value) is float and result.value - result.value == 0:
        return result  # the common case, checked cheaply: x - x is 0 only for finite floats
    if isinstance(result, Score):
        if result.value is None:
            if result.failure is None:
                return Score.failed("no_score", "reward returned a Score with no value", where)
            return result
        bad = check_value(result.value, where)
        return result if bad is None else bad
    if result is None:
        return Score.failed("no_score", "reward returned None", where)
    if isinstance(result, bool):
        return Score(value=1.0 if result else 0.0)
    bad = check_value(result, where)  # type: ignore[arg-type]
    return bad if bad is not None else Score(value=float(result))  # type: ignore[arg-type]


def failure_from_exception(exc: Exception, where: str) -> Score:
    """The Score that stands for an exception raised while scoring."""
    if isinstance(exc, RewardError):
        return Score.failed(exc.failure_type, str(exc), where)  # type: ignore[arg-type]
    logger.debug("reward %s raised", where, exc_info=exc)
    message = f"{type(exc).__name__}: {exc}"
    if len(message) > 500:
        message = message[:500] + "..."
    return Score.failed("error", message, where)


class _RewardBase(ABC):
    """Shared by the base classes: naming, pickling of compiled state, the sync entry point."""

    name: str
    # Spec options are validated by pydantic against the reward's dataclass fields: an unknown
    # option is an error, not silently dropped.
    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    def __getstate__(self) -> dict[str, Any]:
        # Compiled state (validators, regexes, caches) lives in attributes starting with "_"
        # and is rebuilt by __post_init__ after unpickling, so rewards travel to workers.
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        post_init = getattr(self, "__post_init__", None)
        if post_init is not None:
            post_init()

    @property
    def is_sync(self) -> bool:
        """True when scoring never waits: then `check_safe(rollout)` scores inline."""
        return False

    def check_safe(self, rollout: Rollout) -> Score:
        """Score one rollout synchronously; only for rewards whose `is_sync` is true."""
        raise TypeError(f"{type(self).__name__} {self.name!r} scores asynchronously")

    @abstractmethod
    async def score_batch(
        self, rollouts: Sequence[Rollout], *, concurrency: int | None = None
    ) -> list[Score]: ...

    def score_sync(self, rollouts: Sequence[Rollout]) -> list[Score]:
        """Synchronous `score_batch`, for scripts."""
        return run_sync(self.score_batch(rollouts))


class CheckReward(_RewardBase):
    """Base class of CPU-bound rewards: implement `check(rollout)`; it runs inline, no threads.

    `score_batch` is a plain loop: for deterministic checks, event-loop tasks would cost more
    than the check itself.
    """

    @abstractmethod
    def check(self, rollout: Rollout) -> RewardResult:
        """Score one rollout (synchronously). Raise `RewardError` when it cannot be scored."""

    @property
    def is_sync(self) -> bool:
        return True

    def check_safe(self, rollout: Rollout) -> Score:
        """`check`, with exceptions and bad values turned into Failures."""
        try:
            return coerce_result(self.check(rollout), self.name)
        except Exception as exc:
            return failure_from_exception(exc, self.name)

    async def score(self, rollout: Rollout) -> Score:
        return self.check_safe(rollout)

    async def score_batch(
        self, rollouts: Sequence[Rollout], *, concurrency: int | None = None
    ) -> list[Score]:
        check = self.check_safe
        return [check(r) for r in rollouts]


async def gather_bounded(
    fn: Callable[[Rollout], Awaitable[Score]], rollouts: Sequence[Rollout], concurrency: int
) -> list[Score]:
    """Apply `fn` to every rollout, at most `concurrency` at a time, keeping order."""
    if len(rollouts) <= 1 or concurrency <= 1:
        return [await fn(r) for r in rollouts]
    semaphore = asyncio.Semaphore(concurrency)

    async def one(rollout: Rollout) -> Score:
        async with semaphore:
            return await fn(rollout)

    return list(await asyncio.gather(*(one(r) for r in rollouts)))


class AsyncReward(_RewardBase):
    """Base class of rewards that wait on something: implement `async evaluate(rollout)`."""

    concurrency: int = DEFAULT_CONCURRENCY

    @abstractmethod
    async def evaluate(self, rollout: Rollout) -> RewardResult:
        """Score one rollout. Raise `RewardError` when it cannot be scored."""

    async def score(self, rollout: Rollout) -> Score:
        try:
            return coerce_result(await self.evaluate(rollout), self.name)
        except Exception as exc:
            return failure_from_exception(exc, self.name)

    async def score_batch(
        self, rollouts: Sequence[Rollout], *, concurrency: int | None = None
    ) -> list[Score]:
        return await gather_bounded(self.score, rollouts, concurrency or self.concurrency)


def group_indices(rollouts: Sequence[Rollout]) -> list[list[int]]:
    """Positions of the rollouts of each group, groups in order of first appearance.

    Grouping is by `Rollout.group`, never by position; a rollout with no group is a group
    of one.
    """
    groups: dict[str, list[int]] = {}
    singles: list[list[int]] = []
    order: list[list[int]] = []
    for i, rollout in enumerate(rollouts):
        if rollout.group is None:
            singles.append([i])
            order.append(singles[-1])
            continue
        members = groups.get(rollout.group)
        if members is None:
            members = groups[rollout.group] = []
            order.append(members)
        members.append(i)
    return order


class GroupRewardBase(_RewardBase):
    """Base class of group rewards: implement `async evaluate_group(rollouts)`."""

    concurrency: int = DEFAULT_CONCURRENCY

    @abstractmethod
    async def evaluate_group(self, rollouts: Sequence[Rollout]) -> Sequence[RewardResult]:
        """Score the attempts of one group, one result per rollout in order."""

    async def score_group(self, rollouts: Sequence[Rollout]) -> list[Score]:
        try:
            results = list(await self.evaluate_group(rollouts))
        except Exception as exc:
            failed = failure_from_exception(exc, self.name)
            return [failed] * len(rollouts)
        if len(results) != len(rollouts):
            failed = Score.failed(
                "error",
                f"group reward returned {len(results)} scores for {len(rollouts)} rollouts",
                self.name,
            )
            return [failed] * len(rollouts)
        return [coerce_result(r, self.name) for r in results]

    async def score(self, rollout: Rollout) -> Score:
        return (await self.score_group([rollout]))[0]

    async def score_batch(
        self, rollouts: Sequence[Rollout], *, concurrency: int | None = None
    ) -> list[Score]:
        groups = group_indices(rollouts)
        semaphore = asyncio.Semaphore(concurrency or self.concurrency)

        async def one(indices: list[int]) -> list[Score]:
            async with semaphore:
                return await self.score_group([rollouts[i] for i in indices])

        out: list[Score | None] = [None] * len(rollouts)
        results = await asyncio.gather(*(one(g) for g in groups))
        for indices, scores in zip(groups, results, strict=True):
            for i, s in zip(indices, scores, strict=True):
                out[i] = s
        return out  # type: ignore[return-value]


# --- the decorator -------------------------------------------------------------------------


class _FunctionPickling:
    """Pickle a decorated module-level function by reference, like the function itself."""

    fn: Callable[[Rollout], Any]
    name: str

    def __reduce__(self) -> str | tuple[Any, ...]:
        module = sys.modules.get(self.fn.__module__)
        target: object = module
        for part in self.fn.__qualname__.split("."):
            target = getattr(target, part, None)
        if target is self:
            return self.fn.__qualname__
        return (type(self), (self.fn, self.name))


class FunctionReward(_FunctionPickling, CheckReward):
    """A synchronous function of a rollout, as a Reward (made by `@reward`)."""

    def __init__(self, fn: Callable[[Rollout], RewardResult], name: str | None = None) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        functools.update_wrapper(self, fn)

    def check(self, rollout: Rollout) -> RewardResult:
        result: RewardResult = self.fn(rollout)
        return result

    def __call__(self, rollout: Rollout) -> RewardResult:
        return self.check(rollout)


class AsyncFunctionReward(_FunctionPickling, AsyncReward):
    """An async function of a rollout, as a Reward (made by `@reward`)."""

    def __init__(
        self, fn: Callable[[Rollout], Awaitable[RewardResult]], name: str | None = None
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        functools.update_wrapper(self, fn)

    async def evaluate(self, rollout: Rollout) -> RewardResult:
        result: RewardResult = await self.fn(rollout)
        return result

    def __call__(self, rollout: Rollout) -> Awaitable[RewardResult]:
        return self.evaluate(rollout)


RewardFunction: TypeAlias = Callable[[Rollout], RewardResult | Awaitable[RewardResult]]


@overload
def reward(fn: RewardFunction, /) -> FunctionReward | AsyncFunctionReward: ...
@overload
def reward(
    *, name: str | None = None
) -> Callable[[RewardFunction], FunctionReward | AsyncFunctionReward]: ...
def reward(
    fn: RewardFunction | None = None, /, *, name: str | None = None
) -> (
    FunctionReward
    | AsyncFunctionReward
    | Callable[[RewardFunction], FunctionReward | AsyncFunctionReward]
):
    """Turn a function of a rollout into a picklable `Reward`.

    The function may be sync or async and may return a float, a bool, a `Score`, or None (no
    score: it becomes a `Failure`, never 0). Exceptions it raises become Failures too.

    Example:
        ```python
        @referee.reward
        def short(rollout: referee.Rollout) -> float:
            return 1.0 if len(rollout.completion_text) < 200 else 0.0
        ```
    """

    def wrap(f: RewardFunction) -> FunctionReward | AsyncFunctionReward:
        if inspect.iscoroutinefunction(f):
            return AsyncFunctionReward(f, name)
        return FunctionReward(f, name)  # type: ignore[arg-type]

    return wrap if fn is None else wrap(fn)


# --- the synchronous entry point -----------------------------------------------------------


def is_sync(reward: object) -> bool:
    """Whether `reward` can score inline with `check_safe` (no waiting anywhere inside it)."""
    return isinstance(reward, _RewardBase) and reward.is_sync


def score(
    reward: Reward, rollouts: Iterable[Rollout], *, concurrency: int | None = None
) -> list[Score]:
    """Score rollouts from plain synchronous code: one Score per rollout, in order.

    Example:
        ```python
        scores = referee.score(referee.load("spec.yaml"), rollouts)
        ```
    """
    items = list(rollouts)
    if is_sync(reward):
        check = reward.check_safe  # type: ignore[attr-defined]
        return [check(r) for r in items]
    return run_sync(reward.score_batch(items, concurrency=concurrency))
