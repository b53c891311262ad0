"""What the trainer backends share: resolving a reward, walking its tree, flat extra-info keys."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from referee.compose import Combined, Transform
from referee.reward import GroupReward, Reward
from referee.score import Score
from referee.spec import load

__all__ = ["decode_json_text", "iter_rewards", "needs_groups", "resolve", "top_components"]


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


def iter_rewards(reward: Reward) -> Iterator[Reward]:
    """The reward and every reward inside it (components of combinations, transformed rewards)."""
    yield reward
    if isinstance(reward, Combined):
        for component in reward.components:
            yield from iter_rewards(component.reward)
    elif isinstance(reward, Transform):
        yield from iter_rewards(reward.reward)


def needs_groups(reward: Reward) -> bool:
    """Whether any part of the reward compares the attempts of a group."""
    return any(isinstance(r, GroupReward) for r in iter_rewards(reward))


def top_components(reward: Reward) -> list[tuple[str, float]]:
    """Names and weights of a combination's top-level components; `[(name, 1.0)]` otherwise."""
    if isinstance(reward, Combined):
        return [(c.name, c.weight) for c in reward.components]
    return [(reward.name, 1.0)]


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
