"""``reward_model`` against a hand-written scoring loop, on the same model, in the same run.

Rollouts of mixed lengths (``--short`` and ``--long`` tokens, interleaved at random: a GRPO
step's completions, some stopping early, some running long) are scored by:

1. the loop a user writes by hand: tokenize, batches of ``--loop-batch`` in input order,
   padded on the right to each batch's longest, one forward each, ``logits[:, 0]``;
2. referee's ``reward_model`` (``referee.score``): the same inputs, sorted by length into
   batches under a token budget.

Both see the same text and the same weights, so they must give the same values (checked:
the largest difference is printed; 1e-5 in float32). Printed: rollouts/s of each and their
ratio (target: referee at least 1.5x the loop), best of ``--repeat`` runs taken in turns,
after a warm-up run of each that loads the model.

The model is random weights in a given shape (`referee.models.testing.SIZES`): ``--size
tiny`` (CPU, seconds) or ``--size 0.5b`` (Qwen2-0.5B's shape, for a GPU: ``--size 0.5b
--device cuda --dtype bfloat16``).

Usage: python benchmarks/bench_reward_model.py [--rollouts 256] [--size tiny] [--device cpu]
(needs ``pip install "referee[rm]"``)
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import transformers

import referee
from referee.models.testing import tiny_model, words
from referee.rewards import RewardModel

SEED = 0


def rollouts(count: int, short: int, long: int, vocab: int) -> list[referee.Rollout]:
    """Half `short`-token and half `long`-token completions, shuffled, after a 16-word prompt
    (one word is one token of the tiny tokenizer)."""
    rng = random.Random(SEED)
    pool = words(vocab)
    lengths = [short] * (count - count // 2) + [long] * (count // 2)
    rng.shuffle(lengths)
    out = []
    for i, n in enumerate(lengths):
        prompt = " ".join(rng.choice(pool) for _ in range(16)) + " "
        completion = " ".join(rng.choice(pool) for _ in range(n - 16 if n > 16 else 1))
        out.append(referee.Rollout(id=str(i), prompt=prompt, completion=completion))
    return out


def hand_loop(
    path: Path, device: str, dtype: str, batch: int
) -> Callable[[list[str]], list[float]]:
    """The loop written by hand: fixed-size batches in input order."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        path, dtype=getattr(torch, dtype)
    )
    model.eval().to(device)

    def score(texts: list[str]) -> list[float]:
        out: list[float] = []
        for start in range(0, len(texts), batch):
            inputs = tokenizer(
                text=texts[start : start + batch],
                return_tensors="pt",
                padding=True,
                padding_side="right",
                add_special_tokens=False,
            )
            inputs = {k: v.to(device) for k, v in inputs.items()}
            with torch.inference_mode():
                out.extend(model(**inputs).logits[:, 0].float().tolist())
        return out

    return score


def timed(fns: list[Callable[[], Any]], repeat: int) -> list[tuple[float, Any]]:
    """The best wall time of `repeat` calls of each of `fns`, and its last result. The calls
    take turns, so a change in the machine's load falls on both alike."""
    best: list[float] = [float("inf")] * len(fns)
    results: list[Any] = [None] * len(fns)
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            start = time.perf_counter()
            results[k] = fn()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            best[k] = min(best[k], time.perf_counter() - start)
    return list(zip(best, results, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rollouts", type=int, default=256)
    parser.add_argument("--short", type=int, default=16, help="tokens of a short rollout")
    parser.add_argument("--long", type=int, default=512, help="tokens of a long rollout")
    parser.add_argument("--size", default="tiny", choices=["tiny", "0.5b"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--loop-batch", type=int, default=32, help="the hand loop's batch size")
    parser.add_argument("--batch-tokens", type=int, default=16384, help="referee's budget")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--model", help="an existing model directory (default: build one)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.model) if args.model else Path(tmp) / "rm"
        if not args.model:
            tiny_model(path, size=args.size, max_position=max(2048, args.long + 64), seed=SEED)
        from referee.models.testing import SIZES

        vocab = SIZES[args.size]["vocab"]
        data = rollouts(args.rollouts, args.short, args.long, vocab)
        texts = [str(r.prompt) + str(r.completion) for r in data]

        loop = hand_loop(path, args.device, args.dtype, args.loop_batch)
        reward = RewardModel(model=str(path), device=args.device, dtype=args.dtype,
                             batch_tokens=args.batch_tokens)  # fmt: skip
        reward.load()
        loop(texts[: args.loop_batch])  # warm-up: first-call costs out of the timing
        referee.score(reward, data[: args.loop_batch])

        (loop_s, loop_values), (referee_s, scores) = timed(
            [lambda: loop(texts), lambda: referee.score(reward, data)], args.repeat
        )

    failed = [s for s in scores if s.value is None]
    if failed:
        raise SystemExit(f"{len(failed)} rollouts failed: {failed[0].failure}")
    diff = max(abs(s.value - v) for s, v in zip(scores, loop_values, strict=True))
    half = args.rollouts // 2
    tokens = (args.rollouts - half) * args.short + half * args.long
    threads = torch.get_num_threads()
    print(f"model {args.size} on {args.device} ({args.dtype}), torch threads {threads}, "
          f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    print(f"{args.rollouts} rollouts: half {args.short} tokens, half {args.long} "
          f"(~{tokens:,} tokens), best of {args.repeat}")  # fmt: skip
    print(f"  hand loop (batches of {args.loop_batch}, input order): "
          f"{args.rollouts / loop_s:9.1f} rollouts/s  ({loop_s:.3f}s)")  # fmt: skip
    print(f"  referee reward_model (sorted, {args.batch_tokens} tokens a batch): "
          f"{args.rollouts / referee_s:9.1f} rollouts/s  ({referee_s:.3f}s)")  # fmt: skip
    got = [s.value for s in scores]
    print(f"  values from {min(got):.4g} to {max(got):.4g} ({len(set(got))} distinct)")
    ratio = loop_s / referee_s
    print(f"  ratio: {ratio:.2f}x the loop (target >= 1.5x)  largest difference: {diff:.2e}")
    tolerance = 1e-5 if args.dtype == "float32" else 5e-2
    if diff > tolerance:
        raise SystemExit(f"the values differ by {diff:.2e} (> {tolerance:g})")


if __name__ == "__main__":
    main()
