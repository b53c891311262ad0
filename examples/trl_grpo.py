"""GRPO with TRL on the structured-extraction task, rewarded by a referee spec.

    python examples/trl_grpo.py --model Qwen/Qwen2.5-0.5B-Instruct --steps 20
    python examples/trl_grpo.py --model /path/to/model --spec my_spec.yaml --data my.jsonl

The data is a JSONL file of rows with ``prompt`` (text or chat messages) and ``reference``
(what the spec compares against); by default, the prompts and references of referee's bundled
extraction demo. The reward is exactly what ``referee score --spec SPEC`` prints for the same
completions; its components are logged as ``referee/<component>/mean``.

At the end the script prints the share of training-step time spent inside referee's reward
function (measured around every call), which should stay small for deterministic specs.
Needs: pip install 'referee[trl]' and a torch build for your hardware (a GPU for real models).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from importlib import resources
from pathlib import Path
from typing import Any

from referee.backends.trl import reward_funcs

DEMO = resources.files("referee") / "data" / "demo"


def load_rows(path: str | None) -> list[dict[str, Any]]:
    """Unique prompts with their references, from a JSONL file (default: the bundled demo)."""
    text = Path(path).read_text() if path else (DEMO / "extraction.jsonl").read_text()
    rows: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        if line.strip():
            row = json.loads(line)
            key = json.dumps(row["prompt"], sort_keys=True)
            rows.setdefault(key, {"prompt": row["prompt"], "reference": row.get("reference")})
    return list(rows.values())


class Timed:
    """Wraps a synchronous TRL reward function and adds up the seconds spent in it."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.seconds = 0.0
        self.__name__ = fn.__name__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start


class TimedAsync(Timed):
    """The same for an async reward function (judges): TRL awaits it."""

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        start = time.perf_counter()
        try:
            return await self.fn(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start


def timed(fn: Any) -> Timed:
    return TimedAsync(fn) if asyncio.iscoroutinefunction(type(fn).__call__) else Timed(fn)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="Model path or hub id.")
    parser.add_argument("--spec", default=None, help="Reward spec (default: the demo's).")
    parser.add_argument("--data", default=None, help="JSONL rows with prompt and reference.")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--num-generations", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=8, help="Completions per device.")
    parser.add_argument("--max-completion-length", type=int, default=256)
    parser.add_argument("--output-dir", default="outputs/trl-grpo-referee")
    parser.add_argument("--use-vllm", action="store_true", help="Generate with vLLM (colocate).")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    with resources.as_file(DEMO / "extraction.yaml") as demo_spec:
        funcs = reward_funcs(args.spec or str(demo_spec))
    timers = [timed(f) for f in funcs]
    config = GRPOConfig(
        output_dir=args.output_dir,
        max_steps=args.steps,
        per_device_train_batch_size=args.batch_size,
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        reward_weights=funcs.weights,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        bf16=torch.cuda.is_available(),
        use_cpu=not torch.cuda.is_available(),
        use_vllm=args.use_vllm,
        vllm_mode="colocate",
        seed=args.seed,
    )
    trainer = GRPOTrainer(
        model=args.model,
        args=config,
        reward_funcs=timers,
        train_dataset=Dataset.from_list(load_rows(args.data)),
    )
    start = time.perf_counter()
    trainer.train()
    total = time.perf_counter() - start
    in_referee = sum(t.seconds for t in timers)
    last = next(h for h in reversed(trainer.state.log_history) if "reward" in h)
    print(f"trained {args.steps} steps in {total:.1f} s; last mean reward {last['reward']:.3f}")
    print(
        f"time in referee's reward function: {in_referee:.2f} s, "
        f"{100 * in_referee / total:.2f}% of training time"
    )


if __name__ == "__main__":
    main()
