"""TRL GRPO step time with referee's adapter against an equivalent hand-written reward, same run.

1. Training: a real `GRPOTrainer` on the CPU (a tiny Qwen2 built from a config, a character
   tokenizer built in-process) runs the same steps twice per round, once rewarded by
   `referee.backends.trl.reward_funcs(extraction spec)` and once by a hand-written TRL reward
   function doing the same checks (json.loads, one compiled jsonschema validator, the field
   comparisons inline). Same seed, same data; the sides alternate, best of N rounds each.
   Target: referee's training time at most 1.05x the hand-written one's.
2. The reward call alone, as TRL makes it (prompts, completions, dataset columns), on a batch
   of realistic extraction completions: the per-batch cost of building rollouts and scoring,
   against the hand-written function on the same batch (values checked equal).

The random tiny model writes no valid JSON, so in (1) both rewards fail fast at json.loads and
the ratio shows what the adapter adds to a step; (2) shows the full checks.

Usage: python benchmarks/bench_trl_overhead.py [--steps 20] [--rounds 5] [--batch 64]
"""

from __future__ import annotations

import argparse
import gc
import logging
import random
import sys
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_deterministic import SPEC, baseline_pairs, extraction_rollouts  # noqa: E402
from referee.backends.trl import reward_funcs  # noqa: E402
from tests.support import tiny  # noqa: E402


def handwritten(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
    """The extraction spec, by hand, as a TRL reward function."""
    return baseline_pairs(list(zip(completions, kwargs["reference"], strict=True)))


def dataset(n: int) -> Any:
    from datasets import Dataset

    rows = extraction_rollouts(n, seed=7)
    return Dataset.from_list(
        [{"prompt": f"Extract the funding round as JSON ({r.id}):", "reference": r.reference}
         for r in rows]
    )  # fmt: skip


def train(funcs: list[Any], steps: int, out: Path) -> float:
    """Seconds for `steps` GRPO steps with these reward functions."""
    import torch
    from trl import GRPOConfig, GRPOTrainer

    torch.manual_seed(0)
    tok = tiny.tokenizer()
    args = GRPOConfig(
        output_dir=str(out),
        per_device_train_batch_size=16,
        num_generations=8,
        max_completion_length=32,
        max_steps=steps,
        use_cpu=True,
        report_to=[],
        logging_steps=1000,
        save_strategy="no",
        seed=0,
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=tiny.model(tok), processing_class=tok, args=args, reward_funcs=funcs,
        train_dataset=dataset(steps * 2),
    )  # fmt: skip
    from transformers import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    gc.collect()
    start = time.perf_counter()
    trainer.train()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)

    import torch

    torch.set_num_threads(2)
    referee_funcs = reward_funcs(SPEC)
    out = Path("/tmp/referee-bench-trl")

    # 1. whole training steps, sides alternating
    train(list(referee_funcs), 2, out)  # warm-up: imports, first-call compilation
    train([handwritten], 2, out)
    times: dict[str, list[float]] = {"referee": [], "hand-written": []}
    for i in range(args.rounds):
        sides = [("referee", list(referee_funcs)), ("hand-written", [handwritten])]
        for name, funcs in sides if i % 2 == 0 else sides[::-1]:
            times[name].append(train(funcs, args.steps, out))
    best = {k: min(v) for k, v in times.items()}
    print(f"GRPO on CPU, tiny Qwen2, {args.steps} steps x 16 completions, best of {args.rounds}:")
    for name, value in best.items():
        print(f"  {name:13s} {value:7.3f} s  ({value / args.steps * 1000:.1f} ms/step)")
    print(f"  ratio referee / hand-written: {best['referee'] / best['hand-written']:.3f}x "
          "(target <= 1.05x)")  # fmt: skip

    # 2. the reward call alone, on realistic completions
    rows = extraction_rollouts(args.batch, seed=3)
    random.Random(0).shuffle(rows)
    prompts = [f"Extract ({r.id}):" for r in rows]
    completions = [r.completion_text for r in rows]
    references = [r.reference for r in rows]
    fn = referee_funcs[0]
    got = fn(prompts=prompts, completions=completions, completion_ids=None, reference=references)
    want = handwritten(prompts, completions, reference=references)
    assert all(abs(a - b) < 1e-12 for a, b in zip(got, want, strict=True)), "values differ"
    calls: dict[str, list[float]] = {"referee": [], "hand-written": []}
    for _ in range(200):
        start = time.perf_counter()
        fn(prompts=prompts, completions=list(completions), completion_ids=None,
           reference=references)  # fmt: skip
        calls["referee"].append(time.perf_counter() - start)
        start = time.perf_counter()
        handwritten(prompts, list(completions), reference=references)
        calls["hand-written"].append(time.perf_counter() - start)
    med = {k: sorted(v)[len(v) // 2] for k, v in calls.items()}
    print(f"one reward call, batch of {args.batch} extraction completions (median of 200), "
          "same values:")  # fmt: skip
    for name, value in med.items():
        print(f"  {name:13s} {value * 1000:7.3f} ms")
    print(f"  ratio referee / hand-written: {med['referee'] / med['hand-written']:.2f}x")
    mean_step = best["referee"] / args.steps
    print(f"  referee's call is {100 * med['referee'] / mean_step:.2f}% of one CPU step here")


if __name__ == "__main__":
    main()
