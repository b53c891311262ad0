"""Deadlines: a check past its limit costs its rollout (a sync check's: the policy's verdict, 0;
an async reward's: ``Failure("timeout")``), never the batch.

Times here are generous upper bounds that only tell a hang from a finish; no test asserts how
fast anything is.
"""

from __future__ import annotations

import asyncio
import logging
import pickle
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest

import referee
from referee import GroupRewardBase, Rollout, Score
from referee.compose import Combined, Component
from referee.deadline import DEFAULT_TIMEOUT, Overrun, each, run
from referee.errors import VerifierTimeout
from referee.judges import JudgeClient
from referee.reward import CheckReward, RewardResult, is_sync
from referee.rewards import JsonValid, MathAnswer, RubricJudge
from tests.support.outcomes import outcome
from tests.support.rollouts import make

HANG = 30.0  # seconds after which a test calls it a hang

BATCH = [make("ok"), make("ok"), make("loop"), make("ok"), make("ok")]


@contextmanager
def no_hang(seconds: float = HANG) -> Iterator[None]:
    """Fail (rather than hang the suite) when the main thread is still here after `seconds`."""

    def alarm(signum: int, frame: Any) -> None:
        raise AssertionError(f"still running after {seconds}s: a hang")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def in_thread(fn: Callable[[], Any]) -> Any:
    """``fn()`` in a fresh worker thread; a hang fails the test."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn).result(timeout=HANG)


# This file tests the in-process deadline (`referee.deadline`): its sync rewards run inline.
# tests/workers/ tests the worker processes, the default for a function of yours.


@referee.reward(deadline=0.2, run_in="inline")
def spin(rollout: Rollout) -> float:
    """Loops for ever on the completion "loop"."""
    if rollout.completion_text == "loop":
        while True:
            pass
    return 1.0


@referee.reward(deadline=0.2, run_in="inline")
def spin_catching(rollout: Rollout) -> float:
    """A check that swallows every Exception: the deadline still stops it."""
    try:
        while rollout.completion_text == "loop":
            pass
    except Exception:
        return 1.0
    return 1.0


@referee.reward(deadline=0.2)
async def await_forever(rollout: Rollout) -> float:
    if rollout.completion_text == "loop":
        await asyncio.Event().wait()
    await asyncio.sleep(0)
    return 1.0


@referee.reward(deadline=0.2)
async def spin_without_awaiting(rollout: Rollout) -> float:
    await asyncio.sleep(0)
    if rollout.completion_text == "loop":
        while True:
            pass
    return 1.0


def timed_out(score: Score) -> bool:
    """Past its deadline: the policy's verdict (sync) or a Failure (async)."""
    return score.fault == "timeout" or (
        score.failure is not None and score.failure.type == "timeout"
    )


EXPECTED_SYNC = [1.0, 1.0, "0:timeout", 1.0, 1.0]
EXPECTED_ASYNC = [1.0, 1.0, "timeout", 1.0, 1.0]


def score_in_loop(reward: referee.Reward, rollouts: list[Rollout]) -> list[Score]:
    """`referee.score` called from async code, inside a running event loop."""

    async def main() -> list[Score]:
        return referee.score(reward, rollouts)

    return asyncio.run(main())


WHERE: dict[str, Callable[[referee.Reward, list[Rollout]], list[Score]]] = {
    "main thread": lambda reward, rs: referee.score(reward, rs),
    "worker thread": lambda reward, rs: in_thread(lambda: referee.score(reward, rs)),
    "running event loop": score_in_loop,
}


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize(
    "reward",
    [
        spin,  # a sync check that loops
        spin_catching,  # ... and catches Exception around the loop
        await_forever,  # an async one that awaits what never comes
        spin_without_awaiting,  # an async one that computes without awaiting
    ],
    ids=lambda r: r.name,
)
def test_a_runaway_rollout_times_out_and_the_batch_is_scored(
    reward: referee.Reward, where: str
) -> None:
    with no_hang():
        scores = WHERE[where](reward, BATCH)
    want = EXPECTED_SYNC if is_sync(reward) else EXPECTED_ASYNC
    assert outcome(scores) == want
    reason = scores[2].reason or ""
    assert "ran past its deadline" in reason and "limit 0.2s" in reason
    if scores[2].failure is not None:
        assert scores[2].failure.where == reward.name


def test_the_message_gives_elapsed_time_and_limit() -> None:
    with no_hang():
        [s] = referee.score(spin, [make("loop")])
    assert timed_out(s)
    # "spin ran past its deadline: stopped after 0.25s (limit 0.2s)"
    elapsed = float((s.reason or "").split("stopped after ")[1].split("s")[0])
    assert elapsed >= 0.2


