"""What the worker processes cost, and what they buy: deadlines that hold in C (issue 27).

1. Cost per rollout. A user's cheap ``@referee.reward`` function (a length check and a small
   regex over the completion), `referee.score` on N distinct rollouts (default 20,000):
   - inline: ``run_in="inline"``, in the caller's thread under the in-process watchdog;
   - process: ``run_in="process"`` (the default for a sync function), chunks of rollouts sent
     to the warm worker pool (`referee.workers`);
   - peer: `pebble.ProcessPool` (the library issue 27 names), the same function scheduled
     rollout by rollout with a per-task timeout, as many workers as referee's pool, started
     by forkserver (pebble's ``map`` times out chunks, not rollouts, so it is no peer).
   Printed: µs/rollout of each, the ratios against inline, and the round trip of one rollout
   (``reward.score_sync(rollout)`` on the process path). The pool is warmed first; each side
   is timed best-of-N, the sides alternating run by run. No target: reported.
2. Deadline to Failure for a C spin. A reward with ``deadline=D`` (default 0.5s) whose check
   spins in C with the interpreter lock held: stdlib ``re.match(r"^(a+)+$", "a" * 40 + "!")``,
   and ``eval("9**9**9**9")`` behind a countdown-style character whitelist. Printed: the
   wall time of `referee.score` on that one rollout minus D, median and max over the tries
   (a warm worker holding the reward before each try). Target: under 100 ms past D.
3. CPU after the Failure. In the second after each try's Failure: the CPU time of the worker
   seen spinning (found by its CPU during the call, not by the pool's bookkeeping) and of
   anything in its process group, from /proc/PID/schedstat (ns) or /proc/PID/stat, and
   whether they are gone; printed beside it, the CPU of the worker started at once to replace
   it (importing referee: start-up, not the spin) and this process's own. Target: 0 for the
   spin (under 0.01s).
4. A PASS/FAIL line per target (exit status 1 on a FAIL). Also printed: the cold start of a
   worker (what a batch would wait were no warm worker left).

Usage: python benchmarks/bench_process.py [--rollouts 20000] [--repeat 3] [--deadline 0.5]
    [--tries 5]
"""

from __future__ import annotations

import argparse
import gc
import math
import multiprocessing
import os
import re
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import referee  # noqa: E402
from referee import Rollout  # noqa: E402
from referee.workers import WorkerPool, pool  # noqa: E402

OVERSHOOT_TARGET = 0.100  # seconds past the deadline
CPU_TARGET = 0.01  # CPU seconds in the second after the Failure
PEER_TIMEOUT = 10.0  # pebble's per-task timeout: as referee's deadline, never reached here

# --- the rewards ----------------------------------------------------------------------------

_ANSWER = re.compile(r"answer is (-?\d+)")
_ARITHMETIC = set("0123456789+-*/() ")


def cheap(rollout: Rollout) -> float:
    """A user's cheap check: short enough, and the stated answer even."""
    text = rollout.completion_text
    if len(text) > 400:
        return 0.0
    found = _ANSWER.search(text)
    return 1.0 if found is not None and int(found.group(1)) % 2 == 0 else 0.0


def backtracking(rollout: Rollout) -> float:
    """Stdlib ``re`` on the policy's text: exponential backtracking, in C."""
    return 1.0 if re.match(r"^(a+)+$", rollout.completion_text) else 0.0


def countdown(rollout: Rollout) -> float:
    """A countdown reward as RL recipes write it: a whitelist, then eval (``9**9**9**9``
    passes the whitelist and spins in big-integer code)."""
    expr = rollout.completion_text
    if not set(expr) <= _ARITHMETIC:
        return 0.0
    return 1.0 if eval(expr, {"__builtins__": None}, {}) == 24 else 0.0


def cheap_rollouts(n: int) -> list[Rollout]:
    return [
        Rollout(id=str(i), completion=f"Adding {i} and {i % 7} step by step, the answer is {i}.")
        for i in range(n)
    ]


# --- 1. cost per rollout --------------------------------------------------------------------


