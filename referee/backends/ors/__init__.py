"""The Open Reward Standard (ORS): `referee serve --tasks FILE` as an ORS environment.

ORS (the ``openreward`` SDK's protocol, 0.1.167) is HTTP with JSON and server-sent events. An
environment lists *splits* of *tasks* (JSON objects); a client opens a *session* on one task,
reads its prompt and its tools, and calls tools until one returns ``finished: true``; a tool's
result (``ToolOutput``) carries text blocks, a ``reward`` (a number or null) and metadata.
`OpenRewardEnvironment` serves a task file (`referee.backends.ors.tasks`) with the service's
reward as one such environment, mounted beside ``/score`` (`referee.backends.service.Mount`),
behind the same guard (token, limits) as every route:

- ``GET /list_environments`` -> ``[name]``. The name is ``env_name`` (``--env-name``), or the
  reward's name in lower case.
- ``GET /{env}/splits`` -> ``[{"name", "type"}]``: the task file's splits (``train`` where a
  row names none); ``type`` is the name where it is ``train``, ``validation`` or ``test``, else
  ``validation``, as the reference server has it.
- ``POST /{env}/tasks`` ``{"split"}`` -> ``{"tasks": [spec, ...], "env_name"}``;
  ``/{env}/num_tasks`` -> ``{"num_tasks"}``; ``/{env}/task`` ``{"split", "index"}`` ->
  ``{"task", "env_name"}``; ``/{env}/task_range`` ``{"split", "start"?, "stop"?}`` ->
  ``{"tasks", "env_name"}``. A task spec is ``{"id": ...}``: the prompt is read in a session,
  and the reference never leaves the server. Indexes and ranges are Python's, as the
  reference server's (``-1`` is the last task; a range is clamped); an index out of range or
  an unknown split is a 400.
- ``GET /{env}/tools`` (and ``/{env}/task_tools`` in a session) -> one tool,
  ``submit_answer`` with ``{"answer": string}``; no terminal tool, no group scoring.
- ``POST /create_session`` -> an event stream with a new session id (``task_id``), as the
  SDK asks for one; ``POST /create`` (header ``X-Session-ID``) ``{"split", "index"}`` or
  ``{"task_spec"}`` (one of the server's, by id) opens the session; ``POST /ping`` keeps it,
  ``POST /delete`` closes it. At most ``max_sessions`` are open (``--max-sessions``; 503 with
  ``Retry-After`` past it), and one that goes ``session_timeout`` seconds
  (``--session-timeout``, 900 by default) without a request is closed by the reaper (one with
  a call running excepted). A request naming a session that is not open is a 404.
- ``GET /{env}/prompt`` -> the prompt as text blocks; ``GET /{env}/messages`` -> as ORS
  messages (``system``/``developer`` as ``system``, ``tool`` as ``user``, one text block each).
- ``POST /{env}/call`` ``{"name", "input", "task_id"?}`` -> an event stream: ``task_id``, a
  keep-alive comment every 10 s while the answer is scored, then the result (``RunToolOutput``)
  in ``chunk``/``end`` events. ``submit_answer`` scores the rollout *task prompt + answer as
  the completion + task reference* with the service's reward (its slots and deadlines, as
  ``/score``), and returns ``{"ok": true, "output": {"reward", "finished": true, "metadata",
  "blocks"}}``: ``reward`` is the number ``POST /score`` gives that rollout, ``metadata`` its
  whole score (``/score``'s item: components, reason, failure) with its texts withheld: the
  reference is the server's secret, and a reason can quote it (``answer 'no idea' !=
  'SECRET-7731-ALPHA'``); the server logs them (`referee.backends.contract.withheld`). A
  rollout referee cannot score gets ``"reward": null`` with its failure (type, blame) in
  ``metadata``, never a number. The tool tells the
  policy only that its answer was submitted. An unknown tool (``not_found``) or bad input
  (``input_validation``) is refused and the episode goes on; once an answer is scored, every
  call is refused (``episode_finished``), a concurrent one included (calls on a session are
  scored one at a time). A client that lost the stream resumes it by posting its ``task_id``;
  an unknown one gets an ``error`` event, as does a call that fails (the SDK raises
  ``ToolFailed``).
- The routes under ``/{env}/`` are also served at the root, for the default environment, as
  the reference server does: a 308 redirect to ``/{env}/...`` (method and body kept). The
  SDK's local use (``environments.get(name, base_url=...)`` with no variant) calls them there.

Errors before a stream starts are referee's JSON errors (``{"error": {"type", "message"}}``)
with the status the reference server gives (400 bad body, split or index; 404 unknown
environment or session; 401 without the token). A request's body is hostile: its keys are the
protocol's and no others, its values are checked for type, and a session names one of the
server's tasks; the task file and the spec are the user's. No NaN reaches the wire.

With a token, give the SDK the token as its API key (it sends ``X-API-Key``, which referee's
guard reads), or as the password in its base URL (``http://ors:TOKEN@host:8000``), which it
sends as basic authentication.
"""

from referee.backends.ors.environment import OpenRewardEnvironment, environment_name
from referee.backends.ors.sessions import DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_TIMEOUT
from referee.backends.ors.tasks import DEFAULT_SPLIT, Task, TaskSet

__all__ = [
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_SESSION_TIMEOUT",
    "DEFAULT_SPLIT",
    "OpenRewardEnvironment",
    "Task",
    "TaskSet",
    "environment_name",
]
