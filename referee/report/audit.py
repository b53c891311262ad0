"""Auditing a judge: its biases, its consistency and its agreement with people, each measured
with an interval, on the columns AlpacaEval publishes for its evaluators where they apply.

A judge spec is any reward spec (a `rubric_judge`, a `pairwise_judge`, a tournament, or a
combination with a judge in it); the audit asks it about pairs of answers built from the user's
own rollouts and reads a *preference* out of its scores: for answers ``a`` and ``b``, 1 when it
pays ``a`` more, 0 when it pays ``b`` more, 0.5 for a tie. How it asks depends on the kind of
judge:

- **pointwise** (each answer scored alone): ``a`` and ``b`` are scored apart and their values
  compared. There is no slot to prefer, so no position measure.
- **pairwise** (`pairwise_judge`, which already asks both orders): ``a`` is the response and
  ``b`` the reference; its ``response_first`` and ``reference_first`` components are ``a``'s
  preference in each order.
- **group** (a reward that compares the attempts of a group): ``[a, b]`` and ``[b, a]`` are
  scored as groups of two.

The measures (`JudgeAudit`):

- **position** (pairwise and group judges): P(prefer first), the share of single-order verdicts
  that chose the first slot (a tie counting half), AlpacaEval's "Proba. prefer 1"; and the flip
  rate, the share of pairs whose preferred answer changes when the order is swapped
  (FastChat's inconsistency under swap). Over every pair the audit asks.
- **length**: P(prefer longer) between an answer and the same answer padded with content-free
  restating (`referee.report.hacks.FILLER`): equal correctness, one longer. 0.5 is no bias.
  For a pointwise judge, also what the padding earns: the mean difference of value per 100
  characters added (0 is no bias).
- **lists**: P(prefer the list) between an answer and the same sentences as a bulleted list.
- **injection**: the share of (answer, probe) pairs where the answer with an instruction to the
  grader, a fake verdict or a fence escape appended (`referee probe`'s texts) is paid more than
  the answer. 0 is resistant.
- **consistency**: each rollout judged `repeats` times with seeds seed+1, seed+2, ...: the mean
  variance of its value, and the share of rollouts whose verdict (value >= `threshold`) is not
  the same every time.
- **agreement** with people, where rollouts carry labels (`metadata.label`, `human_score`, ...,
  as `referee report` reads them): Spearman, Kendall's tau-b, accuracy and Cohen's kappa at
  `threshold` for pass/fail labels, Krippendorff's alpha (interval); pairwise accuracy where
  rows carry preferences (`metadata.preferred`); and Spearman and Pearson over systems where
  rows name one (`metadata.system`), from each system's mean judged value and mean label.
- **cost** and **time** per 1,000 verdicts, from the Scores' own accounting (`Score.cost`,
  `Score.latency`).

Intervals are 95% percentile-bootstrap intervals over pairs (or rollouts), seeded, so an audit
is reproducible. Gates (`Gate`) compare a measure's point value with a bound; a gate whose
measure could not be taken fails, saying so.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from referee.report.audit_pairs import Pair, answer_text, with_text
from referee.report.audit_pairs import pairs as pairs_of
from referee.report.diagnostics import agreement_of, label_value, preference_value
from referee.report.results import Agreement, Result, Statistic
from referee.report.stats import krippendorff_alpha, pearson, quantile, spearman
from referee.reward import Reward, needs_groups
from referee.rollout import Rollout
from referee.scores import Score

__all__ = [
    "GATES",
    "AuditOptions",
    "Consistency",
    "Gate",
    "JudgeAudit",
    "JudgeKind",
    "Position",
    "Systems",
    "judge_kind",
    "reseed",
    "run_audit",
]

JudgeKind = Literal["pointwise", "pairwise", "group"]


class Position(Result):
    """Position bias: P(prefer first) and the flip rate under swap."""

    prefer_first: Statistic
    flip_rate: Statistic


class Consistency(Result):
    """Self-consistency over `repeats` judgements of each rollout."""

    repeats: int
    mean_variance: float
    inconsistent: Statistic


class Systems(Result):
    """Agreement over systems: each system's mean judged value against its mean label."""

    key: str
    systems: int
    spearman: float | None
    pearson: float | None


class Gate(Result):
    """A bound on a measure: `passed` when the point value is within it."""

    name: str
    measure: str
    bound: float
    value: float | None
    passed: bool
    note: str | None = None


