"""`referee serve`: a reward as an HTTP service any trainer can call.

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
stuck one gets ``Failure("timeout")`` and its work is stopped), and a request still being
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
import contextlib
import json
import logging
import math
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from referee.backends._common import resolve
from referee.backends._guard import (
    BACKLOG,
    TOKEN_ENV,
    BadRequest,
    Guard,
    check_descriptors,
    dropped,
    exposed_without_token,
    is_loopback,
)
from referee.backends.openrlhf import EndMarkers, component_keys, reward_response, rollouts_from
from referee.errors import MissingDependency, RolloutError
from referee.reward import Reward, is_sync, reference_powers
from referee.reward import score as score_rollouts
from referee.rollout import Rollout
from referee.score import Score

try:
    from aiohttp import web
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependency("aiohttp", "serve", "referee serve") from exc

__all__ = ["TOKEN_ENV", "RewardService", "is_loopback", "serve"]

logger = logging.getLogger("referee.serve")

DEFAULT_MAX_BATCH = 10_000
DEFAULT_MAX_CONCURRENT = 8
DEFAULT_MAX_BODY = 32 * 1024**2
"""Bytes a request body may have (decompressed); 413 beyond."""
DEFAULT_MAX_CONNECTIONS = 1024
"""Connections open at once; past it the oldest idle one is closed, or the new one refused."""
DEFAULT_IDLE_TIMEOUT = 30.0
"""Seconds a connection may sit without a whole request's headers (idle keep-alive included)."""
DEFAULT_IO_TIMEOUT = 60.0
"""Seconds a client has to send a request's body, and again to take its answer."""
SLOW_AFTER = 0.1
"""Seconds after which a request still being scored moves to the slow lane (module docstring)."""


def _error(
    status: int, kind: str, message: str, headers: Mapping[str, str] | None = None
) -> web.Response:
    body = {"error": {"type": kind, "message": message}}
    return web.json_response(body, status=status, headers=headers)


def _too_deep(what: str) -> str:
    return (
        f"{what} is JSON nested too deep to read: more levels of arrays and objects than "
        f"Python's json takes (about {sys.getrecursionlimit()}); send flatter JSON"
    )


