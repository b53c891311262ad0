"""The registry of named reward types that spec files refer to (``type: json_schema``).

Built-in types register themselves with `@register` when `referee.rewards` is imported, which
the spec loader does: the registry itself imports no reward. Plugins add types through the
``referee.rewards`` entry-point group, e.g. in their ``pyproject.toml``::

    [project.entry-points."referee.rewards"]
    my_reward = "my_package.rewards:MyReward"

A registered type is a class (usually a dataclass) whose keyword arguments are the options a
spec gives; referee validates them with pydantic before construction, so a wrong option is
reported with its key path.
"""

from __future__ import annotations

import importlib.metadata
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["ENTRY_POINT_GROUP", "lookup", "register", "registered_types"]

ENTRY_POINT_GROUP = "referee.rewards"

logger = logging.getLogger("referee")

_types: dict[str, type[Any]] = {}
_lock = threading.Lock()
_plugins_loaded = False

T = TypeVar("T", bound=type[Any])


def register(name: str) -> Callable[[T], T]:
    """Register a reward class under `name`, for use as ``type: <name>`` in specs."""

    def decorate(cls: T) -> T:
        existing = _types.get(name)
        if existing is not None and existing is not cls:
            raise ValueError(
                f"reward type {name!r} is already registered by "
                f"{existing.__module__}.{existing.__qualname__}"
            )
        _types[name] = cls
        cls.kind = name
        return cls

    return decorate


def _load_plugins() -> None:
    global _plugins_loaded
    with _lock:
        if _plugins_loaded:
            return
        _plugins_loaded = True
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            if ep.name in _types:
                continue
            try:
                _types[ep.name] = ep.load()
            except Exception as exc:  # a broken plugin must not hide the built-in types
                logger.warning("could not load reward plugin %s (%s): %s", ep.name, ep.value, exc)


def lookup(name: str) -> type[Any] | None:
    """The reward class registered as `name`, loading plugins on first miss; None if unknown."""
    cls = _types.get(name)
    if cls is None:
        _load_plugins()
        cls = _types.get(name)
    return cls


def registered_types() -> list[str]:
    """Every registered reward type name, built-in and plugin, sorted."""
    _load_plugins()
    return sorted(_types)
