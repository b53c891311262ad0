"""Scoring fanned out over Ray: `referee score --engine ray [--address ADDR]`.

`RayReward` wraps any reward: each batch is cut into chunks that keep every group whole, the
chunks go to a pool of Ray actors that each hold a copy of the reward (unpickled once per
actor, so compiled validators, sandboxes and judge clients are built once per worker), and the
scores come back in input order. The values are the reward's own: the same spec scored on the
local engine gives the same numbers.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

from referee.errors import MissingDependency
from referee.reward import Part, Reward, RewardBase, group_indices
from referee.rollout import Rollout
from referee.score import Score

__all__ = ["RayReward"]


class _Worker:
    """A Ray actor holding one copy of the reward."""

    def __init__(self, reward: Reward) -> None:
        self.reward = reward

    async def score(self, rollouts: list[Rollout]) -> list[Score]:
        return await self.reward.score_batch(rollouts)


class RayReward(RewardBase):
    """A reward scored by a pool of Ray actors (see the module docstring).

    Args:
        reward: The reward to fan out.
        address: A Ray cluster's address; None starts (or joins) a local Ray.
        workers: How many actors; by default one per CPU Ray reports.
    """

    def __init__(self, reward: Reward, *, address: str | None = None, workers: int | None = None):
        try:
            import ray
        except ImportError as exc:
            raise MissingDependency("ray", "ray", "--engine ray") from exc
        self.reward = reward
        self.name = reward.name
        if not ray.is_initialized():
            # Judges in the workers keep litellm's cost map offline, as in this process.
            env = {"LITELLM_LOCAL_MODEL_COST_MAP": os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP",
                                                                  "True")}  # fmt: skip
            ray.init(address=address, include_dashboard=False, log_to_driver=False,
                     runtime_env={"env_vars": env})  # fmt: skip
        count = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))  # type: ignore[no-untyped-call]
        actor: Any = ray.remote(num_cpus=0)(_Worker)
        shared = ray.put(reward)
        self._actors: list[Any] = [
            actor.options(max_concurrency=4).remote(shared) for _ in range(count)
        ]
        self._next = 0

    def children(self) -> Sequence[Part]:
        return [Part(self.reward.name, self.reward)]

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError("a RayReward holds live actors; pickle the reward it wraps instead")

    def _chunks(self, rollouts: Sequence[Rollout]) -> list[list[int]]:
        """Positions cut into one chunk per actor, every group whole in one chunk."""
        chunks: list[list[int]] = [[] for _ in self._actors]
        sizes = [0] * len(chunks)
        for group in sorted(group_indices(rollouts), key=len, reverse=True):
            smallest = sizes.index(min(sizes))
            chunks[smallest].extend(group)
            sizes[smallest] += len(group)
        return [sorted(c) for c in chunks if c]

    async def score(self, rollout: Rollout) -> Score:
        return (await self.score_batch([rollout]))[0]

    async def score_batch(
        self, rollouts: Sequence[Rollout], *, concurrency: int | None = None
    ) -> list[Score]:
        chunks = self._chunks(rollouts)
        refs = []
        for chunk in chunks:
            actor = self._actors[self._next % len(self._actors)]
            self._next += 1
            refs.append(actor.score.remote([rollouts[i] for i in chunk]))
        results = await asyncio.gather(*refs)
        out: list[Score | None] = [None] * len(rollouts)
        for chunk, scores in zip(chunks, results, strict=True):
            for i, s in zip(chunk, scores, strict=True):
                out[i] = s
        return out  # type: ignore[return-value]

    def close(self) -> None:
        import ray

        for actor in self._actors:
            ray.kill(actor)
        self._actors = []
