"""Two rewards on the same rollouts: how much do they agree, and where do they differ?

Over the rollouts both score: rank correlation (Spearman, Kendall's tau-b, with bootstrap
CIs), verdict agreement at a threshold (share and Cohen's kappa), the rollouts whose verdict
flipped (largest differences first), and inside each group, whether the two rank the attempts
alike: within-group Kendall's tau, how often the best attempt changes, and how often the sign
of a rollout's GRPO advantage (its reward minus its group's mean) differs, which is what a
trainer would feel. And the rollouts that moved at all (a drop of 0.2 on a few rollouts shows
there, where a rank correlation barely moves), largest first, with both rewards' reasons.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import SerializerFunctionWrapHandler, model_serializer, model_validator

from referee.errors import RolloutError
from referee.report.results import Result, Statistic
from referee.report.stats import bootstrap, cohen_kappa, kendall_tau, pearson, spearman
from referee.rollouts.scored import Number, ScoredRow

__all__ = [
    "Compared", "Comparison", "Flip", "Moved", "WithinGroups", "compare", "pair_rows",
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Compared:
    """One rollout as the two rewards scored it."""

    id: str
    group: str | None
    a: float | None
    b: float | None
    reason_a: str | None = None
    reason_b: str | None = None


def pair_rows(
    rows_a: Sequence[ScoredRow], rows_b: Sequence[ScoredRow], sources: tuple[str, str]
) -> list[Compared]:
    """Two scorings of the same rollouts, row by row.

    Raises:
        RolloutError: They differ in length, or a row's id differs: not scorings of the same
            rollouts in the same order. `sources` name the two.
    """
    a, b = sources
    if len(rows_a) != len(rows_b):
        raise RolloutError(
            f"{a} has {len(rows_a)} rows and {b} {len(rows_b)}: compare scorings of the same "
            "rollouts", source=a,
        )  # fmt: skip
    pairs = []
    for i, (x, y) in enumerate(zip(rows_a, rows_b, strict=True)):
        if x.id != y.id:
            raise RolloutError(
                f"id {x.id!r} in {a} but {y.id!r} in {b}: compare scorings of the same "
                "rollouts, in the same order", source=a, line=i + 1,
            )  # fmt: skip
        pairs.append(Compared(str(x.id), x.group, x.reward, y.reward, x.reason, y.reason))
    return pairs


class Flip(Result):
    """A rollout whose verdict the two rewards disagree on, with the value each gave."""

    id: str
    group: str | None
    a: Number
    b: Number


class Moved(Result):
    """A rollout the two rewards scored differently: both values and both reasons."""

    id: str
    group: str | None
    a: Number
    b: Number
    reason_a: str | None = None
    reason_b: str | None = None


MOVED = 1e-9
"""How far apart two values must be for a rollout to count as moved."""


class WithinGroups(Result):
    """Whether the two rank the attempts of each group alike (groups of two or more)."""

    groups: int
    mean_within_group_kendall_tau: float | None
    groups_ranked: int
    best_attempt_changed_share: float
    advantage_sign_differs_share: float


class Comparison(Result):
    """Two scorings of the same rollouts compared (see the module docstring).

    Written as JSON, the rewards' names stand in keys: `failed_only_a` as
    ``only_<names[0]>_failed``, and a flip's `a` and `b` under the two names.
    """

    names: tuple[str, str]
    rows: int
    compared: int
    failed_only_a: int
    failed_only_b: int
    both_failed: int
    pearson: float | None
    spearman: Statistic
    kendall_tau: Statistic
    threshold: float
    verdict_agreement: float | None
    cohen_kappa: float | None
    flipped: int
    top_flipped: tuple[Flip, ...]
    within_groups: WithinGroups | None
    moved: int = 0
    mean_difference: float | None = None
    mean_abs_difference: float | None = None
    top_moved: tuple[Moved, ...] = ()

    @model_validator(mode="after")
    def _two_names(self) -> Comparison:
        if self.names[0] == self.names[1]:
            raise ValueError(f"the two rewards need different names, got {self.names!r}")
        return self

    @model_serializer(mode="wrap")
    def _named_keys(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        a, b = self.names
        data: dict[str, Any] = handler(self)
        written = {"failed_only_a": f"only_{a}_failed", "failed_only_b": f"only_{b}_failed"}
        data["top_flipped"] = [
            {"id": f["id"], "group": f["group"], a: f["a"], b: f["b"]} for f in data["top_flipped"]
        ]
        data["top_moved"] = [
            {"id": m["id"], "group": m["group"], a: m["a"], b: m["b"],
             f"{a}_reason": m["reason_a"], f"{b}_reason": m["reason_b"]}
            for m in data["top_moved"]
        ]  # fmt: skip
        return {written.get(k, k): v for k, v in data.items()}

    @model_validator(mode="before")
    @classmethod
    def _unnamed_keys(cls, data: Any) -> Any:
        """Read the written form back. None of its keys is a `failed_only_*`, whatever the
        rewards' names, so the two forms cannot be mistaken for each other."""
        if not isinstance(data, dict) or "failed_only_a" in data:
            return data
        names = data.get("names")
        if not isinstance(names, list | tuple) or len(names) != 2:
            return data  # validation says what is wrong
        a, b = names
        fields = {f"only_{a}_failed": "failed_only_a", f"only_{b}_failed": "failed_only_b"}
        out = {fields.get(k, k): v for k, v in data.items()}
        if isinstance(out.get("top_flipped"), list):
            out["top_flipped"] = [
                {"id": f.get("id"), "group": f.get("group"), "a": f.get(a), "b": f.get(b)}
                if isinstance(f, dict)
                else f
                for f in out["top_flipped"]
            ]
        if isinstance(out.get("top_moved"), list):
            out["top_moved"] = [
                {"id": m.get("id"), "group": m.get("group"), "a": m.get(a), "b": m.get(b),
                 "reason_a": m.get(f"{a}_reason"), "reason_b": m.get(f"{b}_reason")}
                if isinstance(m, dict)
                else m
                for m in out["top_moved"]
            ]  # fmt: skip
        return out


