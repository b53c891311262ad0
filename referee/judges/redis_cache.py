"""The verdict cache in Redis (or Valkey), so every node of a cluster reads one cache.

``cache: redis://10.0.0.5:6379/0`` in a judge's options (also ``rediss://`` for TLS and
``unix:///run/redis.sock?db=0``): the keys are the SQLite cache's (`cache_key`), under the
namespace ``referee:judge:v1:``, and an entry is the same JSON object, so a verdict bought on
one node is read by every other. ``?ttl=SECONDS`` in the URL lets Redis drop an entry that
long after it was written; the other query options are redis-py's (``socket_timeout=5``).

The judge client is async and must not wait on a socket on its event loop: the lookups a
loop asks for in one turn (a scored batch asks for all its verdicts at once) are sent as one
pipelined MGET, by redis-py's synchronous client, in a worker thread; a write is one SET there.
(2,000 lookups at once on loopback, 2 CPUs: 26,000/s so; one GET each on the loop 16,000/s,
and the loop stalls for every round trip; ``redis.asyncio``, one GET each, 7,600/s, and its
connections belong to one event loop.) A single server: not Redis Cluster or Sentinel.
In front of Redis each process keeps what it read or wrote in memory (`FRONT_SIZE`), as the
SQLite cache does, and for the same reason this is safe: a key is a hash of everything its
verdict depends on.

A cache that cannot be reached costs model calls, never a verdict: a connection refused, a
timeout (`TIMEOUT` seconds, so a dead server cannot hang scoring) or an error reply is a miss
and no store, logged once per process, and Redis is left alone for `RETRY_AFTER` seconds
before it is tried again. What is read from Redis may have been written by anyone who can
reach it: an entry that is not a verdict referee wrote is a miss.

Only the URL travels with a pickled client; connections are opened in each process (redis-py's
pool notices a fork and opens new ones in the child).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from referee.judges.cache import FrontMixin, parse_entry

if TYPE_CHECKING:
    import redis

__all__ = [
    "BATCH",
    "NAMESPACE",
    "RETRY_AFTER",
    "SCHEMES",
    "TIMEOUT",
    "RedisVerdictCache",
    "check_cache_url",
]

logger = logging.getLogger("referee.judges")

NAMESPACE = "referee:judge:v1:"
"""What every key referee writes to Redis starts with (then the `cache_key`)."""

SCHEMES = ("redis", "rediss", "unix")
"""The URL schemes of a Redis cache (``rediss``: TLS; ``unix``: a local socket)."""

TIMEOUT = 1.0
"""Seconds to connect to Redis, and to wait for a reply, unless the URL says
(``?socket_timeout=5&socket_connect_timeout=5``)."""

RETRY_AFTER = 10.0
"""Seconds a process leaves Redis alone (every lookup a miss) after it failed."""

BATCH = 1000
"""The most keys in one MGET (the lookups of one loop turn are split into these)."""

_INSTALL = 'pip install "referee[redis]"'


def check_cache_url(url: str, option: str = "cache") -> str:
    """`url` if it names a Redis cache referee can open, else ValueError naming `option`.

    Checks the scheme, port, database number and ``ttl``, and that the ``redis`` package is
    installed; it does not connect (a cache that is down costs model calls, not the run).
    """
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError as exc:
        raise ValueError(f"{option}: {_redacted(url)!r} is not a URL ({exc})") from None
    if parts.scheme not in SCHEMES:
        raise ValueError(
            f"{option}: {_redacted(url)!r} is not a cache: give true or false (the SQLite file "
            "at cache_path), or a Redis/Valkey URL (redis://host:6379/0, rediss://..., "
            "unix:///path/redis.sock)"
        )
    db = parts.path.strip("/") if parts.scheme != "unix" else ""
    query = dict(parse_qsl(parts.query))
    db = query.get("db", db)
    if db and not db.isdigit():
        raise ValueError(
            f"{option}: the database in {_redacted(url)!r} must be a number, not {db!r}"
        )
    ttl = query.get("ttl")
    if ttl is not None and not (ttl.isdigit() and int(ttl) > 0):
        raise ValueError(
            f"{option}: ttl in {_redacted(url)!r} must be whole seconds above 0, not {ttl!r}"
        )
    try:
        client, _ = _open(url)
        pool = client.connection_pool
        pool.connection_class(**pool.connection_kwargs)  # redis-py's options, checked; no socket
    except ImportError:
        raise ValueError(f"{option}: a Redis cache needs the redis package: {_INSTALL}") from None
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{option}: {_redacted(url)!r}: {exc}") from None
    return url


def _open(url: str) -> tuple[redis.Redis, int | None]:
    """A redis-py client for `url` (our timeouts, unless the URL gives its own), and the
    ``ttl`` the URL gives, taken out of it. Connects nothing."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    base, _, query_string = url.partition("?")
    query = dict(parse_qsl(query_string))
    ttl = query.pop("ttl", None)
    if query:
        base += "?" + urlencode(query)
    # One retry at once (a pooled connection the server closed), none after: a dead server
    # costs two timeouts, then RETRY_AFTER of misses.
    client = redis.Redis.from_url(
        base, socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT, retry=Retry(NoBackoff(), 1)
    )
    return client, int(ttl) if ttl is not None else None


