"""The `@reward` decorator: a function of a rollout, as a picklable `Reward`."""

from __future__ import annotations

import functools
import inspect
import sys
import warnings
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias, cast, overload

from referee.deadline import check_timeout
from referee.reward import AsyncReward, CheckReward, RewardResult
from referee.rollout import Rollout
from referee.workers import RunIn, check_run_in

__all__ = ["AsyncFunctionReward", "FunctionReward", "RewardFunction", "reward"]


class _FunctionPickling:
    """Pickle a decorated module-level function by reference, like the function itself."""

    fn: Callable[[Rollout], Any]
    name: str

    def __init__(
        self,
        fn: Callable[[Rollout], Any],
        name: str | None = None,
        deadline: float | None = None,
        run_in: RunIn | None = None,
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        self.deadline = check_timeout(deadline, self.name)
        self.run_in = check_run_in(run_in, self.name)
        # The instance stands for the function: its name, docstring and module.
        functools.update_wrapper(cast(Any, self), fn)

    def by_value(self) -> tuple[Any, ...]:
        """How to rebuild it from its function (what a fresh interpreter does where its
        module cannot be imported: a function of ``__main__``)."""
        return (type(self), (self.fn, self.name, self.deadline, self.run_in))

    def __reduce__(self) -> str | tuple[Any, ...]:
        module = sys.modules.get(self.fn.__module__)
        target: object = module
        for part in self.fn.__qualname__.split("."):
            target = getattr(target, part, None)
        if target is self:
            return self.fn.__qualname__
        return self.by_value()


class FunctionReward(_FunctionPickling, CheckReward):
    """A synchronous function of a rollout, as a Reward (made by `@reward`).

    Attributes:
        deadline: Seconds one call may take before it is stopped and scores 0 with the
            reason (`Score.fault` ``timeout``, the policy's verdict); None:
            `referee.deadline.DEFAULT_TIMEOUT`.
        run_in: Where it runs (`referee.workers.RunIn`); None: in a worker process.
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
    *,
    name: str | None = None,
    deadline: float | None = None,
    run_in: RunIn | None = None,
    timeout: float | None = None,
) -> Callable[[RewardFunction], FunctionReward | AsyncFunctionReward]: ...
def reward(
    fn: RewardFunction | None = None,
    /,
    *,
    name: str | None = None,
    deadline: float | None = None,
    run_in: RunIn | None = None,
    timeout: float | None = None,
) -> (
    FunctionReward
    | AsyncFunctionReward
    | Callable[[RewardFunction], FunctionReward | AsyncFunctionReward]
):
    """Turn a function of a rollout into a picklable `Reward`.

    The function may be sync or async and may return a float, a bool, a `Score`, or None (no
    score: it becomes a `Failure`, never 0). Exceptions it raises become Failures too. A call
    that runs past `deadline` seconds (default: `referee.deadline.DEFAULT_TIMEOUT`) is stopped,
    whether it loops, computes in C, sleeps or awaits: a sync function's rollout scores 0 with
    the reason (`Score.fault` ``timeout``), the policy's verdict, never a masked Failure; an
    async function's gets ``Failure("timeout")``, the infrastructure's.

    A sync function runs in a worker process (`referee.workers`) unless `run_in` says
    ``inline`` or ``thread``: referee cannot know that it never spins in C, where only killing
    its process stops it. It must then pickle: a module-level function travels by reference,
    one of ``__main__``, a notebook or a closure by value. An async function runs on the event
    loop (its deadline is ``asyncio.timeout``); keep its computing short, or make it sync.

    Args:
        fn: The function (when used without arguments).
        name: The reward's name (default: the function's).
        deadline: Seconds per call.
        run_in: ``inline``, ``thread`` or ``process`` (`referee.workers.RunIn`).
        timeout: Deprecated: the old name of `deadline`.

    Example:
        ```python
        @referee.reward(deadline=2)
        def short(rollout: referee.Rollout) -> float:
            return 1.0 if len(rollout.completion_text) < 200 else 0.0
        ```
    """
    if timeout is not None:
        if deadline is not None:
            raise ValueError("give deadline alone: timeout is its old name")
        warnings.warn(
            "referee.reward(timeout=...) is deprecated; name it deadline (the same behaviour)",
            DeprecationWarning,
            stacklevel=2,
        )
        deadline = timeout

    def wrap(f: RewardFunction) -> FunctionReward | AsyncFunctionReward:
        if inspect.iscoroutinefunction(f):
            if run_in not in (None, "inline"):
                raise ValueError(
                    f"{name or f.__name__}: an async function runs on the event loop; "
                    f"run_in={run_in!r} takes a sync function"
                )
            return AsyncFunctionReward(f, name, deadline)
        return FunctionReward(f, name, deadline, run_in)

    return wrap if fn is None else wrap(fn)
