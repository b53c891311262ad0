"""Deadlines: a check that runs past its limit is stopped, in whatever thread it runs.

Every reward scores a rollout (a group, for a group reward) under a deadline: its
``deadline_seconds``, `DEFAULT_TIMEOUT` unless it says otherwise. Past it, the check is stopped
(`VerifierTimeout`, naming the time taken and the limit) and the rest of the batch is scored
as usual: a sync check's rollout scores 0 with the reason (`Score.fault` ``timeout``), the
policy's verdict, never a masked Failure (docs/threat-model.md, "Blame"); an async reward's
gets ``Failure("timeout")``, the infrastructure's.

How a synchronous check is stopped. It runs inline, in the caller's thread: no thread, no
process, no signal. One watchdog thread per process (a daemon, started on first use) watches
a small record per thread: the running check's "tick", a tuple of its deadline and its
reward's name, made afresh per check so that its identity tells checks apart. When the
running check is past its deadline, the watchdog raises `Overrun` in that thread with
``PyThreadState_SetAsyncExc``, which works in the main thread and any other. `Overrun`
derives from `BaseException`, so a check's ``except Exception`` does not swallow it. The
watchdog sleeps while no thread is inside a deadline and, while one is, looks every `POLL`
seconds, or just after the soonest deadline it saw when that comes first (a check that runs
past its deadline is stopped a few milliseconds after it; one that starts while the watchdog
sleeps, within `POLL`).

Checks nest (`referee.score` -> a combination -> a component): each inner one costs a clock
read and a few attribute stores. The record holds the tick of the check whose deadline is
the earliest in force; a check whose own deadline is later than an enclosing one stores
nothing. Only the outermost scope of a thread arms the watchdog, and disarms it.

The races, and why nothing leaks:

- the watchdog decides under a lock, and writes the tick it fires at (``fired``) before it
  checks that this check is still the one running and raises;
- a check that returns first restores the enclosing record, then reads ``fired``: if it was
  its own, it takes the lock (so the watchdog is done) and takes delivery of what was raised
  but not yet delivered, at a point where it is dropped (`_take_back`), unless the watchdog
  has fired at the enclosing check since. Between the end of a check and that read there is
  no point where Python delivers an asynchronous exception (the code there only stores and
  compares). It is not cleared with ``SetAsyncExc(thread, NULL)``: on CPython 3.11 that
  leaves every thread of the interpreter on the eval loop's slow path for good;
- an `Overrun` caught by a check is its own timeout when ``fired`` is its tick, an
  enclosing check's (passed on) when it is that one's, and otherwise stale: then the check
  is run again with a fresh deadline;
- a stray `Overrun` that reaches the outermost scope (several deadlines passing within one
  poll) makes that scope score the rollout it landed on again; the scope disarms under the
  lock and takes delivery of anything pending, so nothing reaches the caller.

Async rewards: `within` bounds a coroutine with `asyncio.timeout` (a coroutine awaiting past
its deadline is cancelled) and runs each of its steps under the same watchdog, so a coroutine
that computes without awaiting is interrupted too. A step is an outermost scope of its own:
nothing stays armed across an ``await``, so the other tasks of the loop are never hit.

What cannot be stopped:

- a check stuck inside native code that does not return to the interpreter (a C extension's
  loop, a huge big-integer power): the exception waits until that code returns. The watchdog
  logs one error naming the reward when a check is still running `STUCK_AFTER` seconds past
  its deadline;
- a check that catches `BaseException` (or `Overrun`) and carries on (the watchdog raises
  again every `REFIRE` seconds while the check runs: an exception delivered inside a
  finalizer is ignored by Python, and this recovers from that);
- work a reward hands to a thread of its own, which an async reward's cancellation does not
  stop (the code rewards' grading threads end when their sandbox job does, at its limits).
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Coroutine, Generator, Sequence
from typing import Any, Final, Generic, TypeVar, cast

from referee.errors import RewardError, VerifierTimeout

__all__ = [
    "DEFAULT_TIMEOUT",
    "POLL",
    "REFIRE",
    "STUCK_AFTER",
    "Overrun",
    "check_timeout",
    "each",
    "run",
    "run_in_thread",
    "within",
]

A = TypeVar("A")
T = TypeVar("T")

logger = logging.getLogger("referee")

DEFAULT_TIMEOUT: Final = 10.0
"""Seconds a reward may spend on one rollout (on one group, for a group reward), unless its
``timeout`` says otherwise."""

POLL: Final = 0.05
"""Seconds between two looks of the watchdog while a deadline is in force."""

REFIRE: Final = 1.0
"""Seconds after which the watchdog raises again in a check it fired at that still runs."""

STUCK_AFTER: Final = 5.0
"""Seconds past its deadline after which a check still running is logged as stuck."""


class Overrun(BaseException):
    """Raised inside a check by the watchdog at its deadline; referee turns it into
    `VerifierTimeout` (for a sync check, a score of 0 with ``fault: timeout``). A
    BaseException, so that ``except Exception`` does not swallow it."""


def check_timeout(value: object, where: str) -> float | None:
    """`value` as a timeout in seconds (None stays None).

    Raises:
        ValueError: `value` is not a positive, finite number.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: timeout must be a number of seconds, got {value!r}")
    if not 0 < value < math.inf:
        raise ValueError(f"{where}: timeout must be positive and finite, got {value!r}")
    return float(value)