@pytest.mark.parametrize("reward", [spin, spin_without_awaiting], ids=lambda r: r.name)
def test_the_runaway_work_is_stopped(reward: referee.Reward) -> None:
    threads = threading.active_count()
    in_thread(lambda: referee.score(reward, [make("loop")]))
    before = time.process_time()
    time.sleep(0.5)
    # A loop still burning a core would use about 0.5s of CPU here.
    assert time.process_time() - before < 0.25
    assert threading.active_count() <= threads + 1  # the watchdog, if this started it


def test_a_group_that_hangs_fails_whole_and_alone() -> None:
    rollouts = [make("a", group="g1"), make("loop", group="g2"), make("b", group="g2")]
    rollouts.append(make("c", group="g1"))
    with no_hang():
        scores = referee.score(HangingGroup(), rollouts)
    assert outcome(scores) == [1.0, "timeout", "timeout", 1.0]
    with no_hang():
        scores = referee.score(SpinningGroup(), rollouts)
    assert outcome(scores) == [1.0, "timeout", "timeout", 1.0]


class HangingGroup(GroupRewardBase):
    """Awaits for ever on a group holding "loop"."""

    name = "hanging_group"
    deadline = 0.2

    async def evaluate_group(self, rollouts: Sequence[Rollout]) -> Sequence[RewardResult]:
        if any(r.completion_text == "loop" for r in rollouts):
            await asyncio.Event().wait()
        return [1.0] * len(rollouts)


class SpinningGroup(HangingGroup):
    """Computes for ever, without awaiting, on a group holding "loop"."""

    name = "spinning_group"

    async def evaluate_group(self, rollouts: Sequence[Rollout]) -> Sequence[RewardResult]:
        while any(r.completion_text == "loop" for r in rollouts):
            pass
        return [1.0] * len(rollouts)


@referee.reward(deadline=5, run_in="inline")
def spin_on_inner(rollout: Rollout) -> float:
    while rollout.completion_text == "inner":
        pass
    return 1.0


@referee.reward(deadline=0.2, run_in="inline")
def spin_on_first(rollout: Rollout) -> float:
    while rollout.completion_text == "first":
        pass
    return 1.0


@pytest.mark.parametrize("where", ["main thread", "worker thread"])
def test_nested_components_keep_their_own_deadlines(where: str) -> None:
    # The inner combination's 0.3s comes before its component's 5s; "first" overruns only the
    # first component's 0.2s; the other rollouts overrun nothing.
    inner = Combined(components=[Component(name="slow", reward=spin_on_inner)], deadline=0.3)
    # on_failure="omit": a timed-out component is left out, so the others' values show.
    total = referee.weighted(
        {"first": spin_on_first, "inner": inner, "len": JsonValid()}, on_failure="omit"
    )
    rollouts = [make("{}"), make("first"), make("inner"), make("{}")]
    with no_hang():
        scores = WHERE[where](total, rollouts)
    first, inner_score = scores[1], scores[2]
    assert scores[0].components == {"first": 1.0, "inner": 1.0, "inner.slow": 1.0, "len": 1.0}
    # Sync checks past their deadline spun on the policy's output: its verdict, 0, in place.
    assert first.components["first"] == 0.0 and first.components["inner"] == 1.0
    assert first.value is not None and first.failure is None
    assert inner_score.components["inner"] == 0.0 and inner_score.components["first"] == 1.0
    assert "combined ran past its deadline" in (inner_score.reason or "")
    assert "limit 0.3s" in (inner_score.reason or "")


@dataclass(kw_only=True)
class Spin(CheckReward):
    """A check that loops on the completion "loop" (registered only by the spec test)."""

    name: str = "spin"

    def check(self, rollout: Rollout) -> float:
        while rollout.completion_text == "loop":
            pass
        return 1.0


def test_a_spec_timeout_on_a_component(monkeypatch: pytest.MonkeyPatch) -> None:
    from referee import registry

    monkeypatch.setitem(registry._types, "test_spin", Spin)
    reward = referee.load({
        "components": {
            # omitted where it times out: the component after it still runs
            "spin": {"type": "test_spin", "deadline": 0.2, "on_failure": "omit"},
            "valid": {"type": "json_valid", "deadline": 3},
        }
    })  # fmt: skip
    with no_hang():
        scores = referee.score(reward, [make("{}"), make("loop")])
    assert scores[0].components == {"spin": 1.0, "valid": 1.0}
    assert scores[1].components == {"spin": 0.0, "valid": 0.0}  # the spin: its verdict
    copy = pickle.loads(pickle.dumps(reward))
    assert [c.reward.deadline for c in copy.components] == [0.2, 3.0]


