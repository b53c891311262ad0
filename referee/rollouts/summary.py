"""Running statistics of a scoring run: per component count, mean, std, min, max; failures."""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from referee.scores import Score

__all__ = ["ComponentStats", "Summary"]

TOTAL = "reward"


@dataclass
class ComponentStats:
    """Welford's running mean and variance, plus min and max, of one component's values."""

    count: int = 0
    missing: int = 0
    mean: float = 0.0
    _m2: float = 0.0
    min: float = math.inf
    max: float = -math.inf

    def add(self, value: float | None) -> None:
        if value is None:
            self.missing += 1
            return
        self.count += 1
        delta = value - self.mean
        self.mean += delta / self.count
        self._m2 += delta * (value - self.mean)
        self.min = min(self.min, value)
        self.max = max(self.max, value)

    @property
    def std(self) -> float:
        """Population standard deviation (0 for fewer than two values)."""
        return math.sqrt(self._m2 / self.count) if self.count > 1 else 0.0

    def to_dict(self) -> dict[str, Any]:
        empty = self.count == 0
        return {
            "count": self.count,
            "missing": self.missing,
            "mean": None if empty else self.mean,
            "std": None if empty else self.std,
            "min": None if empty else self.min,
            "max": None if empty else self.max,
        }


REASONS_KEPT = 100
"""How many distinct failure reasons a summary counts (the rest count as one: `OTHER`)."""

OTHER = "(other reasons)"


def _reason(kind: str, message: str) -> str:
    """A failure's reason as counted: its row's line number dropped (an unreadable row's
    message starts with it), cut to 200 characters."""
    message = re.sub(r"^line \d+: ", "", message)
    if len(message) > 200:
        message = message[:197] + "..."
    return f"{kind}: {message}"


@dataclass
class Summary:
    """What a scoring run saw: rows, per-component statistics, failures by type and by reason,
    and how many rows were grouped by their prompt (`referee.rollouts.readers.prompt_group`)."""

    rows: int = 0
    components: dict[str, ComponentStats] = field(default_factory=dict)
    failures: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    prompt_grouped: int = 0

    @property
    def failed(self) -> int:
        """Rows with no value: a failure, or an unreadable row."""
        return sum(self.failures.values())

    @property
    def all_failed(self) -> bool:
        """Every row failed (and there was at least one): nothing was scored."""
        return self.rows > 0 and self.failed == self.rows

    def add(self, score: Score) -> None:
        self.rows += 1
        stats = self.components
        if TOTAL not in stats:
            stats[TOTAL] = ComponentStats()
        stats[TOTAL].add(score.value)
        for name, value in score.components.items():
            if name not in stats:
                stats[name] = ComponentStats()
            stats[name].add(value)
        for name in score.skipped:
            self.skipped[name] += 1
        if score.failure is not None:
            self.failures[score.failure.type] += 1
            reason = _reason(score.failure.type, score.failure.message or score.reason or "")
            if reason in self.reasons or len(self.reasons) < REASONS_KEPT:
                self.reasons[reason] += 1
            else:
                self.reasons[OTHER] += 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "components": {k: v.to_dict() for k, v in self.components.items()},
            "failures": dict(self.failures),
            "skipped": dict(self.skipped),
            "reasons": dict(self.reasons.most_common()),
            "prompt_grouped": self.prompt_grouped,
        }
