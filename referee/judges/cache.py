"""A persistent cache of judge verdicts (SQLite), so scoring a log again costs nothing.

The key is a hash of everything that decides a verdict: the model, the messages, the sampling
parameters and the rubric's version. Several processes may read and write the same file at
once (WAL mode, a busy timeout); a cache that cannot be written only costs a model call.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

__all__ = ["VerdictCache", "cache_key", "default_cache_path", "shared_cache"]

logger = logging.getLogger("referee.judges")


def default_cache_path() -> Path:
    """``$REFEREE_CACHE_DIR/judge.sqlite``, else ``~/.cache/referee/judge.sqlite``."""
    base = os.environ.get("REFEREE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "referee"
    )
    return Path(base) / "judge.sqlite"


def cache_key(
    model: str, messages: list[dict[str, Any]], params: dict[str, Any], version: str
) -> str:
    """The hash of what decides a verdict."""
    blob = json.dumps(
        {"model": model, "messages": messages, "params": params, "version": version},
        sort_keys=True,
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


class VerdictCache:
    """Verdicts by key in one SQLite file; safe across threads and processes."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self._local = threading.local()

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
        try:
            row = (
                self._conn().execute("SELECT value FROM verdicts WHERE key = ?", (key,)).fetchone()
            )
        except sqlite3.Error as exc:
            logger.warning("judge cache %s unreadable: %s", self.path, exc)
            return None
        return None if row is None else dict(json.loads(row[0]))

    def put(self, key: str, value: dict[str, Any]) -> None:
        try:
            self._conn().execute(
                "INSERT OR REPLACE INTO verdicts (key, value) VALUES (?, ?)",
                (key, json.dumps(value, ensure_ascii=False)),
            )
        except sqlite3.Error as exc:
            logger.warning("judge cache %s not written: %s", self.path, exc)

    def __len__(self) -> int:
        return int(self._conn().execute("SELECT COUNT(*) FROM verdicts").fetchone()[0])


_shared: dict[str, VerdictCache] = {}
_shared_lock = threading.Lock()


def shared_cache(path: str | os.PathLike[str] | None = None) -> VerdictCache:
    """The process's cache object for `path` (one connection per thread, not per call)."""
    key = str(Path(path) if path is not None else default_cache_path())
    with _shared_lock:
        cache = _shared.get(key)
        if cache is None:
            cache = _shared[key] = VerdictCache(key)
        return cache
