"""referee rewards in verl: a `compute_score` function and reward managers.

The reward function (verl 0.9; the old top-level ``custom_reward_function.*`` keys are silently
ignored there, use the ``reward.`` ones)::

    reward.custom_reward_function.path=pkg://referee.backends.verl
    reward.custom_reward_function.name=compute_score_async     # or compute_score (sync)
    +reward.custom_reward_function.reward_kwargs={spec: /abs/path/spec.yaml}

Every sample gets a dict with the same keys: ``score``, ``referee_failed`` (1.0 when referee
could give no score), and for each top-level component of a combination ``referee/<component>``
and ``referee/<component>/skipped`` (1.0 where the component did not run because a gate, or a
failure, before it stopped the rollout; else 0.0). verl has no way to mask a sample, so a
rollout that gets no score is given ``failure_value`` (0.0 unless ``reward_kwargs`` says
otherwise) with ``referee_failed`` set; a component that ran and failed reads ``failure_value``
too. ``score`` is always a finite number.

A skipped component has no value, which is not a zero: it reads None, the value verl itself
gives a sample that lacks an extra-info key. verl keeps these keys as numpy arrays (never
tensors) and its validation metrics leave None out of their means, so ``referee/<component>``
averages over the rollouts where the component ran; NaN would turn those means into NaN. (A
key used as DAPO's ``filter_groups.metric`` must be a number on every sample: use ``score``.)

``compute_score`` sees one sample: its ``solution_str``, ``ground_truth`` (the reference; text
that is a JSON object or array is decoded, so store nested references as JSON strings, which
parquet keeps exactly),
``data_source`` and ``extra_info`` (metadata). The prompt reaches rewards that need it (judges)
from ``extra_info["prompt"]`` (or ``"question"``); put it there when preparing the parquet, or
use a referee reward manager, which decodes the prompt itself.

Group rewards (``group_rank``, pairwise judges) need every attempt at a prompt; use a reward
manager, which groups by verl's ``uid``:

- the reward loop (verl's current trainer): ``reward.reward_manager.source=importlib``,
  ``reward.reward_manager.name=RefereeRewardLoopManager``,
  ``reward.reward_manager.module.path=pkg://referee.backends.verl``, with the spec in
  ``+reward.reward_kwargs={spec: ...}``. Samples reach it one at a time, on several workers,
  so members of a group meet in a named Ray actor and are scored together once the group is
  complete (``actor_rollout_ref.rollout.n`` members, ``val_kwargs.n`` in validation), or after
  ``group_timeout`` seconds with whatever arrived. Identical attempts count as members (a
  group often has them); so do the copies verl pads a batch with when its size is not a
  multiple of ``reward.num_workers``, which can leave a group's last member to be scored on
  its own: keep the batch size a multiple of the worker count.
- verl's legacy batch managers: `RefereeRewardManager`, registered as ``referee``; it sees the
  whole batch, so groups are whole.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from referee.backends._common import decode_json_text, resolve
from referee.errors import MissingDependency, SpecError
from referee.reward import Reward, needs_groups, top_components
from referee.reward import score as score_rollouts
from referee.rollout import Rollout
from referee.score import Score

try:
    import torch
    import verl  # noqa: F401  (fails early, with the message below, where verl is missing)
    from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase
    from verl.workers.reward_manager.abstract import AbstractRewardManager
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependency("verl", "verl", "referee.backends.verl") from exc

__all__ = [
    "RefereeRewardLoopManager",
    "RefereeRewardManager",
    "compute_score",
    "compute_score_async",
    "result_keys",
    "rollout_from_verl",
]

logger = logging.getLogger("referee.verl")

DEFAULT_FAILURE_VALUE = 0.0
DEFAULT_GROUP_TIMEOUT = 300.0
PROMPT_KEYS = ("prompt", "question")

_loaded: dict[str, Reward] = {}


def _reward(spec: str | Path | Mapping[str, Any] | Reward | None, *, per_sample: bool) -> Reward:
    """The reward a spec describes, loaded once per process."""
    if spec is None:
        raise SpecError(
            "referee's verl entry point needs a spec: set "
            "+reward.custom_reward_function.reward_kwargs={spec: /abs/path/spec.yaml}"
        )
    source: str | dict[str, Any]
    if isinstance(spec, (str, Path)):
        source = str(Path(spec).expanduser().resolve())
        key = source
    elif isinstance(spec, Mapping):
        # An inline spec (Hydra hands a DictConfig) arrives with every sample: loaded once by
        # its content, so a judge keeps its client, cache and concurrency limit.
        source = _plain(spec)
        key = json.dumps(source, sort_keys=True, default=str)
    else:
        return _checked(resolve(spec), per_sample=per_sample)
    reward = _loaded.get(key)
    if reward is None:
        reward = _loaded[key] = resolve(source)
    return _checked(reward, per_sample=per_sample)


def _checked(reward: Reward, *, per_sample: bool) -> Reward:
    if per_sample and needs_groups(reward):
        raise SpecError(
            f"{reward.name}: this spec has a group reward, which compute_score (one sample at a "
            "time) cannot give; use the reward manager: reward.reward_manager.source=importlib "
            "reward.reward_manager.name=RefereeRewardLoopManager "
            "reward.reward_manager.module.path=pkg://referee.backends.verl"
        )
    return reward


def _plain(value: Any) -> Any:
    """numpy arrays and scalars (what parquet columns become) as plain Python values."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [_plain(v) for v in value]  # lists, tuples, omegaconf's ListConfig
    tolist = getattr(value, "tolist", None)
    if tolist is not None and type(value).__module__ == "numpy":
        return _plain(tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    return str(value)


def rollout_from_verl(
    data_source: Any,
    solution_str: str | list[Any],
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None,
    *,
    prompt: Any = None,
    group: str | None = None,
) -> Rollout:
    """The Rollout referee scores for one verl sample."""
    info = _plain(extra_info or {})
    if prompt is None:
        prompt = next((info[k] for k in PROMPT_KEYS if isinstance(info.get(k), (str, list))), "")
    metadata = {k: v for k, v in info.items() if v is not None}
    if data_source is not None:
        metadata["data_source"] = _plain(data_source)
    return Rollout(
        id=str(info.get("index", "")),
        prompt=_plain(prompt),
        completion=solution_str,
        reference=decode_json_text(_plain(ground_truth)),
        group=group,
        metadata=metadata,
    )


def _components(reward: Reward) -> list[str]:
    return [name for name, _ in top_components(reward) if name != reward.name]


def result_keys(reward: Reward) -> list[str]:
    """The keys of every sample's result dict, the same for every sample of a reward."""
    per_component = ((f"referee/{n}", f"referee/{n}/skipped") for n in _components(reward))
    return ["score", "referee_failed", *(key for pair in per_component for key in pair)]


def _total(score: Score, failure_value: float) -> float:
    """What verl optimises for a sample: its score, or `failure_value` where it has none."""
    return failure_value if score.value is None else score.value


def result_dict(reward: Reward, score: Score, failure_value: float) -> dict[str, float | None]:
    """A Score as verl's per-sample dict: fixed keys, finite numbers, None for a skipped
    component (see the module docstring)."""
    out: dict[str, float | None] = {
        "score": _total(score, failure_value),
        "referee_failed": 0.0 if score.value is not None else 1.0,
    }
    for name in _components(reward):
        value = score.components.get(name)
        skipped = name in score.skipped
        out[f"referee/{name}"] = None if skipped else failure_value if value is None else value
        out[f"referee/{name}/skipped"] = 1.0 if skipped else 0.0
    return out


def _sample(
    spec: str | Mapping[str, Any] | None, data_source: Any, solution_str: str,
    ground_truth: Any, extra_info: Mapping[str, Any] | None,
) -> tuple[Reward, Rollout]:  # fmt: skip
    """What both reward functions start from: the spec's reward and the sample's rollout."""
    reward = _reward(spec, per_sample=True)
    return reward, rollout_from_verl(data_source, solution_str, ground_truth, extra_info)


def compute_score(
    data_source: Any = None,
    solution_str: str = "",
    ground_truth: Any = None,
    extra_info: Mapping[str, Any] | None = None,
    spec: str | Mapping[str, Any] | None = None,
    failure_value: float = DEFAULT_FAILURE_VALUE,
    **_: Any,
) -> dict[str, float | None]:
    """verl's per-sample reward function, synchronous (legacy managers, or any verl).

    Extra keyword arguments verl adds (``reward_router_address`` and the like) are ignored.
    """
    reward, rollout = _sample(spec, data_source, solution_str, ground_truth, extra_info)
    [score] = score_rollouts(reward, [rollout])
    return result_dict(reward, score, failure_value)


async def compute_score_async(
    data_source: Any = None,
    solution_str: str = "",
    ground_truth: Any = None,
    extra_info: Mapping[str, Any] | None = None,
    spec: str | Mapping[str, Any] | None = None,
    failure_value: float = DEFAULT_FAILURE_VALUE,
    **_: Any,
) -> dict[str, float | None]:
    """`compute_score` for verl's reward loop, which awaits it: judges run concurrently."""
    reward, rollout = _sample(spec, data_source, solution_str, ground_truth, extra_info)
    return result_dict(reward, await reward.score(rollout), failure_value)


# --- decoding a DataProto item --------------------------------------------------------------


def _valid_ids(item: Any) -> tuple[Any, Any, int]:
    """An item's valid prompt ids, valid response ids, and the response's valid length."""
    prompt_ids = item.batch["prompts"]
    prompt_length = prompt_ids.shape[-1]
    mask = item.batch["attention_mask"]
    valid_prompt = int(mask[:prompt_length].sum())
    valid_response = int(mask[prompt_length:].sum())
    return (
        prompt_ids[prompt_length - valid_prompt :],
        item.batch["responses"][:valid_response],
        valid_response,
    )


_HERMES_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)


