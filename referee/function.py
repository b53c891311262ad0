"""The `@reward` decorator: a function of a rollout, as a picklable `Reward`."""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias, cast, overload

from referee.deadline import check_timeout
from referee.reward import AsyncReward, CheckReward, RewardResult
from referee.rollout import Rollout

__all__ = ["AsyncFunctionReward", "FunctionReward", "RewardFunction", "reward"]


class _FunctionPickling:
    """Pickle a decorated module-level function by reference, like the function itself."""

    fn: Callable[[Rollout], Any]
    name: str
    timeout: float | None

    def __init__(
        self, fn: Callable[[Rollout], Any], name: str | None = None, timeout: float | None = None
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        self.timeout = check_timeout(timeout, self.name)
        # The instance stands for the function: its name, docstring and module.
        functools.update_wrapper(cast(Any, self), fn)

    def __reduce__(self) -> str | tuple[Any, ...]:
        module = sys.modules.get(self.fn.__module__)
        target: object = module
        for part in self.fn.__qualname__.split("."):
            target = getattr(target, part, None)
        if target is self:
            return self.fn.__qualname__
        return (type(self), (self.fn, self.name, self.timeout))


class FunctionReward(_FunctionPickling, CheckReward):
    """A synchronous function of a rollout, as a Reward (made by `@reward`).

    Attributes:
        timeout: Seconds one call may take before it is stopped and scores
            ``Failure("timeout")``; None: `referee.deadline.DEFAULT_TIMEOUT`.
    """

    fn: Callable[[Rollout], RewardResult]

    def check(self, rollout: Rollout) -> RewardResult:
        result: RewardResult = self.fn(rollout)
        return result

    def __call__(self, rollout: Rollout) -> RewardResult:
        return self.check(rollout)


class AsyncFunctionReward(_FunctionPickling, AsyncReward):
    """An async function of a rollout, as a Reward (made by `@reward`)."""

    fn: Callable[[Rollout], Awaitable[RewardResult]]

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
    *, name: str | None = None, timeout: float | None = None
) -> Callable[[RewardFunction], FunctionReward | AsyncFunctionReward]: ...
def reward(
    fn: RewardFunction | None = None, /, *, name: str | None = None, timeout: float | None = None
) -> (
    FunctionReward
    | AsyncFunctionReward
    | Callable[[RewardFunction], FunctionReward | AsyncFunctionReward]
):
    """Turn a function of a rollout into a picklable `Reward`.

    The function may be sync or async and may return a float, a bool, a `Score`, or None (no
    score: it becomes a `Failure`, never 0). Exceptions it raises become Failures too. A call
    that runs past `timeout` seconds (default: `referee.deadline.DEFAULT_TIMEOUT`) is stopped
    and scores ``Failure("timeout")``, whether it loops, computes or awaits.

    Example:
        ```python
        @referee.reward(timeout=2)
        def short(rollout: referee.Rollout) -> float:
            return 1.0 if len(rollout.completion_text) < 200 else 0.0
        ```
    """

    def wrap(f: RewardFunction) -> FunctionReward | AsyncFunctionReward:
        if inspect.iscoroutinefunction(f):
            return AsyncFunctionReward(f, name, timeout)
        return FunctionReward(f, name, timeout)

    return wrap if fn is None else wrap(fn)
