"""OpenRLHF's answer, ``{"rewards", "scores", "extra_logs"}``, and ``/get_reward``, its remote
reward-model protocol, as an endpoint of referee's HTTP service."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from pydantic import ValidationError

from referee.backends.contract import Door, Outlet, refuse_unfit
from referee.backends.contract import components as top_level
from referee.backends.openrlhf.markers import EndMarkers
from referee.backends.openrlhf.query import in_place, rollouts_from
from referee.errors import RolloutError, SpecError
from referee.reward import Reward
from referee.rollout import Rollout
from referee.scores import Score

if TYPE_CHECKING:
    from aiohttp import web

    from referee.backends.service import Service

__all__ = ["GetReward", "component_keys", "extra_logs", "reward_response"]


def outlet(components: Sequence[str], failure_value: float) -> Outlet:
    """OpenRLHF's policy: `failure_value` for a rollout with no score, NaN for a skipped
    component (OpenRLHF makes a tensor of every key: it takes neither a missing key nor a
    null, and a number would pass for a score)."""
    return Outlet(tuple(components), failure_value, math.nan)


def extra_logs(
    scores: Sequence[Score], components: Sequence[str], failure_value: float
) -> dict[str, list[float]]:
    """OpenRLHF's ``extra_logs``: every key with one number per sample, as it needs.

    ``referee_failed`` is 1.0 where the rollout got no score. For each top-level component,
    ``referee/<component>`` and ``referee/<component>/skipped``: a skipped component (a gate,
    or a failure, before it stopped the rollout) has no value, and OpenRLHF averages each key
    over the batch, so it reads NaN rather than a number that would pass for a score, with its
    ``/skipped`` flag 1.0. A component that ran and failed reads `failure_value`, as the
    reward does.
    """
    # Every value is a number: failure_value, NaN or a score's own.
    return cast("dict[str, list[float]]", outlet(components, failure_value).columns(scores))


def reward_response(
    scores: Sequence[Score], components: Sequence[str], failure_value: float
) -> dict[str, Any]:
    """What OpenRLHF reads: ``{"rewards", "scores", "extra_logs"}``, one value per sample.

    ``scores`` (what its dynamic filtering reads) equals ``rewards``: referee has one number.
    """
    policy = outlet(components, failure_value)
    rewards = [failure_value if s.value is None else s.value for s in scores]
    return {
        "rewards": rewards,
        "scores": list(rewards),
        # Every value is a number: failure_value, NaN or a score's own.
        "extra_logs": cast("dict[str, list[float]]", policy.columns(scores)),
    }


DOOR = Door(
    "OpenRLHF (one sample at a time, its query as text)",
    instead={
        "group": "a per-sample reward (OpenRLHF normalises rewards within a prompt's samples "
        "itself), or referee serve's /score with whole groups",
        "messages": "referee serve's /score, or NeMo Gym's /verify, which carry a trajectory",
        "tokens": "unit: words or unit: chars in the spec (OpenRLHF sends no token count)",
    },
)
"""What OpenRLHF gives a reward: text, sample by sample; `refuse_unfit` refuses the rest."""


def component_keys(reward: Reward) -> list[str]:
    """The top-level components `extra_logs` reports for `reward`."""
    return top_level(reward)


@dataclass(frozen=True)
class GetReward:
    """``POST /get_reward``, OpenRLHF's remote reward-model protocol, as an endpoint of
    `referee.backends.service.Service`.

    ``{"query": [...], "prompts": [...], "labels": [...]}`` -> `reward_response`. Each query
    is read as `rollouts_from` reads it; a query that does not hold its prompt is a failure,
    not a score of the whole query.

    Attributes:
        end_markers: What to strip from the end of each response.
        failure_value: What a rollout with no score gets.
    """

    end_markers: EndMarkers = field(default_factory=EndMarkers)
    failure_value: float = 0.0
    path: str = "/get_reward"
    keys: tuple[str, ...] = ("query", "prompts", "labels")

    async def answer(self, service: Service, body: Mapping[str, Any]) -> web.Response:
        from aiohttp import web

        from referee.backends.service import BadRequest, too_deep

        try:
            refuse_unfit(service.reward, DOOR)
        except SpecError as exc:  # the spec, not the request: the same answer every time
            raise BadRequest(422, "unfit_spec", f"/get_reward refuses this spec: {exc}") from exc
        queries = service.items(body, "query")
        prompts = service.items(body, "prompts", required=False)
        labels = service.items(body, "labels", required=False)
        try:
            items = rollouts_from(queries, prompts, labels, end_markers=self.end_markers,
                                  names=("query", "prompts", "labels"))  # fmt: skip
        except RolloutError as exc:
            if isinstance(exc.__cause__, RecursionError):
                raise BadRequest(400, "invalid_json", too_deep(exc.source)) from exc
            if isinstance(exc.__cause__, ValidationError):
                raise BadRequest(422, "invalid_rollout", str(exc)) from exc
            raise BadRequest(400, "invalid_body", str(exc)) from exc
        rollouts = [r for r in items if isinstance(r, Rollout)]
        scores = in_place(items, await service.score_batch(rollouts) if rollouts else [])
        answer = reward_response(scores, service.components, self.failure_value)
        # json's NaN literal: a skipped component's value in extra_logs (rewards are finite).
        return web.json_response(answer, dumps=_dumps_nan)


def _dumps_nan(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
