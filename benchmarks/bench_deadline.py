"""What a stuck reward costs: a timed-out rollout, and a server whose slots are full of them.

1. A timed-out rollout. A check that loops for ever on one input, `timeout` T:
   - referee: `referee.score` on that rollout. Printed: how late the Failure comes after the
     deadline, and the process's CPU in the second after it (the runaway check was stopped,
     so about 0);
   - baseline: the fix verl, compose-rl and miles ship, `ThreadPoolExecutor.submit(check)`
     then `.result(timeout=T)`: the caller gets its TimeoutError on time, but the check's
     thread goes on computing (printed: its CPU in the second after).
   The same for async rewards under referee: one awaiting for ever, one computing without
   awaiting.
   And a check that spins in C (stdlib regex backtracking), which no in-process deadline
   interrupts: in a worker process (``run_in: process``, the default for a function of yours),
   killed at the deadline.
2. `referee serve` (its own process) with `max_concurrent` requests whose rewards are stuck at
   all times (each re-sent as soon as its timeout comes back), and normal one-rollout requests
   from 4 clients in a closed loop: their p50/p99 latency, against the same normal load with
   nothing stuck, same run; for a Python loop inline (the slow lane's 0.1ms switch interval,
   then 1ms throughout, for comparison), and for C spins in worker processes, 1, 2 and 8 of
   them stuck at all times (target: p99 under 2 s).

Usage: python benchmarks/bench_deadline.py [--timeout 0.5] [--window 6]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import referee  # noqa: E402
from referee import Rollout  # noqa: E402

RUNNING = [True]  # the baseline's runaway check looks at it, so the benchmark can end it


def spin(rollout: Rollout) -> float:
    """A check that loops on the completion "loop" (until the benchmark says stop)."""
    n = 0
    while rollout.completion_text == "loop" and RUNNING[0]:
        n += 1
    return 1.0


def c_spin(rollout: Rollout) -> float:
    """A check that spins in C, holding the interpreter lock, on the completion "loop"."""
    if rollout.completion_text == "loop":
        re.match(r"^(a+)+$", "a" * 40 + "!")
    return 1.0


async def awaits_for_ever(rollout: Rollout) -> float:
    if rollout.completion_text == "loop":
        await asyncio.sleep(3600)
    return 1.0


async def computes_without_awaiting(rollout: Rollout) -> float:
    await asyncio.sleep(0)
    return spin(rollout)


def cpu_in_the_next(seconds: float) -> float:
    """The process's CPU seconds (all threads) over the next `seconds` of wall time."""
    start = time.process_time()
    time.sleep(seconds)
    return time.process_time() - start


def timed_out_rollout(seconds: float, repeats: int = 5) -> None:
    print(f"1. a rollout whose check never returns, timeout {seconds:g}s ({repeats} runs)")
    loop = [Rollout(completion="loop")]
    for label, fn, where in [
        ("sync check, inline", spin, "inline"),
        ("sync check, in a worker process", spin, "process"),
        ("sync check spinning in C, in a worker process", c_spin, "process"),
        ("async, awaiting for ever", awaits_for_ever, None),
        ("async, computing without awaiting", computes_without_awaiting, None),
    ]:
        reward = referee.reward(deadline=seconds, run_in=where)(fn)  # type: ignore[arg-type]
        late = []
        for _ in range(repeats):
            start = time.perf_counter()
            [score] = referee.score(reward, loop)
            late.append(time.perf_counter() - start - seconds)
            assert score.failure is not None, score
            assert score.failure.type == "timeout", score
        cpu = cpu_in_the_next(1.0)
        median, most = statistics.median(late) * 1e3, max(late) * 1e3
        what = (
            "this process's CPU"
            if where != "process"
            else "this process's CPU (the worker was killed)"
        )
        print(f"  referee, {label}: Failure {median:.0f} ms after the deadline "
              f"(max {most:.0f} ms); {what} in the second after: {cpu:.2f}s")  # fmt: skip

    late = []
    with ThreadPoolExecutor(1) as pool:
        start = time.perf_counter()
        future = pool.submit(spin, loop[0])
        try:
            future.result(timeout=seconds)
        except FutureTimeout:
            late.append(time.perf_counter() - start - seconds)
        cpu = cpu_in_the_next(1.0)
        RUNNING[0] = False  # end the runaway thread, or the pool never shuts down
    print(f"  baseline (a thread pool's result(timeout)), sync check: TimeoutError "
          f"{late[0] * 1e3:.0f} ms after the deadline; CPU in the second after: {cpu:.2f}s "
          f"(its thread still computes)")  # fmt: skip
    RUNNING[0] = True


