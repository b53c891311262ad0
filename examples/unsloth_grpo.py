"""GRPO with Unsloth, rewarded by a referee spec: TRL's GRPOTrainer, patched by Unsloth.

    python examples/unsloth_grpo.py --model unsloth/Qwen2.5-0.5B-Instruct --steps 20

Unsloth patches TRL's trainers when it is imported (so import it before trl), and its
GRPOTrainer calls reward functions as TRL does: ``reward_func(prompts=..., completions=...,
completion_ids=..., **dataset_columns)``. referee's TRL functions go in unchanged and give what
``referee score --spec SPEC`` prints for the same completions. What to watch (checked against
unsloth 2026.10.9's source, ``unsloth/models/rl_replacements.py``):

- for vision-language batches (images present) Unsloth hands the reward functions the decoded
  text (``prompts_text``, ``completions_text``), not chat messages: referee then sees text
  rollouts, and groups by the prompt text;
- that Unsloth release pins ``trl<=1.15``: install the trl it asks for (referee's trl extra
  takes any 1.x from 1.10);
- Unsloth needs a GPU; referee's tests cannot run it, and run this file's reward through TRL.

Needs: pip install unsloth 'referee[trl]' on a machine with a GPU.
"""

# ruff: noqa: I001  (unsloth is imported before trl on purpose)
from __future__ import annotations

import argparse
import json
from importlib import resources

from unsloth import FastLanguageModel  # before trl: Unsloth patches TRL's trainers on import

from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from referee.backends.trl import reward_funcs

DEMO = resources.files("referee") / "data" / "demo"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="unsloth/Qwen2.5-0.5B-Instruct")
    parser.add_argument("--spec", default=str(DEMO / "extraction.yaml"))
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()

    rows: dict[str, dict[str, object]] = {}
    for line in (DEMO / "extraction.jsonl").read_text().splitlines():
        row = json.loads(line)
        rows.setdefault(json.dumps(row["prompt"]), {"prompt": row["prompt"],
                                                    "reference": row["reference"]})  # fmt: skip
    dataset = Dataset.from_list(list(rows.values()))

    model, tokenizer = FastLanguageModel.from_pretrained(
        model_name=args.model, max_seq_length=1024, load_in_4bit=True
    )
    model = FastLanguageModel.get_peft_model(model, r=16, lora_alpha=16)

    funcs = reward_funcs(args.spec)  # reference from the dataset's "reference" column
    config = GRPOConfig(
        output_dir="outputs/unsloth-referee",
        max_steps=args.steps,
        num_generations=8,
        per_device_train_batch_size=8,
        max_completion_length=256,
        learning_rate=5e-6,
        logging_steps=1,
        reward_weights=funcs.weights,
    )
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=funcs,
                          args=config, train_dataset=dataset)  # fmt: skip
    trainer.train()


if __name__ == "__main__":
    main()
