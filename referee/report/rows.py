"""`ReportRow`: what the report needs of one scored rollout, in a module of its own so that
the report's parts (`diagnostics`, `panel`, `passk`) all read it without importing each other."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from referee.rollouts.scored import ScoredRow

__all__ = ["ReportRow"]


@dataclass(slots=True)
class ReportRow:
    """What the report needs of one scored rollout."""

    value: float | None
    components: Mapping[str, float | None] = field(default_factory=dict)
    failure: str | None = None
    group: str | None = None
    reason: str | None = None
    skipped: Sequence[str] = ()
    failure_where: str | None = None
    failure_message: str | None = None
    chars: int | None = None
    label: float | None = None
    preferred: bool | None = None
    steps: Sequence[float] | None = None
    cost: float | None = None
    latency: float | None = None
    tokens: int | None = None
    subset: str | None = None
    answer: str | None = None

    @classmethod
    def of(
        cls,
        scored: ScoredRow,
        *,
        chars: int | None = None,
        label: float | None = None,
        preferred: bool | None = None,
        subset: str | None = None,
        answer: str | None = None,
    ) -> ReportRow:
        """What the report needs of a scored output row, with what its rollout adds (the
        completion's length, a human label or preference) where the rollout is known."""
        failure = scored.failure
        return cls(
            value=scored.reward,
            components=scored.components,
            failure=None if failure is None else failure.type,
            group=scored.group,
            reason=scored.reason,
            skipped=scored.skipped,
            failure_where=None if failure is None else failure.where,
            failure_message=None if failure is None else failure.message,
            chars=chars,
            label=label,
            preferred=preferred,
            steps=scored.steps,
            cost=scored.cost,
            latency=scored.latency,
            tokens=scored.tokens,
            subset=subset,
            answer=answer,
        )