# --- 2. the server -------------------------------------------------------------------------

SERVER = r"""
import asyncio, sys
sys.path.insert(0, sys.argv[1])
import referee
from benchmarks.bench_deadline import c_spin, spin
from referee.backends.server import serve, serve_switch_intervals
stuck_interval = serve_switch_intervals()  # as `referee serve` does
if sys.argv[4] == "c":
    reward = referee.reward(deadline=float(sys.argv[2]))(c_spin)  # a worker process
else:
    reward = referee.reward(deadline=float(sys.argv[2]), run_in="inline")(spin)
stuck = stuck_interval if sys.argv[3] == "1" else None
asyncio.run(serve(reward, port=0, stuck_switch_interval=stuck,
                  ready=lambda url: print(url, flush=True)))
"""


def post(url: str, completion: str) -> None:
    body = json.dumps({"rollouts": [{"completion": completion}]}).encode()
    req = urllib.request.Request(url + "/score", data=body, method="POST",
                                 headers={"content-type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(req, timeout=600) as response:
        response.read()


def normal_latencies(url: str, window: float, clients: int = 4) -> list[float]:
    """Latencies of one-rollout requests from `clients` closed-loop clients over `window`."""
    out: list[float] = []
    end = time.monotonic() + window

    def client() -> None:
        while time.monotonic() < end:
            start = time.perf_counter()
            post(url, "fine")
            out.append(time.perf_counter() - start)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def server_under_stuck_requests(
    seconds: float,
    window: float,
    slots: int = 8,
    stuck_switch: bool = True,
    spin_in_c: bool = False,
) -> float:
    """Part 2; `stuck_switch`: the slow lane's shorter switch interval, as `referee serve`
    sets it (else 1ms throughout, as before it); `spin_in_c`: the stuck requests spin in C,
    in worker processes. The normal requests' p99 under stuck ones, in seconds."""
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(ROOT), str(seconds),
                             "1" if stuck_switch else "0", "c" if spin_in_c else "python"],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        normal_latencies(url, 1.0)  # warm up
        calm = normal_latencies(url, window)
        stop = threading.Event()
        stuck_done = [0]

        def stuck_client() -> None:
            while not stop.is_set():
                post(url, "loop")
                stuck_done[0] += 1

        stuck = [threading.Thread(target=stuck_client) for _ in range(slots)]
        for t in stuck:
            t.start()
        time.sleep(0.2)  # every slot taken
        busy = normal_latencies(url, window)
        stop.set()
        for t in stuck:
            t.join()
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    p50, p99 = percentiles(calm)
    b50, b99 = percentiles(busy)
    interval = "0.1ms in the slow lane" if stuck_switch else "1ms throughout (before 0.1ms)"
    stuck_how = "spinning in C, in worker processes" if spin_in_c else "a Python loop, inline"
    print(f"2. referee serve, max_concurrent {slots}, reward deadline {seconds:g}s ({stuck_how}), "
          f"switch interval {interval},")  # fmt: skip
    print(f"   normal one-rollout requests from 4 clients for {window:g}s")
    print(f"  nothing stuck: {len(calm)} requests, p50 {p50 * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms")
    print(f"  {slots} stuck requests at all times ({stuck_done[0]} timed out meanwhile): "
          f"{len(busy)} requests, p50 {b50 * 1e3:.1f} ms, p99 {b99 * 1e3:.1f} ms")  # fmt: skip
    print(f"  ratio stuck/calm: p50 {b50 / p50:.1f}x, p99 {b99 / p99:.1f}x")
    return b99


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--timeout", type=float, default=0.5)
    parser.add_argument("--window", type=float, default=6.0)
    args = parser.parse_args()
    timed_out_rollout(args.timeout)
    server_under_stuck_requests(max(args.timeout, 2.0), args.window)
    server_under_stuck_requests(max(args.timeout, 2.0), args.window, stuck_switch=False)
    seconds = max(args.timeout, 2.0)
    for stuck in (1, 2, 8):
        p99 = server_under_stuck_requests(seconds, args.window, slots=stuck, spin_in_c=True)
        print(f"  {'PASS' if p99 < 2.0 else 'FAIL'}: p99 {p99 * 1e3:.0f} ms while {stuck} "
              f"request(s) spin in C (target under 2 s)")  # fmt: skip


if __name__ == "__main__":
    main()