def test_no_interrupt_ever_escapes_the_scope() -> None:
    # Checks about as long as their deadline, over and over: the watchdog fires as checks
    # run, as they return, between them and as scopes end. Every result is a value or a
    # timeout, and no Overrun reaches this code (it would raise here, or in the loop after).
    @referee.reward(deadline=0.001, run_in="inline")
    def busy(rollout: Rollout) -> float:
        total = 0
        for i in range(len(rollout.completion_text) * 500):
            total += i
        return 1.0

    nested = Combined(components=[Component(name="busy", reward=busy)], deadline=0.0015)
    batch = [make("x" * n) for n in range(1, 200, 10)]
    end = time.monotonic() + 2.0
    seen: dict[object, int] = {}
    while time.monotonic() < end:
        for reward in (busy, nested):
            for s in [*referee.score(reward, batch), busy.score_sync(batch[-1])]:
                key = (
                    "timeout" if timed_out(s) else s.value if s.failure is None else s.failure.type
                )
                seen[key] = seen.get(key, 0) + 1
    end = time.monotonic() + 0.3
    while time.monotonic() < end:
        pass
    # Both happened, and nothing else (a total of 0.0 where a nested check timed out).
    assert {1.0, "timeout"} <= set(seen) <= {1.0, 0.0, "timeout"}, seen


def test_no_interrupt_escapes_in_a_worker_thread_either() -> None:
    test = test_no_interrupt_ever_escapes_the_scope
    in_thread(test)


def test_a_check_stuck_in_native_code_is_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # time.sleep does not return to the interpreter until it is done: the interrupt waits.
    monkeypatch.setattr("referee.deadline.STUCK_AFTER", 0.1)

    @referee.reward(name="sleeper", deadline=0.1, run_in="inline")
    def sleeper(rollout: Rollout) -> float:
        time.sleep(0.8)
        return 1.0

    with caplog.at_level(logging.ERROR, logger="referee"):
        [s] = in_thread(lambda: referee.score(sleeper, [make("x")]))
    assert outcome([s]) == ["0:timeout"]
    assert any("sleeper" in r.getMessage() and "stuck" in r.getMessage() for r in caplog.records)


def test_a_check_that_swallows_the_interrupt_is_interrupted_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("referee.deadline.REFIRE", 0.1)

    @referee.reward(deadline=0.1, run_in="inline")
    def stubborn(rollout: Rollout) -> float:
        try:
            while True:
                pass
        except BaseException:  # what a finalizer does with it, too
            pass
        while True:
            pass

    with no_hang():
        [s] = referee.score(stubborn, [make("x")])
    assert outcome([s]) == ["0:timeout"]


class Foreign:
    """A sync reward that follows the protocol without subclassing referee's bases."""

    name = "foreign"
    is_sync = True
    deadline = 0.2

    def score_sync(self, rollout: Rollout) -> Score:
        while rollout.completion_text == "loop":
            pass
        return Score(value=1.0)

    async def score(self, rollout: Rollout) -> Score:
        return self.score_sync(rollout)

    async def score_batch(
        self, rollouts: Sequence[Rollout], *, concurrency: int | None = None
    ) -> list[Score]:
        return [self.score_sync(r) for r in rollouts]


def test_referee_score_bounds_a_reward_of_your_own() -> None:
    with no_hang():
        assert outcome(referee.score(Foreign(), BATCH)) == EXPECTED_SYNC


def spin_plain(rollout: Rollout) -> float:
    while rollout.completion_text == "loop":
        pass
    return 1.0


class ClassDeadline(CheckReward):
    name = "class_deadline"
    deadline = 0.2
    run_in = "inline"

    def check(self, rollout: Rollout) -> float:
        return spin_plain(rollout)


def test_every_way_to_set_a_deadline() -> None:
    made = referee.function.FunctionReward(spin_plain, deadline=0.2, run_in="inline")
    instance = JsonValid()
    instance.deadline = 0.5
    assert made.deadline_seconds == 0.2
    assert ClassDeadline().deadline_seconds == 0.2
    assert instance.deadline_seconds == 0.5
    assert JsonValid().deadline_seconds == DEFAULT_TIMEOUT
    with no_hang():
        assert outcome(referee.score(ClassDeadline(), BATCH)) == EXPECTED_SYNC
        assert outcome(referee.score(made, BATCH)) == EXPECTED_SYNC
    with pytest.raises(ValueError, match="positive"):
        referee.reward(deadline=0)(spin_plain)
    with pytest.raises(ValueError, match="number of seconds"):
        referee.reward(deadline="2")(spin_plain)  # type: ignore[call-overload]


