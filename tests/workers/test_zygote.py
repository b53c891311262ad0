"""The zygote (`referee.workers._zygote`): workers forked from a warm interpreter, safely.

A worker killed at a deadline is replaced by a fork of the zygote (milliseconds), not a fresh
interpreter (an interpreter start plus referee's imports). What is checked here is that the
forked workers are what they should be (the zygote's children, in sessions of their own, with
the reward's modules already loaded), and that every way the zygote can fail falls back to
fresh interpreters with the same scores. `benchmarks/bench_workers.py` measures the speed.
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

import referee
from referee import workers
from referee.rollout import Rollout
from referee.scores import Score
from referee.workers import _process

HANG = 60.0


def rollout(text: str) -> Rollout:
    return Rollout(completion=text)


@referee.reward(deadline=0.5)
def whose(r: Rollout) -> Score:
    """Who this worker is: its parent, its session and whether math-verify was loaded before
    the reward ran (the zygote preloaded it) — as the reason, so the test can read it."""
    import sys

    if r.completion_text == "spin":
        float(sum(itertools.repeat(1, 10**13)))
    facts = f"{os.getppid()} {os.getsid(0)} {os.getpid()} {'sympy' in sys.modules}"
    return Score(value=1.0, reason=facts)


@pytest.fixture
def fresh_pool(monkeypatch: pytest.MonkeyPatch) -> Iterator[workers.WorkerPool]:
    """A pool of its own, with a zygote of its own (the process's is closed first)."""
    _process.close_zygote()
    monkeypatch.setattr(_process, "_zygote_starts", 0)
    pool = workers.WorkerPool(2)
    yield pool
    pool.close()
    _process.close_zygote()


def facts(score: Score) -> tuple[int, int, int, bool]:
    assert score.failure is None, score.failure
    assert score.reason is not None
    parent, session, pid, sympy = score.reason.split()
    return int(parent), int(session), int(pid), sympy == "True"


def test_workers_are_forked_by_the_zygote_in_sessions_of_their_own(
    fresh_pool: workers.WorkerPool,
) -> None:
    [score] = fresh_pool.score(whose, [rollout("x")])
    parent, session, pid, _ = facts(score)
    zygote = _process._zygote
    assert zygote is not None and zygote.alive()
    assert parent == zygote.proc.pid != os.getpid()  # a fork of the zygote, not of us
    assert session == pid  # its own session: killed with its process group


def test_a_killed_worker_is_replaced_by_a_fork(fresh_pool: workers.WorkerPool) -> None:
    scores = fresh_pool.score(whose, [rollout("x"), rollout("spin"), rollout("y")])
    assert [s.fault or s.value for s in scores] == [1.0, "timeout", 1.0]  # 0, its verdict
    zygote = _process._zygote
    assert zygote is not None
    for score in (scores[0], scores[2]):
        assert facts(score)[0] == zygote.proc.pid


def test_a_math_worker_starts_with_math_verify_loaded(fresh_pool: workers.WorkerPool) -> None:
    math = referee.load({"type": "math_answer"})
    [score] = fresh_pool.score(math, [Rollout(completion="\\boxed{2}", reference="2")])
    assert score.value == 1.0
    zygote = _process._zygote
    assert zygote is not None
    # The zygote loaded math_answer (and ran its prepare) before it forked: a worker forked
    # now (a new pool's) has sympy before any reward of its own ran; `import referee` alone
    # does not import it (a fresh interpreter's worker has none: the test below).
    other = workers.WorkerPool(1)
    try:
        [score] = other.score(whose, [rollout("x")])
    finally:
        other.close()
    assert facts(score)[0] == zygote.proc.pid
    assert facts(score)[3]


def test_off_every_worker_is_a_fresh_interpreter(
    fresh_pool: workers.WorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REFEREE_ZYGOTE", "0")
    [score] = fresh_pool.score(whose, [rollout("x")])
    assert facts(score)[0] == os.getpid()
    assert not facts(score)[3]  # nothing preloaded
    assert _process._zygote is None


def test_a_dead_zygote_is_replaced_and_scores_go_on(fresh_pool: workers.WorkerPool) -> None:
    [first] = fresh_pool.score(whose, [rollout("x")])
    zygote = _process._zygote
    assert zygote is not None
    os.kill(zygote.proc.pid, signal.SIGKILL)  # its workers die with it
    zygote.proc.wait(timeout=10)
    deadline = time.monotonic() + HANG
    scores = fresh_pool.score(whose, [rollout("x"), rollout("y")])
    assert time.monotonic() < deadline
    assert [s.value for s in scores] == [1.0, 1.0]
    assert _process._zygote is not None and _process._zygote is not zygote
    assert facts(scores[0])[0] == _process._zygote.proc.pid != facts(first)[0]


class _Threaded:
    """A reward whose unpickling starts a thread, as some clients' constructors do."""

    name = "threaded"
    deadline_seconds = 5.0

    def __setstate__(self, state: object) -> None:
        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()

    def __getstate__(self) -> object:
        return {"x": 1}

    def check_within(self, rollout: Rollout, seconds: float | None) -> Score:
        return Score(value=1.0, reason=f"{os.getppid()}")


def test_a_reward_that_starts_a_thread_stops_the_zygote_forking(
    fresh_pool: workers.WorkerPool,
) -> None:
    [plain] = fresh_pool.score(whose, [rollout("x")])  # zygote up, one worker forked
    zygote = _process._zygote
    assert zygote is not None
    fresh_pool.close()  # its idle worker goes: the next one must be started anew
    pool = workers.WorkerPool(1)
    try:
        [score] = pool.score(_Threaded(), [rollout("x")])
        assert score.value == 1.0
        assert zygote.unsafe is not None  # it has a thread now: it may not fork
        [after] = pool.score(whose, [rollout("y")])
        # A fresh interpreter, ours; the unsafe zygote is kept for its workers' exits.
        assert facts(after)[0] == os.getpid() != facts(plain)[0]
        [new] = workers.WorkerPool(1).score(whose, [rollout("z")])
        assert facts(new)[0] == os.getpid()
    finally:
        pool.close()