def best_of_alternating(
    sides: dict[str, Callable[[], Any]], repeat: int
) -> dict[str, tuple[float, Any]]:
    """Best wall time of each side, run in turn `repeat` times so drift in machine load hits
    all; with the last run's results."""
    out: dict[str, tuple[float, Any]] = dict.fromkeys(sides, (math.inf, None))
    for _ in range(repeat):
        for name, fn in sides.items():
            gc.collect()
            start = time.perf_counter()
            result = fn()
            elapsed = time.perf_counter() - start
            out[name] = (min(out[name][0], elapsed), result)
    return out


def pebble_side(rollouts: list[Rollout], workers: int) -> tuple[Callable[[], Any], Any] | None:
    """Scoring by pebble, rollout by rollout with a timeout, and its pool (None: no pebble)."""
    try:
        import pebble  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    peer = pebble.ProcessPool(workers, context=multiprocessing.get_context("forkserver"))

    def run() -> list[float]:
        futures = [peer.submit(cheap, PEER_TIMEOUT, r) for r in rollouts]
        return [f.result() for f in futures]

    return run, peer


def cost_per_rollout(n: int, repeat: int, single: int) -> float:
    """Part 1; returns the process path's µs/rollout over the inline path's."""
    inline = referee.reward(run_in="inline")(cheap)
    process = referee.reward(run_in="process")(cheap)
    rollouts = cheap_rollouts(n)
    workers = pool().size
    print(f"1. a cheap @referee.reward (length check + regex), {n:,} rollouts, best of {repeat}")
    print(f"   ({workers} workers in referee's pool; pebble gets as many)")
    referee.score(process, rollouts[: 64 * workers * 2])  # warm-up: every worker, reward sent
    referee.score(inline, rollouts[:1000])
    sides: dict[str, Callable[[], Any]] = {
        "inline": lambda: [s.value for s in referee.score(inline, rollouts)],
        "process": lambda: [s.value for s in referee.score(process, rollouts)],
    }
    peer = pebble_side(rollouts, workers)
    if peer is not None:
        run, peer_pool = peer
        [f.result() for f in [peer_pool.submit(cheap, PEER_TIMEOUT, r) for r in rollouts[:200]]]
        sides["pebble"] = run
    try:
        timed = best_of_alternating(sides, repeat)
    finally:
        if peer is not None:
            peer[1].close()
            peer[1].join()
    base_t, base_values = timed["inline"]
    per = {name: t / n * 1e6 for name, (t, _) in timed.items()}
    print(f"  inline  (run_in=inline): {per['inline']:8.2f} µs/rollout")
    for name, label in [("process", "process (run_in=process)"), ("pebble", "pebble.ProcessPool")]:
        if name not in timed:
            print(f"  {label}: skipped (pebble is not installed: pip install pebble)")
            continue
        t, values = timed[name]
        same = sum(1 for a, b in zip(values, base_values, strict=True) if a == b)
        print(f"  {label}: {per[name]:8.2f} µs/rollout, {t / base_t:6.1f}x inline "
              f"(same values on {same:,}/{n:,})")  # fmt: skip
    if "pebble" in per:
        print(f"  ratio process/pebble: {per['process'] / per['pebble']:.2f}x")

    one = rollouts[0]
    process.score_sync(one)
    trips = []
    for _ in range(single):
        start = time.perf_counter()
        process.score_sync(one)
        trips.append(time.perf_counter() - start)
    inline_trips = []
    for _ in range(single):
        start = time.perf_counter()
        inline.score_sync(one)
        inline_trips.append(time.perf_counter() - start)
    trips.sort()
    print(f"  one rollout, process.score_sync: median {statistics.median(trips) * 1e6:.0f} µs, "
          f"p99 {trips[int(len(trips) * 0.99)] * 1e6:.0f} µs (inline: "
          f"{statistics.median(inline_trips) * 1e6:.1f} µs; {single:,} calls)")  # fmt: skip
    return per["process"] - per["inline"]