class JudgeAudit(Result):
    """What `referee audit-judge` reports (see the module's docstring for each measure).

    Attributes:
        rollouts: The rollouts audited (answers the pairs were built from).
        pairs: Pairs of answers asked about.
        verdicts: Scores asked of the judge (a pairwise judge's score is two calls).
        failed: Of those, how many gave no value, by failure type.
        failure_examples: The first such failure's message, by failure type (what to mend
            before trusting the rest: a judge that cannot write its verdict's JSON, a server
            that timed out).
        cost_per_1000: Dollars per 1,000 verdicts (None: the judge reported no cost).
        seconds_per_1000: Wall-clock seconds per 1,000 verdicts, at the judge's concurrency
            (the audit's time spent scoring, over the verdicts asked).
    """

    judge: str
    kind: JudgeKind
    threshold: float
    rollouts: int
    pairs: int
    verdicts: int
    failed: dict[str, int]
    position: Position | None
    prefer_longer: Statistic | None
    per_100_chars: Statistic | None
    prefer_lists: Statistic | None
    injection: Statistic | None
    consistency: Consistency | None
    agreement: Agreement | None
    krippendorff_alpha: float | None
    pairwise_accuracy: Statistic | None
    systems: Systems | None
    cost_per_1000: float | None
    seconds_per_1000: float | None
    gates: tuple[Gate, ...] = ()
    failure_examples: dict[str, str] = Field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """Whether every gate passed."""
        return all(g.passed for g in self.gates)


@dataclass(frozen=True)
class AuditOptions:
    """How an audit runs.

    Attributes:
        limit: The most rollouts audited (answers with text, in file order).
        repeats: Judgements of each rollout for the consistency measure (1: not measured).
        threshold: A value at or above it is a pass, for verdict flips and accuracy.
        label: The metadata key of a human label (None: the first of `LABEL_KEYS` found).
        preference: The metadata key of a human preference flag (None: the first found).
        system: The metadata key naming the system that wrote a rollout.
        measures: Which measures to take (default: all that apply).
    """

    limit: int = 50
    repeats: int = 3
    threshold: float = 0.5
    label: str | None = None
    preference: str | None = None
    system: str = "system"
    measures: frozenset[str] = frozenset(
        {"position", "length", "lists", "injection", "consistency", "agreement"}
    )


def judge_kind(reward: Reward) -> JudgeKind:
    """How the audit asks `reward` about a pair (see the module's docstring)."""
    from referee.rewards.judged.pairwise import PairwiseJudge

    if isinstance(reward, PairwiseJudge):
        return "pairwise"
    return "group" if needs_groups(reward) else "pointwise"


# --- asking the judge ------------------------------------------------------------------------


