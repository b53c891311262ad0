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

Safe to expose, the same for every endpoint (``/health`` and unknown paths included):

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
  be taken within as many again (else the connection is closed). A connection that has not
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
import base64
import binascii
import contextlib
import hashlib
import hmac
import ipaddress
import json
import logging
import math
import resource
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from referee.backends._common import resolve
from referee.backends.openrlhf import EndMarkers, component_keys, reward_response, rollouts_from
from referee.errors import MissingDependency, RolloutError
from referee.reward import Reward, is_sync, reference_powers
from referee.reward import score as score_rollouts
from referee.rollout import Rollout
from referee.score import Score

try:
    from aiohttp import hdrs, web
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
TOKEN_ENV = "REFEREE_SERVE_TOKEN"
"""The environment variable `referee serve` reads its token from (``--token`` too)."""
MIN_TOKEN_LENGTH = 16
_FD_HEADROOM = 512  # descriptors besides the connections: the reward's workers and sandboxes
_BACKLOG = 128  # connections the kernel queues for accepting, and asyncio accepts at a go
_ACCEPTED_AHEAD = 4 * _BACKLOG
"""Sockets asyncio may have accepted before `_Connections` sees them (its accept loop takes up
to a backlog at a time, and a connection is made two loop turns after it is accepted)."""
SLOW_AFTER = 0.1
"""Seconds after which a request still being scored moves to the slow lane (module docstring)."""


class _BadRequest(Exception):
    def __init__(
        self,
        status: int,
        kind: str,
        message: str,
        *,
        headers: Mapping[str, str] | None = None,
        then: Literal["keep", "close", "drop"] = "keep",
    ) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.headers = headers
        # What becomes of the connection: kept; closed once aiohttp has read (for up to 10 s)
        # what the client still sends, so it sees the answer rather than a reset (a body left
        # unread); or closed once the answer is out (a client too slow to wait for).
        self.then = then


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


def _dropped(request: web.Request, why: str) -> None:
    """One line, no traceback, for a request that lost its client: it is not a bug of ours."""
    logger.info("referee serve: %s %s: %s", request.method, request.path, why)


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


# --- exposure: loopback, the token, trust -----------------------------------------------------


def is_loopback(host: str | None) -> bool:
    """Whether listening on `host` reaches this machine only: 127.0.0.0/8, ::1 or localhost.

    Every other name (and "", every interface) counts as exposed: what it resolves to is up to
    the resolver.
    """
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def _token_digest(token: str | None) -> bytes | None:
    """The token's SHA-256 (compared, digest to digest, in constant time), after checking it."""
    if token is None:
        return None
    if len(token) < MIN_TOKEN_LENGTH or not all("!" <= c <= "~" for c in token):
        # The token is a secret: say what is wrong with it, never what it is.
        raise ValueError(
            f"referee serve: the token must be at least {MIN_TOKEN_LENGTH} printable ASCII "
            f"characters with no spaces; the one given has {len(token)} characters"
            f"{'' if token.isascii() else ', some of them not ASCII'}. Make one with: "
            f"python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    return hashlib.sha256(token.encode()).digest()


def _presented(request: web.Request) -> bytes:
    """The token a request carries: a bearer token, or the password of basic authentication."""
    scheme, _, credentials = request.headers.get(hdrs.AUTHORIZATION, "").strip().partition(" ")
    credentials = credentials.strip()
    if scheme.lower() == "bearer":
        return credentials.encode("utf-8", "surrogateescape")
    if scheme.lower() == "basic":
        try:
            pair = base64.b64decode(credentials, validate=True)
        except (binascii.Error, ValueError):
            return b""
        return pair.partition(b":")[2]  # any user name: a URL's userinfo needs one
    return b""


def _exposed_without_token(host: str | None) -> str:
    return (
        f"referee serve: refusing to listen on {host!r} without a token: anyone who can reach "
        f"it could have it score whatever they send, at your cost. Set one in the environment, "
        f"{TOKEN_ENV}=$(python -c 'import secrets; print(secrets.token_urlsafe(32))'), or with "
        f"--token, and have clients send 'Authorization: Bearer <token>' (OpenRLHF: "
        f"--reward.remote_url http://referee:<token>@host:port/get_reward); or listen on "
        f"loopback only (--host 127.0.0.1)"
    )


def _untrusted_powers(powers: list[tuple[str, str]]) -> str:
    listed = "; ".join(f"{name!r} {what}" for name, what in powers)
    return (
        f"referee serve: refusing to serve this spec to clients it does not trust: in a "
        f"request, the reference is the client's, and {listed}. Any client could have the "
        f"server do that. Start it with --trust-clients (trust_clients=True) only if everyone "
        f"who can reach it (with a token: everyone who holds it) may run code as this "
        f"server's user; else serve a spec without those rewards"
    )


def _check_descriptors(connections: int) -> None:
    """Raise the soft limit on open files to what `connections` need, or say why it cannot be.

    Past the limit, accepting fails and asyncio stops accepting for a second at a time: the
    server would be unreachable for everyone, which the connection limit is there to prevent.
    """
    need = connections + _ACCEPTED_AHEAD + _FD_HEADROOM
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return
    if hard != resource.RLIM_INFINITY and hard < need:
        raise ValueError(
            f"referee serve: max_connections {connections} needs {need} open files and this "
            f"process may open {hard} (its hard RLIMIT_NOFILE); lower --max-connections to "
            f"{max(hard - _ACCEPTED_AHEAD - _FD_HEADROOM, 1)} or raise the limit (ulimit -Hn; "
            f"LimitNOFILE= under systemd)"
        )
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


# --- connections ------------------------------------------------------------------------------


_FULL_BODY = json.dumps({"error": {"type": "too_many_connections", "message": (
    "every connection the server keeps is busy with a request; retry, or have the server "
    "started with a higher --max-connections")}}).encode()  # fmt: skip
_FULL = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\nConnection: close\r\nRetry-After: 1\r\n\r\n%s"
) % (len(_FULL_BODY), _FULL_BODY)


