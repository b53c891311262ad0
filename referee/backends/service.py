"""A reward as an HTTP service: the generic machinery under `referee serve`.

`RewardService` answers ``GET /health`` and ``POST /score`` (the canonical rollout shape),
and any protocol's endpoints given to it: a single ``POST`` path with fixed keys (`Endpoint`:
OpenRLHF's ``/get_reward`` is one, in `referee.backends.openrlhf`), or a protocol with routes
of its own, any method, state and background tasks (`Mount`: NeMo Gym's resources server and
the Open Reward Standard are two). Every route, a mount's too, is behind the same guard
(token, limits). It knows no trainer: `referee.backends.server` assembles the
service `referee serve` runs. `run` listens, serves until stopped, and drains.

The module docstring of `referee.backends.server` describes the endpoints, the errors, what
makes the service safe to expose (a token, trust, limits) and how stuck rewards are kept from
stopping it; the machinery of the guard is `referee.backends._guard`'s.
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
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import ValidationError

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
from referee.backends.contract import Bridge, components
from referee.errors import MissingDependency
from referee.reward import Reward, reference_powers
from referee.rollout import Rollout
from referee.scores import Score

try:
    from aiohttp import web
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependency("aiohttp", "serve", "referee serve") from exc

__all__ = [
    "TOKEN_ENV",
    "BadRequest",
    "Endpoint",
    "Mount",
    "Service",
    "check_listen",
    "is_loopback",
    "run",
    "too_deep",
]

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


def too_deep(what: str) -> str:
    """The message for JSON nested deeper than Python's json reads (`what` names where)."""
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


class Endpoint(Protocol):
    """A protocol's ``POST`` endpoint on a `Service` (OpenRLHF's is
    `referee.backends.openrlhf.GetReward`).

    The service reads the body (a JSON object, or 400), refuses keys outside `keys` (a
    request may send data, never choose what scores it), and hands the body to `answer`,
    which reads its lists with `Service.items`, scores with `Service.score_batch` (slots,
    slow lane, deadlines) and raises `BadRequest` for a body of the wrong shape.
    """

    @property
    def path(self) -> str: ...

    @property
    def keys(self) -> tuple[str, ...]: ...

    async def answer(self, service: Service, body: Mapping[str, Any]) -> web.Response: ...


class Mount(Protocol):
    """A protocol with routes of its own on a `Service` (NeMo Gym's resources server, the
    Open Reward Standard).

    `mount` adds its routes to the application, and any startup or cleanup hooks
    (``app.on_startup``, ``app.on_cleanup``: background tasks, sessions to let go). Its
    handlers read bodies with `Service.read_body` (a JSON object or 400), refuse keys with
    `Service.check_keys` where the protocol fixes them, score with `Service.score_batch`
    (slots, slow lane, deadlines, 503 while closing), and raise `BadRequest` to answer an
    error as JSON. The guard (token, limits) runs before any of its handlers.
    """

    def mount(self, service: Service, app: web.Application) -> None: ...