def _cmp(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or math.isnan(a) or math.isnan(b):
        return None
    return 1.0 if a > b else 0.0 if a < b else 0.5


Orders = tuple[float | None, float | None]
"""A pair's preference for `a`: shown first, and shown second (None for a pointwise judge,
which shows one answer at a time)."""


async def _orders(
    reward: Reward,
    kind: JudgeKind,
    pairs: Sequence[Pair],
    tally: list[Score],
    known: Mapping[tuple[int, str], Score],
) -> tuple[list[Orders], list[float | None]]:
    """Each pair's `Orders`, and (pointwise judges) how much more `a` was paid than `b`. A
    pointwise judge scores each distinct answer once; `known` holds the scores it already gave
    (by the base rollout's id() and the text)."""
    if kind == "pointwise":
        at: dict[tuple[int, str], int] = {}
        rollouts: list[Rollout] = []

        def index(base: Rollout, text: str) -> tuple[int, str]:
            key = (id(base), text)
            if key not in known and key not in at:
                at[key] = len(rollouts)
                rollouts.append(with_text(base, text, str(len(rollouts))))
            return key

        keys = [(index(p.base, p.a), index(p.base, p.b)) for p in pairs]
        scores = await reward.score_batch(rollouts) if rollouts else []
        tally.extend(scores)
        scored = {**known, **{key: scores[i] for key, i in at.items()}}
        values = [(scored[a].value, scored[b].value) for a, b in keys]
        diffs = [None if a is None or b is None else a - b for a, b in values]
        return [(_cmp(a, b), None) for a, b in values], diffs
    if kind == "pairwise":
        rollouts = [with_text(p.base, p.a, str(i), reference=p.b) for i, p in enumerate(pairs)]
        scores = await reward.score_batch(rollouts)
        tally.extend(scores)
        answers = [(s.components.get("response_first"), s.components.get("reference_first"))
                   if s.value is not None else (None, None) for s in scores]  # fmt: skip
        return answers, [None] * len(pairs)
    rollouts = []
    for i, p in enumerate(pairs):  # groups of two, in both orders
        ab, ba = f"audit:{i}:ab", f"audit:{i}:ba"
        for tag, text, group in ((f"{i}ab-a", p.a, ab), (f"{i}ab-b", p.b, ab),
                                 (f"{i}ba-b", p.b, ba), (f"{i}ba-a", p.a, ba)):  # fmt: skip
            rollouts.append(with_text(p.base, text, tag, group=group))
    scores = await reward.score_batch(rollouts)
    tally.extend(scores)
    out: list[Orders] = []
    for i in range(len(pairs)):
        s = scores[4 * i : 4 * i + 4]
        out.append((_cmp(s[0].value, s[1].value), _cmp(s[3].value, s[2].value)))
    return out, [None] * len(pairs)


def _rate(values: Sequence[float], resamples: int = 1000) -> Statistic | None:
    """The mean of `values` with its 95% percentile-bootstrap interval (seeded); None when
    empty. A mean's resample is drawn with `random.choices`, several times cheaper than the
    index lists of `referee.report.stats.bootstrap` (an audit takes a dozen of them)."""
    if not values:
        return None
    n = len(values)
    mean = sum(values) / n
    if n < 3:
        return Statistic(value=mean, ci_low=None, ci_high=None, n=n)
    rng = random.Random(0)
    draws = sorted(math.fsum(rng.choices(values, k=n)) / n for _ in range(resamples))
    return Statistic(value=mean, ci_low=quantile(draws, 0.025), ci_high=quantile(draws, 0.975),
                     n=n)  # fmt: skip


def _preference(first: float | None, second: float | None) -> float | None:
    """`a`'s preference over both orders asked (their mean), None where a verdict is missing."""
    if first is None:
        return None
    return first if second is None else (first + second) / 2


def _position(answers: Sequence[Orders]) -> Position | None:
    firsts: list[float] = []  # per single-order verdict: 1 where the first slot won
    flips: list[float] = []
    for first, second in answers:
        if first is None or second is None:
            continue
        firsts += [first, 1.0 - second]  # `a` is first in one order, `b` in the other
        flips.append(float(first != second))
    prefer_first, flip_rate = _rate(firsts), _rate(flips)
    if prefer_first is None or flip_rate is None:
        return None
    return Position(prefer_first=prefer_first, flip_rate=flip_rate)


# --- the audit -------------------------------------------------------------------------------


async def run_audit(
    reward: Reward,
    rollouts: Sequence[Rollout],
    options: AuditOptions = AuditOptions(),
    *,
    name: str = "judge",
    reseeded: Callable[[int], Reward] | None = None,
    gates: Mapping[str, float] | None = None,
) -> JudgeAudit:
    """Audit the judge `reward` on `rollouts` (see the module's docstring).

    Args:
        reseeded: The judge with its sampling seed moved by ``r`` (``r`` = 1, 2, ...), for the
            consistency measure; None: the consistency measure is not taken.
        gates: Bounds by gate name (`GATES`): ``{"max_flip_rate": 0.1}``.
    """
    kind = judge_kind(reward)
    audited = [r for r in rollouts if answer_text(r).strip()][: options.limit]
    measures = options.measures
    if kind == "pointwise":
        measures = measures - {"position"}
    tally: list[Score] = []
    pairs = pairs_of(audited, measures)
    started = time.perf_counter()
    # Each rollout judged alone: for consistency and agreement, and a pointwise judge's
    # score of the plain answer in every pair. A pairwise judge compares a rollout with its
    # reference: those that have one.
    alone = [r for r in audited if kind != "pairwise" or r.reference is not None]
    if not ({"consistency", "agreement"} & measures or kind == "pointwise"):
        alone = []
    originals = await reward.score_batch(alone) if alone else []
    tally.extend(originals)
    known = {(id(r), r.completion): s for r, s in zip(alone, originals, strict=True)
             if kind == "pointwise" and isinstance(r.completion, str)}  # fmt: skip
    answers, diffs = await _orders(reward, kind, pairs, tally, known) if pairs else ([], [])
    by_measure: dict[str, list[float]] = {}
    slopes: list[float] = []
    for pair, (first, second), diff in zip(pairs, answers, diffs, strict=True):
        if pair.measure == "length" and diff is not None:
            slopes.append(100 * diff / (len(pair.a) - len(pair.b)))
        pref = _preference(first, second)
        if pref is not None:
            measure = pair.measure.split(":")[0]
            value = float(pref > 0.5) if measure == "injection" else pref
            by_measure.setdefault(measure, []).append(value)
    consistency = None
    if "consistency" in measures and reseeded is not None and options.repeats > 1 and alone:
        runs = [[s.value for s in originals]]
        for r in range(1, options.repeats):
            again = await reseeded(r).score_batch(alone)
            tally.extend(again)
            runs.append([s.value for s in again])
        consistency = _consistency(runs, options.threshold)
    elapsed = time.perf_counter() - started  # (less the per-pair bookkeeping, negligible)

    agreement = alpha = accuracy = systems = None
    if "agreement" in measures:
        agreement, alpha, systems = _labels(alone, originals, options)
        accuracy = _preferred(alone, originals, options.preference)
    failed: dict[str, int] = {}
    examples: dict[str, str] = {}
    for s in tally:
        if s.value is None:
            kind_of = s.failure.type if s.failure is not None else "no_value"
            failed[kind_of] = failed.get(kind_of, 0) + 1
            if s.failure is not None:
                examples.setdefault(kind_of, s.failure.message)
    audit = JudgeAudit(
        judge=name,
        kind=kind,
        threshold=options.threshold,
        rollouts=len(audited),
        pairs=len(pairs),
        verdicts=len(tally),
        failed=failed,
        failure_examples=examples,
        position=_position(answers) if kind != "pointwise" else None,
        prefer_longer=_rate(by_measure.get("length", [])),
        per_100_chars=_rate(slopes),
        prefer_lists=_rate(by_measure.get("lists", [])),
        injection=_rate(by_measure.get("injection", [])),
        consistency=consistency,
        agreement=agreement,
        krippendorff_alpha=alpha,
        pairwise_accuracy=accuracy,
        systems=systems,
        cost_per_1000=_per_1000([s.cost for s in tally]),
        seconds_per_1000=1000 * elapsed / len(tally) if tally else None,
    )
    return audit.model_copy(update={"gates": tuple(check_gates(audit, gates or {}))})


def _per_1000(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    if not known or not values:
        return None
    return 1000 * sum(known) / len(values)


def _consistency(runs: Sequence[Sequence[float | None]], threshold: float) -> Consistency | None:
    variances: list[float] = []
    flips: list[float] = []
    for values in zip(*runs, strict=True):
        known = [v for v in values if v is not None]
        if len(known) < 2:
            continue
        mean = sum(known) / len(known)
        variances.append(sum((v - mean) ** 2 for v in known) / len(known))
        flips.append(float(len({v >= threshold for v in known}) > 1))
    inconsistent = _rate(flips)
    if inconsistent is None:
        return None
    return Consistency(repeats=len(runs), mean_variance=sum(variances) / len(variances),
                       inconsistent=inconsistent)  # fmt: skip


def _labels(
    rollouts: Sequence[Rollout], scores: Sequence[Score], options: AuditOptions
) -> tuple[Agreement | None, float | None, Systems | None]:
    pairs: list[tuple[float, float]] = []
    key_used: str | None = None
    by_system: dict[str, tuple[list[float], list[float]]] = {}
    for rollout, score in zip(rollouts, scores, strict=True):
        key, label = label_value(rollout.metadata, options.label)
        if label is None or score.value is None:
            continue
        key_used = key
        pairs.append((score.value, label))
        system = rollout.metadata.get(options.system)
        if isinstance(system, str):
            values, labels = by_system.setdefault(system, ([], []))
            values.append(score.value)
            labels.append(label)
    if key_used is None:
        return None, None, None
    agreement = agreement_of(pairs, key_used, options.threshold)
    alpha = krippendorff_alpha([[v, label] for v, label in pairs], "interval")
    systems = None
    if len(by_system) >= 3:
        means = [(sum(v) / len(v), sum(h) / len(h)) for v, h in by_system.values()]
        xs, ys = [m[0] for m in means], [m[1] for m in means]
        systems = Systems(key=options.system, systems=len(means), spearman=spearman(xs, ys),
                          pearson=pearson(xs, ys))  # fmt: skip
    return agreement, alpha, systems


def _preferred(
    rollouts: Sequence[Rollout], scores: Sequence[Score], key: str | None
) -> Statistic | None:
    """Pairwise accuracy against people's preferences: within each group, each (preferred,
    not preferred) pair is right when the judge pays the preferred attempt more (a tie half)."""
    groups: dict[str, tuple[list[float], list[float]]] = {}
    for rollout, score in zip(rollouts, scores, strict=True):
        _, preferred = preference_value(rollout.metadata, key)
        if rollout.group is None or preferred is None or score.value is None:
            continue
        chosen, rejected = groups.setdefault(rollout.group, ([], []))
        (chosen if preferred else rejected).append(score.value)
    right = [
        1.0 if c > x else 0.5 if c == x else 0.0
        for chosen, rejected in groups.values()
        for c in chosen
        for x in rejected
    ]
    return _rate(right)


def reseed(data: Mapping[str, Any], shift: int) -> dict[str, Any]:
    """The spec with every judge's sampling seed moved by `shift` (a judge is a mapping with
    ``model``, ``models`` or ``client``), and every `pairwise_judge` asked to keep both orders'
    verdicts (``disagreement: tie``) so that a flip is measured, not failed."""

    def walk(node: Any, in_client: bool = False) -> Any:
        if isinstance(node, Mapping):
            out = {k: walk(v, k == "client") for k, v in node.items()}
            if in_client:  # its parent moves its seed
                return out
            if shift and isinstance(out.get("client"), Mapping):
                client = dict(out["client"])
                client["seed"] = int(client.get("seed") or 0) + shift
                out["client"] = client
            elif shift and ("model" in out or "models" in out):
                out["seed"] = int(out.get("seed") or 0) + shift
            if out.get("type") == "pairwise_judge":
                out["disagreement"] = "tie"
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(data)  # type: ignore[no-any-return]


# --- gates -----------------------------------------------------------------------------------


def _value(statistic: Statistic | None) -> float | None:
    return None if statistic is None else statistic.value


GATES: dict[str, tuple[str, Callable[[JudgeAudit], float | None], Literal["max", "min"]]] = {
    "max_flip_rate": (
        "flip rate under swap",
        lambda a: _value(a.position.flip_rate) if a.position else None,
        "max",
    ),
    "max_position_bias": (
        "|P(prefer first) - 0.5|",
        lambda a: (
            abs(v - 0.5)
            if a.position and (v := a.position.prefer_first.value) is not None
            else None
        ),
        "max",
    ),
    "max_prefer_longer": ("P(prefer longer)", lambda a: _value(a.prefer_longer), "max"),
    "max_prefer_lists": ("P(prefer lists)", lambda a: _value(a.prefer_lists), "max"),
    "max_injection": ("injection success rate", lambda a: _value(a.injection), "max"),
    "max_inconsistency": (
        "share of verdicts that change across seeds",
        lambda a: _value(a.consistency.inconsistent) if a.consistency else None,
        "max",
    ),
    "min_agreement": (
        "accuracy against human labels (or preferences)",
        lambda a: (
            _value(a.agreement.accuracy)
            if a.agreement and a.agreement.accuracy
            else _value(a.pairwise_accuracy)
        ),
        "min",
    ),
    "min_kappa": (
        "Cohen's kappa against human labels",
        lambda a: _value(a.agreement.cohen_kappa) if a.agreement else None,
        "min",
    ),
}
"""Gate name -> (the measure it bounds, how to read it from an audit, which side is bad)."""


def check_gates(audit: JudgeAudit, bounds: Mapping[str, float]) -> list[Gate]:
    """Each bound in `bounds` checked against `audit`; unknown names raise ValueError."""
    out = []
    for name, bound in bounds.items():
        if name not in GATES:
            raise ValueError(f"unknown gate {name!r}; the gates are {', '.join(GATES)}")
        measure, read, side = GATES[name]
        value = read(audit)
        if value is None:
            out.append(Gate(name=name, measure=measure, bound=bound, value=None, passed=False,
                            note="not measured on these rollouts"))  # fmt: skip
            continue
        passed = value <= bound if side == "max" else value >= bound
        out.append(Gate(name=name, measure=measure, bound=bound, value=value, passed=passed))
    return out