def _sign(x: float, eps: float = 1e-9) -> int:
    return 0 if abs(x) <= eps else (1 if x > 0 else -1)


def _both(rows: Sequence[Compared]) -> list[tuple[Compared, float, float]]:
    """The rollouts both rewards scored, with their two values (narrowed to floats)."""
    return [(r, r.a, r.b) for r in rows if r.a is not None and r.b is not None]


def _groups(rows: Sequence[Compared]) -> WithinGroups | None:
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
    return WithinGroups(
        groups=len(multi),
        mean_within_group_kendall_tau=sum(taus) / len(taus) if taus else None,
        groups_ranked=len(taus),
        best_attempt_changed_share=best_changed / len(multi),
        advantage_sign_differs_share=sign_differs / sign_total,
    )


def compare(
    rows: Sequence[Compared],
    *,
    threshold: float = 0.5,
    top: int = 10,
    names: tuple[str, str] = ("A", "B"),
) -> Comparison:
    """The comparison of two scorings of the same rollouts.

    Raises:
        ValueError: The two names are the same (they name keys of the written comparison).
    """
    both = _both(rows)
    xs = [t[1] for t in both]
    ys = [t[2] for t in both]
    verdict_a = [x >= threshold for x in xs]
    verdict_b = [y >= threshold for y in ys]
    flipped = [t for t in both if (t[1] >= threshold) != (t[2] >= threshold)]
    flipped.sort(key=lambda t: -abs(t[1] - t[2]))
    moved = [t for t in both if abs(t[2] - t[1]) > MOVED]
    moved.sort(key=lambda t: -abs(t[1] - t[2]))
    differences = [y - x for x, y in zip(xs, ys, strict=True)]
    return Comparison(
        names=names,
        rows=len(rows),
        compared=len(both),
        failed_only_a=sum(1 for r in rows if r.a is None and r.b is not None),
        failed_only_b=sum(1 for r in rows if r.b is None and r.a is not None),
        both_failed=sum(1 for r in rows if r.a is None and r.b is None),
        pearson=pearson(xs, ys),
        spearman=Statistic.of(bootstrap(spearman, xs, ys, resamples=300)),
        kendall_tau=Statistic.of(bootstrap(kendall_tau, xs, ys, resamples=200)),
        threshold=threshold,
        verdict_agreement=(
            sum(p == q for p, q in zip(verdict_a, verdict_b, strict=True)) / len(both)
            if both
            else None
        ),
        cohen_kappa=cohen_kappa(verdict_a, verdict_b),
        flipped=len(flipped),
        top_flipped=tuple(Flip(id=r.id, group=r.group, a=a, b=b) for r, a, b in flipped[:top]),
        within_groups=_groups(rows),
        moved=len(moved),
        mean_difference=math.fsum(differences) / len(both) if both else None,
        mean_abs_difference=math.fsum(map(abs, differences)) / len(both) if both else None,
        top_moved=tuple(
            Moved(id=r.id, group=r.group, a=a, b=b, reason_a=r.reason_a, reason_b=r.reason_b)
            for r, a, b in moved[:top]
        ),
    )