# --- per-thread state and the watchdog ------------------------------------------------------

_Tick = tuple[float, str]  # (deadline, reward name); compared by identity, one per check
_IDLE: Final[_Tick] = (math.inf, "")


class _Slot:
    """One thread's deadline record, read by the watchdog.

    Attributes:
        tid: The thread's id.
        depth: Nested scopes entered (the watchdog looks only while it is above 0).
        tick: (deadline, reward name) of the check that owns the earliest deadline in
            force; one tuple, so the watchdog never reads half of an update, and a new one
            per check, so its identity names the check.
        fired: The tick the watchdog last fired at.
        fired_at: When it last raised there.
        warned: The tick last logged as stuck.
    """

    __slots__ = ("depth", "fired", "fired_at", "tick", "tid", "warned")

    def __init__(self, tid: int) -> None:
        self.tid = tid
        self.depth = 0
        self.tick: _Tick = _IDLE
        self.fired: _Tick | None = None
        self.fired_at = 0.0
        self.warned: _Tick | None = None


_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
_set_async_exc.argtypes = (ctypes.c_ulong, ctypes.py_object)
_set_async_exc.restype = ctypes.c_int
# An exception raised but not yet delivered is never cleared with SetAsyncExc(thread, NULL):
# on CPython 3.11 that leaves the interpreter's "async exception pending" flag set for good,
# so every thread then takes the eval loop's slow path at each call and loop (and, under a
# tracer, spins there for ever). It is delivered instead, where it is harmless (`_take_back`).

_monotonic = time.monotonic
_local = threading.local()
_lock = threading.Lock()
_wake = threading.Event()
_slots: list[_Slot] = []
_watchdog: threading.Thread | None = None


def _slot() -> _Slot:
    """This thread's record, made on first use."""
    try:
        slot: _Slot = _local.slot
    except AttributeError:
        slot = _local.slot = _Slot(threading.get_ident())
        with _lock:
            # Threads come and go; keep the records of live ones (ids can be reused).
            alive = {t.ident for t in threading.enumerate()}
            _slots[:] = [s for s in _slots if s.tid in alive and s.tid != slot.tid]
            _slots.append(slot)
    return slot


def _arm(slot: _Slot) -> None:
    """Enter a scope; the outermost wakes the watchdog (starting it in this process)."""
    slot.depth += 1
    if slot.depth == 1:
        if _watchdog is None:
            _start_watchdog()
        if not _wake.is_set():  # depth is stored first: a watchdog clearing now still sees it
            _wake.set()


def _disarm(slot: _Slot) -> None:
    """Leave a scope; the outermost takes back anything raised but undelivered."""
    slot.depth -= 1
    if slot.depth == 0:
        slot.tick = _IDLE
        _take_back(slot)


def _checkpoint() -> None:
    """A point where Python delivers a pending asynchronous exception (a call, a loop)."""
    for _ in _TWICE:
        pass


_TWICE: Final = (0, 0)


def _take_back(slot: _Slot) -> None:
    """Deliver, and drop, an `Overrun` raised at a check that has ended, if one is pending.

    The lock waits out a watchdog that is firing now; after it, the watchdog fires only at
    the thread's current tick, which no longer names the ended check. An `Overrun` fired at
    the enclosing check meanwhile (the current tick) is passed on, not dropped.
    """
    with _lock:
        pass
    try:
        _checkpoint()
    except Overrun:
        if slot.depth and slot.fired is slot.tick:
            raise


def _start_watchdog() -> None:
    global _watchdog
    with _lock:
        if _watchdog is None:
            _watchdog = threading.Thread(target=_watch, name="referee-deadline", daemon=True)
            _watchdog.start()


