"""Which verdict store a cache location names, one per process and location: a SQLite file
(`referee.judges.cache.VerdictCache`) or a Redis/Valkey URL
(`referee.judges.redis_cache.RedisVerdictCache`). The choice is made here, above both
backends, so neither imports the module that chooses it."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from referee.judges.cache import VerdictCache, VerdictStore, default_cache_path

__all__ = ["is_cache_url", "shared_cache"]

_shared: dict[str, VerdictStore] = {}
_by_argument: dict[tuple[str | None, str | None, str | None], VerdictStore] = {}
_shared_lock = threading.Lock()

_URL_SCHEMES = ("redis://", "rediss://", "unix://")


def is_cache_url(location: object) -> bool:
    """Whether `location` names a Redis cache (``redis://``, ``rediss://``, ``unix://``)
    rather than a SQLite file."""
    return isinstance(location, str) and location.startswith(_URL_SCHEMES)


def shared_cache(location: str | os.PathLike[str] | None = None) -> VerdictStore:
    """The process's cache for `location`: a SQLite file (None: `default_cache_path`), or a
    Redis/Valkey URL (``redis://host:6379/0``, see `referee.judges.redis_cache`). One object
    per process and location, with one memory front (and, for SQLite, one connection per
    thread), not one per call."""
    # Every judge call asks: the answer is remembered by the argument as given (and, for the
    # default path, the variables that decide it).
    given = None if location is None else os.fspath(location)
    argument = (
        (given, None, None)
        if given is not None
        else (None, os.environ.get("REFEREE_CACHE_DIR"), os.environ.get("XDG_CACHE_HOME"))
    )
    cache = _by_argument.get(argument)
    if cache is not None:
        return cache
    if is_cache_url(given):
        key = str(given)
    else:
        key = str(Path(given) if given is not None else default_cache_path())
    with _shared_lock:
        cache = _shared.get(key)
        if cache is None:
            if is_cache_url(key):
                from referee.judges.redis_cache import RedisVerdictCache  # redis, when asked

                cache = RedisVerdictCache(key)
            else:
                cache = VerdictCache(key)
            _shared[key] = cache
        _by_argument[argument] = cache
        return cache
