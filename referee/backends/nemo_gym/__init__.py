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

from referee.backends.nemo_gym.metrics import aggregate_metrics
from referee.backends.nemo_gym.server import FAILURE_KINDS, ResourcesServer, failure_kind
from referee.backends.nemo_gym.wire import DEFAULT_REFERENCE_FIELD, group_key, rollout_of

__all__ = [
    "DEFAULT_REFERENCE_FIELD",
    "FAILURE_KINDS",
    "ResourcesServer",
    "aggregate_metrics",
    "failure_kind",
    "group_key",
    "rollout_of",
]
