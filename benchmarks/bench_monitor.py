"""The training monitor's cost per step against the reward's own, with the gold check and the
live probes reported apart.

Each step is a batch of extraction rollouts (`bench_deterministic`'s, in groups of 8, as GRPO
gives them), scored by the extraction spec: that is the reward's own time. Then, on the same
scores, three monitors take the step (`Monitor.observe`):

1. the figures and rules alone, writing the JSONL timeline (what every step pays);
2. with a gold spec (the same extraction spec with a stricter amount tolerance) on a sample of
   16 (the gold check: its cost is the gold reward's, on the sample);
3. with the probe battery on the step's best answers (``probe_every=1``, 8 groups: what a probe
   step costs, run every N steps in a real run).

Target: (1) under 5% of the reward's time on a deterministic spec (a judge's reward makes the
share smaller still); (2) and (3) are reported as they are, in proxy or gold calls' terms.

Usage: python benchmarks/bench_monitor.py [--steps 20] [--batch 256]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import referee  # noqa: E402
from benchmarks.bench_deterministic import SPEC, extraction_rollouts  # noqa: E402
from referee._aio import run_sync  # noqa: E402
from referee.monitor import Monitor  # noqa: E402


def steps(count: int, batch: int) -> list[list[referee.Rollout]]:
    out = []
    for step in range(count):
        rows = extraction_rollouts(batch, seed=step)
        out.append([r.model_copy(update={"id": f"{step}-{i}", "group": f"{step}-{i // 8}",
                                         "prompt": f"announcement {step}-{i // 8}",
                                         "metadata": {"step": step}})
                    for i, r in enumerate(rows)])  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=256)
    options = parser.parse_args()
    proxy = referee.load(SPEC)
    strict = copy.deepcopy(SPEC)
    strict["components"]["fields"]["fields"]["amount"] = {"number": {"rel_tol": 0.0}}
    gold = referee.load(strict)
    batches = steps(options.steps, options.batch)
    times: dict[str, list[float]] = {"reward": [], "monitor": [], "gold": [], "probes": []}

    async def run(tmp: str) -> None:
        # one event loop, as a trainer's reward call awaits the monitor inside its own
        plain = Monitor(timeline=Path(tmp) / "plain.jsonl")
        golden = Monitor(gold, gold_sample=16)
        probing = Monitor(probe_every=1, probe_groups=8)
        for step, rows in enumerate(batches):
            start = time.perf_counter()
            scores = await proxy.score_batch(rows)
            times["reward"].append(time.perf_counter() - start)
            for key, monitor in (("monitor", plain), ("gold", golden), ("probes", probing)):
                start = time.perf_counter()
                await monitor.observe(step, rows, scores, proxy)
                times[key].append(time.perf_counter() - start)

    with tempfile.TemporaryDirectory() as tmp:
        run_sync(run(tmp))
    ms = {k: 1000 * statistics.median(v) for k, v in times.items()}
    # the gold and probe monitors compute the figures too: their own part is the difference
    gold_own, probes_own = ms["gold"] - ms["monitor"], ms["probes"] - ms["monitor"]
    print(f"{options.steps} steps of {options.batch} rollouts (groups of 8), median per step:")
    print(f"  the reward (extraction spec):        {ms['reward']:8.2f} ms")
    print(f"  the monitor's figures, rules, JSONL: {ms['monitor']:8.2f} ms  "
          f"({ms['monitor'] / ms['reward']:.3f}x the reward)")  # fmt: skip
    print(f"  the gold check (16 rollouts):        {gold_own:8.2f} ms  "
          f"({gold_own / ms['reward']:.3f}x the reward)")  # fmt: skip
    print(f"  a probe step (8 groups' best):       {probes_own:8.2f} ms  "
          f"({probes_own / ms['reward']:.3f}x the reward)")  # fmt: skip
    share = ms["monitor"] / ms["reward"]
    print(f"target: the monitor under 5% of the reward's time: {100 * share:.2f}% "
          f"({'met' if share < 0.05 else 'NOT met'})")  # fmt: skip


if __name__ == "__main__":
    main()
