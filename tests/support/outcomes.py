"""How tests read a batch's scores at a glance."""

from __future__ import annotations

from collections.abc import Sequence

from referee.scores import Score


def outcome(scores: Sequence[Score]) -> list[float | str | None]:
    """Each value; a Failure's type; ``0:FAULT`` for the policy's verdict (`Score.fault`): a
    sync check past its deadline spun on the policy's output (issue 44), where an async one
    waited on something (a judge: ``timeout``, the infrastructure's Failure). A verdict is
    checked to be a 0 with no Failure: never a masked sample."""
    out: list[float | str | None] = []
    for s in scores:
        if s.fault is not None:
            assert s.value == 0.0 and s.failure is None, s
            out.append(f"0:{s.fault}")
        else:
            out.append(s.value if s.failure is None else s.failure.type)
    return out
