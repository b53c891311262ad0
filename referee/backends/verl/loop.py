"""verl's reward loop: `RefereeRewardLoopManager`, and the `GroupCollector` where the members
of a group meet (package docstring)."""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Mapping
from typing import Any

from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

from referee.backends.cohort import DEFAULT_GROUP_TIMEOUT, Cohorts
from referee.backends.contract import Door
from referee.backends.verl.batch import item_rollout, options_of
from referee.backends.verl.function import (
    DEFAULT_FAILURE_VALUE,
    bridge_for,
    manager_door,
    result_dict,
    reward_for,
)
from referee.errors import SpecError
from referee.reward import needs_groups
from referee.rollout import Rollout
from referee.scores import Score

__all__ = ["DEFAULT_GROUP_TIMEOUT", "GroupCollector", "RefereeRewardLoopManager"]

logger = logging.getLogger("referee.verl")


class GroupCollector:
    """Where the members of a group meet before a group reward scores them together.

    Runs as a named async Ray actor shared by every reward-loop worker (or in-process without
    Ray): `referee.backends.cohort.Cohorts` (how members meet, are scored, and what a member
    that comes late gets) on this spec's reward, speaking dicts, which cross Ray.
    """

    def __init__(self, spec: str | Mapping[str, Any], timeout: float) -> None:
        self.reward = reward_for(spec, door=_ANY)  # the manager that sends them has checked
        self.timeout = timeout
        self.cohorts = Cohorts(bridge_for(self.reward).score_async, timeout)

    async def submit(self, rollout: dict[str, Any], expected: int) -> dict[str, Any]:
        score = await self.cohorts.submit(Rollout.model_validate(rollout), expected)
        return score.to_dict()


_ANY = Door("the group collector", frozenset({"group", "messages", "tokens"}))


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
    ``spec`` (required), ``failure_value``, ``group_timeout``, and ``per_turn``: read a
    multi-turn response as a trajectory (the model's turns and the tools' apart, from
    ``response_mask``; a single turn that calls a tool too), for trajectory rewards. The reward
    loop takes one score per sample, placed at its last token: a reward's per-turn values
    (``Score.steps``) reach only the legacy `RefereeRewardManager`'s tensor.
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
        if options.get("monitor") is not None:  # never ignored silently
            raise SpecError(
                "reward_kwargs.monitor: the reward loop scores one sample at a time on each "
                "worker, so no worker sees a step; use the batch manager (RefereeRewardManager, "
                "reward_manager.name=referee with the legacy reward path) or TRL's callback"
            )
        self.per_turn = bool(options.get("per_turn", False))
        self.reward = reward_for(options.get("spec"), door=manager_door(self.per_turn))
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
        rollout, _, _ = await self.loop.run_in_executor(
            None, item_rollout, item, self.tokenizer, self.per_turn
        )
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