def _watch() -> None:
    """The watchdog: sleeps while nothing is armed, else looks every `POLL` seconds, or at the
    next deadline it saw if that comes sooner."""
    while True:
        _wake.clear()  # before looking: a scope armed after this sets it again
        busy, soonest = _sweep()
        if busy:
            time.sleep(max(0.0, min(POLL, soonest - _monotonic())) + _LATE)
        else:
            _wake.wait()


_LATE: Final = 0.001  # slept past a deadline, so that the look after it finds it passed


def _sweep() -> tuple[bool, float]:
    """Fire at every check past its deadline; log the stuck ones. Whether any is armed, and
    the soonest deadline still to come."""
    now = _monotonic()
    busy = False
    soonest = math.inf
    stuck: list[tuple[str, float]] = []
    with _lock:
        for slot in _slots:
            if not slot.depth:
                continue
            busy = True
            tick = slot.tick
            deadline, name = tick
            if now < deadline:
                soonest = min(soonest, deadline)
                continue
            if slot.fired is not tick:
                slot.fired = tick  # announce first: a check ending now will see it
                if slot.tick is tick:
                    _set_async_exc(slot.tid, Overrun)
                    slot.fired_at = now
                continue
            if now - slot.fired_at >= REFIRE and slot.tick is tick:
                # Still running: the exception went into a finalizer (which Python ignores),
                # or waits on native code, where raising it again costs nothing.
                _set_async_exc(slot.tid, Overrun)
                slot.fired_at = now
            if now > deadline + STUCK_AFTER and slot.warned is not tick:
                slot.warned = tick
                stuck.append((name, now - deadline))
    for name, late in stuck:
        logger.error(
            "reward %s is still running %.1fs past its deadline: it is stuck where it cannot "
            "be interrupted (native code); its thread stays busy until that code returns",
            name,
            late,
        )
    return busy, soonest


def _after_fork() -> None:
    """A forked child has no watchdog and only the forking thread: start afresh."""
    global _lock, _wake, _watchdog, _slots
    _lock = threading.Lock()
    _wake = threading.Event()
    _watchdog = None
    mine: _Slot | None = getattr(_local, "slot", None)
    _slots = [] if mine is None else [mine]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


# --- synchronous checks ----------------------------------------------------------------------


def _timeout(name: str, start: float, limit: float) -> VerifierTimeout:
    elapsed = _monotonic() - start
    return VerifierTimeout(
        f"{name} ran past its deadline: stopped after {elapsed:.2f}s (limit {limit:g}s)"
    )


def _stray(name: str) -> RewardError:
    return RewardError(
        f"{name}: an interrupt meant for another check's deadline stopped this coroutine "
        "mid-step; it cannot be resumed (score the rollout again)"
    )


def run(
    fn: Callable[[A], T],
    arg: A,
    seconds: float | None,
    name: str,
    since: float | None = None,
    again: bool = True,
) -> T:
    """``fn(arg)``, stopped `seconds` after it starts (or after `since`); works in any thread.

    Args:
        fn: The check.
        arg: Its argument.
        seconds: The limit (None: none).
        name: Whose check it is (in the error and the stuck log).
        since: When the time started (`time.monotonic`), if before this call: a coroutine's
            steps share their rollout's deadline.
        again: Call `fn` again when a stray interrupt (one meant for a check that has ended)
            stopped it. False for a coroutine's step, which cannot be sent twice.

    Raises:
        VerifierTimeout: `fn` ran past `seconds`; it was stopped.
        RewardError: A stray interrupt stopped `fn` and `again` is False.
    """
    if seconds is None:
        return fn(arg)
    try:
        slot: _Slot = _local.slot
    except AttributeError:
        slot = _slot()
    if not slot.depth:
        return _outermost(slot, fn, arg, seconds, name, since, again)
    start = _monotonic() if since is None else since
    while True:
        outer = slot.tick
        deadline = start + seconds
        if deadline >= outer[0]:
            return fn(arg)  # an enclosing deadline comes first: its owner handles an overrun
        slot.tick = mine = (deadline, name)
        try:
            result = fn(arg)
            slot.tick = outer
            if slot.fired is mine:  # fired as it returned: take back what is undelivered
                _take_back(slot)
            return result
        except Overrun:
            slot.tick = outer
            fired = slot.fired
            if fired is mine:
                _take_back(slot)  # a second raise (`REFIRE`) may be on its way
                raise _timeout(name, start, seconds) from None
            if fired is outer:
                raise  # the enclosing check's deadline
            if not again:
                raise _stray(name) from None
            start = _monotonic()  # stale (meant for a check that has ended): run afresh
        except BaseException:
            slot.tick = outer
            if slot.fired is mine:  # fired as it raised: the overrun is what happened
                _take_back(slot)
                raise _timeout(name, start, seconds) from None
            raise