@dataclass
class Service:
    """The aiohttp application around one reward: ``/health``, ``/score`` and `endpoints`.

    Attributes:
        reward: What scores the rollouts.
        endpoints: The protocols' endpoints served beside ``/score``.
        mounts: The protocols with routes of their own (`Mount`), mounted in order.
        max_batch: The most rollouts one request may carry.
        max_concurrent: How many requests are scored at once; more wait their turn.
        concurrency: How many rollouts an async reward scores at once within a request.
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
        components: The reward's top-level components (`contract.components`), read once:
            what a protocol's endpoint reports.
    """

    reward: Reward
    endpoints: Sequence[Endpoint] = ()
    mounts: Sequence[Mount] = ()
    max_batch: int = DEFAULT_MAX_BATCH
    max_concurrent: int = DEFAULT_MAX_CONCURRENT
    concurrency: int | None = None
    slow_after: float = SLOW_AFTER
    stuck_switch_interval: float | None = None
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
                what = type(self).__name__
                raise ValueError(f"{what}: {name} must be a positive number, not {value!r}")
        self._guard = Guard(
            token=self.token, max_body=self.max_body, io_timeout=self.io_timeout,
            max_connections=self.max_connections,
        )  # fmt: skip
        self.connections = self._guard.connections
        powers = reference_powers(self.reward)
        if powers and not self.trust_clients:
            raise ValueError(_untrusted_powers(powers))
        self.components = components(self.reward)  # what protocols report, once
        self._slots: asyncio.Semaphore | None = None
        self._slow = 0  # requests in the slow lane
        # Both lanes: a thread for every request a sync reward may score at once.
        self._bridge = Bridge(
            self.reward, concurrency=self.concurrency, threads=2 * self.max_concurrent
        )

    def app(self) -> web.Application:
        # The guard is inside the error middleware, so what it refuses is answered as JSON;
        # it runs for every route, the unknown ones included.
        app = web.Application(
            middlewares=[self._errors, self._guard.middleware], client_max_size=self.max_body
        )
        app.router.add_get("/health", self.health)
        app.router.add_post("/score", self.score)
        for endpoint in self.endpoints:
            app.router.add_post(endpoint.path, self._handler(endpoint))
        for mount in self.mounts:
            mount.mount(self, app)
        return app

    def _handler(
        self, endpoint: Endpoint
    ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            body = await self.read_body(request)
            self.check_keys(body, endpoint.keys)
            return await endpoint.answer(self, body)

        return handle

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

    async def read_body(self, request: web.Request) -> Mapping[str, Any]:
        """The request's body, a JSON object; else a `BadRequest` (400) that says why."""
        try:
            body = await request.json(loads=json.loads)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise BadRequest(400, "invalid_json", f"the request body is not JSON: {exc}") from exc
        except RecursionError as exc:  # Python's json recurses once per level of nesting
            raise BadRequest(400, "invalid_json", too_deep("the request body")) from exc
        if not isinstance(body, dict):
            raise BadRequest(400, "invalid_body", "the request body must be a JSON object")
        return body

    def check_keys(self, body: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
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

    def items(self, body: Mapping[str, Any], key: str, required: bool = True) -> list[Any]:
        """The list under `key` (or [] where it is absent and not `required`), at most
        `max_batch` long; else a `BadRequest` that says why."""
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

    async def score_batch(self, rollouts: list[Rollout]) -> list[Score]:
        """Score a request's rollouts in a slot (module docstring of `referee.backends.server`:
        slots, the slow lane); 503 once the service is closing."""
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
        # A CPU-bound batch runs off the event loop, so /health still answers.
        return await self._bridge.score_async(rollouts)

    def close(self) -> None:
        """Let the service's threads go (after the last request)."""
        self._bridge.close()

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
        body = await self.read_body(request)
        self.check_keys(body, ("rollouts",))
        items = self.items(body, "rollouts")
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
        scores = await self.score_batch(rollouts)
        out = [{"id": r.id, **s.to_dict()} for r, s in zip(rollouts, scores, strict=True)]
        return web.json_response({"scores": out}, dumps=_dumps)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def check_listen(token: str | None, host: str, idle_timeout: float) -> None:
    """Refuse, before anything starts, to listen beyond loopback without a token, or with an
    idle timeout that is not a positive number (ValueError)."""
    if token is None and not is_loopback(host):
        raise ValueError(exposed_without_token(host))
    if not 0 < idle_timeout < math.inf:
        raise ValueError(f"serve: idle_timeout must be a positive number, not {idle_timeout!r}")


async def run(
    service: Service,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    shutdown_timeout: float = 60.0,
    ready: Callable[[str], None] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve `service` until SIGTERM/SIGINT (or `stop` is set), then drain and return.

    `ready` is called with the base URL once the socket is listening (port 0 picks a free
    one). `idle_timeout` is how long a connection may go without a whole request's headers.
    The soft limit on open files is raised to what the service's ``max_connections`` needs.

    Raises:
        ValueError: Before listening: a `host` beyond loopback while the service asks for no
            token, or more connections than the process may open files.
    """
    check_listen(service.token, host, idle_timeout)
    check_descriptors(service.max_connections)
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
