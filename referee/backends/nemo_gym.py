"""NeMo Gym's resources-server protocol: `referee serve` as the verifier of a NeMo Gym agent.

NeMo Gym (0.7) runs rollouts with an *agent* server that asks a *resources server* for each
rollout's reward. `ResourcesServer` mounts that server's routes on `referee serve` (a `Mount`
of `referee.backends.service`), so the reward NeMo RL trains on is the number `referee score`
gives for the same rollout:

- ``POST /verify``: a ``BaseVerifyRequest``: ``responses_create_params`` (the OpenAI
  Responses create params the model was called with), ``response`` (the OpenAI Response the
  model gave) and the task's dataset fields at the top level. Read as a rollout:

  - the prompt is ``responses_create_params.input`` (a string, or its messages; its
    ``instructions`` first, as a system message);
  - the completion is the text of the response's assistant ``message`` items (their
    ``output_text`` parts, joined, as NeMo Gym's math servers read it). Where the response
    holds ``function_call`` or ``function_call_output`` items (an agent's tool calls and their
    results), the completion is the trajectory as chat messages instead: assistant turns with
    ``tool_calls``, ``tool`` messages with results, in order (`referee.trajectory`'s shape).
    ``reasoning`` items and other kinds are not part of it;
  - the reference is the task field ``reference_field`` (``expected_answer`` by default, as
    NeMo Gym's math servers name it), as sent;
  - ``metadata.tools`` is ``responses_create_params.tools`` and ``metadata.completion_tokens``
    the response's ``usage.output_tokens``, where they are given.

  Every other field is data: echoed, never read as an option. Nothing in a body chooses the
  spec, a reward, an option or a file.

  It answers a ``BaseVerifyResponse``: the request echoed, with ``reward``. A reward with
  top-level components answers a ``BaseMultiRewardVerifyResponse``: ``reward_components``
  has the components that gave a value (one skipped by a gate, or failed, is left out: NeMo
  Gym parses with orjson, which takes no NaN, and its model takes no null), and each is also
  a top-level field ``referee/<component>``, since NeMo Gym's metrics read top-level numbers
  only.

- A rollout referee cannot score (a `Failure` in its `Score`; a reward that needs a reference
  and a request without ``reference_field``) is not a 0.0 that trains: it is answered as NeMo
  Gym's own servers answer a failed judge (``judge_failsafe``): HTTP 200, ``reward`` 0.0 (the
  model needs a number there), ``mask_sample: true``, ``failure_kind`` and
  ``failure_reason``. The kind is NeMo Gym's where one fits (`FAILURE_KINDS`: ``judge`` ->
  ``judge_failed``, ``sandbox`` -> ``provider_unavailable``, ``error`` -> ``verifier_error``)
  and ``referee:<type>`` otherwise (``referee:timeout``, ``referee:not_applicable``,
  ``referee:missing_reference``, ...). NeMo Gym leaves masked samples out of its quality
  metrics, and NeMo RL out of training.

- ``POST /seed_session``: both forms NeMo Gym sends. An Environment Server's
  ``ResourcesSeedSessionRequest`` (it has ``resources_session_id``) gets that id back; an
  agent's ``/run`` body (anything else) gets ``{}``. ``POST /close_session`` echoes
  ``resources_session_id``. referee keeps no state per session: a verdict depends on the
  request alone, so ``GET /reverify_mode`` answers ``"stateless"``.

- ``POST /aggregate_metrics``: ``{"verify_responses": [...]}`` -> NeMo Gym's
  ``AggregateMetrics``, by its own rules (`aggregate_metrics`): masked samples are left out of
  the quality metrics and counted under ``coverage/*``.

- Group rewards (``group_rank``, tournaments) compare the attempts at one prompt, but NeMo
  Gym verifies one rollout per request. With ``group_size`` (required for such a reward), each
  ``/verify`` waits in a `referee.backends.cohort.Cohorts` until its group has
  ``group_size`` members, or ``group_timeout`` seconds after the first arrived, and then the
  group is scored together. A group is keyed as NeMo Gym's GenRM comparison server keys its
  cohorts (`group_key`): by ``_ng_group_id`` and ``_ng_group_attempt`` where the caller sends
  them; else by the prompt (a digest of ``responses_create_params.input`` and
  ``principle``), within ``_ng_task_index`` (or ``prompt_id``) where given, and
  ``_ng_group_attempt``. A group scored short of ``group_size`` is scored as it is (the reward
  decides what a short group is worth) and says so: ``failure_kind: "cohort_incomplete"``
  with ``mask_sample: false``, NeMo Gym's way of naming a degraded but valid measurement.

With NeMo Gym's observability on, its client prefixes a rollout's calls with
``/ng-rollout/<rollout id>``; those paths are served too. A body of the wrong shape is a
JSON error naming the field: 400 for what is not a JSON object, 422 for a field of the wrong
type (``response.output[2].arguments: ...``). `referee.backends.server` describes the guard
(token, limits) in front of every route.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from referee.backends.cohort import DEFAULT_GROUP_TIMEOUT, Cohorts
from referee.backends.service import BadRequest, too_deep
from referee.reward import Reward, needs, needs_groups
from referee.rollout import Message, Rollout, ToolCall
from referee.scores import Score

if TYPE_CHECKING:
    from aiohttp import web

    from referee.backends.service import Service

__all__ = [
    "DEFAULT_REFERENCE_FIELD",
    "FAILURE_KINDS",
    "ResourcesServer",
    "aggregate_metrics",
    "failure_kind",
    "group_key",
    "rollout_of",
]

DEFAULT_REFERENCE_FIELD = "expected_answer"
"""The task field that holds the reference, as NeMo Gym's math servers name it."""

