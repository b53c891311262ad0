"""NeMo Gym's resources server's routes on `referee serve` (see `referee.backends.nemo_gym`)."""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from referee.backends.cohort import DEFAULT_GROUP_TIMEOUT, Cohorts
from referee.backends.nemo_gym.metrics import aggregate_metrics
from referee.backends.nemo_gym.wire import (
    DEFAULT_REFERENCE_FIELD,
    ROLLOUT_INDEX,
    TASK_INDEX,
    group_key,
    rollout_of,
)
from referee.backends.service import BadRequest, too_deep
from referee.reward import Reward, needs, needs_groups
from referee.scores import Score

if TYPE_CHECKING:
    from aiohttp import web

    from referee.backends.service import Service

__all__ = ["FAILURE_KINDS", "ResourcesServer", "failure_kind"]

FAILURE_KINDS: Mapping[str, str] = {
    "judge": "judge_failed",
    "sandbox": "provider_unavailable",
    "error": "verifier_error",
}
"""A referee `Failure` type -> NeMo Gym's failure kind, where its vocabulary has one."""

_ROLLOUT_PREFIX = "/ng-rollout/{rollout_id:[A-Za-z0-9][A-Za-z0-9._-]*}"
_Answer = Callable[["Service", Mapping[str, Any]], Awaitable[Any]]
_Handler = Callable[["web.Request"], Awaitable["web.Response"]]


def failure_kind(score: Score) -> str | None:
    """NeMo Gym's ``failure_kind`` for a score without a value (None for one with a value)."""
    if score.failure is None:
        return None if score.value is not None else "referee:no_score"
    return FAILURE_KINDS.get(score.failure.type, f"referee:{score.failure.type}")