def _outermost(
    slot: _Slot,
    fn: Callable[[A], T],
    arg: A,
    seconds: float,
    name: str,
    since: float | None,
    again: bool,
) -> T:
    """`run` as the thread's outermost scope: arms the watchdog, and disarms it after."""
    _arm(slot)
    try:
        while True:
            try:
                return run(fn, arg, seconds, name, since, again)
            except Overrun:
                if not again:
                    raise _stray(name) from None
                since = None  # a stray that passed every check (module docstring): afresh
    finally:
        _disarm(slot)


def each(fn: Callable[[A], T], items: Sequence[A]) -> list[T]:
    """``[fn(item) for item in items]`` with the watchdog armed once for the whole batch.

    `fn` bounds its own work (`run`); arming here makes each of those a cheap inner scope.
    """
    try:
        slot: _Slot = _local.slot
    except AttributeError:
        slot = _slot()
    out: list[T] = []
    append = out.append
    _arm(slot)
    try:
        while len(out) < len(items):
            try:
                for item in items[len(out) :] if out else items:
                    append(fn(item))
            except Overrun:
                pass  # a stray between two checks: go on from the item it landed on
    finally:
        _disarm(slot)
    return out


def run_in_thread(fn: Callable[[A], T], arg: A, seconds: float | None, name: str) -> T:
    """``fn(arg)`` in a thread of its own, waited for `seconds` (``run_in: thread``).

    Past them the caller stops waiting and gets `VerifierTimeout`; the thread is also
    interrupted between bytecodes (`run`), and otherwise left to end on its own: a check that
    blocks without the interpreter lock (a sleep, I/O) costs the caller no more than its
    deadline. One that spins in C holding the lock stalls every thread until it returns:
    that takes ``run_in: process`` (`referee.workers`).

    Raises:
        VerifierTimeout: `fn` ran past `seconds`.
    """
    box: list[Any] = []

    def target() -> None:
        try:
            box.append((True, run(fn, arg, seconds, name)))
        except BaseException as exc:  # handed to the caller
            box.append((False, exc))

    start = _monotonic()
    thread = threading.Thread(target=target, name=f"referee-check-{name}", daemon=True)
    thread.start()
    thread.join(None if seconds is None else seconds + _THREAD_GRACE)
    if not box:
        raise _timeout(name, start, seconds or 0.0)
    ok, value = box[0]
    if ok:
        return cast(T, value)
    raise value


_THREAD_GRACE: Final = 0.02  # seconds: the in-thread interrupt of a Python loop comes first


# --- coroutines ---------------------------------------------------------------------------


async def within(coro: Coroutine[Any, Any, T], seconds: float | None, name: str) -> T:
    """Await `coro`, stopped after `seconds` whether it awaits or computes.

    Raises:
        VerifierTimeout: `coro` ran past `seconds`; it was cancelled or interrupted.
    """
    if seconds is None:
        return await coro
    start = _monotonic()
    timer = asyncio.timeout(seconds)
    try:
        async with timer:
            return await _Stepped(coro, start, seconds, name)
    except TimeoutError:
        if not timer.expired():
            raise  # the coroutine's own
        raise _timeout(name, start, seconds) from None


class _Stepped(Generic[T]):
    """An awaitable that drives a coroutine one step at a time, each under the deadline."""

    __slots__ = ("coro", "limit", "name", "start")

    def __init__(self, coro: Coroutine[Any, Any, T], start: float, limit: float, name: str) -> None:
        self.coro = coro
        self.start = start
        self.limit = limit
        self.name = name

    def __await__(self) -> Generator[Any, Any, T]:
        coro = self.coro
        sent: Any = None
        thrown: BaseException | None = None
        try:
            while True:
                try:
                    if thrown is None:
                        waiting = run(coro.send, sent, self.limit, self.name, self.start, False)
                    else:
                        waiting = run(coro.throw, thrown, self.limit, self.name, self.start, False)
                except StopIteration as done:
                    value: T = done.value
                    return value
                try:
                    sent, thrown = (yield waiting), None
                except GeneratorExit:
                    raise
                except BaseException as exc:  # a cancellation, handed on to the coroutine
                    sent, thrown = None, exc
        finally:
            coro.close()
