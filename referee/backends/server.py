"""`referee serve`: a reward as an HTTP service any trainer can call.

This module assembles what `referee serve` runs: the generic service of
`referee.backends.service` (``/health``, ``/score``, the guard, the lanes) with the protocols'
endpoints (OpenRLHF's ``/get_reward``, from `referee.backends.openrlhf`), and the process-wide
policy of the command (`serve_switch_intervals`). The generic service imports no trainer.

Endpoints:

- ``GET /health``: ``{"status": "ok", "reward": name, "in_flight": n}``; 503 while shutting down.
- ``POST /score``: ``{"rollouts": [rollout, ...]}`` (the canonical rollout shape, as in a JSONL
  file) -> ``{"scores": [{"id", "reward", "components", "reason", "failure", ...}, ...]}``, one
  per rollout, in order. A rollout that gets no score has ``"reward": null`` and its failure.
- ``POST /get_reward``: OpenRLHF's remote reward-model protocol: ``{"query": [...],
  "prompts": [...], "labels": [...]}`` -> ``{"rewards": [...], "scores": [...], "extra_logs":
  {...}}``, the numbers `referee score` gives. OpenRLHF decodes each query (prompt +
  response) with its special tokens, so the response ends in the chat template's end-of-turn
  or end-of-text token; the completion scored is the query with its prompt removed and those
  end markers stripped (``end_markers``: by default the common templates' markers; or ones
  you name, ``--end-marker``; or a model's own, ``--tokenizer PATH``; or none,
  ``--no-strip-markers``). A query that does not hold its prompt is a failure, not a score of
  the whole query; a label that is a JSON object or array is decoded
  (`referee.backends.openrlhf` says how a query is read). OpenRLHF needs a number for every
  sample, so a failure gives ``failure_value`` with ``extra_logs["referee_failed"]`` set, as
  in verl. ``extra_logs`` has one value per query under every key: ``referee/<component>``
  for each top-level component, and ``referee/<component>/skipped``, 1.0 where the component
  did not run (a gate, or a failure, before it stopped the rollout) and 0.0 where it did. A
  skipped component has no value, which is not a zero: it reads NaN (JSON's ``NaN``, which
  Python's json reads), since OpenRLHF makes a tensor of every key for every sample and so
  can take neither a missing key nor a null.

Errors are JSON, ``{"error": {"type", "message"}}``, with the status that fits: 400 for a body
that is not JSON (nested too deep for the parser included) or not the expected shape, 422 for a
rollout that fails validation (the message names its index and field), 413 for a batch over
``max_batch`` or a body over ``max_body``, 401 without the token, 408 for a body that does
not arrive in time, 404 for an unknown path. A client that closes its connection before the answer
costs one log line, not a traceback. Requests are scored at most ``max_concurrent`` at a time
(others wait); on SIGTERM or SIGINT the server stops taking requests, finishes those in flight,
then exits.

Safe to expose, the same for every endpoint (``/health`` and unknown paths included; the
machinery is `referee.backends._guard`'s):

- **A token.** Started with one (``token``; ``--token`` or the ``REFEREE_SERVE_TOKEN``
  environment variable), every request must carry it, as ``Authorization: Bearer <token>``
  or as the password of HTTP basic authentication (any user name: what a client that can
  put credentials only in its URL sends, OpenRLHF's ``http://referee:<token>@host/get_reward``);
  anything else gets 401 before its body is read. Tokens are compared in constant time. A
  server bound to anything but loopback (127.0.0.0/8, ::1, ``localhost``) refuses to start
  without one.
- **Trust.** A request's whole body is hostile, its references included. A spec with a reward
  that would act on the host on what a reference says (`referee.reward.reference_powers`:
  ``python_tests`` runs each reference's test code unsandboxed) is refused at start unless
  the server is started trusting its clients (``trust_clients``, ``--trust-clients``). A
  request names no spec, reward, option or file: the body's keys are the protocol's and no
  others (400 for any other key).
- **Limits.** A body is at most ``max_body`` bytes, decompressed (413, and the connection is
  closed); it must arrive within ``io_timeout`` seconds of its headers (408), and its answer
  be taken within as many again (else the connection is aborted). A connection that has not
  sent a whole request's headers ``idle_timeout`` seconds after it opened, or after its last
  answer, is closed (aiohttp's keep-alive timer, which runs from the connection's start). At
  most ``max_connections`` are open at once: a new one past that closes the oldest idle one
  (no request of its being handled: never sent one, still sending headers, done, or not
  authenticated), as nginx reuses idle connections when it runs out; if every one is busy
  with a request, the new one is answered 503 and closed at once (a client already sending
  may see a reset instead). So a thousand idle or half-open connections cost their owner
  their connections, not the server its clients. `serve` raises the process's soft limit on
  open files to what ``max_connections`` needs (and refuses to start if the hard one is
  lower): out of files, asyncio stops accepting anyone.

Stuck rewards do not stop the server. Every rollout scores under its reward's deadline (a
stuck one's work is stopped: a sync check scores 0 with ``fault: timeout``, an async reward
gets ``Failure("timeout")``), and a request still being
scored `SLOW_AFTER` seconds after it started gives its slot back and finishes in a slow lane
of ``max_concurrent`` more, so requests stuck until their deadline do not make fast ones wait
for it. At most twice ``max_concurrent`` requests are scored at once; when the slow lane is
full a slow request keeps its slot. A sync reward scores in the service's own threads, one per
request it may run at once. Those threads share the interpreter lock with the event loop: a
check computing until its deadline slows every request while it runs. ``referee serve`` sets a
switch interval of 1ms, not 5, so the loop gets the lock back sooner, and 0.1ms while any
request is in the slow lane (``stuck_switch_interval``): a normal request then waits about
35ms, not 100, behind eight stuck ones, and the shorter interval, which costs a busy server
10-15% of its throughput, is only paid while something is stuck (measured in
``benchmarks/bench_deadline.py``).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from referee.backends._guard import MIN_TOKEN_LENGTH, TOKEN_ENV
from referee.backends.contract import resolve
from referee.backends.openrlhf import EndMarkers, GetReward
from referee.backends.service import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_IO_TIMEOUT,
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_CONCURRENT,
    DEFAULT_MAX_CONNECTIONS,
    SLOW_AFTER,
    Mount,
    Service,
    check_listen,
    is_loopback,
    run,
)
from referee.reward import Reward

__all__ = [
    "MIN_TOKEN_LENGTH",
    "STUCK_SWITCH_INTERVAL",
    "SWITCH_INTERVAL",
    "TOKEN_ENV",
    "RewardService",
    "is_loopback",
    "serve",
    "serve_switch_intervals",
]

SWITCH_INTERVAL = 0.001
"""`referee serve`: seconds a thread holds the interpreter lock in turn (Python's default: 5ms)."""
STUCK_SWITCH_INTERVAL = 0.0001
"""The same, while a request is in the slow lane."""


def serve_switch_intervals() -> float:
    """Set `referee serve`'s switch interval for the process, and return the one to use while
    a request is in the slow lane (`RewardService.stuck_switch_interval`).

    A sync check computing until its deadline holds the interpreter lock in turns with the
    event loop: a shorter interval hands it back sooner (module docstring). Process-wide, so
    the command sets it; a library caller decides for its own process.
    """
    sys.setswitchinterval(SWITCH_INTERVAL)
    return STUCK_SWITCH_INTERVAL


@dataclass
class RewardService(Service):
    """`referee serve`'s service: `referee.backends.service.Service` (its attributes) with
    OpenRLHF's ``/get_reward``.

    Attributes:
        failure_value: What OpenRLHF gets for a rollout with no score.
        end_markers: What ``/get_reward`` strips from the end of each response
            (`referee.backends.openrlhf.EndMarkers`; `EndMarkers.none()` strips nothing).
    """

    failure_value: float = 0.0
    end_markers: EndMarkers = field(default_factory=EndMarkers)

    def __post_init__(self) -> None:
        own = GetReward(end_markers=self.end_markers, failure_value=self.failure_value)
        self.endpoints = (*self.endpoints, own)
        super().__post_init__()


async def serve(
    reward_or_spec: Reward | str | Path | Mapping[str, Any],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    trust_clients: bool = False,
    max_batch: int = DEFAULT_MAX_BATCH,
    max_concurrent: int = DEFAULT_MAX_CONCURRENT,
    max_body: int = DEFAULT_MAX_BODY,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    io_timeout: float = DEFAULT_IO_TIMEOUT,
    failure_value: float = 0.0,
    slow_after: float = SLOW_AFTER,
    stuck_switch_interval: float | None = None,
    end_markers: EndMarkers | None = None,
    mounts: Sequence[Mount] = (),
    shutdown_timeout: float = 60.0,
    ready: Callable[[str], None] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve a reward until SIGTERM/SIGINT (or `stop` is set), then drain and return.

    `ready` is called with the base URL once the socket is listening (port 0 picks a free one).
    `token`, `trust_clients`, `max_body`, `max_connections` and `io_timeout` are
    `RewardService`'s; `idle_timeout` is how long a connection may go without a whole
    request's headers (module docstring). The soft limit on open files is raised to what
    `max_connections` needs. `mounts` are protocols with routes of their own
    (`referee.backends.service.Mount`) served beside ``/score`` and ``/get_reward``.

    Raises:
        ValueError: Before listening: a `host` beyond loopback with no `token`, a token too
            short, a reward with reference powers and not `trust_clients`, or more
            connections than the process may open files.
    """
    check_listen(token, host, idle_timeout)
    service = RewardService(
        resolve(reward_or_spec),
        max_batch=max_batch,
        max_concurrent=max_concurrent,
        failure_value=failure_value,
        slow_after=slow_after,
        stuck_switch_interval=stuck_switch_interval,
        end_markers=EndMarkers() if end_markers is None else end_markers,
        mounts=mounts,
        token=token,
        trust_clients=trust_clients,
        max_body=max_body,
        max_connections=max_connections,
        io_timeout=io_timeout,
    )
    await run(
        service, host=host, port=port, idle_timeout=idle_timeout,
        shutdown_timeout=shutdown_timeout, ready=ready, stop=stop,
    )  # fmt: skip
