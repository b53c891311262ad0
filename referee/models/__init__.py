"""Learned models in-process: loaded once per process, fed rollouts as TRL feeds them, batched.

What the ``reward_model`` and ``process_reward_model`` rewards stand on, usable alone:

- `referee.models.loading`: the process-wide cache (one model per path, head, device and
  dtype; one thread per model that loads it and runs its forwards), device and dtype rules;
- `referee.models.inputs`: how a rollout becomes the text a reward model reads (TRL's
  GRPOTrainer's rule), and a process reward model's steps;
- `referee.models.batching`: inputs sorted by length into batches under a token budget;
- `referee.models.forward`: the length rule, and batched forwards read at the right token.

torch and transformers are imported on first use (``pip install "referee[rm]"``).
"""

from referee.models.batching import plan
from referee.models.forward import CHARS_PER_TOKEN, Encoded, Overflow, encode, length_limit
from referee.models.inputs import Template, messages_of, reward_text, split_steps, step_text
from referee.models.loading import (
    Dtype,
    Head,
    Loaded,
    ModelLoadError,
    ModelSpec,
    check_model_path,
    clear,
    load_tokenizer,
    resolve,
    shared,
)

__all__ = [
    "CHARS_PER_TOKEN",
    "Dtype",
    "Encoded",
    "Head",
    "Loaded",
    "ModelLoadError",
    "ModelSpec",
    "Overflow",
    "Template",
    "check_model_path",
    "clear",
    "encode",
    "length_limit",
    "load_tokenizer",
    "messages_of",
    "plan",
    "resolve",
    "reward_text",
    "shared",
    "split_steps",
    "step_text",
]
