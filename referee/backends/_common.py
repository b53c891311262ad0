"""What the trainer backends share: resolving a reward, component values, JSON-text references."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from referee.reward import Reward
from referee.score import Score
from referee.spec import load

__all__ = ["component_value", "decode_json_text", "resolve"]


def resolve(reward_or_spec: Reward | str | Path | Mapping[str, Any]) -> Reward:
    """A Reward as given, or the reward a spec (path or mapping) describes."""
    if isinstance(reward_or_spec, (str, Path, Mapping)):
        return load(reward_or_spec)
    if not isinstance(reward_or_spec, Reward):
        raise TypeError(
            f"expected a referee Reward, a spec path or a spec mapping, got "
            f"{type(reward_or_spec).__name__}"
        )
    return reward_or_spec


def component_value(score: Score, name: str, whole: str) -> float | None:
    """A component's value on a score; the total when `name` is the reward itself."""
    if name == whole:
        return score.value
    return score.components.get(name)


def decode_json_text(value: Any) -> Any:
    """A reference sent as text: decoded when it is a JSON object or array, else as given.

    Trainers pass ground truth as strings (verl parquet columns, OpenRLHF labels); an object
    stored as JSON text is what a field comparison needs. Plain answers ("42", "x = 2") stay
    text: only text starting with ``{`` or ``[`` is decoded, and only when it parses.
    """
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        with contextlib.suppress(json.JSONDecodeError):
            return json.loads(value)
    return value
