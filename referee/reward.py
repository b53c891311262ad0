"""What a reward is: the `Reward` protocols, the base classes that implement them, and walks.

A reward turns a `Rollout` into a `Score`. Scoring has one naming scheme, the same on every
reward, built-in or yours:

===============  ====================  ==========================  ====================
                 one rollout           many rollouts               one group
===============  ====================  ==========================  ====================
async            ``score(r)``          ``score_batch(rs)``         ``score_group(rs)``
sync             ``score_sync(r)``     ``referee.score(rw, rs)``   (none)
you implement    ``check(r)`` (`CheckReward`), ``evaluate(r)`` (`AsyncReward`),
                 ``evaluate_group(rs)`` (`GroupRewardBase`)
===============  ====================  ==========================  ====================

`referee.score(reward, rollouts)` scores many rollouts from sync code, for any reward (the
method ``score_batch_sync`` it duplicated is deprecated). The sync calls block; on a reward
whose `is_sync` is true they never touch an event loop (so they are safe inside a running
one, and cost no task per rollout): that is the fast path combinations, the CLI and the
trainers take. A reward of your own gets that fast path by
satisfying `SyncReward` (an ``is_sync`` property and ``score_sync``), whether or not it
subclasses a referee base class.

Three ways to write one:

- subclass `CheckReward` and implement `check(rollout)` for CPU-bound checks (JSON, math,
  string matching): plain synchronous code, wrapped once into the async protocol;
- subclass `AsyncReward` and implement `async evaluate(rollout)` for anything that waits
  (judges, sandboxes, HTTP);
- subclass `GroupRewardBase` and implement `async evaluate_group(rollouts)` for rewards that
  compare the attempts at one prompt;

or decorate a function with `referee.reward`. In every case an exception raised while scoring
one rollout becomes a `Failure` on that rollout's `Score`; it never escapes into the training
loop and is never turned into 0.

Every reward scores under a deadline (`referee.deadline`): ``deadline_seconds`` per rollout
(per group for a group reward), its ``deadline`` when set, else its class's
`RewardBase.default_deadline` (`DEFAULT_TIMEOUT`, or one derived from the reward's own options:
`math_answer`'s and the code rewards' ``timeout``, a judge client's retries). Past it the
work is stopped and the rollout scores 0 with the reason (`Score.fault` ``timeout``) where the
reward is a sync check (a `CheckReward`, a combination of checks: the policy's verdict, never a
masked Failure; `CheckReward.overrun_blame`), else ``Failure("timeout")`` (an async reward: the
infrastructure's); the rest of the batch is scored as usual. Set it with
``@referee.reward(deadline=2)``, a class attribute (``deadline = 2.0``; in a dataclass,
``deadline: ClassVar[float] = 2.0``), ``reward.deadline = 2.0``, or ``deadline: 2`` in a spec.
``timeout`` is a reward's own option where its class declares one; the old use of ``timeout``
for the deadline still works, with a `DeprecationWarning`, where it cannot mean an option (a
class that declares none).

Where a check runs is its ``run_in`` (`referee.workers.RunIn`): ``inline`` in the caller's
thread (referee's built-ins, whose cost is bounded), ``thread``, or ``process``: a worker
process killed at the deadline, the default for a `CheckReward` of your own and for
``@referee.reward`` functions, since a check that spins in C cannot be interrupted in-process
(`referee.workers`).

A reward made of rewards (a combination, a transform, `final_answer`) says what it contains
with `children()`, a sequence of `Part`; `walk`, `needs_groups`, `needs` and `top_components`
answer questions about the whole tree from that one method, for built-in and user composites
alike.

A reward says what it needs of a rollout with `needs()` (a `Need` each: a reference, a group,
chat messages), so a missing input is caught before scoring (`referee score`, TRL's reward
functions) instead of failing every rollout, or worse, being left out of every total.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import inspect
import logging
import sys
import warnings
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import (
    Any,
    ClassVar,
    Literal,
    NamedTuple,
    Protocol,
    TypeAlias,
    TypeGuard,
    cast,
    get_args,
    runtime_checkable,
)

from pydantic import ConfigDict

from referee._aio import run_sync
from referee.deadline import DEFAULT_TIMEOUT, check_timeout, each, run, run_in_thread, within
from referee.errors import RewardError, VerifierTimeout
from referee.rollout import Rollout
from referee.scores import Score, check_value
from referee.workers import RunIn, in_worker, pool

__all__ = [
    "DEFAULT_CONCURRENCY",
    "DEFAULT_TIMEOUT",
    "AsyncReward",
    "CheckReward",
    "Composite",
    "GroupReward",
    "GroupRewardBase",
    "Need",
    "Part",
    "Reward",
    "RewardBase",
    "RewardResult",
    "SyncReward",
    "coerce_result",
    "failure_from_exception",
    "gather_bounded",
    "group_indices",
    "is_sync",
    "needs",
    "needs_groups",
    "overrun_verdict",
    "reference_powers",
    "score",
    "top_components",
    "walk",
]

logger = logging.getLogger("referee")

DEFAULT_CONCURRENCY = 64
"""How many rollouts an async reward scores at once when the caller does not say."""

# A reward's own `timeout` option bounds its work itself; referee's deadline is a backstop far
# enough past it that the reward's own handling (math_answer killing a stuck worker, a sandbox
# case or a queue of them) always comes first (`RewardBase.backstop`).
_BACKSTOP_FACTOR = 10.0
_BACKSTOP_SLACK = 60.0

RewardResult: TypeAlias = Score | float | bool | None
"""What a reward function may return: a Score, a number, a bool (1.0/0.0), or None (no score)."""

Need = Literal["reference", "group", "messages", "tokens"]
"""What a reward needs of a rollout to score it (`RewardBase.needs`):