def _redacted(url: str) -> str:
    """`url` without its password (for messages and logs)."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
        return urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        return "<unparsable URL>"


class RedisVerdictCache(FrontMixin):
    """Verdicts by key in Redis or Valkey, shared by every process that reaches it.

    Use `shared_cache` (one per process and URL) rather than this class, and ``aget`` /
    ``aput`` from async code (they leave the event loop free); ``get``, ``put`` and
    ``len()`` wait on the socket, and ``len()`` scans the namespace (for tests and tools).

    Attributes:
        url: Where the cache is (``redis://host:port/db``, ``?ttl=SECONDS``).
    """

    def __init__(self, url: str) -> None:
        self.url = check_cache_url(url)
        self._client, self.ttl = _open(url)
        self._front: dict[str, dict[str, Any]] = {}
        self._pending: dict[asyncio.AbstractEventLoop, list[tuple[str, asyncio.Future[Any]]]] = {}
        self._fetches: set[asyncio.Task[None]] = set()
        self._down_until = 0.0
        self._warned: set[tuple[int, str]] = set()

    # --- async: what the judge client uses -----------------------------------------------

    async def aget(self, key: str, fallback: Any = None) -> dict[str, Any] | None:
        """The entry stored under `key`, or None; the lookups of one loop turn share one MGET.

        `fallback` (the key before 0.2) is not used: no Redis cache predates `cache_key`.
        """
        entry = self._front.get(key)
        if entry is not None or self._down():
            return entry
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        pending = self._pending.get(loop)
        if pending is None:
            pending = self._pending[loop] = []
            loop.call_soon(self._flush, loop)
        pending.append((key, future))
        return self._accept(key, await future)

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        batch = self._pending.pop(loop, [])
        task = loop.create_task(self._fetch(batch))
        self._fetches.add(task)  # held until done: the loop keeps only a weak reference
        task.add_done_callback(self._fetches.discard)

    async def _fetch(self, batch: list[tuple[str, asyncio.Future[Any]]]) -> None:
        keys = [key for key, _ in batch]
        try:
            values = await asyncio.to_thread(self._mget, keys)
        except Exception as exc:  # whatever the cache's failure, it is a miss, never the score's
            self._failed(exc)
            values = [None] * len(keys)
        except BaseException:  # cancelled: the loop is closing
            for _, future in batch:
                if not future.done():
                    future.set_result(None)
            raise
        for (_, future), value in zip(batch, values, strict=True):
            if not future.done():  # a caller cancelled meanwhile
                future.set_result(value)

    def _mget(self, keys: list[str]) -> list[Any]:
        pipe = self._client.pipeline(transaction=False)
        for start in range(0, len(keys), BATCH):
            pipe.mget([NAMESPACE + key for key in keys[start : start + BATCH]])
        return [value for chunk in pipe.execute() for value in chunk]

    async def aput(self, key: str, value: dict[str, Any]) -> None:
        """Store `value` (JSON-serialisable) under `key`, without waiting on the loop."""
        self._remember(key, value)
        if not self._down():
            await asyncio.to_thread(self._set, key, value)

    # --- sync -----------------------------------------------------------------------------

    def get(self, key: str, fallback: Any = None) -> dict[str, Any] | None:
        """As `aget`, waiting on the socket (from sync code, tests and tools)."""
        entry = self._front.get(key)
        if entry is not None or self._down():
            return entry
        try:
            value = self._client.get(NAMESPACE + key)
        except Exception as exc:  # a miss, as in _fetch
            self._failed(exc)
            return None
        return self._accept(key, value)

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store `value` (JSON-serialisable) under `key`, replacing what was there."""
        self._remember(key, value)
        if not self._down():
            self._set(key, value)

    def _set(self, key: str, value: dict[str, Any]) -> None:
        try:
            text = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
            self._client.set(NAMESPACE + key, text, ex=self.ttl)
        except Exception as exc:  # not stored: costs a model call later, never this verdict
            self._failed(exc)

    def __len__(self) -> int:
        return sum(1 for _ in self._client.scan_iter(match=NAMESPACE + "*", count=1000))

    # --- what was read, and what failed -------------------------------------------------------

    def _accept(self, key: str, value: Any) -> dict[str, Any] | None:
        if value is None:
            return None
        entry = parse_entry(value)
        if entry is None:
            self._warn(
                "entry",
                "judge cache %s: the entry under %s is not a verdict referee wrote; asking the "
                "judge instead (logged once per process)",
                key[:12],
            )
            return None
        self._remember(key, entry)
        return entry

    def _down(self) -> bool:
        return self._down_until > 0 and time.monotonic() < self._down_until

    def _failed(self, exc: BaseException) -> None:
        self._down_until = time.monotonic() + RETRY_AFTER
        self._warn(
            "failed",
            "judge cache %s failed (%s: %s): verdicts are neither read from it nor stored "
            "there, so each costs a model call; tried again every %gs (logged once per process)",
            type(exc).__name__,
            exc,
            RETRY_AFTER,
        )

    def _warn(self, kind: str, message: str, *args: Any) -> None:
        """Log `message` as a warning the first time `kind` happens in this process."""
        if (os.getpid(), kind) in self._warned:
            logger.debug(message, _redacted(self.url), *args)
            return
        self._warned.add((os.getpid(), kind))
        logger.warning(message, _redacted(self.url), *args)
