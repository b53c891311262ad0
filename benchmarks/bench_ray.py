"""`referee score --engine ray` on a three-node loopback cluster against the local engine, same
run, same spec, same rows.

The cluster: a head and two worker nodes, each a `ray start` process group of its own on this
machine with one CPU (tests/support/ray_cluster.py), so one actor per node. Each side is the
command a user runs, `referee score LOG --spec SPEC -o OUT` (plus ``--engine ray --address``),
timed from its start to its exit; rows/s from its first written batch to its exit (without
Ray's join and actor start) is printed too. Both outputs are compared byte for byte.

Workloads:
1. extraction: CPU-bound (bench_deterministic's json_schema gate + field_match spec).
2. judge: latency-bound: a rubric judge on a scripted server (threads of this process) that
   answers after `--delay` seconds, 16 rollouts in flight per reward.
3. each again on Ray with a worker node killed (SIGKILL, every process of it) once the first
   batch is written: the rows must not change, and the rows/s says what the loss cost.

On a machine with fewer cores than nodes, Ray cannot speed a CPU-bound run up: the ratio is
then Ray's overhead (moving rollouts and scores between processes), not its scaling.

Usage: python benchmarks/bench_ray.py [--rows 200000] [--judge-rows 3000] [--delay 0.2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_deterministic import SPEC  # noqa: E402
from benchmarks.bench_score_log import write_log  # noqa: E402
from referee.judges.testing import FakeJudgeServer, Reply  # noqa: E402
from tests.support.judges import letter_judge, spec_with_judge  # noqa: E402
from tests.support.ray_cluster import LoopbackCluster  # noqa: E402


class Run:
    """One `referee score` command, timed: to its exit, and from its first written row."""

    def __init__(self, cmd: list[str], out: Path, env: dict[str, str] | None = None) -> None:
        self.out = out
        self.partial = out.with_name(out.name + ".partial")
        self.started = time.perf_counter()
        self.process = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
        self.first: float | None = None

    def wait_first_batch(self) -> None:
        while self.first is None:
            if self.process.poll() is not None:
                break
            if self.partial.exists() and self.partial.stat().st_size:
                self.first = time.perf_counter()
            else:
                time.sleep(0.01)

    def finish(self) -> tuple[float, float, str]:
        self.wait_first_batch()
        _, stderr = self.process.communicate()
        end = time.perf_counter()
        if self.process.returncode:
            raise RuntimeError(f"referee score failed:\n{stderr}")
        first = self.first or end
        return end - self.started, end - first, stderr


def score_cmd(log: Path, spec: Path, out: Path, batch: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "referee.cli", "score", str(log), "--spec", str(spec),
            "-o", str(out), "-q", "--batch-size", str(batch), *extra]  # fmt: skip


def compare(
    name: str, log: Path, spec: Path, rows: int, batch: int, cluster: LoopbackCluster, tmp: Path
) -> None:
    local_out, ray_out, kill_out = tmp / "local.jsonl", tmp / "ray.jsonl", tmp / "kill.jsonl"
    ray = ["--engine", "ray", "--address", cluster.address]
    local_s, local_steady, _ = Run(score_cmd(log, spec, local_out, batch), local_out).finish()
    ray_run = Run(score_cmd(log, spec, ray_out, batch, *ray), ray_out, cluster.env)
    ray_s, ray_steady, _ = ray_run.finish()
    kill = Run(score_cmd(log, spec, kill_out, batch, *ray), kill_out, cluster.env)
    kill.wait_first_batch()
    cluster.live_workers[0].kill()
    kill_s, _, stderr = kill.finish()
    cluster.add_workers(1)  # whole again for the next workload
    reference = local_out.read_bytes()
    same = ray_out.read_bytes() == reference and kill_out.read_bytes() == reference
    resent = stderr.count("sent again")
    after = rows - batch
    print(f"{name}: {rows:,} rows, batches of {batch:,}; outputs identical: {same}")
    print(f"  local engine:       {rows / local_s:9,.0f} rows/s ({local_s:6.2f} s); "
          f"after the first batch {after / local_steady:9,.0f} rows/s")  # fmt: skip
    print(f"  ray, 3 nodes:       {rows / ray_s:9,.0f} rows/s ({ray_s:6.2f} s); "
          f"after the first batch {after / ray_steady:9,.0f} rows/s; "
          f"ray/local rows/s {local_s / ray_s:.2f}x (after the first batch "
          f"{local_steady / ray_steady:.2f}x)")  # fmt: skip
    print(f"  ray, a node killed: {rows / kill_s:9,.0f} rows/s ({kill_s:6.2f} s); "
          f"chunks sent again: {resent}; rows/s against ray without a loss "
          f"{ray_s / kill_s:.2f}x")  # fmt: skip
    for path in (local_out, ray_out, kill_out):
        path.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--judge-rows", type=int, default=3_000)
    parser.add_argument("--judge-batch", type=int, default=300)
    parser.add_argument("--delay", type=float, default=0.2)
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs on this machine")

    def judge(request: dict[str, object]) -> Reply:
        return Reply(letter_judge(request).content, delay=args.delay)

    with tempfile.TemporaryDirectory(prefix="referee-bench-ray-") as d:
        tmp = Path(d)
        started = time.perf_counter()
        with (
            LoopbackCluster(workers=2, cpus=1, head_cpus=1) as cluster,
            FakeJudgeServer(judge) as server,
        ):
            print(f"cluster of 3 nodes up in {time.perf_counter() - started:.1f} s")
            log, spec = tmp / "extraction.jsonl", tmp / "extraction.json"
            write_log(log, args.rows)
            spec.write_text(json.dumps(SPEC))
            compare("extraction", log, spec, args.rows, args.batch, cluster, tmp)

            log, spec = tmp / "judge.jsonl", tmp / "judge.json"
            texts = [json.dumps({"e": "e" * (i % 7)}) if i % 3 else "see " * (i % 4)
                     for i in range(args.judge_rows)]  # fmt: skip
            log.write_text("".join(json.dumps({"id": f"r{i}", "completion": t}) + "\n"
                                   for i, t in enumerate(texts)))  # fmt: skip
            judged = spec_with_judge(server, cache=None)
            judged["components"]["judge"]["concurrency"] = 16
            spec.write_text(json.dumps(judged))
            print(f"(judge: answers after {args.delay * 1000:.0f} ms, 16 in flight per reward)")
            compare("judge", log, spec, args.judge_rows, args.judge_batch, cluster, tmp)


if __name__ == "__main__":
    main()
