"""`referee serve` while rewards are stuck: the stuck requests fail at their deadline, give
back their slots and threads, and the server goes on answering.

Times here are hang guards; no test asserts how fast anything is.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

pytest.importorskip(
    "aiohttp", reason="the serve extra is not installed (pip install 'referee[serve]')"
)

import referee
from referee import Rollout
from referee.backends.server import RewardService
from referee.backends.service import _StuckInterval
from tests.support.serving import HANG, post, running

spins = [0]  # loop iterations of the stuck checks: it stops growing when they are stopped


@referee.reward(deadline=0.5, run_in="inline")  # in-process: `spins` counts its loops
def loops_on_request(rollout: Rollout) -> float:
    """Loops for ever on the completion "loop"; 1.0 otherwise."""
    while rollout.completion_text == "loop":
        spins[0] += 1
    return 1.0


@referee.reward(deadline=0.5)
async def computes_on_request(rollout: Rollout) -> float:
    """An async reward that, on "loop", computes for ever without awaiting."""
    await asyncio.sleep(0)
    while rollout.completion_text == "loop":
        spins[0] += 1
    return 1.0


def one(completion: str) -> dict[str, Any]:
    return {"rollouts": [{"id": completion, "completion": completion}]}


@pytest.mark.parametrize("reward", [loops_on_request, computes_on_request], ids=["sync", "async"])
def test_stuck_requests_fail_at_the_deadline_and_the_server_goes_on(reward: Any) -> None:
    slots = 2
    with running(reward, max_concurrent=slots) as url, ThreadPoolExecutor(slots + 1) as pool:
        stuck = [pool.submit(post, url + "/score", one("loop")) for _ in range(slots)]
        # Every slot is taken by a stuck request; a normal one is answered all the same.
        normal = pool.submit(post, url + "/score", one("fine"))
        assert normal.result(timeout=HANG)["scores"][0]["reward"] == 1.0
        # A sync check that spins on the completion: the policy's verdict, 0 with the
        # reason (issue 44); an async reward's spin waited on nothing it can blame: a Failure.
        sync = reward is loops_on_request
        for future in stuck:
            [score] = future.result(timeout=HANG)["scores"]
            if sync:
                assert score["reward"] == 0.0 and score["fault"] == "timeout"
                assert score["failure"] is None
            else:
                assert score["reward"] is None and score["failure"]["type"] == "timeout"
            assert "ran past its deadline" in score["reason"]
        # OpenRLHF's endpoint, the same: 0 (flagged as a failure only where it is one).
        body = post(url + "/get_reward", {"query": ["loop", "fine"]})
        assert body["rewards"] == [0.0, 1.0]
        assert body["extra_logs"]["referee_failed"] == [0.0 if sync else 1.0, 0.0]
        # Nothing keeps computing after the answers: the stuck checks were stopped.
        before = spins[0]
        time.sleep(0.3)
        assert spins[0] == before
        # The slots came back: as many requests as slots are served at once again.
        again = [pool.submit(post, url + "/score", one("fine")) for _ in range(slots + 1)]
        assert [f.result(timeout=HANG)["scores"][0]["reward"] for f in again] == [1.0] * 3


@referee.reward(deadline=0.5)
def spins_in_c_on_request(rollout: Rollout) -> float:
    """On "loop", stdlib regex backtracking: C code holding the interpreter lock, which no
    in-process deadline interrupts (a worker process, killed at the deadline)."""
    if rollout.completion_text == "loop":
        re.match(r"^(a+)+$", "a" * 40 + "!")
    return 1.0


def test_requests_spinning_in_c_fail_at_the_deadline_and_the_server_goes_on() -> None:
    slots = 2
    with (
        running(spins_in_c_on_request, max_concurrent=slots) as url,
        ThreadPoolExecutor(slots + 1) as pool,
    ):
        stuck = [pool.submit(post, url + "/score", one("loop")) for _ in range(slots)]
        normal = pool.submit(post, url + "/score", one("fine"))
        assert normal.result(timeout=HANG)["scores"][0]["reward"] == 1.0
        for future in stuck:
            [score] = future.result(timeout=HANG)["scores"]
            assert score["reward"] == 0.0 and score["fault"] == "timeout"  # its verdict
            assert "its worker process was killed" in score["reason"]
        body = post(url + "/get_reward", {"query": ["loop", "fine"]})
        assert body["rewards"] == [0.0, 1.0]
        again = [pool.submit(post, url + "/score", one("fine")) for _ in range(slots + 1)]
        assert [f.result(timeout=HANG)["scores"][0]["reward"] for f in again] == [1.0] * 3


def held_until(release: threading.Event) -> Any:
    """A reward that holds a "loop" rollout, awaiting, until `release` is set."""

    @referee.reward(deadline=HANG)
    async def waits(rollout: Rollout) -> float:
        while rollout.completion_text == "loop" and not release.is_set():
            await asyncio.sleep(0.01)
        return 1.0

    return waits


def test_a_slow_request_gives_its_slot_back() -> None:
    """One slot, held by a request stuck until released: a fast request is served meanwhile."""
    release = threading.Event()
    waits = held_until(release)

    with running(waits, max_concurrent=1, slow_after=0.05) as url, ThreadPoolExecutor(1) as pool:
        stuck = pool.submit(post, url + "/score", one("loop"))
        health = urllib.request.Request(url + "/health")
        while json.loads(urllib.request.urlopen(health, timeout=HANG).read())["in_flight"] < 1:
            time.sleep(0.01)
        assert post(url + "/score", one("fine"))["scores"][0]["reward"] == 1.0
        assert not stuck.done()
        release.set()
        assert stuck.result(timeout=HANG)["scores"][0]["reward"] == 1.0


def test_the_switch_interval_is_short_only_while_a_request_is_in_the_slow_lane() -> None:
    release = threading.Event()
    waits = held_until(release)

    def interval_becomes(value: float) -> bool:
        # (the interpreter keeps whole microseconds: 0.0002 reads back as 0.000199)
        deadline = time.monotonic() + HANG
        while abs(sys.getswitchinterval() - value) > 2e-6 and time.monotonic() < deadline:
            time.sleep(0.01)
        return abs(sys.getswitchinterval() - value) <= 2e-6

    calm = sys.getswitchinterval()
    options = {"max_concurrent": 1, "slow_after": 0.05, "stuck_switch_interval": 0.0002}
    try:
        with running(waits, **options) as url, ThreadPoolExecutor(2) as pool:
            assert post(url + "/score", one("fine"))["scores"][0]["reward"] == 1.0
            assert sys.getswitchinterval() == calm  # a fast request leaves it alone
            stuck = [pool.submit(post, url + "/score", one("loop")) for _ in range(2)]
            assert interval_becomes(0.0002)
            release.set()
            assert [f.result(timeout=HANG)["scores"][0]["reward"] for f in stuck] == [1.0] * 2
            assert interval_becomes(calm)  # the lane emptied
    finally:
        sys.setswitchinterval(calm)


def test_a_library_server_leaves_the_switch_interval_alone() -> None:
    release = threading.Event()
    waits = held_until(release)

    calm = sys.getswitchinterval()
    with running(waits, max_concurrent=1, slow_after=0.05) as url, ThreadPoolExecutor(1) as pool:
        stuck = pool.submit(post, url + "/score", one("loop"))
        time.sleep(0.3)  # well into the slow lane
        assert sys.getswitchinterval() == calm
        release.set()
        assert stuck.result(timeout=HANG)["scores"][0]["reward"] == 1.0


def test_services_sharing_the_interpreter_restore_its_interval_only_when_all_are_calm() -> None:
    calm = sys.getswitchinterval()
    lanes = _StuckInterval()
    try:
        lanes.enter(0.0005)
        lanes.enter(0.0002)
        assert sys.getswitchinterval() == pytest.approx(0.0002, abs=2e-6)
        lanes.leave(0.0005)  # the first to enter leaves first: the other is still stuck
        assert sys.getswitchinterval() == pytest.approx(0.0002, abs=2e-6)
        lanes.leave(0.0002)
        assert sys.getswitchinterval() == calm
    finally:
        sys.setswitchinterval(calm)


def test_a_cancelled_request_cancels_its_scoring() -> None:
    # aiohttp cancels a handler still running when shutdown_timeout runs out (not when its
    # client goes away, by default): the scoring it started must stop with it, as it does
    # when the handler is cancelled while awaiting the work itself.
    cancelled: list[bool] = []

    @referee.reward(deadline=HANG)
    async def waits_for_ever(rollout: Rollout) -> float:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return 1.0

    async def main() -> None:
        service = RewardService(waits_for_ever, slow_after=10.0)
        request = asyncio.ensure_future(service.score_batch([Rollout(completion="x")]))
        await asyncio.sleep(0.05)
        request.cancel()
        with pytest.raises(asyncio.CancelledError):
            await request
        await asyncio.sleep(0.05)
        assert cancelled == [True]  # before the loop's own clean-up would cancel it

    asyncio.run(main())
