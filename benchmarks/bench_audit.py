"""What `referee audit-judge` costs: judge calls per audited rollout, and the client's CPU per
call against a plain `rubric_judge` run over the same rollouts (target: at most 1.1x).

A scripted OpenAI-compatible server runs in a process of its own (in-process it would share
the client's GIL) and answers every call with the same verdict after ``--delay`` seconds; the
judge has no cache, so every verdict is a call. CPU is this process's (`time.process_time`),
divided by the calls the server saw; the best of ``--repeat`` runs is kept.

Usage: python benchmarks/bench_audit.py [--rollouts 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import referee
from referee.judges.testing import requests_seen, server_process
from referee.report.audit import AuditOptions, reseed, run_audit

REPLY = json.dumps({"criteria": {"quality": 70}, "reasoning": "fine"})
RUBRIC = """name: quality
version: '1'
description: Is the answer right?
requires_reference: false
criteria:
  - id: quality
    description: The answer is right.
    weight: 1
    scale: {min: 0, max: 100}
"""


def rollouts(n: int) -> list[referee.Rollout]:
    return [
        referee.Rollout(
            id=f"r{i}",
            group=f"g{i // 2}",
            prompt="What is the capital of France?",
            completion=f"The capital of France is Paris. It has been for {i} years.",
            metadata={"label": 1.0, "system": f"s{i % 4}"},
        )
        for i in range(n)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--delay", type=float, default=0.005)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    (folder / "quality.yaml").write_text(RUBRIC)
    server, url = server_process(delay=args.delay, reply=REPLY)
    try:
        spec = {"type": "rubric_judge", "rubric": str(folder / "quality.yaml"),
                "model": "openai/bench", "api_base": url, "cache": False,
                "structured": "prompt", "concurrency": 32}  # fmt: skip
        rows = rollouts(args.rollouts)
        plain_best = audit_best = float("inf")
        calls_per_rollout = 0.0
        for _ in range(args.repeat):
            judge = referee.load(spec)
            seen, cpu = requests_seen(url), time.process_time()
            referee.score(judge, rows)
            plain_calls = requests_seen(url) - seen
            plain_best = min(plain_best, (time.process_time() - cpu) / plain_calls)

            seen, cpu = requests_seen(url), time.process_time()
            asyncio.run(run_audit(judge, rows, AuditOptions(limit=len(rows)),
                                  reseeded=lambda r: referee.load(reseed(spec, r))))  # fmt: skip
            audit_calls = requests_seen(url) - seen
            audit_best = min(audit_best, (time.process_time() - cpu) / audit_calls)
            calls_per_rollout = audit_calls / len(rows)
    finally:
        server.terminate()
        server.wait()
    print(
        f"rollouts: {args.rollouts}, best of {args.repeat}, server delay {args.delay * 1000:g} ms"
    )
    print(f"plain rubric_judge: {plain_best * 1e3:.3f} ms of client CPU per call")
    print(f"audit-judge:        {audit_best * 1e3:.3f} ms of client CPU per call, "
          f"{calls_per_rollout:g} calls per audited rollout")  # fmt: skip
    print(f"ratio audit / plain CPU per call: {audit_best / plain_best:.2f}x (target <= 1.1x)")


if __name__ == "__main__":
    main()
