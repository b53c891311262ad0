"""Two rewards on the same rollouts: how much do they agree, and where do they differ?

Over the rollouts both score: rank correlation (Spearman, Kendall's tau-b, with bootstrap
CIs), verdict agreement at a threshold (share and Cohen's kappa), the rollouts whose verdict
flipped (largest differences first), and inside each group, whether the two rank the attempts
alike: within-group Kendall's tau, how often the best attempt changes, and how often the sign
of a rollout's GRPO advantage (its reward minus its group's mean) differs, which is what a
trainer would feel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from referee.report.stats import bootstrap, cohen_kappa, kendall_tau, pearson, spearman

__all__ = ["Compared", "compare"]


@dataclass(frozen=True, slots=True)
class Compared:
    """One rollout as the two rewards scored it."""

    id: str
    group: str | None
    a: float | None
    b: float | None


def _sign(x: float, eps: float = 1e-9) -> int:
    return 0 if abs(x) <= eps else (1 if x > 0 else -1)


def _both(rows: Sequence[Compared]) -> list[tuple[Compared, float, float]]:
    """The rollouts both rewards scored, with their two values (narrowed to floats)."""
    return [(r, r.a, r.b) for r in rows if r.a is not None and r.b is not None]


def _groups(rows: Sequence[Compared]) -> dict[str, Any] | None:
    groups: dict[str, list[tuple[float, float]]] = {}
    for r, value_a, value_b in _both(rows):
        if r.group is not None:
            groups.setdefault(r.group, []).append((value_a, value_b))
    multi = [g for g in groups.values() if len(g) >= 2]
    if not multi:
        return None
    taus: list[float] = []
    best_changed = 0
    sign_total = sign_differs = 0
    for g in multi:
        a = [p[0] for p in g]
        b = [p[1] for p in g]
        tau = kendall_tau(a, b)
        if tau is not None:
            taus.append(tau)
        best_a = {i for i, v in enumerate(a) if v == max(a)}
        best_b = {i for i, v in enumerate(b) if v == max(b)}
        best_changed += not (best_a & best_b)
        mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)
        for x, y in g:
            sign_total += 1
            sign_differs += _sign(x - mean_a) != _sign(y - mean_b)
    return {
        "groups": len(multi),
        "mean_within_group_kendall_tau": sum(taus) / len(taus) if taus else None,
        "groups_ranked": len(taus),
        "best_attempt_changed_share": best_changed / len(multi),
        "advantage_sign_differs_share": sign_differs / sign_total,
    }


def compare(
    rows: Sequence[Compared],
    *,
    threshold: float = 0.5,
    top: int = 10,
    names: tuple[str, str] = ("A", "B"),
) -> dict[str, Any]:
    """The comparison of two scorings of the same rollouts, JSON-ready."""
    both = _both(rows)
    xs = [t[1] for t in both]
    ys = [t[2] for t in both]
    verdict_a = [x >= threshold for x in xs]
    verdict_b = [y >= threshold for y in ys]
    flipped = [t for t in both if (t[1] >= threshold) != (t[2] >= threshold)]
    flipped.sort(key=lambda t: -abs(t[1] - t[2]))
    only = {
        f"only_{names[0]}_failed": sum(1 for r in rows if r.a is None and r.b is not None),
        f"only_{names[1]}_failed": sum(1 for r in rows if r.b is None and r.a is not None),
        "both_failed": sum(1 for r in rows if r.a is None and r.b is None),
    }
    return {
        "names": list(names),
        "rows": len(rows),
        "compared": len(both),
        **only,
        "pearson": pearson(xs, ys),
        "spearman": bootstrap(spearman, xs, ys, resamples=300).to_dict(),
        "kendall_tau": bootstrap(kendall_tau, xs, ys, resamples=200).to_dict(),
        "threshold": threshold,
        "verdict_agreement": (
            sum(p == q for p, q in zip(verdict_a, verdict_b, strict=True)) / len(both)
            if both
            else None
        ),
        "cohen_kappa": cohen_kappa(verdict_a, verdict_b),
        "flipped": len(flipped),
        "top_flipped": [
            {"id": r.id, "group": r.group, names[0]: a, names[1]: b} for r, a, b in flipped[:top]
        ],
        "within_groups": _groups(rows),
    }
