"""`referee.models.loading`: a model path checked when the spec loads, a checkpoint without the
head it needs refused naming why, and one model per process shared by every reward that names
it. Through the ``reward_model`` reward, as users reach it. CPU only."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

import referee
from referee import Rollout, SpecError
from referee.models.testing import tiny_model
from referee.rewards import RewardModel
from tests.support.extras import needs

pytestmark = needs("torch", "transformers", reason="the reward model's libraries are not installed")


@pytest.fixture(scope="module")
def rm_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_model(tmp_path_factory.mktemp("rm") / "model")


def reward(path: Path | str, **options: Any) -> referee.Reward:
    return referee.load({"type": "reward_model", "model": str(path), **options})


def test_a_model_path_that_does_not_exist_fails_at_spec_time_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(SpecError, match=r"no-such-model.*does not exist"):
        referee.load({"type": "reward_model", "model": str(missing)})
    with pytest.raises(ValueError, match="no-such-model"):
        RewardModel(model=str(missing))
    (tmp_path / "empty").mkdir()
    with pytest.raises(SpecError, match=r"has no config\.json"):
        referee.load({"type": "reward_model", "model": str(tmp_path / "empty")})
    with pytest.raises(SpecError, match="needs model"):
        referee.load({"type": "reward_model"})


def test_a_hub_id_that_cannot_be_loaded_fails_every_rollout_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    constants = pytest.importorskip("huggingface_hub.constants")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # no network: fail at once
    [score] = referee.score(reward("referee-test/not-a-model"), [Rollout(completion="w1")])
    assert score.failure is not None and "referee-test/not-a-model" in score.failure.message


def test_a_checkpoint_without_a_reward_head_is_refused(tmp_path: Path) -> None:
    import transformers

    config = transformers.LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32,
                                      num_hidden_layers=1, num_attention_heads=2)  # fmt: skip
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path / "lm")
    tiny = tiny_model(tmp_path / "tok")  # borrow its tokenizer files
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        (tmp_path / "lm" / name).write_bytes((tiny / name).read_bytes())
    [score] = referee.score(reward(tmp_path / "lm"), [Rollout(completion="w1")])
    assert score.failure is not None and "no trained sequence-classification head" in (
        score.failure.message
    )
    two_labels = tiny_model(tmp_path / "two", labels=2)
    [score] = referee.score(reward(two_labels), [Rollout(completion="w1")])
    assert score.failure is not None and "has 2 labels" in score.failure.message


def test_one_model_per_process_shared_by_every_reward_that_names_it(rm_path: Path) -> None:
    import torch

    first, second = RewardModel(model=str(rm_path)), RewardModel(model=str(rm_path), name="b")
    loaded = first.load()
    assert second.load() is loaded
    clone = pickle.loads(pickle.dumps(first))
    assert clone.load() is loaded
    assert loaded.spec.device == "cpu" and loaded.spec.dtype == "float32"  # auto, on CPU
    assert next(loaded.model.parameters()).dtype == torch.float32