FAILURE_KINDS: Mapping[str, str] = {
    "judge": "judge_failed",
    "sandbox": "provider_unavailable",
    "error": "verifier_error",
}
"""A referee `Failure` type -> NeMo Gym's failure kind, where its vocabulary has one."""

TASK_INDEX = "_ng_task_index"
ROLLOUT_INDEX = "_ng_rollout_index"
GROUP_ID = "_ng_group_id"
GROUP_ATTEMPT = "_ng_group_attempt"
_ROLLOUT_PREFIX = "/ng-rollout/{rollout_id:[A-Za-z0-9][A-Za-z0-9._-]*}"
_TOOL_ITEMS = ("function_call", "function_call_output")
_Answer = Callable[["Service", Mapping[str, Any]], Awaitable[Any]]
_Handler = Callable[["web.Request"], Awaitable["web.Response"]]


def failure_kind(score: Score) -> str | None:
    """NeMo Gym's ``failure_kind`` for a score without a value (None for one with a value)."""
    if score.failure is None:
        return None if score.value is not None else "referee:no_score"
    return FAILURE_KINDS.get(score.failure.type, f"referee:{score.failure.type}")


# --- reading a request ------------------------------------------------------------------------


class _Part(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str | None = None
    text: str | None = None


class _Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["user", "assistant", "system", "developer"] = "assistant"
    content: str | list[_Part] | None = None


class _FunctionCall(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    arguments: str | dict[str, Any] = ""
    call_id: str | None = None


class _FunctionCallOutput(BaseModel):
    model_config = ConfigDict(extra="allow")
    call_id: str | None = None
    output: str | list[_Part] | None = None


class _CreateParams(BaseModel):
    model_config = ConfigDict(extra="allow")
    input: str | list[dict[str, Any]] = ""
    instructions: str | None = None
    tools: list[dict[str, Any]] | None = None


class _Usage(BaseModel):
    model_config = ConfigDict(extra="allow")
    output_tokens: int | None = None


class _Response(BaseModel):
    model_config = ConfigDict(extra="allow")
    output: list[dict[str, Any]]
    usage: _Usage | None = None


def _check(model: type[BaseModel], value: Any, where: str) -> Any:
    """`value` validated as `model`; a 422 naming the field (``where`` and pydantic's path)."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
        raise BadRequest(422, "invalid_request", f"{where}{path}: {first['msg']}") from exc


def _text(content: str | list[_Part] | None) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    return "".join(p.text or "" for p in content if p.type in ("output_text", "input_text", "text"))


def _messages(items: Sequence[Any], where: str) -> list[Message]:
    """OpenAI Responses items as chat messages: messages, then an assistant turn's calls on it,
    a call's output as a ``tool`` message. Items of other kinds (reasoning, ...) are left out."""
    out: list[Message] = []
    turn: dict[str, Any] | None = None  # the assistant turn being built

    def flush() -> None:
        nonlocal turn
        if turn is not None:
            out.append(Message(role="assistant", content=turn["content"],
                               tool_calls=turn["calls"] or None))  # fmt: skip
            turn = None

    for i, item in enumerate(items):
        at = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            raise BadRequest(422, "invalid_request", f"{at}: must be an object")
        kind = item.get("type", "message")
        if kind == "message":
            message = _check(_Message, item, at)
            text = _text(message.content)
            if message.role != "assistant":
                flush()
                out.append(Message(role=message.role, content=text))
            elif turn is not None and not turn["calls"]:
                turn["content"] += text
            else:
                flush()
                turn = {"content": text, "calls": []}
        elif kind == "function_call":
            call = _check(_FunctionCall, item, at)
            if turn is None:
                turn = {"content": "", "calls": []}
            turn["calls"].append(
                ToolCall(id=call.call_id, name=call.name, arguments=call.arguments)
            )
        elif kind == "function_call_output":
            result = _check(_FunctionCallOutput, item, at)
            flush()
            output = result.output if isinstance(result.output, str) else _text(result.output)
            out.append(Message(role="tool", tool_call_id=result.call_id, content=output))
    flush()
    return out


def rollout_of(body: Mapping[str, Any], reference_field: str = DEFAULT_REFERENCE_FIELD) -> Rollout:
    """The rollout a ``/verify`` body describes (the module docstring says how it is read).

    Raises:
        BadRequest: 422 for a field of the wrong shape, naming it.
    """
    if "responses_create_params" not in body or "response" not in body:
        missing = "responses_create_params" if "responses_create_params" not in body else "response"
        raise BadRequest(422, "invalid_request", f"{missing}: field required (a BaseVerifyRequest)")
    params = _check(_CreateParams, body["responses_create_params"], "responses_create_params")
    response = _check(_Response, body["response"], "response")
    system = [Message(role="system", content=params.instructions)] if params.instructions else []
    prompt: str | list[Message]
    if isinstance(params.input, str):
        prompt = [*system, Message(role="user", content=params.input)] if system else params.input
    else:
        prompt = [*system, *_messages(params.input, "responses_create_params.input")]
    output = response.output
    completion: str | list[Message]
    if any(isinstance(item, Mapping) and item.get("type") in _TOOL_ITEMS for item in output):
        completion = _messages(output, "response.output")
    else:
        turns = _messages(output, "response.output")
        completion = "".join(m.text for m in turns if m.role == "assistant")
    metadata: dict[str, Any] = {}
    if params.tools is not None:
        metadata["tools"] = params.tools
    if response.usage is not None and response.usage.output_tokens is not None:
        metadata["completion_tokens"] = response.usage.output_tokens
    task, index = body.get(TASK_INDEX), body.get(ROLLOUT_INDEX)
    ids = all(isinstance(v, int) and not isinstance(v, bool) for v in (task, index))
    try:
        return Rollout(
            id=f"{task}:{index}" if ids else "", prompt=prompt, completion=completion,
            reference=body.get(reference_field), metadata=metadata,
        )  # fmt: skip
    except ValidationError as exc:
        first = exc.errors()[0]
        raise BadRequest(422, "invalid_request", f"{first['loc'][0]}: {first['msg']}") from exc


def group_key(body: Mapping[str, Any]) -> str:
    """The group a ``/verify`` body belongs to, keyed as NeMo Gym's GenRM comparison server
    keys its cohorts: the caller's ``_ng_group_id`` and ``_ng_group_attempt``; else a digest of
    the prompt (``responses_create_params.input`` and ``principle``) within ``_ng_task_index``
    (or ``prompt_id``) and ``_ng_group_attempt``.

    Raises:
        BadRequest: 422 for a group field of the wrong type.
    """
    group_id, attempt = body.get(GROUP_ID), body.get(GROUP_ATTEMPT, 0)
    if not (isinstance(attempt, int) and not isinstance(attempt, bool) and attempt >= 0):
        raise BadRequest(422, "invalid_request", f"{GROUP_ATTEMPT}: must be an integer >= 0")
    if group_id is not None:
        if not isinstance(group_id, str):
            raise BadRequest(422, "invalid_request", f"{GROUP_ID}: must be a string")
        return f"group_id::{group_id}::group_attempt::{attempt}"
    params = body.get("responses_create_params")
    prompt = params.get("input") if isinstance(params, Mapping) else None
    data = {"input": prompt, "principle": body.get("principle")}
    digest = hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()
    task, prompt_id = body.get(TASK_INDEX), body.get("prompt_id")
    if task is not None:
        digest = f"task_idx::{task!r}::{digest}"
    elif prompt_id is not None:
        digest = f"prompt_id::{prompt_id!r}::{digest}"
    return f"{digest}::group_attempt::{attempt}"


# --- the routes -------------------------------------------------------------------------------


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


# --- aggregate metrics ------------------------------------------------------------------------


def aggregate_metrics(verify_responses: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """NeMo Gym's ``AggregateMetrics`` of verify responses, by its rules
    (``nemo_gym.reward_profile.compute_aggregate_metrics``, 0.7), without pandas.

    Masked samples (``mask_sample``) are left out of the quality metrics and counted under
    ``coverage/*`` (present only when something was masked). Each response's numbers (its
    top-level numbers and booleans not starting with ``_``, and ``response.usage``'s) get
    ``mean/``, ``max/``, ``min/``, ``median/`` and ``std/`` (sample standard deviation),
    per task (``group_level_metrics``, by ``_ng_task_index``) and over all
    (``agent_metrics``, with ``num_repeats``); ``key_metrics`` are the ``mean/`` ones.
    Not computed: NeMo Gym's across-repeat statistics (``*_across_repeats/*``,
    ``repeat_level_metrics``), histograms and ``perf_summary``.
    """
    empty: dict[str, Any] = {"group_level_metrics": [], "agent_metrics": {}, "key_metrics": {},
                             "perf_summary": None, "repeat_level_metrics": []}  # fmt: skip
    if not verify_responses:
        return empty
    scored = [r for r in verify_responses if not r.get("mask_sample")]
    masked = len(verify_responses) - len(scored)
    coverage: dict[str, Any] = {}
    if masked:
        tasks_total = {r.get(TASK_INDEX, 0) for r in verify_responses}
        tasks_measured = {r.get(TASK_INDEX, 0) for r in scored}
        coverage = {
            "coverage/measured_rollouts": len(scored),
            "coverage/masked_rollouts": masked,
            "coverage/measured_tasks": len(tasks_measured),
            "coverage/fully_masked_tasks": len(tasks_total - tasks_measured),
        }
    if not scored:
        return {**empty, "agent_metrics": dict(coverage), "key_metrics": dict(coverage)}
    rows = [_numbers(r) for r in scored]
    columns = list(dict.fromkeys(name for row in rows for name in row))
    by_task: dict[int, list[tuple[Mapping[str, Any], dict[str, float]]]] = {}
    for response, row in zip(scored, rows, strict=True):
        by_task.setdefault(response.get(TASK_INDEX, 0), []).append((response, row))
    groups = []
    for task in sorted(by_task):
        members = by_task[task]
        infos = sorted((_rollout_info(r) for r, _ in members), key=lambda i: i[ROLLOUT_INDEX])
        groups.append({
            TASK_INDEX: task, **_describe([row for _, row in members], columns),
            "sample": {"agent_ref": {"name": "agent"}}, "num_rollouts": len(members),
            "expected_num_rollouts": len(members), "missing_num_rollouts": 0,
            "reward_profile_completion_pct": 100.0, "rollout_infos": infos,
        })  # fmt: skip
    agent = {**_describe(rows, columns), **coverage}
    agent["num_repeats"] = len({r.get(ROLLOUT_INDEX, 0) for r in verify_responses})
    key = {k: v for k, v in agent.items() if k.startswith("mean/")}
    return {**empty, "group_level_metrics": groups, "agent_metrics": agent,
            "key_metrics": {**key, **coverage}}  # fmt: skip


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return value
    return None


def _numbers(response: Mapping[str, Any]) -> dict[str, float]:
    """A response's numbers as NeMo Gym's profiler reads them: its own, then its usage's."""
    usage = response.get("response")
    usage = usage.get("usage") if isinstance(usage, Mapping) else None
    merged = {**response, **(usage if isinstance(usage, Mapping) else {})}
    out: dict[str, float] = {}
    for name, value in merged.items():
        number = _number(value)
        if number is not None and not name.startswith("_") and name != "mask_sample":
            out[name] = number
    return out


def _rollout_info(response: Mapping[str, Any]) -> dict[str, Any]:
    task, index = response.get(TASK_INDEX, 0), response.get(ROLLOUT_INDEX, 0)
    info: dict[str, Any] = {"rollout_id": f"{task}:{index}", TASK_INDEX: task, ROLLOUT_INDEX: index}
    if "reward" in response:
        info["reward"] = response["reward"]
    usage = response.get("response")
    usage = usage.get("usage") if isinstance(usage, Mapping) else None
    for name, value in (usage if isinstance(usage, Mapping) else {}).items():
        if (number := _number(value)) is not None:
            info[name] = int(number) if isinstance(value, bool) else value
    for name, value in response.items():
        if name.startswith("_") or name in ("reward", "response", "mask_sample"):
            continue
        if (number := _number(value)) is not None:
            info[name] = int(number) if isinstance(value, bool) else value
    return info


def _describe(rows: Sequence[Mapping[str, float]], columns: Sequence[str]) -> dict[str, float]:
    """pandas' ``mean``/``max``/``min``/``median``/``std`` per column, missing values skipped;
    a std of one value is dropped, unless no column has two, when a column with no value
    missing reads 0.0 (NeMo Gym's ``describe_dataframe``)."""
    stats: dict[str, dict[str, float]] = {s: {} for s in ("mean", "max", "min", "median", "std")}
    full: list[str] = []
    for name in columns:
        values = [row[name] for row in rows if name in row]
        if len(values) == len(rows):
            full.append(name)
        if not values:
            continue
        ordered = sorted(values)
        mean = math.fsum(values) / len(values)
        half = len(ordered) // 2
        stats["mean"][name] = mean
        stats["max"][name] = ordered[-1]
        stats["min"][name] = ordered[0]
        stats["median"][name] = (
            ordered[half] if len(ordered) % 2 else (ordered[half - 1] + ordered[half]) / 2
        )
        if len(values) > 1:
            spread = math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)
            stats["std"][name] = math.sqrt(spread)
    if not stats["std"]:
        stats["std"] = dict.fromkeys(full, 0.0)
    return {
        f"{stat}/{name}": value for stat, values in stats.items() for name, value in values.items()
    }
