"""Harbor's reward files, read as its verifier reads them: ``reward.json`` and ``reward.txt``."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from referee.errors import RewardError

__all__ = [
    "REWARD_JSON",
    "REWARD_TXT",
    "VERIFIER_DIR",
    "BadRewardFile",
    "RewardFile",
    "parse_reward_json",
    "parse_reward_text",
]

VERIFIER_DIR = "/logs/verifier"
REWARD_TXT = f"{VERIFIER_DIR}/reward.txt"
REWARD_JSON = f"{VERIFIER_DIR}/reward.json"


@dataclass(frozen=True)
class RewardFile:
    """A reward file's value, its other numbers (components), and which file it was."""

    value: float
    components: dict[str, float]
    source: str


class BadRewardFile(RewardError):
    """A reward file that cannot be read as Harbor reads it: `kind` is the Failure's type."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.failure_type = kind


def parse_reward_json(data: bytes, reward_key: str = "reward") -> RewardFile:
    """``reward.json`` as Harbor's verifier reads it: JSON whose values are all finite
    numbers (``true``/``false`` count, as they do in Python); then `reward_key`'s value is
    the reward and the other keys are components.

    Where referee differs (documented): Harbor takes a file without a ``reward`` key as
    metrics with no reward; a reward needs one value, so that is a Failure naming the keys
    and `reward_key`. More than 64 keys is a Failure (a cap on hostile files)."""
    if not data:
        raise BadRewardFile("error", f"{REWARD_JSON} is empty")
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRewardFile("error", f"{REWARD_JSON} is not JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise BadRewardFile(
            "error", f"{REWARD_JSON} must be an object, got {type(parsed).__name__}"
        )
    if len(parsed) > 64:
        raise BadRewardFile("error", f"{REWARD_JSON} has {len(parsed)} keys, over 64")
    values: dict[str, float] = {}
    for key, value in parsed.items():
        if not isinstance(value, int | float):
            raise BadRewardFile(
                "invalid_value", f"{REWARD_JSON}: {key[:80]!r} is not a number: {value!r:.80}"
            )
        number = float(value)
        if not math.isfinite(number):
            raise BadRewardFile("invalid_value", f"{REWARD_JSON}: {key[:80]!r} is {value!r}")
        values[key] = number
    if reward_key not in values:
        raise BadRewardFile(
            "error",
            f"{REWARD_JSON} has no {reward_key[:80]!r} key (its keys: "
            f"{', '.join(k[:40] for k in list(values)[:10])}); set the reward's reward_key to "
            "the metric that is the reward",
        )
    value = values.pop(reward_key)
    return RewardFile(value, {k[:80]: v for k, v in values.items()}, REWARD_JSON)


def parse_reward_text(data: bytes) -> RewardFile:
    """``reward.txt`` as Harbor's verifier reads it: Python's ``float`` of the text (blanks
    around it allowed), finite; an empty file is an error."""
    if not data:
        raise BadRewardFile("error", f"{REWARD_TXT} is empty")
    try:
        value = float(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        shown = data[:80].decode("utf-8", "replace")
        raise BadRewardFile("invalid_value", f"{REWARD_TXT} is not a number: {shown!r}") from None
    if not math.isfinite(value):
        raise BadRewardFile("invalid_value", f"{REWARD_TXT} is not finite: {value!r}")
    return RewardFile(value, {}, REWARD_TXT)
