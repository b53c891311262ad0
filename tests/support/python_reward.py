"""A reward function in a plain file, as a user writes one for ``type: python``: it imports
nothing of referee. `tests.support.options` names it by its path, so every test that walks the
built-in types (pickling, worker processes, hostile completions, the schema) loads it so."""

from __future__ import annotations

from typing import Any


def mentions_reference(rollout: Any, *, scale: float = 1.0) -> dict[str, Any]:
    """`scale` where the completion holds the reference as text (a mapping's ``a``), else 0;
    returned in the shape `referee score` writes, with a component."""
    reference = rollout.reference
    if isinstance(reference, dict):
        reference = reference.get("a")
    found = reference is not None and str(reference) in rollout.completion_text
    return {"reward": scale if found else 0.0, "components": {"found": float(found)}}
