"""verl's side of a test: real `DataProto` batches as its rollout gives them, and the config of
its reward loop. verl and torch are imported when a batch is made, not with this module
(`tests.support.extras.need`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tests.support import tiny

if TYPE_CHECKING:
    from verl import DataProto


def make_batch(
    tok: Any,
    items: list[tuple[str, str, Any]],
    uids: list[str] | None = None,
    prompt_len: int = 24,
    response_len: int = 48,
) -> DataProto:
    """A verl batch: left-padded prompts, right-padded responses, as verl's rollout gives."""
    import torch
    from verl import DataProto

    pad = tok.pad_token_id
    prompts, responses, masks = [], [], []
    for prompt, response, _ in items:
        p = tok(prompt, add_special_tokens=False).input_ids[-prompt_len:]
        r = tok(response, add_special_tokens=False).input_ids[:response_len]
        prompts.append([pad] * (prompt_len - len(p)) + p)
        responses.append(r + [pad] * (response_len - len(r)))
        masks.append([0] * (prompt_len - len(p)) + [1] * len(p) + [1] * len(r)
                     + [0] * (response_len - len(r)))  # fmt: skip
    prompts_t = torch.tensor(prompts)
    responses_t = torch.tensor(responses)
    tensors = {
        "prompts": prompts_t,
        "responses": responses_t,
        "input_ids": torch.cat([prompts_t, responses_t], dim=1),
        "attention_mask": torch.tensor(masks),
    }
    non_tensors: dict[str, Any] = {
        "data_source": np.array(["extraction"] * len(items), dtype=object),
        "reward_model": np.array(
            [{"ground_truth": gt, "style": "rule"} for *_, gt in items], dtype=object
        ),
        # The prompt in extra_info too, as examples/verl/prepare.py writes it: compute_score
        # sees no prompt otherwise.
        "extra_info": np.array(
            [{"index": i, "prompt": prompt} for i, (prompt, *_) in enumerate(items)], dtype=object
        ),
    }
    if uids is not None:
        non_tensors["uid"] = np.array(uids, dtype=object)
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors)


def last_token_positions(batch: DataProto) -> list[int]:
    prompt_len = batch.batch["prompts"].shape[1]
    return (batch.batch["attention_mask"][:, prompt_len:].sum(dim=1) - 1).tolist()


def loop_config(tmp_path: Path, manager: dict[str, Any], reward_kwargs: dict[str, Any],
                n: int, workers: int) -> Any:  # fmt: skip
    from omegaconf import OmegaConf

    tok_dir = tmp_path / "tok"
    tiny.tokenizer().save_pretrained(tok_dir)
    return OmegaConf.create({
        "actor_rollout_ref": {"model": {"path": str(tok_dir), "tokenizer_path": None},
                              "rollout": {"n": n, "val_kwargs": {"n": 1}}},
        "reward": {
            "num_workers": workers,
            "custom_reward_function": {"path": "pkg://referee.backends.verl",
                                       "name": "compute_score_async",
                                       "reward_kwargs": reward_kwargs},
            "reward_manager": {"source": "register", "name": "naive",
                               "module": {"path": None, "name": None}, **manager},
            "reward_model": {"enable": False, "enable_resource_pool": False},
            "sandbox_fusion": None,
        },
        "trainer": {"experiment_name": "test"},
    })  # fmt: skip