def test_timeout_as_the_deadline_still_works_with_a_warning() -> None:
    # The old spelling, where it cannot mean an option of the reward's own.
    with pytest.warns(
        DeprecationWarning, match=r"timeout=\.\.\.\) is deprecated; name it deadline"
    ):
        made = referee.reward(timeout=0.2)(spin_plain)
    assert made.deadline_seconds == 0.2
    with pytest.warns(DeprecationWarning, match="class Old: timeout as the deadline"):

        class Old(CheckReward):
            name = "old"
            timeout = 0.3

            def check(self, rollout: Rollout) -> float:
                return 1.0

    assert Old().deadline_seconds == 0.3
    instance = JsonValid()
    with pytest.warns(DeprecationWarning, match="json_valid: timeout as the deadline"):
        instance.timeout = 0.5
    assert instance.deadline_seconds == 0.5
    with pytest.warns(DeprecationWarning, match="timeout is deprecated here; name it deadline"):
        combined = Combined(components=[Component(name="j", reward=JsonValid())], timeout=3)
    assert combined.deadline_seconds == 3.0
    with pytest.warns(
        FutureWarning, match="timeout as the deadline is deprecated; write deadline: 0.3"
    ):
        loaded = referee.load({"type": "json_valid", "timeout": 0.3})
    assert loaded.deadline_seconds == 0.3
    with pytest.raises(referee.SpecError, match="give deadline alone"):
        referee.load({"type": "json_valid", "timeout": 0.3, "deadline": 1})


def test_own_timeouts_keep_their_meaning_and_derive_the_deadline() -> None:
    # math_answer's timeout bounds its comparison (it stops its own work, between bytecodes);
    # its worker is killed just after it (a spin in C), its pattern's limit added. A judge's
    # comes from its client: attempts, their timeout, backoff, and a repair call.
    assert MathAnswer(timeout=2).deadline_seconds == 2 + 1
    assert MathAnswer(timeout=2, pattern="<a>(.*)</a>").deadline_seconds == 2 * 2 + 1
    client = JudgeClient(model="openai/x", timeout=10, retries=1, max_backoff=3)
    judge = RubricJudge(rubric="helpfulness", client=client)
    assert judge.deadline_seconds == 2 * (2 * (10 + 5) + 1 * 3)
    judge.deadline = 42
    assert judge.deadline_seconds == 42  # set on the reward: its deadline, as for any reward
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a judge's timeout is its client's: no deprecation
        spec = {"type": "rubric_judge", "rubric": "helpfulness", "model": "openai/x"}
        loaded = referee.load({**spec, "timeout": 7})
    assert loaded.client.timeout == 7 and loaded.deadline is None
    assert referee.weighted({"a": JsonValid()}).deadline_seconds is None  # parts carry theirs


@dataclass(kw_only=True)
class DataclassClassDeadline(CheckReward):
    """A dataclass reward with its deadline as the docs write it: a ClassVar, not a field."""

    name: str = "dataclass_class_deadline"
    deadline: ClassVar[float] = 0.2  # type: ignore[misc]

    def check(self, rollout: Rollout) -> float:
        return spin_plain(rollout)


@dataclass(kw_only=True)
class UnsetTimeoutField(CheckReward):
    """A dataclass reward with a `timeout` option of its own, left unset."""

    name: str = "unset_timeout_field"
    timeout: float | None = None

    def check(self, rollout: Rollout) -> float:
        return 1.0


def test_a_dataclass_class_var_deadline_and_an_unset_timeout_field_is_no_crash() -> None:
    reward = DataclassClassDeadline()
    assert reward.deadline_seconds == 0.2  # not the 10 * 0.2 + 60 backstop of an own option
    [score] = referee.score(reward, [Rollout(completion="loop")])
    assert outcome([score]) == ["0:timeout"]
    unset = UnsetTimeoutField()
    assert unset.deadline_seconds == DEFAULT_TIMEOUT  # an option of its own, not the deadline
    assert referee.score(unset, [Rollout(completion="x")])[0].value == 1.0
    [loaded] = [referee.load({"type": "json_valid", "deadline": 0.3})]
    assert loaded.deadline_seconds == 0.3


