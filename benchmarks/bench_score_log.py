"""`referee score` on a large log against a bare loop doing the same work, same run.

The log: N canonical JSONL rows of the structured-extraction task (every completion distinct).
Both sides run as their own process, read -> score -> write a JSONL file:

- referee: `referee score LOG --spec extraction.yaml -o OUT` (json_schema gate + field_match,
  weighted), the command a user runs, writing one full output row per input row;
- baseline: a plain loop: json.loads each line, one compiled jsonschema validator and the
  same field comparisons inline (bench_deterministic's baseline), json.dumps of the id, the
  reward and the component values (what referee's rows carry, less the reasons).

Printed: rows/s of each and their ratio (target: referee at least 0.7x the baseline's rows/s),
and each process's peak memory (ru_maxrss) at two sizes (target: flat, not growing with N).
Values are checked equal on every row.

Usage: python benchmarks/bench_score_log.py [--rows 1000000] [--small 100000]
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

from benchmarks.bench_deterministic import SPEC, extraction_rollouts  # noqa: E402

BASELINE = r"""
import json, sys
sys.path.insert(0, sys.argv[3])
from benchmarks.bench_deterministic import baseline_pairs
with open(sys.argv[1], "rb") as src, open(sys.argv[2], "w") as out:
    batch = []
    def flush():
        components = []
        values = baseline_pairs([(r["completion"], r["reference"]) for r in batch], components)
        for r, v, c in zip(batch, values, components):
            out.write(json.dumps({"id": r["id"], "reward": v, "components": c}) + "\n")
        batch.clear()
    for line in src:
        batch.append(json.loads(line))
        if len(batch) >= 256:
            flush()
    flush()
"""


MEASURE = (
    "import resource, subprocess, sys, time, json\n"
    "t = time.perf_counter()\n"
    "subprocess.run(sys.argv[1:], check=True, capture_output=True)\n"
    "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024\n"
    "print(json.dumps([time.perf_counter() - t, peak]))\n"
)


def write_log(path: Path, rows: int) -> None:
    chunk = 50_000
    with open(path, "w") as f:
        for start in range(0, rows, chunk):
            for r in extraction_rollouts(min(chunk, rows - start), seed=start):
                f.write(json.dumps({"id": f"{start}-{r.id}", "completion": r.completion,
                                    "reference": r.reference}) + "\n")  # fmt: skip


def measure(log: Path, spec: Path, tmp: Path) -> dict[str, tuple[float, float]]:
    referee_out, baseline_out = tmp / "referee.jsonl", tmp / "baseline.jsonl"
    referee_cmd = [sys.executable, "-m", "referee.cli", "score", str(log), "--spec", str(spec),
                   "-o", str(referee_out), "-q", "--batch-size", "1024"]  # fmt: skip
    baseline_cmd = [sys.executable, "-c", BASELINE, str(log), str(baseline_out), str(ROOT)]
    # Memory: each side alone in a fresh child of a fresh measuring process, so ru_maxrss is
    # that side's own peak.
    result = {}
    for name, cmd in (("baseline", baseline_cmd), ("referee", referee_cmd)):
        probe = [sys.executable, "-c", MEASURE, *cmd]
        out = subprocess.run(probe, capture_output=True, text=True, check=True).stdout
        seconds, mib = json.loads(out)
        result[name] = (seconds, mib)
    got = [json.loads(line)["reward"] for line in referee_out.open()]
    want = [json.loads(line)["reward"] for line in baseline_out.open()]
    assert len(got) == len(want), "referee and the baseline wrote different row counts"
    assert all(
        (a is None and b == 0.0) or (a is not None and abs(a - b) < 1e-9)
        for a, b in zip(got, want, strict=True)
    ), "referee and the baseline disagree"
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="referee-bench-log-") as d:
        tmp = Path(d)
        spec = tmp / "spec.json"
        spec.write_text(json.dumps(SPEC))
        results = {}
        for n in (args.small, args.rows):
            log = tmp / f"log-{n}.jsonl"
            start = time.perf_counter()
            write_log(log, n)
            size = os.path.getsize(log) / 2**20
            print(f"{n:,} rows ({size:.0f} MiB) written in {time.perf_counter() - start:.1f} s")
            results[n] = measure(log, spec, tmp)
            log.unlink()
        print("read -> score -> write, one process per side:")
        for n, sides in results.items():
            b_s, b_mem = sides["baseline"]
            r_s, r_mem = sides["referee"]
            print(f"  {n:>9,} rows: baseline {n / b_s:9,.0f} rows/s ({b_s:6.1f} s, peak "
                  f"{b_mem:5.0f} MiB); referee {n / r_s:9,.0f} rows/s ({r_s:6.1f} s, peak "
                  f"{r_mem:5.0f} MiB); referee/baseline rows/s {b_s / r_s:.2f}x")  # fmt: skip
        small, large = results[args.small]["referee"][1], results[args.rows]["referee"][1]
        print(f"  referee peak memory {small:.0f} MiB at {args.small:,} rows, {large:.0f} MiB at "
              f"{args.rows:,} rows (target: flat); rows/s target >= 0.7x the baseline")  # fmt: skip


if __name__ == "__main__":
    main()