def _turn_spans(item: Any, length: int) -> list[tuple[int, int, bool]]:
    """Runs of the response's valid tokens: (start, end exclusive, generated by the model).

    verl's multi-turn rollouts mark the model's tokens with 1 in ``response_mask`` and the
    tool/environment tokens with 0; without a mask the whole response is one model turn.
    """
    mask = item.batch.get("response_mask", None)
    if mask is None:
        return [(0, length, True)]
    flags = [bool(v) for v in mask[:length].tolist()]
    spans: list[tuple[int, int, bool]] = []
    start = 0
    for i in range(1, length + 1):
        if i == length or flags[i] != flags[start]:
            spans.append((start, i, flags[start]))
            start = i
    return spans


def _assistant_message(text: str) -> dict[str, Any]:
    """An assistant turn decoded from tokens, its Hermes-style ``<tool_call>`` blocks (the
    format of verl's tool agent loop with Qwen-style models) read as tool calls."""
    calls = []
    for i, block in enumerate(_HERMES_CALL.findall(text)):
        try:
            call = json.loads(block)
        except ValueError:
            continue
        if isinstance(call, dict) and isinstance(call.get("name"), str):
            arguments = call.get("arguments", {})
            if not isinstance(arguments, (dict, str)):
                arguments = {}
            calls.append({"id": f"call_{i}", "name": call["name"], "arguments": arguments})
    content = _HERMES_CALL.sub("", text).strip() if calls else text
    return {"role": "assistant", "content": content, **({"tool_calls": calls} if calls else {})}


