"""A panel of three judges against one judge: calls made, and client CPU per call.

A scripted OpenAI-compatible server runs in a process of its own (``python -m
referee.judges.testing``; in-process it would share the client's GIL and bill its CPU to the
client) and answers every call after 50 ms. The same rollouts are scored with a
``reference_judge`` of one model and with one of three (``models: [a, b, c]``, ``vote:
majority``), without a cache, through ``referee.score``. For each it prints the calls the
server saw (target: the panel makes exactly 3x the calls) and this process's CPU time per
call (``time.process_time()`` over the calls: the client's cost of a call, scoring, voting
and all), and their ratio (target: the panel's CPU per call at most one judge's, 1.00x or
less). The best of ``--repeat`` runs is kept; the figures move with the machine's load.

Usage: python benchmarks/bench_panel.py [--rollouts 400] [--repeat 3]
(needs ``pip install "referee[judges]"``; runs in well under a minute)
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import referee
from referee.judges.testing import requests_seen, server_process

LATENCY = 0.05
REPLY = '{"equivalent": true, "reasoning": "verdict {n}"}'
MODELS = ["openai/gpt-4.1-mini", "openai/gpt-4.1-nano", "openai/gpt-4o-mini"]


def judge(url: str, models: list[str]) -> Any:
    spec: dict[str, Any] = {
        "type": "reference_judge", "api_base": url, "cache": False, "structured": "prompt",
        "max_in_flight": 64, "concurrency": 64,
    }  # fmt: skip
    if len(models) == 1:
        spec["model"] = models[0]
    else:
        spec.update(models=models, vote="majority")
    return referee.load(spec)


def rollouts(n: int, run: int) -> list[referee.Rollout]:
    # distinct texts per run, so no layer below could answer a call from memory
    return [
        referee.Rollout(id=str(i), prompt="What is 6 * 7?",
                        completion=f"Run {run}, attempt {i}: the answer is 42.", reference="42")
        for i in range(n)
    ]  # fmt: skip


def measure(url: str, models: list[str], n: int, run: int) -> tuple[int, float, float]:
    """Calls the server saw, CPU seconds and wall seconds for scoring `n` rollouts."""
    reward, batch = judge(url, models), rollouts(n, run)
    gc.collect()
    before = requests_seen(url)
    cpu, wall = time.process_time(), time.perf_counter()
    scores = referee.score(reward, batch)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    calls = requests_seen(url) - before
    bad = [s for s in scores if s.value != 1.0]
    if bad:
        raise SystemExit(f"a rollout was not scored 1.0: {bad[0]}")
    return calls, cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each; best is kept")
    args = parser.parse_args()
    server, url = server_process(LATENCY, REPLY)
    try:
        print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
        measure(url, MODELS, 32, -1)  # warm: imports, connections, litellm's tables
        results: dict[str, tuple[int, float, float]] = {}
        run = 0
        for label, models in (("one judge", MODELS[:1]), ("panel of three", MODELS)):
            best: tuple[int, float, float] | None = None
            for _ in range(args.repeat):
                run += 1
                got = measure(url, models, args.rollouts, run)
                if best is None or got[1] / got[0] < best[1] / best[0]:
                    best = got
            if best is not None:
                results[label] = best
        print(f"\n{args.rollouts} rollouts, reference_judge, {LATENCY * 1000:.0f} ms per call, "
              f"best of {args.repeat}")  # fmt: skip
        for label, (calls, cpu, wall) in results.items():
            print(f"  {label:15} {calls:6} calls  {cpu / calls * 1e6:7.0f} us CPU per call  "
                  f"{wall:5.2f} s wall")  # fmt: skip
        one, panel = results["one judge"], results["panel of three"]
        print(f"calls, panel / one judge: {panel[0] / one[0]:.2f}x (target exactly 3.00x)")
        ratio = (panel[1] / panel[0]) / (one[1] / one[0])
        print(f"CPU per call, panel / one judge: {ratio:.2f}x (target <= 1.00x)")
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