- ``reference``: a `Rollout.reference` (not None): the answer, the fields, the tests;
- ``group``: a `Rollout.group` shared by the attempts at one prompt (a group reward: with no
  group every rollout is a group of one, and ranking it says nothing);
- ``messages``: a completion given as chat messages, not text (a trajectory reward);
- ``tokens``: the response's token count (``metadata.completion_ids`` or
  ``metadata.completion_tokens``, as trainers give them: `length` with ``unit: tokens``).

A trainer's door that cannot carry a need refuses a spec that has it when it loads
(`referee.backends.contract.refuse_unfit`), where it would score every rollout wrong.
"""
_NEEDS: frozenset[str] = frozenset(get_args(Need))


# --- the protocols -------------------------------------------------------------------------


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


@runtime_checkable
class SyncReward(Reward, Protocol):
    """A reward that can score without waiting: the fast path of combinations and backends."""

    @property
    def is_sync(self) -> bool:
        """True when `score_sync` never waits (a composite: when all its parts are sync)."""
        ...

    def score_sync(self, rollout: Rollout) -> Score:
        """Score one rollout, blocking; never raises for a problem with the rollout."""
        ...


class Part(NamedTuple):
    """One reward inside a composite one.

    Attributes:
        name: The part's name.
        reward: The reward.
        weight: Its weight in the parent's total (1.0 where the parent does not weigh).
        reported: Whether the parent's `Score.components` carries this part's value under
            `name` (a combination's components do; a transform's inner reward does not).
        required: Whether the parent fails where this part gives no value (a combination's
            component under ``on_failure: fail``, a gate); False where it leaves the part out
            or counts a fixed value instead (``omit``, ``value``), or falls through to the
            next part (a cascade's). `needs` reports only what required parts need.
    """

    name: str
    reward: Reward
    weight: float = 1.0
    reported: bool = False
    required: bool = True


@runtime_checkable
class Composite(Protocol):
    """A reward made of rewards: it says which, so one walk can see the whole tree."""

    def children(self) -> Sequence[Part]:
        """The rewards inside this one, in the order they run."""
        ...


# --- questions about a reward tree ---------------------------------------------------------


def is_sync(reward: object) -> TypeGuard[SyncReward]:
    """Whether `reward` scores inline with `score_sync` (no waiting anywhere inside it)."""
    if isinstance(reward, RewardBase):
        # referee's own bases first: a runtime protocol check costs microseconds, and
        # transforms and final_answer ask on every rollout.
        return reward.is_sync
    return isinstance(reward, SyncReward) and reward.is_sync


def walk(reward: Reward) -> Iterator[Reward]:
    """The reward and every reward inside it, depth first, parents before their parts."""
    yield reward
    if isinstance(reward, Composite):
        for part in reward.children():
            yield from walk(part.reward)


def needs_groups(reward: Reward) -> bool:
    """Whether any part of the reward, however deep, compares the attempts of a group."""
    return any(isinstance(r, GroupReward) for r in walk(reward))


def reference_powers(reward: Reward) -> list[tuple[str, str]]:
    """What the reward tree would do on the host with a rollout's reference that only a
    trusted reference may ask: ``(reward name, what)`` per reward that runs code the
    reference carries outside the sandbox, opens a path it names, or the like.

    Empty for a tree that treats every reference as data. `referee serve` refuses a spec where
    this is not empty unless it was started trusting its clients (docs/threat-model.md).
    """
    found: list[tuple[str, str]] = []
    for r in walk(reward):
        powers = getattr(r, "reference_powers", None)
        if callable(powers):
            found.extend((getattr(r, "name", type(r).__name__), what) for what in powers())
    return found


def needs(reward: Reward, *, optional: bool = False) -> list[tuple[str, Need]]:
    """What the reward tree needs of a rollout: ``(component, need)`` per reward inside it that
    declares a `Need` (`RewardBase.needs`; a group reward needs a group), named by its dotted
    component path (``answer``, ``judge.faithful``), or by the reward's own name at the top.

    Only parts whose parent fails without their value (`Part.required`) count: a component
    under ``on_failure: omit`` or ``value`` can go without its input. With `optional`, those
    are listed too.

    Example:
        ```python
        referee.reward.needs(referee.load("math.yaml"))  # [("answer", "reference")]
        ```
    """
    found: list[tuple[str, Need]] = []

    def visit(r: Reward, path: str, required: bool) -> None:
        if required or optional:
            declared: set[Need] = set()
            method = getattr(r, "needs", None)
            if callable(method):
                declared.update(cast(Need, n) for n in method() if n in _NEEDS)
            if isinstance(r, GroupReward):
                declared.add("group")
            where = path or getattr(r, "name", type(r).__name__)
            found.extend((where, n) for n in sorted(declared))
        if isinstance(r, Composite):
            for part in r.children():
                sub = path
                if part.reported:
                    sub = f"{path}.{part.name}" if path else part.name
                visit(part.reward, sub, required and getattr(part, "required", True))

    visit(reward, "", True)
    return list(dict.fromkeys(found))


def top_components(reward: Reward) -> list[tuple[str, float]]:
    """Names and weights of the components a reward reports; ``[(name, 1.0)]`` if none."""
    if isinstance(reward, Composite):
        parts = [(p.name, p.weight) for p in reward.children() if p.reported]
        if parts:
            return parts
    return [(reward.name, 1.0)]


# --- results -------------------------------------------------------------------------------


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


def overrun_verdict(score: Score, blame: str = "policy") -> Score:
    """A check's ``Failure("timeout")`` as the policy's verdict (0, the reason, `Score.fault`
    ``timeout``) where `blame` is the policy's; any other score as it is."""
    failure = score.failure
    if failure is None or failure.type != "timeout" or blame != "policy":
        return score
    return Score.policy_fault("timeout", failure.message)


def failure_from_exception(exc: Exception, where: str) -> Score:
    """The Score that stands for an exception raised while scoring."""
    if isinstance(exc, RewardError):
        return Score.failed(exc.failure_type, str(exc), where)  # type: ignore[arg-type]
    logger.debug("reward %s raised", where, exc_info=exc)
    message = f"{type(exc).__name__}: {exc}"
    if len(message) > 500:
        message = message[:500] + "..."
    return Score.failed("error", message, where)


# --- the base classes ----------------------------------------------------------------------


_OWN_FRAMES = frozenset({__file__, "<frozen abc>", abc.__file__ or ""})  # between a class and us


def _deprecated_timeout(owner: str, stacklevel: int | None = None) -> None:
    """Warn that `owner` names its deadline ``timeout``, at the caller's line (`stacklevel`;
    None: the first frame outside referee and abc, where a class statement is)."""
    if stacklevel is None:
        frame, stacklevel = sys._getframe(1), 2
        while frame.f_back is not None and frame.f_code.co_filename in _OWN_FRAMES:
            frame, stacklevel = frame.f_back, stacklevel + 1
    warnings.warn(
        f"{owner}: timeout as the deadline is deprecated; name it deadline "
        "(timeout is a reward's own option where its class declares one)",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


class RewardBase(ABC):
    """What referee's base classes share: pickling of compiled state, the sync entry points,
    the deadline, and `children` (none, unless a composite says otherwise). Subclass it
    directly for a reward that is neither a check, an async evaluation nor a group reward (a
    wrapper).

    Attributes:
        name: The reward's name (components, failures and logs use it).
        deadline: Seconds one rollout (a group, for a group reward) may take; None: the
            class's `default_deadline`. A class attribute every reward has: set it on your
            class, on an instance, or with ``deadline:`` in a spec.
        run_in: Where its check runs (`referee.workers.RunIn`); None: the class's
            `default_run_in`.
    """

    name: str
    deadline: float | None = None
    run_in: RunIn | None = None
    default_run_in: ClassVar[RunIn] = "inline"
    """Where the class's checks run when ``run_in`` is not set."""
    # Spec options are validated by pydantic against the reward's dataclass fields: an unknown
    # option is an error, not silently dropped. Fields typed `Reward` hold rewards.
    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(
        extra="forbid", arbitrary_types_allowed=True
    )

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # The old spelling: a plain ``timeout = 2.0`` (or ``timeout: ClassVar[float]``) on a
        # class is its deadline. An annotated ``timeout`` (a dataclass field) is an option.
        if "timeout" in cls.__dict__ and "deadline" not in cls.__dict__:
            hint = str(inspect.get_annotations(cls).get("timeout", "ClassVar"))
            if "ClassVar" in hint and not isinstance(cls.__dict__["timeout"], property):
                _deprecated_timeout(f"class {cls.__name__}")
                cls.deadline = cls.__dict__["timeout"]

    @property
    def timeout(self) -> float | None:
        """Deprecated: the old name of `deadline`, where a class declares no ``timeout``
        option of its own."""
        return self.deadline

    @timeout.setter
    def timeout(self, value: float | None) -> None:
        _deprecated_timeout(self.name, 3)
        self.deadline = check_timeout(value, self.name)

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
    def runs_in(self) -> RunIn:
        """Where this reward's checks run: ``run_in``, else the class's `default_run_in`."""
        return self.run_in or self.default_run_in

    def children(self) -> Sequence[Part]:
        """The rewards inside this one (none for a plain reward)."""
        return ()

    def needs(self) -> frozenset[Need]:
        """What this reward, as configured, needs of a rollout to score it (`Need`): none by
        default. A reward that compares against ground truth needs ``"reference"``; say so,
        and `referee score` and TRL's reward functions stop before scoring a dataset where no
        row has one (see `referee.reward.needs`).
        """
        return frozenset()

    def reference_powers(self) -> tuple[str, ...]:
        """What this reward, as configured, does on the host with a rollout's reference that
        only a trusted reference may ask (run code it carries outside the sandbox, open a path
        it names); one short sentence each, none for a reward that reads references as data.

        See `referee.reward.reference_powers` and docs/threat-model.md.
        """
        return ()

    @property
    def deadline_seconds(self) -> float | None:
        """Seconds referee lets one rollout (one group) take; None: no deadline of its own.

        ``deadline`` when set, else `default_deadline`. Override `default_deadline`, not
        this, where a class knows better.
        """
        deadline = self.deadline
        return self.default_deadline() if deadline is None else deadline

    def default_deadline(self) -> float | None:
        """The deadline where ``deadline`` is not set: `DEFAULT_TIMEOUT`. A class with a
        ``timeout`` option of its own returns `backstop` of it; a composite None (its parts
        carry their own deadlines); a judge its client's worst case."""
        return DEFAULT_TIMEOUT

    @staticmethod
    def backstop(own_timeout: float) -> float:
        """The deadline behind a reward's own ``timeout`` option: ``10 * timeout + 60``, so
        that the reward's own handling of its timeout always comes first."""
        return _BACKSTOP_FACTOR * own_timeout + _BACKSTOP_SLACK

    @property
    def is_sync(self) -> bool:
        """True when scoring never waits: then `score_sync(rollout)` scores inline."""
        return False

    @abstractmethod
    async def score(self, rollout: Rollout) -> Score: ...

    @abstractmethod
    async def score_batch(
        self, rollouts: Sequence[Rollout], *, concurrency: int | None = None
    ) -> list[Score]: ...

    def score_sync(self, rollout: Rollout) -> Score:
        """Score one rollout, blocking (inline where `is_sync`, else on an event loop)."""
        return run_sync(self.score(rollout))

    def score_batch_sync(
        self, rollouts: Sequence[Rollout], *, concurrency: int | None = None
    ) -> list[Score]:
        """Deprecated: `referee.score(reward, rollouts)`, which it was, and which takes any
        reward (this method only referee's base classes)."""
        warnings.warn(
            "reward.score_batch_sync(rollouts) is deprecated: call referee.score(reward, "
            "rollouts) (the same scores, for any reward)",
            DeprecationWarning,
            stacklevel=2,
        )
        return score(self, rollouts, concurrency=concurrency)


class CheckReward(RewardBase):
    """Base class of CPU-bound rewards: implement `check(rollout)`.

    Where the check runs is ``run_in`` (`referee.workers.RunIn`): a class of yours runs in a
    worker process by default (``default_run_in = "process"``), killed at its deadline, since
    referee cannot know that your check never spins in C; referee's built-ins, whose cost is
    bounded, say ``inline``. Inline, `score_batch` is a plain loop (for deterministic checks,
    event-loop tasks would cost more than the check itself) and a check past its deadline
    (`deadline_seconds`) is interrupted between bytecodes. Either way the rollout scores 0
    with the reason (`Score.fault` ``timeout``), the policy's verdict (see `overrun_blame`);
    a rollout that kills its worker process twice scores 0 with ``fault: crash``.
    """

    default_run_in: ClassVar[RunIn] = "process"
    overrun_blame: ClassVar[Literal["policy", "infrastructure"]] = "policy"
    """Whose fault a check past its deadline is. A check's work is CPU on the policy's output
    (its text, its code's results), so by default the policy's: that rollout scores 0 with
    the reason (`Score.fault` ``timeout``), never a Failure a trainer would mask, which a
    policy could provoke on purpose. A check that waits on a service says
    ``infrastructure``: then it is ``Failure("timeout")``, worth a retry."""
    # (the `deadline` it was computed for, `deadline_seconds`): read once per deadline on the
    # inline path, where a property call per rollout would be a measurable share of a check.
    _deadline: tuple[object, float | None] = (object(), None)
    _prepared: bool = False  # `prepare` has run for this instance, in this process

    @abstractmethod
    def check(self, rollout: Rollout) -> RewardResult:
        """Score one rollout (synchronously). Raise `RewardError` when it cannot be scored."""

    def prepare(self) -> None:
        """One-time set-up a check needs (imports, parsers, tables), run once per worker
        process when it loads the reward, and in the pool's zygote before it forks workers,
        so it never counts against the first check's deadline. Nothing by default."""

    def _prepare_once(self) -> None:
        """`prepare`, once per instance: a set-up that raises is left to the check, which
        meets the same error and says it."""
        with contextlib.suppress(Exception):
            self.prepare()
        with contextlib.suppress(AttributeError):  # a slotted class prepares every time
            self._prepared = True

    @property
    def is_sync(self) -> bool:
        """True unless it runs in a worker process (then batches go to the pool at once)."""
        return (self.run_in or self.default_run_in) != "process" or in_worker()

    def _seconds(self) -> float | None:
        deadline = self._deadline
        if deadline[0] is not self.deadline:
            deadline = (self.deadline, self.deadline_seconds)
            with contextlib.suppress(AttributeError):  # a slotted class keeps no cache
                self._deadline = deadline
        return deadline[1]

    def score_sync(self, rollout: Rollout) -> Score:
        """`check` under the deadline, where `runs_in` says, with exceptions and bad values
        turned into Failures."""
        where = self.run_in or self.default_run_in
        if where == "inline" or in_worker():
            if not self._prepared:  # in this process, outside the first check's deadline
                self._prepare_once()
            return self.check_within(rollout, self._seconds())
        if where == "process":
            return pool().score(self, [rollout])[0]
        try:
            result = run_in_thread(self.check, rollout, self._seconds(), self.name)
            return coerce_result(result, self.name)
        except Exception as exc:
            return self.blamed(failure_from_exception(exc, self.name))

    def check_within(self, rollout: Rollout, seconds: float | None) -> Score:
        """`check` in this thread, stopped after `seconds` (between bytecodes): what
        `score_sync` does inline, and what a worker process does with its rollouts. Not a
        scoring method of the contract: callers use `score_sync` or `referee.score`."""
        try:
            return coerce_result(run(self.check, rollout, seconds, self.name), self.name)
        except Exception as exc:
            return self.blamed(failure_from_exception(exc, self.name))

    def blamed(self, score: Score) -> Score:
        """`score`, or the policy's verdict where it is a timeout that `overrun_blame` puts
        on the policy (see there)."""
        return overrun_verdict(score, self.overrun_blame)

    async def score(self, rollout: Rollout) -> Score:
        if self.is_sync:
            return self.score_sync(rollout)
        return (await self.score_batch([rollout]))[0]

    async def score_batch(
        self, rollouts: Sequence[Rollout], *, concurrency: int | None = None
    ) -> list[Score]:
        if self.is_sync:
            return each(self.score_sync, rollouts)
        # In the worker pool; the event loop goes on meanwhile.
        return await pool().score_async(self, rollouts)


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


class AsyncReward(RewardBase):
    """Base class of rewards that wait on something: implement `async evaluate(rollout)`.

    Attributes:
        concurrency: Rollouts scored at once by `score_batch` when the caller does not say.
    """

    concurrency: int = DEFAULT_CONCURRENCY

    @abstractmethod
    async def evaluate(self, rollout: Rollout) -> RewardResult:
        """Score one rollout. Raise `RewardError` when it cannot be scored."""

    async def score(self, rollout: Rollout) -> Score:
        try:
            result = await within(self.evaluate(rollout), self.deadline_seconds, self.name)
            return coerce_result(result, self.name)
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


class GroupRewardBase(RewardBase):
    """Base class of group rewards: implement `async evaluate_group(rollouts)`.

    Attributes:
        concurrency: Groups scored at once by `score_batch` when the caller does not say.
    """

    concurrency: int = DEFAULT_CONCURRENCY

    def needs(self) -> frozenset[Need]:
        """A group: it compares the attempts at one prompt."""
        return frozenset({"group"})

    @abstractmethod
    async def evaluate_group(self, rollouts: Sequence[Rollout]) -> Sequence[RewardResult]:
        """Score the attempts of one group, one result per rollout in order."""

    async def score_group(self, rollouts: Sequence[Rollout]) -> list[Score]:
        """`evaluate_group` under the deadline (one per group: past it, every member fails)."""
        try:
            work = self.evaluate_group(rollouts)
            results = list(await within(work, self.deadline_seconds, self.name))
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


# --- the synchronous entry point -----------------------------------------------------------


def score(
    reward: Reward, rollouts: Iterable[Rollout], *, concurrency: int | None = None
) -> list[Score]:
    """Score rollouts from plain synchronous code: one Score per rollout, in order.

    A sync reward scores inline, each rollout under its deadline (a reward of your own that
    does not subclass referee's bases is bounded here, by its ``deadline_seconds`` or
    ``deadline`` attribute, else `DEFAULT_TIMEOUT`); one that runs in worker processes
    (``run_in: process``) sends them the whole batch.

    Raises:
        TypeError: `rollouts` is one Rollout (or a string or a mapping), not an iterable of
            them: a pydantic model iterates over its fields, and each would fail on its own.

    Example:
        ```python
        scores = referee.score(referee.load("spec.yaml"), rollouts)
        ```
    """
    if isinstance(rollouts, (Rollout, str, bytes, Mapping)):
        what = "one Rollout" if isinstance(rollouts, Rollout) else type(rollouts).__name__
        raise TypeError(
            f"referee.score takes a list of rollouts, got {what}: pass [rollout] "
            "(or score one with reward.score_sync(rollout))"
        )
    items = list(rollouts)
    for item in items[:1]:
        if not isinstance(item, Rollout):
            raise TypeError(
                f"referee.score takes a list of rollouts, got a {type(rollouts).__name__} of "
                f"{type(item).__name__}: build each with referee.Rollout(...)"
            )
    if is_sync(reward):
        if isinstance(reward, RewardBase):
            return each(reward.score_sync, items)  # it bounds its own checks
        return each(_bounded(reward), items)
    return run_sync(reward.score_batch(items, concurrency=concurrency))


def _bounded(reward: SyncReward) -> Callable[[Rollout], Score]:
    """`reward.score_sync` under a deadline, for a reward that does not bound its own."""
    seconds = (
        getattr(reward, "deadline_seconds", None)
        or getattr(reward, "deadline", None)
        or getattr(reward, "timeout", None)  # the old name
    )
    limit = DEFAULT_TIMEOUT if seconds is None else float(seconds)
    name, check = reward.name, reward.score_sync

    def one(rollout: Rollout) -> Score:
        try:
            return run(check, rollout, limit, name)
        except VerifierTimeout as exc:  # a sync check on the policy's output: its verdict
            return Score.policy_fault("timeout", str(exc))

    return one