@dataclass
class ResourcesServer:
    """NeMo Gym's resources server on `referee serve` (module docstring): a `Mount`.

    Args:
        reward: The reward the service scores with: read here for what it needs (a group,
            a reference), so a server that could not serve it refuses to be built.
        reference_field: The task field that holds the reference.
        group_size: How many ``/verify`` requests make one group, for a reward that compares
            the attempts at a prompt (`referee.reward.needs_groups`); required for one.
        group_timeout: Seconds a group waits for its members after the first arrived, then
            is scored with those that came.

    Raises:
        ValueError: A reward that needs groups and no `group_size`; a `group_size` that is
            not a positive integer; an empty `reference_field`; a bad `group_timeout`.
    """

    reward: Reward = field(repr=False)
    reference_field: str = DEFAULT_REFERENCE_FIELD
    group_size: int | None = None
    group_timeout: float = DEFAULT_GROUP_TIMEOUT

    def __post_init__(self) -> None:
        if not isinstance(self.reference_field, str) or not self.reference_field:
            raise ValueError(
                f"reference_field must name a task field, not {self.reference_field!r}; "
                f"NeMo Gym's math servers use {DEFAULT_REFERENCE_FIELD!r}"
            )
        size = self.group_size
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise ValueError(f"group_size must be a positive integer, not {size!r}")
        if not 0 < self.group_timeout < math.inf:
            raise ValueError(f"group_timeout must be a positive number of seconds, "
                             f"not {self.group_timeout!r}")  # fmt: skip
        self.grouped = needs_groups(self.reward)
        if self.grouped and size is None:
            raise ValueError(
                f"the reward {self.reward.name!r} compares the attempts at a prompt, and NeMo "
                f"Gym verifies one rollout per request: give the group size (group_size; "
                f"--group-size N, NeMo Gym's num_repeats) so referee knows when a group is whole"
            )
        self.needs_reference = any(n == "reference" for _, n in needs(self.reward))
        self._cohorts: Cohorts | None = None

    def mount(self, service: Service, app: web.Application) -> None:
        """Add NeMo Gym's routes to `app`, plain and under ``/ng-rollout/<id>``."""
        if self.grouped:
            self._cohorts = Cohorts(service.score_batch, timeout=self.group_timeout)
        for prefix in ("", _ROLLOUT_PREFIX):
            app.router.add_post(f"{prefix}/verify", self._route(service, self.verify))
            app.router.add_post(f"{prefix}/seed_session", self._route(service, self.seed_session))
            app.router.add_post(f"{prefix}/close_session", self._route(service, self.close_session))
            app.router.add_post(f"{prefix}/aggregate_metrics", self._route(service, self.aggregate))
            app.router.add_get(f"{prefix}/reverify_mode", self.reverify_mode)

    def _route(self, service: Service, answer: _Answer) -> _Handler:
        async def handle(request: web.Request) -> web.Response:
            body = await service.read_body(request)
            return _json(await answer(service, body))

        return handle

    async def verify(self, service: Service, body: Mapping[str, Any]) -> dict[str, Any]:
        """``/verify``: the request echoed with ``reward`` and, where the reward could give no
        number, NeMo Gym's failure fields."""
        _dumps(body)  # the answer echoes the body: one it cannot echo is refused before scoring
        rollout = rollout_of(body, self.reference_field)
        short = ""
        if self.needs_reference and body.get(self.reference_field) is None:
            score = Score.failed(
                "not_applicable",
                f"the request has no {self.reference_field!r} field, where the reward finds the "
                f"reference; send it with the task's data, or start referee serve with "
                f"--reference-field naming the field that holds it",
                "nemo_gym",
            )
            kind: str | None = "referee:missing_reference"
        elif self._cohorts is not None and self.group_size is not None:
            key = group_key(body)
            score, members = await self._cohorts.join(
                rollout.model_copy(update={"group": key}), self.group_size
            )
            if members < self.group_size:
                short = (f"scored in a group of {members} of {self.group_size}: the others did not "
                         f"arrive within {self.group_timeout:g} s")  # fmt: skip
            kind = failure_kind(score)
        else:
            (score,) = await service.score_batch([rollout])
            kind = failure_kind(score)
        answer = dict(body)
        answer["reward"] = 0.0 if score.value is None else score.value
        answer["mask_sample"] = score.value is None
        answer["failure_kind"] = kind
        answer["failure_reason"] = None if score.value is not None else score.reason
        if score.value is not None and short:
            answer["failure_kind"], answer["failure_reason"] = "cohort_incomplete", short
        if service.components:
            parts = {
                name: float(value)
                for name in service.components
                if name not in score.skipped
                and isinstance(value := score.components.get(name), (int, float))
                and math.isfinite(value)
            }
            answer["reward_components"] = parts
            answer.update({f"referee/{name}": value for name, value in parts.items()})
        return answer

    async def seed_session(self, service: Service, body: Mapping[str, Any]) -> dict[str, Any]:
        """``/seed_session``: an Environment Server's id echoed; ``{}`` for an agent's body."""
        if "resources_session_id" not in body:
            return {}
        return {"resources_session_id": _session_id(body)}

    async def close_session(self, service: Service, body: Mapping[str, Any]) -> dict[str, Any]:
        """``/close_session``: nothing to let go; the id echoed."""
        return {"resources_session_id": _session_id(body)}

    async def aggregate(self, service: Service, body: Mapping[str, Any]) -> dict[str, Any]:
        """``/aggregate_metrics``: NeMo Gym's ``AggregateMetrics`` (`aggregate_metrics`)."""
        items = service.items(body, "verify_responses")
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise BadRequest(
                    422, "invalid_request", f"verify_responses[{i}]: must be an object"
                )
            for key in (TASK_INDEX, ROLLOUT_INDEX):
                value = item.get(key, 0)
                if isinstance(value, bool) or not isinstance(value, int):
                    raise BadRequest(
                        422, "invalid_request", f"verify_responses[{i}].{key}: must be an integer"
                    )
        return aggregate_metrics(items)

    async def reverify_mode(self, request: web.Request) -> web.Response:
        """``/reverify_mode``: ``"stateless"``: a verdict depends on the request alone."""
        return _json("stateless")


def _session_id(body: Mapping[str, Any]) -> str:
    value = body.get("resources_session_id")
    if not isinstance(value, str) or not value:
        raise BadRequest(422, "invalid_request", "resources_session_id: must be a non-empty string")
    return value


def _json(value: Any) -> web.Response:
    from aiohttp import web

    return web.Response(text=_dumps(value), content_type="application/json")


def _dumps(value: Any) -> str:
    """`value` as JSON; a 400 for what has no JSON (NaN, Infinity: Python's json reads them)."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except ValueError as exc:  # Python's json reads NaN and Infinity; no JSON parser does
        raise BadRequest(
            400, "invalid_json", f"the request body holds a number JSON has not ({exc}): "
            f"NaN and Infinity cannot be echoed to a JSON client",
        ) from exc  # fmt: skip
    except RecursionError as exc:
        raise BadRequest(400, "invalid_json", too_deep("the request body")) from exc