def test_pickling_keeps_the_deadline() -> None:
    made = referee.function.FunctionReward(spin_plain, name="p", deadline=0.7, run_in="thread")
    instance = JsonValid()
    instance.deadline = 0.5
    combined = Combined(components=[Component(name="j", reward=JsonValid())], deadline=3)
    assert pickle.loads(pickle.dumps(spin)).deadline == 0.2  # by reference
    copy = pickle.loads(pickle.dumps(made))  # by value
    assert (copy.deadline, copy.run_in) == (0.7, "thread")
    assert pickle.loads(pickle.dumps(instance)).deadline == 0.5
    assert pickle.loads(pickle.dumps(combined)).deadline == 3.0


def test_run_and_each_alone() -> None:
    def loop(_: object) -> None:
        while True:
            pass

    with no_hang(), pytest.raises(VerifierTimeout, match=r"limit 0\.1s"):
        run(loop, None, 0.1, "loop")
    assert each(lambda x: run(lambda y: y * 2, x, 1.0, "double"), [1, 2, 3]) == [2, 4, 6]
    assert run(lambda x: x, 5, None, "no deadline") == 5


def test_overrun_is_not_an_exception() -> None:
    # So a check's `except Exception` cannot swallow it.
    assert not issubclass(Overrun, Exception)


@pytest.mark.parametrize("hook", ["trace", "profile"])
def test_async_rewards_finish_under_a_tracer_or_profiler(hook: str) -> None:
    """A debugger, coverage or cProfile installs a hook: scoring must not hang under it.

    Clearing an undelivered interrupt with ``SetAsyncExc(thread, NULL)`` left CPython 3.11's
    "async exception pending" flag set for good: every thread then took the eval loop's slow
    path, and a traced one spun there for ever. A scope closed (and a timeout) beforehand is
    what set it.
    """
    import sys

    assert referee.score(spin, [make("ok")])[0].value == 1.0
    with no_hang():
        assert timed_out(referee.score(spin, [make("loop")])[0])

    @referee.reward
    async def sleepy(rollout: referee.Rollout) -> float:
        await asyncio.sleep(0.01)
        return 1.0

    result: list[float | None] = []

    def target() -> None:
        hook_fn = (lambda frame, event, arg: None) if hook == "profile" else _tracer
        (sys.setprofile if hook == "profile" else sys.settrace)(hook_fn)
        try:
            result.extend(s.value for s in referee.score(sleepy, [referee.Rollout(completion="x")]))
        finally:
            sys.setprofile(None)
            sys.settrace(None)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(60)  # a hang guard, not a timing assertion
    assert not thread.is_alive(), f"async scoring hung under sys.set{hook}"
    assert result == [1.0]


def _tracer(frame: object, event: str, arg: object) -> object:
    return _tracer


def test_a_stray_interrupt_in_a_coroutine_step_fails_it_clearly() -> None:
    # A stray Overrun (meant for a check that has ended: the module docstring's race) that
    # ends a coroutine's step cannot be met by sending the step again, as a sync check is run
    # again: the coroutine is finished. Raised here by hand, where the watchdog fired nothing.
    @referee.reward(deadline=5)
    async def stopped_by_a_stray(rollout: Rollout) -> float:
        raise Overrun()

    [score] = referee.score(stopped_by_a_stray, [Rollout(completion="x")])
    assert score.failure is not None and score.failure.type == "error"
    assert "meant for another check's deadline" in score.failure.message
    assert "cannot reuse already awaited coroutine" not in score.failure.message


@dataclass(kw_only=True)
class _SlowToSetUp(referee.CheckReward):
    """A check whose one-time set-up (an import, a table) takes longer than its deadline."""

    name: str = "slow_set_up"
    deadline: float | None = 0.3
    run_in: Any = None
    set_ups: ClassVar[list[float]] = []

    def prepare(self) -> None:
        time.sleep(0.6)
        self.set_ups.append(time.monotonic())

    def check(self, rollout: Rollout) -> Score:
        return Score(value=1.0)


@pytest.mark.parametrize("run_in", ["inline", "process"])
def test_a_checks_set_up_never_counts_against_its_first_deadline(run_in: str) -> None:
    # instruction_following's first check loaded langdetect's profiles inside its deadline;
    # on a loaded machine the process path then paid the policy 0 for the machine's slowness.
    reward = _SlowToSetUp(run_in=run_in)
    _SlowToSetUp.set_ups.clear()
    scores = referee.score(reward, [Rollout(id=str(i), completion="x") for i in range(3)])
    assert [s.value for s in scores] == [1.0] * 3, [s.reason for s in scores]
    if run_in == "inline":
        assert len(_SlowToSetUp.set_ups) == 1  # once per instance, not per check
