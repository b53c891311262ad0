"""verl's reward loop: `RefereeRewardLoopManager`, and the `GroupCollector` where the members
of a group meet (package docstring)."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Mapping
from typing import Any

from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

from referee.backends.verl.batch import item_rollout, options_of
from referee.backends.verl.function import (
    DEFAULT_FAILURE_VALUE,
    bridge_for,
    result_dict,
    reward_for,
)
from referee.reward import needs_groups
from referee.rollout import Rollout
from referee.scores import Score

__all__ = ["DEFAULT_GROUP_TIMEOUT", "GroupCollector", "RefereeRewardLoopManager"]

logger = logging.getLogger("referee.verl")

DEFAULT_GROUP_TIMEOUT = 300.0


class GroupCollector:
    """Where the members of a group meet before a group reward scores them together.

    Runs as a named async Ray actor shared by every reward-loop worker (or in-process without
    Ray). A group is scored when `expected` members have arrived, or `timeout` seconds after
    its first member with whatever arrived. A member that arrives after its group was scored
    (verl pads a batch with copies of its first samples) gets the score of the identical
    member, or is scored in a new round if none is identical.
    """

    def __init__(self, spec: str | Mapping[str, Any], timeout: float) -> None:
        self.reward = reward_for(spec, per_sample=False)
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
            scores = await bridge_for(self.reward).score_async(round_.members)
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
        options = options_of(config)
        self.reward = reward_for(options.get("spec"), per_sample=False)
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
        rollout, _, _ = await self.loop.run_in_executor(None, item_rollout, item, self.tokenizer)
        if self.grouped:
            if self._collector is None:
                self._collector = _collector(self.spec, self.group_timeout)
            expected = self.val_n if data.meta_info.get("validate") else self.n
            score = Score.from_dict(await self._collector.submit(rollout.model_dump(), expected))
        else:
            [score] = await bridge_for(self.reward).score_async([rollout])
        result = result_dict(self.reward, score, self.failure_value)
        logger.debug("referee scored %s in %.3f s", rollout.id, time.monotonic() - started)
        return {"reward_score": result["score"], "reward_extra_info": result}
