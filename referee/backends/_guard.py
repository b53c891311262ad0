"""What makes `referee serve` safe to expose: who may ask, and what a request may cost.

`referee.backends.server` says what is guarded and why (its docstring, "Safe to expose"); this
module holds the machinery, apart from the scoring service it guards:

- `Guard`: the middleware every request passes, on every path: the token, then the body
  under ``max_body`` and ``io_timeout``, then the answer under ``io_timeout``.
- `Connections`: at most ``max_connections`` open; a new one past it closes the oldest idle
  one, or is answered 503.
- the checks at start: `is_loopback`, `token_digest`, `check_descriptors`.

What the guard refuses it raises as `BadRequest`, which the service's error middleware (outside
this one) answers as JSON.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import ipaddress
import json
import logging
import math
import resource
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Literal

from referee.errors import MissingDependency

try:
    from aiohttp import hdrs, web
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependency("aiohttp", "serve", "referee serve") from exc

logger = logging.getLogger("referee.serve")

TOKEN_ENV = "REFEREE_SERVE_TOKEN"
"""The environment variable `referee serve` reads its token from (``--token`` too)."""
MIN_TOKEN_LENGTH = 16
BACKLOG = 128  # connections the kernel queues for accepting, and asyncio accepts at a go
_FD_HEADROOM = 512  # descriptors besides the connections: the reward's workers and sandboxes
_ACCEPTED_AHEAD = 4 * BACKLOG
"""Sockets asyncio may have accepted before `Connections` sees them (its accept loop takes up
to a backlog at a time, and a connection is made two loop turns after it is accepted)."""


class BadRequest(Exception):
    """A request refused: answered as ``{"error": {"type": kind, "message"}}`` with `status`."""

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


def dropped(request: web.Request, why: str) -> None:
    """One line, no traceback, for a request that lost its client: it is not a bug of ours."""
    logger.info("referee serve: %s %s: %s", request.method, request.path, why)


# --- at start: loopback, the token, open files ------------------------------------------------


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


def token_digest(token: str | None) -> bytes | None:
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


def exposed_without_token(host: str | None) -> str:
    """Why `serve` will not listen on `host` without a token, and what to do."""
    return (
        f"referee serve: refusing to listen on {host!r} without a token: anyone who can reach "
        f"it could have it score whatever they send, at your cost. Set one in the environment, "
        f"{TOKEN_ENV}=$(python -c 'import secrets; print(secrets.token_urlsafe(32))'), or with "
        f"--token, and have clients send 'Authorization: Bearer <token>' (OpenRLHF: "
        f"--reward.remote_url http://referee:<token>@host:port/get_reward); or listen on "
        f"loopback only (--host 127.0.0.1)"
    )


def check_descriptors(connections: int) -> None:
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


# --- every request: the token, the body, the answer -------------------------------------------


def _presented(request: web.Request) -> bytes:
    """The token a request carries: a bearer token, the password of basic authentication, or
    ``X-API-Key`` (where the openreward SDK puts its ``api_key``)."""
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
    return request.headers.get("X-API-Key", "").strip().encode("utf-8", "surrogateescape")


class Guard:
    """The middleware that holds every request to the token and the limits.

    Args:
        token: What every request must carry; None: nothing asked.
        max_body: The most bytes a body may have, decompressed (413 beyond).
        io_timeout: Seconds to send a body after its headers (408), and again to take the
            answer (then the connection is closed).
        max_connections: For `connections`, which `serve` listens with.
    """

    def __init__(
        self, *, token: str | None, max_body: int, io_timeout: float, max_connections: int
    ) -> None:
        self._digest = token_digest(token)
        self.max_body = max_body
        self.io_timeout = io_timeout
        self.connections = Connections(max_connections)

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """The token, then the body under its limits, then the answer under its deadline."""
        if self._digest is not None and not hmac.compare_digest(
            hashlib.sha256(_presented(request)).digest(), self._digest
        ):
            raise BadRequest(
                401, "unauthorized",
                "this server needs its token: send 'Authorization: Bearer <token>' (or the "
                "token as the password of basic authentication), with the token the server "
                f"was started with (--token or {TOKEN_ENV})",
                headers={hdrs.WWW_AUTHENTICATE: 'Bearer realm="referee"'}, then="close",
            )  # fmt: skip
        connection = request.protocol
        self.connections.hold(connection)
        try:
            if request.body_exists:
                await self._read_body(request)
            response = await handler(request)
            await self._send(request, response)
            return response
        finally:
            self.connections.release(connection)

    async def _read_body(self, request: web.Request) -> None:
        """Read the body whole (what handlers then read), within `max_body` and `io_timeout`."""
        length = request.content_length
        if length is not None and length > self.max_body:
            raise self._too_large(f"{length} bytes")
        try:
            if request.content.is_eof():
                # All here, as a small body is (it comes with its headers): nothing to wait
                # for, so no deadline to arm (asyncio's timers cost more than the read).
                await request.read()
            else:
                async with asyncio.timeout(self.io_timeout):
                    await request.read()
        except web.HTTPRequestEntityTooLarge:  # no length given, or compressed
            raise self._too_large("more bytes than that") from None
        except TimeoutError:
            raise BadRequest(
                408, "request_timeout",
                f"the request body did not arrive within {self.io_timeout:g}s of its headers "
                f"(the server's io_timeout); send it faster, or start the server with a "
                f"longer --io-timeout", then="drop",
            ) from None  # fmt: skip
        except web.RequestPayloadError as exc:  # bad chunking, bad gzip
            raise BadRequest(
                400, "invalid_body", f"the request body cannot be read: {exc}", then="drop"
            ) from None

    def _too_large(self, size: str) -> BadRequest:
        return BadRequest(
            413, "body_too_large",
            f"the request body has {size}, more than the server's max_body of "
            f"{self.max_body} bytes ({self.max_body / 1024**2:g} MiB, counted decompressed); "
            f"send smaller batches, or start the server with a higher --max-body-mib",
            then="close",
        )  # fmt: skip

    async def _send(self, request: web.Request, response: web.StreamResponse) -> None:
        """Send the answer here, where the connection counts as busy, within `io_timeout`:
        a client that does not read its answer loses its connection, not the server a slot."""
        transport = request.transport
        if transport is None or transport.is_closing():
            return  # the client left: the error middleware says so; aiohttp drops the answer
        try:
            await response.prepare(request)  # composes the headers; writes nothing yet
            if _cannot_wait(transport, response):
                # No deadline to arm: a timer on every answer, for the rare one that can
                # wait at all, was this guard's largest cost per request.
                await response.write_eof()
            else:
                async with asyncio.timeout(self.io_timeout):
                    await response.write_eof()
        except TimeoutError:
            dropped(request, f"the answer was not taken within {self.io_timeout:g}s; closed")
            # Aborted, not closed: a close waits for the unread answer to go out first, which
            # would hold the socket open for as long as the client pleases.
            if isinstance(transport, asyncio.WriteTransport):
                transport.abort()
            request.protocol.force_close()
        except ConnectionResetError:
            pass  # the client left while it was sent: the error middleware says so


def _cannot_wait(transport: asyncio.BaseTransport, response: web.StreamResponse) -> bool:
    """Whether writing `response` whole is sure not to wait for the client.

    aiohttp's write waits only while asyncio has paused the connection's writing, and asyncio
    pauses it only when the transport's buffer goes over its high-water mark. Into an empty
    buffer, an answer no longer than that mark goes without a wait: to the kernel, or into the
    buffer. Counted from above: every header character as 4 bytes of UTF-8.
    """
    if not (
        isinstance(transport, asyncio.WriteTransport)
        and isinstance(response, web.Response)
        and isinstance(body := response.body, (bytes, bytearray))
        and not response.chunked
        and not response.compression
        and transport.get_write_buffer_size() == 0
    ):
        return False
    headers = response.headers
    chars = sum(map(len, headers.keys())) + sum(map(len, headers.values())) + len(response.reason)
    head = 4 * chars + 4 * len(headers) + 64  # ": " and CRLF per header; the status line
    return len(body) + head <= transport.get_write_buffer_limits()[1]


# --- connections ------------------------------------------------------------------------------


_FULL_BODY = json.dumps({"error": {"type": "too_many_connections", "message": (
    "every connection the server keeps is busy with a request; retry, or have the server "
    "started with a higher --max-connections")}}).encode()  # fmt: skip
_FULL = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\nConnection: close\r\nRetry-After: 1\r\n\r\n%s"
) % (len(_FULL_BODY), _FULL_BODY)


class _Connection(asyncio.Protocol):
    """One accepted connection: admitted by `Connections`, then spoken to by aiohttp's
    handler, to which every protocol event goes (asyncio's Protocol interface, nothing more)."""

    def __init__(self, pool: Connections) -> None:
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


class Connections:
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
            raise RuntimeError("Connections.factory(server) was not called")
        if len(self._open) >= self.limit and not self._close_idle():
            self._refuse(transport)
            return None
        handler = self._server()
        self._open[handler] = None
        return handler

    def closed(self, handler: web.RequestHandler) -> None:
        self._open.pop(handler, None)
        self._busy.discard(handler)

    def hold(self, handler: web.RequestHandler) -> None:
        """Count `handler`'s connection as busy (not to be closed for a new one) until
        `release`."""
        self._busy.add(handler)

    def release(self, handler: web.RequestHandler) -> None:
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