class _StuckInterval:
    """The process's switch interval while requests are in slow lanes: the shortest asked for
    while any is (services on several loops and threads share one interpreter), the one from
    before restored when the last leaves."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._asked: list[float] = []
        self._calm = 0.0

    def enter(self, interval: float) -> None:
        with self._lock:
            if not self._asked:
                self._calm = sys.getswitchinterval()
            self._asked.append(interval)
            sys.setswitchinterval(min(self._asked))

    def leave(self, interval: float) -> None:
        with self._lock:
            self._asked.remove(interval)
            sys.setswitchinterval(min(self._asked) if self._asked else self._calm)


_STUCK = _StuckInterval()


def _untrusted_powers(powers: list[tuple[str, str]]) -> str:
    listed = "; ".join(f"{name!r} {what}" for name, what in powers)
    return (
        f"referee serve: refusing to serve this spec to clients it does not trust: in a "
        f"request, the reference is the client's, and {listed}. Any client could have the "
        f"server do that. Start it with --trust-clients (trust_clients=True) only if everyone "
        f"who can reach it (with a token: everyone who holds it) may run code as this "
        f"server's user; else serve a spec without those rewards"
    )


@dataclass
class RewardService:
    """The aiohttp application around one reward.

    Attributes:
        reward: What scores the rollouts.
        max_batch: The most rollouts one request may carry.
        max_concurrent: How many requests are scored at once; more wait their turn.
        failure_value: What OpenRLHF gets for a rollout with no score.
        concurrency: How many rollouts an async reward scores at once within a request.
        end_markers: What `/get_reward` strips from the end of each response
            (`referee.backends.openrlhf.EndMarkers`; `EndMarkers.none()` strips nothing).
        slow_after: Seconds after which a request still being scored gives its slot back
            (`SLOW_AFTER`; see the module docstring).
        stuck_switch_interval: The interpreter's switch interval (`sys.setswitchinterval`)
            while any request is in the slow lane, the one before restored when the lane
            empties; None leaves it alone. It is process-wide: ``referee serve`` sets it
            (`STUCK_SWITCH_INTERVAL`), a library caller decides.
        token: The token every request must carry (module docstring); None: none asked.
            At least `MIN_TOKEN_LENGTH` printable ASCII characters.
        trust_clients: Whether a request's references may ask what only a trusted one may
            (`referee.reward.reference_powers`): without it, a reward with such powers is
            refused here, at construction. Kept for checks per request.
        max_body: The most bytes a request body may have, decompressed (413 beyond).
        max_connections: The most connections open at once (`_guard.Connections`); `serve`
            holds them to it.
        io_timeout: Seconds a client has to send a request's body after its headers (408),
            and again to take its answer (then the connection is closed).
    """

    reward: Reward
    max_batch: int = DEFAULT_MAX_BATCH
    max_concurrent: int = DEFAULT_MAX_CONCURRENT
    failure_value: float = 0.0
    concurrency: int | None = None
    slow_after: float = SLOW_AFTER
    stuck_switch_interval: float | None = None
    end_markers: EndMarkers = field(default_factory=EndMarkers)
    token: str | None = field(default=None, repr=False)
    trust_clients: bool = False
    max_body: int = DEFAULT_MAX_BODY
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    io_timeout: float = DEFAULT_IO_TIMEOUT
    in_flight: int = field(default=0, init=False)
    closing: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        for name in ("max_body", "max_connections", "io_timeout"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0 < value < math.inf):
                raise ValueError(f"RewardService: {name} must be a positive number, not {value!r}")
        self._guard = Guard(
            token=self.token, max_body=self.max_body, io_timeout=self.io_timeout,
            max_connections=self.max_connections,
        )  # fmt: skip
        self.connections = self._guard.connections
        powers = reference_powers(self.reward)
        if powers and not self.trust_clients:
            raise ValueError(_untrusted_powers(powers))
        self._sync = is_sync(self.reward)
        self._slots: asyncio.Semaphore | None = None
        self._slow = 0  # requests in the slow lane
        self._threads: ThreadPoolExecutor | None = None
        self._component_keys = component_keys(self.reward)

    def app(self) -> web.Application:
        # The guard is inside the error middleware, so what it refuses is answered as JSON;
        # it runs for every route, the unknown ones included.
        app = web.Application(
            middlewares=[self._errors, self._guard.middleware], client_max_size=self.max_body
        )
        app.router.add_get("/health", self.health)
        app.router.add_post("/score", self.score)
        app.router.add_post("/get_reward", self.get_reward)
        return app

    # --- plumbing ---------------------------------------------------------------------------

    @web.middleware
    async def _errors(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        try:
            response = await handler(request)
        except BadRequest as exc:
            error = _error(exc.status, exc.kind, str(exc), exc.headers)
            if exc.then != "keep":
                error.force_close()
            if exc.then == "drop":
                with contextlib.suppress(ConnectionResetError):
                    await error.prepare(request)
                    await error.write_eof()
                request.protocol.force_close()
            return error
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            return _error(exc.status, exc.reason.lower().replace(" ", "_"), exc.reason)
        except ConnectionResetError:
            # The client left while its body was read (aiohttp's ClientConnectionResetError is
            # one too): nobody to answer and no bug of ours, so no traceback. The 499 (nginx's
            # "client closed request") is for the access log; it cannot be sent.
            dropped(request, "the client closed the connection while sending")
            return _error(499, "client_closed_request", "the client closed the connection")
        except asyncio.CancelledError:
            dropped(request, "cancelled (the client left, or the server is stopping)")
            raise
        except Exception as exc:  # a bug of ours: say so, keep serving
            logger.exception("referee serve: %s %s failed", request.method, request.path)
            return _error(500, "internal", f"{type(exc).__name__}: {exc}")
        if request.transport is None or request.transport.is_closing():
            # Scored, but the client is gone: aiohttp drops the answer quietly; say so once.
            dropped(request, "the client closed the connection before the answer")
        return response

    async def _body(self, request: web.Request) -> Mapping[str, Any]:
        try:
            body = await request.json(loads=json.loads)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise BadRequest(400, "invalid_json", f"the request body is not JSON: {exc}") from exc
        except RecursionError as exc:  # Python's json recurses once per level of nesting
            raise BadRequest(400, "invalid_json", _too_deep("the request body")) from exc
        if not isinstance(body, dict):
            raise BadRequest(400, "invalid_body", "the request body must be a JSON object")
        return body

    def _keys(self, body: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
        """Refuse keys outside the protocol: a request may send data, never choose what
        scores it (a spec, a reward, an option, a file), and is told so rather than ignored."""
        unknown = [key for key in body if key not in allowed]
        if unknown:
            raise BadRequest(
                400, "invalid_body",
                f"unknown key {unknown[0]!r} in the request body; this endpoint takes "
                f"{', '.join(map(repr, allowed))}. A request cannot choose the spec, a reward, "
                f"an option or a file: the server scores with the spec it was started with",
            )  # fmt: skip

    def _list(self, body: Mapping[str, Any], key: str, required: bool = True) -> list[Any]:
        value = body.get(key)
        if value is None and not required:
            return []
        if not isinstance(value, list):
            raise BadRequest(
                400, "invalid_body", f"{key!r} must be a list, found {type(value).__name__}"
            )
        if len(value) > self.max_batch:
            raise BadRequest(
                413, "batch_too_large",
                f"{len(value)} items in {key!r}, more than the server's max_batch "
                f"{self.max_batch}; send smaller batches or start it with --max-batch",
            )  # fmt: skip
        return value

    async def _score(self, rollouts: list[Rollout]) -> list[Score]:
        if self.closing:
            raise BadRequest(503, "shutting_down", "the server is shutting down")
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_concurrent)
        self.in_flight += 1
        try:
            await self._slots.acquire()
            held = True
            try:
                work = asyncio.ensure_future(self._run(rollouts))
                try:
                    done, _ = await asyncio.wait([work], timeout=self.slow_after)
                except BaseException:  # the request was cancelled: so is its scoring
                    work.cancel()
                    raise
                if done or self._slow >= self.max_concurrent:
                    return await work
                # Slow (stuck until its deadline, or a big batch): give the slot back.
                self._slots.release()
                held = False
                self._slow += 1
                if self.stuck_switch_interval is not None:
                    _STUCK.enter(self.stuck_switch_interval)
                try:
                    return await work
                finally:
                    self._slow -= 1
                    if self.stuck_switch_interval is not None:
                        _STUCK.leave(self.stuck_switch_interval)
            finally:
                if held:
                    self._slots.release()
        finally:
            self.in_flight -= 1

    async def _run(self, rollouts: list[Rollout]) -> list[Score]:
        if not self._sync:
            return await self.reward.score_batch(rollouts, concurrency=self.concurrency)
        if self._threads is None:  # both lanes: a thread for every request that may run
            self._threads = ThreadPoolExecutor(
                2 * self.max_concurrent, thread_name_prefix="referee-serve"
            )
        # A CPU-bound batch runs off the event loop, so /health still answers.
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._threads, score_rollouts, self.reward, rollouts)

    def close(self) -> None:
        """Let the service's threads go (after the last request)."""
        if self._threads is not None:
            self._threads.shutdown(wait=False)
            self._threads = None

    # --- endpoints --------------------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        status = 503 if self.closing else 200
        body = {
            "status": "shutting_down" if self.closing else "ok",
            "reward": self.reward.name,
            "in_flight": self.in_flight,
        }
        return web.json_response(body, status=status)

    async def score(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        self._keys(body, ("rollouts",))
        items = self._list(body, "rollouts")
        rollouts = []
        for i, item in enumerate(items):
            try:
                rollouts.append(Rollout.model_validate(item))
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "(the rollout)"
                raise BadRequest(
                    422, "invalid_rollout", f"rollouts[{i}].{where}: {first['msg']}"
                ) from exc
        scores = await self._score(rollouts)
        out = [{"id": r.id, **s.to_dict()} for r, s in zip(rollouts, scores, strict=True)]
        return web.json_response({"scores": out}, dumps=_dumps)

    async def get_reward(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        self._keys(body, ("query", "prompts", "labels"))
        queries = self._list(body, "query")
        prompts = self._list(body, "prompts", required=False)
        labels = self._list(body, "labels", required=False)
        try:
            items = rollouts_from(queries, prompts, labels, end_markers=self.end_markers,
                                  names=("query", "prompts", "labels"))  # fmt: skip
        except RolloutError as exc:
            if isinstance(exc.__cause__, RecursionError):
                raise BadRequest(400, "invalid_json", _too_deep(exc.source)) from exc
            if isinstance(exc.__cause__, ValidationError):
                raise BadRequest(422, "invalid_rollout", str(exc)) from exc
            raise BadRequest(400, "invalid_body", str(exc)) from exc
        rollouts = [r for r in items if isinstance(r, Rollout)]
        scored = iter(await self._score(rollouts) if rollouts else [])
        scores = [next(scored) if isinstance(r, Rollout) else r for r in items]
        # json's NaN literal: a skipped component's value in extra_logs (rewards are finite).
        answer = reward_response(scores, self._component_keys, self.failure_value)
        return web.json_response(answer, dumps=_dumps_nan)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def _dumps_nan(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


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
    shutdown_timeout: float = 60.0,
    ready: Callable[[str], None] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve a reward until SIGTERM/SIGINT (or `stop` is set), then drain and return.

    `ready` is called with the base URL once the socket is listening (port 0 picks a free one).
    `token`, `trust_clients`, `max_body`, `max_connections` and `io_timeout` are
    `RewardService`'s; `idle_timeout` is how long a connection may go without a whole
    request's headers (module docstring). The soft limit on open files is raised to what
    `max_connections` needs.

    Raises:
        ValueError: Before listening: a `host` beyond loopback with no `token`, a token too
            short, a reward with reference powers and not `trust_clients`, or more
            connections than the process may open files.
    """
    if token is None and not is_loopback(host):
        raise ValueError(exposed_without_token(host))
    if not 0 < idle_timeout < math.inf:
        raise ValueError(f"serve: idle_timeout must be a positive number, not {idle_timeout!r}")
    service = RewardService(
        resolve(reward_or_spec),
        max_batch=max_batch,
        max_concurrent=max_concurrent,
        failure_value=failure_value,
        slow_after=slow_after,
        stuck_switch_interval=stuck_switch_interval,
        end_markers=EndMarkers() if end_markers is None else end_markers,
        token=token,
        trust_clients=trust_clients,
        max_body=max_body,
        max_connections=max_connections,
        io_timeout=io_timeout,
    )
    check_descriptors(max_connections)
    # aiohttp's keep-alive timer starts when a connection opens and again after each answer,
    # and closes the connection if no whole request has come by then: the header timeout too.
    runner = web.AppRunner(
        service.app(), shutdown_timeout=shutdown_timeout, access_log=None,
        keepalive_timeout=idle_timeout,
    )  # fmt: skip
    await runner.setup()
    assert runner.server is not None  # set by setup()
    loop = asyncio.get_running_loop()
    try:
        # What web.TCPSite does, with a protocol factory that counts connections.
        listener = await loop.create_server(
            service.connections.factory(runner.server), host, port,
            backlog=BACKLOG,
        )  # fmt: skip
    except BaseException:
        await runner.cleanup()
        raise
    bound = listener.sockets[0].getsockname()
    name = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    url = f"http://{name}:{bound[1]}"
    if ready is not None:
        ready(url)
    stop = stop or asyncio.Event()
    handled: list[signal.Signals] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
            handled.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            pass  # not the main thread: the caller stops us through `stop`
    try:
        await stop.wait()
    finally:
        service.closing = True
        # Drain: requests already being scored finish and get their answer.
        deadline = loop.time() + shutdown_timeout
        while service.in_flight and loop.time() < deadline:
            await asyncio.sleep(0.05)
        for sig in handled:
            loop.remove_signal_handler(sig)
        listener.close()
        await runner.cleanup()
        service.close()