class _Connection(asyncio.Protocol):
    """One accepted connection: admitted by `_Connections`, then spoken to by aiohttp's
    handler, to which every protocol event goes (asyncio's Protocol interface, nothing more)."""

    def __init__(self, pool: _Connections) -> None:
        self._pool = pool
        self._handler: web.RequestHandler | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._handler = self._pool.admit(transport)
        if self._handler is not None:
            self._handler.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._handler is not None:
            self._pool.closed(self._handler)
            self._handler.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._handler is not None:
            self._handler.data_received(data)

    def eof_received(self) -> None:
        if self._handler is not None:
            self._handler.eof_received()

    def pause_writing(self) -> None:
        if self._handler is not None:
            self._handler.pause_writing()

    def resume_writing(self) -> None:
        if self._handler is not None:
            self._handler.resume_writing()


class _Connections:
    """At most `limit` connections open; a new one past it closes the oldest idle one.

    aiohttp counts no connections. Like nginx when it runs out of connections (it closes
    idle keep-alive ones), a connection with no request being handled is given up for a new
    one: one that never sent a request, or is still sending its headers, or waits between
    requests, or was refused its token. A connection is busy from the moment its request
    is authenticated until its answer is sent; it moves to the back of the line when it
    finishes one. With every connection busy, a new one gets 503 and is closed.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open: dict[web.RequestHandler, None] = {}  # the oldest (least recently used) first
        self._busy: set[web.RequestHandler] = set()
        self._server: web.Server | None = None
        self._warned = -math.inf

    def factory(self, server: web.Server) -> Callable[[], asyncio.Protocol]:
        """The protocol factory to listen with, making `server`'s handlers."""
        self._server = server
        return lambda: _Connection(self)

    @property
    def open(self) -> int:
        """Connections open now."""
        return len(self._open)

    def admit(self, transport: asyncio.BaseTransport) -> web.RequestHandler | None:
        if self._server is None:
            raise RuntimeError("_Connections.factory(server) was not called")
        if len(self._open) >= self.limit and not self._close_idle():
            self._refuse(transport)
            return None
        handler = self._server()
        self._open[handler] = None
        return handler

    def closed(self, handler: web.RequestHandler) -> None:
        self._open.pop(handler, None)
        self._busy.discard(handler)

    @contextlib.contextmanager
    def busy(self, handler: web.RequestHandler) -> Iterator[None]:
        """Hold `handler`'s connection as busy (not to be closed for a new one) meanwhile."""
        self._busy.add(handler)
        try:
            yield
        finally:
            self._busy.discard(handler)
            if handler in self._open:  # to the back of the line: recently used
                self._open[handler] = self._open.pop(handler)

    def _close_idle(self) -> bool:
        for handler in self._open:
            if handler not in self._busy:
                del self._open[handler]
                handler.force_close()
                return True
        return False

    def _refuse(self, transport: asyncio.BaseTransport) -> None:
        if isinstance(transport, asyncio.WriteTransport):
            transport.write(_FULL)
        transport.close()
        now = time.monotonic()
        if now - self._warned > 10:  # once in a while, not once per connection
            self._warned = now
            logger.warning(
                "referee serve: all %d connections are busy with requests: refusing new ones "
                "(503); start the server with a higher --max-connections if your clients "
                "need more at once",
                self.limit,
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
        max_connections: The most connections open at once (`_Connections`); `serve` holds
            them to it.
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
        self._token = _token_digest(self.token)
        powers = reference_powers(self.reward)
        if powers and not self.trust_clients:
            raise ValueError(_untrusted_powers(powers))
        self.connections = _Connections(self.max_connections)
        self._sync = is_sync(self.reward)
        self._slots: asyncio.Semaphore | None = None
        self._slow = 0  # requests in the slow lane
        self._threads: ThreadPoolExecutor | None = None
        self._component_keys = component_keys(self.reward)

    def app(self) -> web.Application:
        # The guard is inside the error middleware, so what it refuses is answered as JSON;
        # it runs for every route, the unknown ones included.
        app = web.Application(
            middlewares=[self._errors, self._guard], client_max_size=self.max_body
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
        except _BadRequest as exc:
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
            _dropped(request, "the client closed the connection while sending")
            return _error(499, "client_closed_request", "the client closed the connection")
        except asyncio.CancelledError:
            _dropped(request, "cancelled (the client left, or the server is stopping)")
            raise
        except Exception as exc:  # a bug of ours: say so, keep serving
            logger.exception("referee serve: %s %s failed", request.method, request.path)
            return _error(500, "internal", f"{type(exc).__name__}: {exc}")
        if request.transport is None or request.transport.is_closing():
            # Scored, but the client is gone: aiohttp drops the answer quietly; say so once.
            _dropped(request, "the client closed the connection before the answer")
        return response

    @web.middleware
    async def _guard(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """The token, then the body under its limits, then the answer under its deadline."""
        if self._token is not None and not hmac.compare_digest(
            hashlib.sha256(_presented(request)).digest(), self._token
        ):
            raise _BadRequest(
                401, "unauthorized",
                "this server needs its token: send 'Authorization: Bearer <token>' (or the "
                "token as the password of basic authentication), with the token the server "
                f"was started with (--token or {TOKEN_ENV})",
                headers={hdrs.WWW_AUTHENTICATE: 'Bearer realm="referee"'}, then="close",
            )  # fmt: skip
        with self.connections.busy(request.protocol):
            if request.body_exists:
                await self._read_body(request)
            response = await handler(request)
            await self._send(request, response)
            return response

    async def _read_body(self, request: web.Request) -> None:
        """Read the body whole (what handlers then read), within `max_body` and `io_timeout`."""
        length = request.content_length
        if length is not None and length > self.max_body:
            raise self._too_large(f"{length} bytes")
        try:
            async with asyncio.timeout(self.io_timeout):
                await request.read()
        except web.HTTPRequestEntityTooLarge:  # no length given, or compressed
            raise self._too_large("more bytes than that") from None
        except TimeoutError:
            raise _BadRequest(
                408, "request_timeout",
                f"the request body did not arrive within {self.io_timeout:g}s of its headers "
                f"(the server's io_timeout); send it faster, or start the server with a "
                f"longer --io-timeout", then="drop",
            ) from None  # fmt: skip
        except web.RequestPayloadError as exc:  # bad chunking, bad gzip
            raise _BadRequest(
                400, "invalid_body", f"the request body cannot be read: {exc}", then="drop"
            ) from None

    def _too_large(self, size: str) -> _BadRequest:
        return _BadRequest(
            413, "body_too_large",
            f"the request body has {size}, more than the server's max_body of "
            f"{self.max_body} bytes ({self.max_body / 1024**2:g} MiB, counted decompressed); "
            f"send smaller batches, or start the server with a higher --max-body-mib",
            then="close",
        )  # fmt: skip

    async def _send(self, request: web.Request, response: web.StreamResponse) -> None:
        """Send the answer here, where the connection counts as busy, within `io_timeout`:
        a client that does not read its answer loses its connection, not the server a slot."""
        if request.transport is None or request.transport.is_closing():
            return  # the client left: `_errors` says so, and aiohttp drops the answer
        try:
            async with asyncio.timeout(self.io_timeout):
                await response.prepare(request)
                await response.write_eof()
        except TimeoutError:
            _dropped(request, f"the answer was not taken within {self.io_timeout:g}s; closed")
            request.protocol.force_close()
        except ConnectionResetError:
            pass  # the client left while it was sent: `_errors` says so

    async def _body(self, request: web.Request) -> Mapping[str, Any]:
        try:
            body = await request.json(loads=json.loads)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise _BadRequest(400, "invalid_json", f"the request body is not JSON: {exc}") from exc
        except RecursionError as exc:  # Python's json recurses once per level of nesting
            raise _BadRequest(400, "invalid_json", _too_deep("the request body")) from exc
        if not isinstance(body, dict):
            raise _BadRequest(400, "invalid_body", "the request body must be a JSON object")
        return body

    def _keys(self, body: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
        """Refuse keys outside the protocol: a request may send data, never choose what
        scores it (a spec, a reward, an option, a file), and is told so rather than ignored."""
        unknown = [key for key in body if key not in allowed]
        if unknown:
            raise _BadRequest(
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
            raise _BadRequest(
                400, "invalid_body", f"{key!r} must be a list, found {type(value).__name__}"
            )
        if len(value) > self.max_batch:
            raise _BadRequest(
                413, "batch_too_large",
                f"{len(value)} items in {key!r}, more than the server's max_batch "
                f"{self.max_batch}; send smaller batches or start it with --max-batch",
            )  # fmt: skip
        return value

    async def _score(self, rollouts: list[Rollout]) -> list[Score]:
        if self.closing:
            raise _BadRequest(503, "shutting_down", "the server is shutting down")
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
                raise _BadRequest(
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
                raise _BadRequest(400, "invalid_json", _too_deep(exc.source)) from exc
            if isinstance(exc.__cause__, ValidationError):
                raise _BadRequest(422, "invalid_rollout", str(exc)) from exc
            raise _BadRequest(400, "invalid_body", str(exc)) from exc
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
        raise ValueError(_exposed_without_token(host))
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
    _check_descriptors(max_connections)
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
            backlog=_BACKLOG,
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
