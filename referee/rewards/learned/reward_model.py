"""``reward_model``: a learned sequence-classification reward model scores prompt + completion.

In-process, a Hugging Face ``AutoModelForSequenceClassification`` with one label (a local
directory or a hub id), loaded once per process and shared by every reward naming it; or
served (``api_base``: vLLM's pooling or classification API, or OpenRLHF's remote RM; see
`referee.rewards.learned._served`). Either way it reads the rollout as TRL's GRPOTrainer feeds a
reward model (`referee.models.inputs`): the same text, tokens and value, to 1e-5 in float32.

The raw score is the model's logit for the sequence. The value is, by ``normalize``:

- ``none``: the raw score;
- ``sigmoid``: ``1 / (1 + exp(-raw))``, in (0, 1), for combining with rewards in [0, 1];
- ``group_z``: the raw score's z-score within its GRPO group, ``(raw - mean) / std`` over the
  group's members that got a score (population std); 0.0 for each when they all score the
  same or the group has one. It compares the attempts at one prompt, so it is a group reward
  (``referee.needs_groups`` is true, and trainers give it whole groups). Under a gate, the
  group is the members that passed it.

The raw score is always kept as the ``raw`` component (``rm.raw`` inside a combination named
``rm``), so ``referee report`` shows its distribution and its correlation with length
whatever the normalisation.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

from referee.models.forward import Reader, sequence_reader
from referee.models.inputs import prompt_text, reward_text
from referee.models.loading import Loaded, ModelLoadError
from referee.registry import register
from referee.reward import coerce_result, failure_from_exception, group_indices
from referee.rewards.learned._base import LearnedReward, Output
from referee.rewards.learned._served import Protocol, Served
from referee.rollout import Rollout
from referee.scores import Score

__all__ = ["GroupRewardModel", "Normalize", "RewardModel"]

Normalize = Literal["none", "sigmoid", "group_z"]
"""How the raw score becomes the value (see the module docstring)."""


@register("reward_model")
@dataclass(kw_only=True)
class RewardModel(LearnedReward):
    """A sequence-classification reward model scores the prompt and completion together.

    In-process, a Hugging Face ``AutoModelForSequenceClassification`` with one label (a local
    directory or a hub id), loaded once per process and shared by every reward naming it; or
    served (`api_base`: vLLM's pooling or classification API, or OpenRLHF's remote RM). Either
    way it reads the rollout as TRL's GRPOTrainer feeds a reward model: the same text, tokens
    and value. The raw score is the model's logit for the sequence, always kept as the
    ``raw`` component (``rm.raw`` inside a combination named ``rm``), whatever `normalize`
    makes the value. A model that cannot be loaded, or has more than one label, fails every
    rollout of the batch (``error``); a request that fails after its retries, or a batch past
    its deadline, fails the rollouts it leaves without a value.

    Attributes:
        normalize: How the raw score becomes the value: ``none`` (the raw score, unbounded),
            ``sigmoid`` (``1 / (1 + exp(-raw))``, in (0, 1), for combining with rewards in
            [0, 1]) or ``group_z`` (the raw score's z-score within its GRPO group,
            ``(raw - mean) / std`` over the members that got a score; 0.0 for each when they
            all score the same or the group has one). With ``group_z`` it is a group reward
            (trainers give it whole groups; under a gate, the group is the members that
            passed it), built as a `GroupRewardModel`.
        protocol: Served: how the server is asked. ``vllm_pooling`` (``vllm serve MODEL
            --runner pooling``: ``POST /pooling``), ``vllm_classify`` (``POST /classify``)
            or ``openrlhf`` (OpenRLHF's ``serve_rm`` or any ``--remote_rm_url`` server:
            `api_base` is then the full URL, e.g. ``http://host:5000/get_reward``, and the
            reference goes as its label). An `api_base` ending in ``/v1`` has it dropped
            for vLLM, which serves these at its root.

    Example:
        ```yaml
        type: reward_model
        model: Skywork/Skywork-Reward-V2-Llama-3.1-8B
        api_base: http://127.0.0.1:8000/v1
        protocol: vllm_pooling
        normalize: sigmoid
        batch_size: 16
        ```

    Scores:
        ```yaml
        needs: [model]
        rollouts:
          - prompt: Write a haiku about autumn.
            completion: Red leaves drift and fall / the cold river carries them / the year lets go.
            model: 2.0
            value: 0.8807970779778823
          - prompt: Write a haiku about autumn.
            completion: Autumn is a season. It comes after summer.
            model: -1.5
            value: 0.18242552380635632
        ```
    """

    normalize: Normalize = "none"
    protocol: Protocol = "vllm_pooling"
    name: str = "reward_model"

    head = "sequence"

    def __new__(cls, *args: Any, **kwargs: Any) -> RewardModel:
        if cls is RewardModel and kwargs.get("normalize") == "group_z":
            # Deprecated: a constructor that returns another class. A spec's
            # `normalize: group_z` still builds the group reward (`_grouped`).
            warnings.warn(
                "RewardModel(normalize='group_z') is deprecated: build GroupRewardModel(...) "
                "(what it returned); it will raise",
                DeprecationWarning,
                stacklevel=2,
            )
            cls = GroupRewardModel
        return super().__new__(cls)

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[Any], handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        # A spec's reward is built by pydantic, which makes the instance without __init__'s
        # arguments: `normalize: group_z` is turned into the group reward after validation.
        schema = handler(source)
        if cls is not RewardModel:
            return schema
        return core_schema.no_info_after_validator_function(_grouped, schema)

    def _render(self, rollout: Rollout, tokenizer: Any) -> tuple[str | None, Any]:
        text = reward_text(rollout, tokenizer, self.template)
        if self.api_base is not None and self.protocol == "openrlhf":
            return text, prompt_text(rollout, tokenizer, self.template)  # OpenRLHF's `prompts`
        return text, None

    def _reader(self, loaded: Loaded) -> Reader[Any]:
        if loaded.labels != 1:
            raise ModelLoadError(
                f"reward_model reads one score per sequence, and {loaded.spec.path!r} has "
                f"{loaded.labels} labels: give a single-label reward model"
            )
        return sequence_reader

    async def _ask(self, served: Served, texts: list[str], rollouts: list[Rollout],
                   extras: list[Any], out: list[Any], at: list[int]) -> None:  # fmt: skip
        prompts = [p if isinstance(p, str) else "" for p in extras]
        await served.scores(texts, prompts, [_label(r) for r in rollouts], out, at)

    def _one(self, output: Output | Exception) -> Score:
        if isinstance(output, Exception):
            return failure_from_exception(output, self.name)
        raw = float(output.value)
        if self.normalize == "sigmoid":
            value = _sigmoid(raw) if math.isfinite(raw) else raw
        else:
            value = raw
        reason = f"raw score {raw:.4g}" + _cut_note(output.cut)
        return coerce_result(Score(value=value, components={"raw": raw}, reason=reason), self.name)


@dataclass(kw_only=True)
class GroupRewardModel(RewardModel):
    """A `RewardModel` with ``normalize: group_z``: raw scores z-scored within each group."""

    normalize: Normalize = "group_z"

    def __post_init__(self) -> None:
        if self.normalize != "group_z":
            raise ValueError("GroupRewardModel normalises with group_z; use RewardModel")
        super().__post_init__()

    async def score(self, rollout: Rollout) -> Score:
        """A group of one: its z-score is 0.0 (the raw score is in the components)."""
        return (await self.score_group([rollout]))[0]

    async def score_group(self, rollouts: Sequence[Rollout]) -> list[Score]:
        """Score `rollouts` as one group, whatever their ``group`` says."""
        items = list(rollouts)
        if not items:
            return []
        raw = RewardModel._finish(self, await self._outputs(items), items)
        return _z_scores(raw, [list(range(len(raw)))], self.name)

    def _finish(
        self, outputs: Sequence[Output | Exception], rollouts: Sequence[Rollout]
    ) -> list[Score]:
        raw = super()._finish(outputs, rollouts)
        return _z_scores(raw, group_indices(rollouts), self.name)


def _grouped(reward: RewardModel) -> RewardModel:
    """`reward` as a `GroupRewardModel` where it normalises with group_z."""
    if reward.normalize != "group_z" or isinstance(reward, GroupRewardModel):
        return reward
    return GroupRewardModel(**{f.name: getattr(reward, f.name) for f in fields(reward) if f.init})


def _z_scores(raw: list[Score], groups: list[list[int]], name: str) -> list[Score]:
    out = list(raw)
    for members in groups:
        scored = [i for i in members if raw[i].value is not None]
        values = [float(raw[i].value) for i in scored]  # type: ignore[arg-type]
        mean = sum(values) / len(values) if values else 0.0
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) if values else 0.0
        for i, v in zip(scored, values, strict=True):
            z = (v - mean) / std if std > 1e-8 else 0.0
            note = f"z {z:+.3f} within a group of {len(scored)} scored"
            out[i] = Score(value=z, components=raw[i].components, reason=f"{raw[i].reason}; {note}")
    return out


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _cut_note(cut: int) -> str:
    return f"; its input was cut by {cut} tokens on the left (over max_length)" if cut else ""


def _label(rollout: Rollout) -> str:
    """OpenRLHF's label: the reference, as text (JSON for a structured one)."""
    reference = rollout.reference
    if reference is None:
        return ""
    return reference if isinstance(reference, str) else json.dumps(reference, ensure_ascii=False)
