"""A persistent cache of judge verdicts (SQLite), so scoring a log again costs nothing.

The key is a hash of everything that decides a verdict: the model, the messages, the sampling
parameters and the rubric's version. Several processes may read and write the same file at
once (WAL mode, a busy timeout); a cache that cannot be written only costs a model call.

In front of the file, each process keeps the entries it has read or written in memory (up to
`FRONT_SIZE`), so re-scoring a log reads SQLite once per verdict. This is correct across
processes because a key is a hash of everything a verdict depends on: whatever entry any
process stored under it is a verdict for exactly those inputs, so a remembered one never goes
stale. Only hits are remembered: a miss asks the file again, and so sees what another process
wrote since.

The key is SHA-256 of the call's canonical JSON (`cache_key`). Caches filled before it took
this form are read through `legacy_cache_key`: a miss looks there once and moves the entry.

A cluster shares one cache in Redis or Valkey instead (`referee.judges.redis_cache`), with the
same keys and entries: `referee.judges.stores.shared_cache` opens whichever its location
names (chosen there, above both backends), and both keep the `VerdictStore` protocol the
judge client uses.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from referee._paths import cache_dir

__all__ = [
    "FRONT_SIZE",
    "FrontMixin",
    "VerdictCache",
    "VerdictStore",
    "cache_key",
    "default_cache_path",
    "legacy_cache_key",
    "parse_entry",
]

logger = logging.getLogger("referee.judges")

FRONT_SIZE = 100_000
"""The most entries a cache keeps in memory per process (the oldest go first)."""


def default_cache_path() -> Path:
    """``$REFEREE_CACHE_DIR/judge.sqlite``, else ``~/.cache/referee/judge.sqlite``."""
    return cache_dir() / "judge.sqlite"


_COMPACT = json.JSONEncoder(
    sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str
).encode


def _compact_json(value: Any) -> bytes:
    """Canonical JSON without orjson: sorted keys, no spaces, UTF-8. The same bytes as orjson's
    for strings, integers, lists and dicts; floats below 1e-4 are written differently
    (``1e-05``, where orjson writes ``0.00001``), which costs only a cache miss."""
    return _COMPACT(value).encode("utf-8", "surrogatepass")


try:
    import orjson

    _SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS

    def _canonical(value: Any) -> bytes:
        try:
            return orjson.dumps(value, default=str, option=_SORTED)
        except (TypeError, orjson.JSONEncodeError):
            # what orjson refuses: a lone surrogate, an integer past 64 bits
            return _compact_json(value)

    def _loads(text: str) -> Any:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:  # NaN, say, which json.dumps writes and orjson refuses
            return json.loads(text)

except ImportError:  # pragma: no cover - orjson comes with the judges extra
    _canonical = _compact_json

    def _loads(text: str) -> Any:
        return json.loads(text)


_KEY_PREFIX = b"referee-verdict-v2\n"


def cache_key(
    model: str, messages: list[dict[str, Any]], params: dict[str, Any], version: str
) -> str:
    """The hash of what decides a verdict: SHA-256 of its canonical JSON (sorted keys, no
    spaces, UTF-8), so the same call gives the same key in any process and on any machine."""
    blob = _canonical({"model": model, "messages": messages, "params": params, "version": version})
    return hashlib.sha256(_KEY_PREFIX + blob).hexdigest()


# json.dumps with these options, without re-reading them on every call.
_LEGACY_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str).encode


def legacy_cache_key(
    model: str, messages: list[dict[str, Any]], params: dict[str, Any], version: str
) -> str:
    """The key caches were written under before `cache_key` took its form (``json.dumps``
    with its spaces, which cost a cache hit 5 us of its 20). A miss under `cache_key` looks
    here once, so a cache filled before the change is still read (`VerdictCache.get`'s
    ``fallback``)."""
    blob = _LEGACY_JSON(
        {"model": model, "messages": messages, "params": params, "version": version}
    )
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


class VerdictStore(Protocol):
    """What the judge client asks of a verdict cache (`VerdictCache`, `RedisVerdictCache`).

    An entry is a JSON object: ``raw`` (the judge's reply), ``cost``, ``prompt_tokens``,
    ``completion_tokens`` and, when logprobs were asked for, ``candidates``. The dicts a
    cache returns may be shared: do not mutate them.
    """

    def get(self, key: str, fallback: Callable[[], str] | None = None) -> dict[str, Any] | None: ...

    def put(self, key: str, value: dict[str, Any]) -> None: ...

    async def aget(
        self, key: str, fallback: Callable[[], str] | None = None
    ) -> dict[str, Any] | None: ...

    async def aput(self, key: str, value: dict[str, Any]) -> None: ...

    def __len__(self) -> int: ...


def parse_entry(stored: str | bytes) -> dict[str, Any] | None:
    """The entry in `stored`, or None where it is not one referee wrote (damaged, or written
    by someone else into a shared cache): a reply text ``raw`` and, if any, ``candidates``
    as `referee.judges.logprobs` gives them. Such an entry is a miss, never an error."""
    try:
        text = stored.decode("utf-8", "surrogatepass") if isinstance(stored, bytes) else stored
        entry = _loads(text)
    except ValueError:  # UnicodeDecodeError included
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("raw"), str):
        return None
    candidates = entry.get("candidates")
    if candidates is not None and not (
        isinstance(candidates, dict)
        and all(isinstance(found, list) and all(map(_is_candidate, found))
                for found in candidates.values())
    ):  # fmt: skip
        return None
    return entry


def _is_candidate(pair: Any) -> bool:
    """``[text, logprob]``, as a stored verdict's candidates hold them."""
    return (
        isinstance(pair, list)
        and len(pair) == 2
        and isinstance(pair[0], str)
        and isinstance(pair[1], int | float)
        and not isinstance(pair[1], bool)
    )


class FrontMixin:
    """The entries a process read or wrote, in memory (up to `FRONT_SIZE`, oldest out first)."""

    _front: dict[str, dict[str, Any]]

    def _remember(self, key: str, entry: dict[str, Any]) -> None:
        front = self._front
        if len(front) >= FRONT_SIZE:
            # the oldest (dicts keep insertion order), unless another thread got there first
            with contextlib.suppress(KeyError, StopIteration, RuntimeError):
                del front[next(iter(front))]
        front[key] = entry


class VerdictCache(FrontMixin):
    """Verdicts by key in one SQLite file; safe across threads and processes."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self._local = threading.local()
        self._front: dict[str, dict[str, Any]] = {}

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "pid", None) != os.getpid():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA busy_timeout=30000")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
            )
            self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def get(self, key: str, fallback: Callable[[], str] | None = None) -> dict[str, Any] | None:
        """The entry stored under `key`, or None. The dict may be shared: do not mutate it.

        On a miss, `fallback` gives the key the same entry may have been stored under before
        (`legacy_cache_key`); an entry found there is copied to `key`, so it is read once.
        """
        entry = self._front.get(key)
        if entry is not None:
            return entry
        entry = self._read(key)
        if entry is not None:
            self._remember(key, entry)
        elif fallback is not None:
            entry = self._read(fallback())
            if entry is not None:
                self.put(key, entry)  # and remembered
        return entry

    def _read(self, key: str) -> dict[str, Any] | None:
        try:
            row = (
                self._conn().execute("SELECT value FROM verdicts WHERE key = ?", (key,)).fetchone()
            )
        except sqlite3.Error as exc:
            logger.warning("judge cache %s unreadable: %s", self.path, exc)
            return None
        if row is None:
            return None
        entry = parse_entry(row[0])
        if entry is None:  # a damaged entry costs a model call, as a missing one does
            logger.warning("judge cache %s: entry %s unreadable", self.path, key[:12])
        return entry

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store `value` (JSON-serialisable) under `key`, replacing what was there."""
        try:
            self._conn().execute(
                "INSERT OR REPLACE INTO verdicts (key, value) VALUES (?, ?)",
                (key, json.dumps(value, ensure_ascii=False)),
            )
        except sqlite3.Error as exc:
            logger.warning("judge cache %s not written: %s", self.path, exc)
        self._remember(key, value)

    # SQLite answers in microseconds from a local file: on the event loop, as it always was.
    async def aget(
        self, key: str, fallback: Callable[[], str] | None = None
    ) -> dict[str, Any] | None:
        """`get`, for the judge client."""
        return self.get(key, fallback)

    async def aput(self, key: str, value: dict[str, Any]) -> None:
        """`put`, for the judge client."""
        self.put(key, value)

    def __len__(self) -> int:
        return int(self._conn().execute("SELECT COUNT(*) FROM verdicts").fetchone()[0])