def _item_rollout(
    item: Any, tokenizer: Any, turns: bool = False
) -> tuple[Rollout, int, list[tuple[int, int, bool]]]:
    """The Rollout of one DataProto item (prompt decoded, or its raw chat), its response's
    valid length, and its turn spans. With `turns`, a multi-turn response becomes chat
    messages: the model's runs assistant turns, the others tool results."""
    prompt_ids, response_ids, length = _valid_ids(item)
    batch = item.non_tensor_batch
    raw = batch.get("raw_prompt")
    prompt = (
        _plain(raw) if raw is not None else tokenizer.decode(prompt_ids, skip_special_tokens=True)
    )
    spans = _turn_spans(item, length) if turns else [(0, length, True)]
    completion: Any
    if turns and len(spans) > 1:
        messages = []
        for start, end, generated in spans:
            text = tokenizer.decode(response_ids[start:end], skip_special_tokens=True)
            messages.append(_assistant_message(text) if generated
                            else {"role": "tool", "content": text})  # fmt: skip
        completion = messages
    else:
        completion = tokenizer.decode(response_ids, skip_special_tokens=True)
    uid = batch.get("uid")
    rollout = rollout_from_verl(
        batch.get("data_source"),
        completion,
        (batch.get("reward_model") or {}).get("ground_truth"),
        batch.get("extra_info"),
        prompt=prompt,
        group=None if uid is None else str(uid),
    )
    return rollout, length, spans


def _options(config: Any) -> dict[str, Any]:
    """The referee options in a verl config: ``reward.reward_kwargs``, else the reward
    function's ``reward_kwargs``."""
    reward_cfg = config.get("reward") or {}
    for source in (
        reward_cfg.get("reward_kwargs"),
        (reward_cfg.get("custom_reward_function") or {}).get("reward_kwargs"),
    ):
        if source and source.get("spec") is not None:
            return dict(source)
    return {}


