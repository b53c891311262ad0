"""Dense rewards: how per-step values (one per assistant turn) fold into a total."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

__all__ = ["Fold", "fold_steps"]

Fold = Literal["sum", "mean", "last", "discounted", "min", "product"]
"""How steps become a total: their sum, their mean, the last one, the discounted return seen
from the first step, ``sum(gamma**t * r_t)``, the worst step, or their product (a process
reward model's per-step probabilities of being right: the chance that every step is)."""


def fold_steps(steps: Sequence[float], how: Fold, gamma: float = 1.0) -> float:
    """The total of per-step values; 0.0 for no steps (nothing was done, nothing earned)."""
    if not steps:
        return 0.0
    if how == "sum":
        return float(sum(steps))
    if how == "mean":
        return float(sum(steps)) / len(steps)
    if how == "last":
        return float(steps[-1])
    if how == "discounted":
        total, weight = 0.0, 1.0
        for value in steps:
            total += weight * value
            weight *= gamma
        return total
    if how == "min":
        return float(min(steps))
    if how == "product":
        return float(math.prod(steps))
    raise ValueError(f"unknown fold {how!r}; use sum, mean, last, discounted, min or product")
