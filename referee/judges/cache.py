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
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

__all__ = ["FRONT_SIZE", "VerdictCache", "cache_key", "default_cache_path", "shared_cache"]

logger = logging.getLogger("referee.judges")

FRONT_SIZE = 100_000
"""The most entries a cache keeps in memory per process (the oldest go first)."""


def default_cache_path() -> Path:
    """``$REFEREE_CACHE_DIR/judge.sqlite``, else ``~/.cache/referee/judge.sqlite``."""
    base = os.environ.get("REFEREE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "referee"
    )
    return Path(base) / "judge.sqlite"


# json.dumps with these options, without re-reading them on every call (a cache hit's key is
# a few microseconds of its budget).
_KEY_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str).encode


def cache_key(
    model: str, messages: list[dict[str, Any]], params: dict[str, Any], version: str
) -> str:
    """The hash of what decides a verdict."""
    blob = _KEY_JSON({"model": model, "messages": messages, "params": params, "version": version})
    return hashlib.sha256(blob.encode()).hexdigest()


class VerdictCache:
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

    def get(self, key: str) -> dict[str, Any] | None:
        """The entry stored under `key`, or None. The dict may be shared: do not mutate it."""
        entry = self._front.get(key)
        if entry is not None:
            return entry
        try:
            row = (
                self._conn().execute("SELECT value FROM verdicts WHERE key = ?", (key,)).fetchone()
            )
        except sqlite3.Error as exc:
            logger.warning("judge cache %s unreadable: %s", self.path, exc)
            return None
        entry = None if row is None else json.loads(row[0])
        if not isinstance(entry, dict):
            return None
        self._remember(key, entry)
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

    def _remember(self, key: str, entry: dict[str, Any]) -> None:
        front = self._front
        if len(front) >= FRONT_SIZE:
            # the oldest (dicts keep insertion order), unless another thread got there first
            with contextlib.suppress(KeyError, StopIteration, RuntimeError):
                del front[next(iter(front))]
        front[key] = entry

    def __len__(self) -> int:
        return int(self._conn().execute("SELECT COUNT(*) FROM verdicts").fetchone()[0])


_shared: dict[str, VerdictCache] = {}
_by_argument: dict[tuple[str | None, str | None, str | None], VerdictCache] = {}
_shared_lock = threading.Lock()


def shared_cache(path: str | os.PathLike[str] | None = None) -> VerdictCache:
    """The process's cache object for `path` (one connection per thread, and one memory front,
    not one per call)."""
    # Every judge call asks: the answer is remembered by the argument as given (and, for the
    # default path, the variables that decide it).
    given = None if path is None else os.fspath(path)
    argument = (
        (given, None, None)
        if given is not None
        else (None, os.environ.get("REFEREE_CACHE_DIR"), os.environ.get("XDG_CACHE_HOME"))
    )
    cache = _by_argument.get(argument)
    if cache is not None:
        return cache
    key = str(Path(given) if given is not None else default_cache_path())
    with _shared_lock:
        cache = _shared.get(key)
        if cache is None:
            cache = _shared[key] = VerdictCache(key)
        _by_argument[argument] = cache
        return cache