# --- the legacy batch manager --------------------------------------------------------------


class RefereeRewardManager(AbstractRewardManager):
    """verl's legacy reward-manager interface: the whole batch at once, groups by ``uid``.

    Places each sample's score at its last valid response token. With ``per_turn=True`` a
    multi-turn response (``response_mask`` marking the model's tokens) is scored as a
    trajectory, and a reward's per-turn values (``Score.steps``, one per assistant turn) are
    placed each at the last token of its turn; a sample whose steps do not line up with its
    turns gets its total at the last token, as without ``per_turn``.
    """

    def __init__(
        self,
        tokenizer: Any,
        num_examine: int = 0,
        compute_score: Any = None,
        reward_fn_key: str = "data_source",
        spec: str | Mapping[str, Any] | None = None,
        failure_value: float = DEFAULT_FAILURE_VALUE,
        per_turn: bool = False,
        **_: Any,
    ) -> None:
        self.tokenizer = tokenizer
        self.reward = _reward(spec, per_sample=False)
        self.failure_value = failure_value
        self.per_turn = per_turn

    def __call__(self, data: Any, return_dict: bool = False) -> Any:
        rollouts, lengths, all_spans = [], [], []
        for i in range(len(data)):
            rollout, length, spans = _item_rollout(data[i], self.tokenizer, turns=self.per_turn)
            rollouts.append(rollout)
            lengths.append(length)
            all_spans.append(spans)
        scores = score_rollouts(self.reward, rollouts)
        reward_tensor = torch.zeros_like(data.batch["responses"], dtype=torch.float32)
        extra: dict[str, list[float | None]] = {k: [] for k in result_keys(self.reward)}
        for i, (score, length) in enumerate(zip(scores, lengths, strict=True)):
            result = result_dict(self.reward, score, self.failure_value)
            ends = [end - 1 for _, end, generated in all_spans[i] if generated]
            if self.per_turn and score.steps is not None and len(score.steps) == len(ends):
                for end, value in zip(ends, score.steps, strict=True):
                    reward_tensor[i, end] = value
            else:
                reward_tensor[i, length - 1] = _total(score, self.failure_value)
            for key, logged in result.items():
                extra[key].append(logged)
        if return_dict:
            return {"reward_tensor": reward_tensor, "reward_extra_info": extra}
        return reward_tensor


# --- the reward loop manager -------------------------------------------------------------


class GroupCollector:
    """Where the members of a group meet before a group reward scores them together.

    Runs as a named async Ray actor shared by every reward-loop worker (or in-process without
    Ray). A group is scored when `expected` members have arrived, or `timeout` seconds after
    its first member with whatever arrived. A member that arrives after its group was scored
    (verl pads a batch with copies of its first samples) gets the score of the identical
    member, or is scored in a new round if none is identical.
    """

    def __init__(self, spec: str | Mapping[str, Any], timeout: float) -> None:
        self.reward = _reward(spec, per_sample=False)
        self.timeout = timeout
        self.pending: dict[str, _Round] = {}  # per uid, the round still taking members
        self.closed: dict[str, _Round] = {}  # per uid, the last round scored (or scoring)

    async def submit(self, rollout: dict[str, Any], expected: int) -> dict[str, Any]:
        member = Rollout.model_validate(rollout)
        uid = member.group or ""
        key = _content_key(member)
        loop = asyncio.get_running_loop()
        if uid not in self.pending and uid in self.closed:
            closed = self.closed[uid]
            if key in closed.keys:
                return (await asyncio.shield(closed.result))[closed.keys.index(key)]
            expected = 1  # a straggler of a group scored without it: scored alone, now
        round_ = self.pending.get(uid)
        if round_ is None:
            round_ = self.pending[uid] = _Round(loop.create_future())
            round_.timer = loop.call_later(
                self.timeout, lambda: asyncio.ensure_future(self._close(uid, round_, expected))
            )
        index = len(round_.members)
        round_.members.append(member)
        round_.keys.append(key)
        if len(round_.members) >= expected:
            await self._close(uid, round_, expected)
        results = await asyncio.shield(round_.result)
        return results[index]

    async def _close(self, uid: str, round_: _Round, expected: int) -> None:
        if round_.closing:
            return
        round_.closing = True
        if round_.timer is not None:
            round_.timer.cancel()
        if self.pending.get(uid) is round_:
            del self.pending[uid]
        self.closed.pop(uid, None)
        self.closed[uid] = round_
        if len(self.closed) > 100_000:  # a long run: forget the oldest groups
            for old in list(self.closed)[:50_000]:
                del self.closed[old]
        if len(round_.members) < expected:
            logger.warning(
                "referee: group %s scored with %d of %d members after %.0f s",
                uid, len(round_.members), expected, self.timeout,
            )  # fmt: skip
        try:
            scores = await self.reward.score_batch(round_.members)
        except BaseException as exc:  # pragma: no cover - score_batch turns errors into failures
            round_.result.set_exception(exc)
            raise
        round_.result.set_result([s.to_dict() for s in scores])