# --- 2 and 3. processes and their CPU, from /proc -------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[str, int, int, float] | None:
    """(state, ppid, process group, CPU seconds) of `pid`; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    cpu = (int(fields[11]) + int(fields[12])) / _TICK
    try:  # nanoseconds on the CPU: finer than stat's clock ticks
        with open(f"/proc/{pid}/schedstat") as fh:
            cpu = int(fh.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        pass
    return fields[0], int(fields[1]), int(fields[2]), cpu


def processes() -> dict[int, tuple[str, int, int, float]]:
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (stat := _stat(int(name))) is not None:
            out[int(name)] = stat
    return out


def descendants(table: dict[int, tuple[str, int, int, float]]) -> set[int]:
    """This process's children, theirs, and so on (the pool's workers and what they start)."""
    found: set[int] = set()
    frontier = {os.getpid()}
    while frontier:
        frontier = {pid for pid, s in table.items() if s[1] in frontier and pid not in found}
        found |= frontier
    return found


class Watch:
    """The CPU each descendant of this process used while a call ran, sampled every `every`
    seconds from a thread (a worker that spins is found by its CPU, whatever the pool's
    bookkeeping says; one started and killed between two samples is missed)."""

    def __init__(self, every: float = 0.05) -> None:
        self.every = every
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        table = processes()
        for pid in descendants(table):
            self.first.setdefault(pid, table[pid][3])
            self.last[pid] = table[pid][3]

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def __enter__(self) -> Watch:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def spinners(self, at_least: float) -> set[int]:
        """Descendants seen using at least `at_least` CPU seconds during the call."""
        return {pid for pid, cpu in self.last.items() if cpu - self.first[pid] >= at_least}


def cpu_after(seconds: float, killed: set[int]) -> tuple[float, float, float, list[str]]:
    """Over the next `seconds`: the CPU seconds of the killed workers and anything in their
    process groups (the spin: the target), of this process's other descendants (the worker
    started to replace the killed one, importing referee), and of this process; and what of
    the killed workers is left (their pids, or processes still in their groups)."""
    before = processes()
    spinning = {pid for pid, s in before.items() if pid in killed or s[2] in killed}
    others = descendants(before) - spinning
    own = time.process_time()
    time.sleep(seconds)
    own = time.process_time() - own
    after = processes()
    spinning |= {pid for pid, s in after.items() if s[2] in killed}
    others |= descendants(after) - spinning

    def used(pids: set[int]) -> float:
        return sum(
            after[pid][3] - (before[pid][3] if pid in before else 0.0)
            for pid in pids
            if pid in after
        )

    left = [f"pid {pid} ({after[pid][0]})" for pid in sorted(killed) if pid in after]
    left += [f"pid {pid} in group {s[2]} ({s[0]})" for pid, s in after.items() if s[2] in killed]
    return used(spinning), used(others), own, sorted(set(left))


# --- 2. deadline to Failure -----------------------------------------------------------------


@dataclass
class Spin:
    """Parts 2 and 3 for one spin, per try."""

    late: list[float] = field(default_factory=list)  # seconds from the deadline to the Failure
    children_cpu: list[float] = field(default_factory=list)  # of the killed, the second after
    startup_cpu: list[float] = field(default_factory=list)  # of the other workers, the same
    own_cpu: list[float] = field(default_factory=list)
    left: list[str] = field(default_factory=list)  # what is left of the killed workers
    stale: list[bool] = field(default_factory=list)  # its warm worker was dead before it


def c_spin(
    label: str, fn: Callable[[Rollout], float], benign: str, hostile: str, deadline: float,
    tries: int,
) -> Spin:  # fmt: skip
    reward = referee.reward(deadline=deadline)(fn)
    assert reward.runs_in == "process", reward.runs_in
    ok, hostile_rollout = [Rollout(completion=benign)], [Rollout(completion=hostile)]
    out = Spin()
    for _ in range(tries):
        [warm] = referee.score(reward, ok)  # a worker up, holding the reward
        assert warm.failure is None, warm
        time.sleep(0.1)
        out.stale.append(any(w.proc.poll() is not None for w in pool()._idle))
        with Watch() as watch:
            start = time.perf_counter()
            [score] = referee.score(reward, hostile_rollout)
            out.late.append(time.perf_counter() - start - deadline)
        assert score.failure is not None, score
        assert score.failure.type == "timeout", score
        spinners = watch.spinners(deadline / 2)
        assert spinners, "no worker was seen spinning"
        used, startup, own, left = cpu_after(1.0, spinners)
        out.children_cpu.append(used)
        out.startup_cpu.append(startup)
        out.own_cpu.append(own)
        out.left += left
    median, most = statistics.median(out.late) * 1e3, max(out.late) * 1e3
    print(f"  {label}: Failure {median:.0f} ms after the deadline (max {most:.0f} ms)")
    print(f"    CPU in the second after: the killed worker {max(out.children_cpu):.4f}s (max of "
          f"{tries}), this process {max(out.own_cpu):.4f}s; spinning worker gone: "
          f"{'yes' if not out.left else 'NO: ' + ', '.join(out.left)}")  # fmt: skip
    print(f"    (its replacement, started at once, importing referee: "
          f"{statistics.median(out.startup_cpu):.2f}s CPU)")  # fmt: skip
    if any(out.stale):
        warm = [x for x, dead in zip(out.late, out.stale, strict=True) if not dead]
        on_warm = (
            f"those with a live one: {statistics.median(warm) * 1e3:.0f} ms (max "
            f"{max(warm) * 1e3:.0f} ms)"
            if warm
            else "none had a live one"
        )
        print(f"    {sum(out.stale)} of {tries} tries found their warm worker already dead "
              f"(started by a thread that has since ended) and waited for a cold one; "
              f"{on_warm}")  # fmt: skip
    return out


def cold_start() -> float:
    """Seconds from a fresh pool to one rollout scored: a worker started, the reward sent."""
    reward = referee.reward(run_in="process")(cheap)
    fresh = WorkerPool(1)
    try:
        start = time.perf_counter()
        fresh.score(reward, cheap_rollouts(1))
        return time.perf_counter() - start
    finally:
        fresh.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rollouts", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--single", type=int, default=2_000, help="one-rollout round trips")
    parser.add_argument("--deadline", type=float, default=0.5)
    parser.add_argument("--tries", type=int, default=5)
    args = parser.parse_args()

    overhead = cost_per_rollout(args.rollouts, args.repeat, args.single)

    print(f"2./3. a check spinning in C, deadline {args.deadline:g}s ({args.tries} tries each)")
    spins = [
        c_spin(label, fn, benign, hostile, args.deadline, args.tries)
        for label, fn, benign, hostile in [
            ('stdlib re.match(r"^(a+)+$", "a" * 40 + "!")', backtracking, "aaaa", "a" * 40 + "!"),
            ("eval('9**9**9**9') after a whitelist", countdown, "6*4", "9**9**9**9"),
        ]
    ]
    print(f"  a killed worker is replaced at once, in the background: a cold worker takes "
          f"{cold_start() * 1e3:.0f} ms to score its first rollout")  # fmt: skip

    worst_late = max(x for s in spins for x in s.late)
    worst_cpu = max(x for s in spins for x in s.children_cpu)
    all_gone = not any(s.left for s in spins)
    stale = sum(sum(s.stale) for s in spins)
    cpu_ok = worst_cpu < CPU_TARGET and all_gone
    print("summary")
    print(f"  REPORT process-path overhead: +{overhead:.2f} µs/rollout over inline (no target)")
    print(f"  {'PASS' if worst_late < OVERSHOOT_TARGET else 'FAIL'} deadline overshoot: max "
          f"{worst_late * 1e3:.0f} ms (target < {OVERSHOOT_TARGET * 1e3:.0f} ms)"
          + (f"; {stale} tries waited for a cold worker" if stale else ""))  # fmt: skip
    print(f"  {'PASS' if cpu_ok else 'FAIL'} CPU after the Failure: max {worst_cpu:.4f}s in "
          f"the second after (target < {CPU_TARGET:g}s), spinning workers gone: "
          f"{'yes' if all_gone else 'no'}")  # fmt: skip
    if worst_late >= OVERSHOOT_TARGET or not cpu_ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