class _Round:
    __slots__ = ("closing", "keys", "members", "result", "timer")

    def __init__(self, result: asyncio.Future[list[dict[str, Any]]]) -> None:
        self.members: list[Rollout] = []
        self.keys: list[str] = []
        self.result = result
        self.timer: asyncio.TimerHandle | None = None
        self.closing = False


def _content_key(rollout: Rollout) -> str:
    return hashlib.sha256(rollout.model_dump_json().encode()).hexdigest()


def _collector(spec: str | Mapping[str, Any], timeout: float) -> Any:
    """The group collector shared by this job's reward workers: a named Ray actor."""
    import ray

    if not ray.is_initialized():
        return GroupCollector(spec, timeout)  # one process: it is its own collector
    name = "referee-groups-" + hashlib.sha256(repr(spec).encode()).hexdigest()[:16]
    actor = (
        ray.remote(GroupCollector)
        .options(name=name, get_if_exists=True, max_concurrency=10_000, num_cpus=0)
        .remote(spec, timeout)
    )
    return _RayCollector(actor)


class _RayCollector:
    def __init__(self, actor: Any) -> None:
        self.actor = actor

    async def submit(self, rollout: dict[str, Any], expected: int) -> dict[str, Any]:
        result: dict[str, Any] = await self.actor.submit.remote(rollout, expected)
        return result


class RefereeRewardLoopManager(RewardManagerBase):
    """A reward manager for verl's reward loop, for any spec, group rewards included.

    Options come from ``reward.reward_kwargs`` (or the reward function's ``reward_kwargs``):
    ``spec`` (required), ``failure_value`` and ``group_timeout``.
    """

    def __init__(
        self,
        config: Any,
        tokenizer: Any,
        compute_score: Any = None,
        reward_router_address: str | None = None,
        reward_model_tokenizer: Any = None,
    ) -> None:
        super().__init__(config, tokenizer, compute_score)
        options = _options(config)
        self.reward = _reward(options.get("spec"), per_sample=False)
        self.spec: str | Mapping[str, Any] = options["spec"]
        self.failure_value = float(options.get("failure_value", DEFAULT_FAILURE_VALUE))
        self.group_timeout = float(options.get("group_timeout", DEFAULT_GROUP_TIMEOUT))
        self.grouped = needs_groups(self.reward)
        rollout_cfg = config.get("actor_rollout_ref", {}).get("rollout", {})
        self.n = int(rollout_cfg.get("n", 1) or 1)
        self.val_n = int((rollout_cfg.get("val_kwargs") or {}).get("n", 1) or 1)
        self._collector: Any = None

    async def run_single(self, data: Any) -> dict[str, Any]:
        item = data[-1:][0]  # for multi-sequence outputs, the last sequence is scored
        started = time.monotonic()
        rollout, _, _ = await self.loop.run_in_executor(None, _item_rollout, item, self.tokenizer)
        if self.grouped:
            if self._collector is None:
                self._collector = _collector(self.spec, self.group_timeout)
            expected = self.val_n if data.meta_info.get("validate") else self.n
            score = Score.from_dict(await self._collector.submit(rollout.model_dump(), expected))
        else:
            score = await self.reward.score(rollout)
        result = result_dict(self.reward, score, self.failure_value)
        logger.debug("referee scored %s in %.3f s", rollout.id, time.monotonic() - started)
        return {"reward_score": result["score"], "reward_extra_info": result}


def _register() -> None:
    """Make the managers reachable by name (``reward_manager.name=referee``) where verl's
    registries allow it."""
    from verl.experimental.reward_loop.reward_manager import registry as loop_registry
    from verl.workers.reward_manager import registry as legacy_registry

    loop_registry.REWARD_MANAGER.setdefault("referee", RefereeRewardLoopManager)
    legacy_registry.REWARD_MANAGER_REGISTRY.setdefault("referee", RefereeRewardManager)


_register()
