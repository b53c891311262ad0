"""Is this reward any good? Diagnostics of a scored set of rollouts, as a `Report`.

- distributions of the total and of every component (summary statistics and histograms);
- failures by type; for each component that gave no value on some rollouts, how many and why
  (a missing reference shows here first, not as a healthy mean of the others);
- judge cost, latency and tokens;
- GRPO signal: the share of groups whose rewards do not vary (the trainer learns nothing from
  them), the spread within groups;
- reward against completion length (Pearson and Spearman, and points for a scatter plot): a
  reward that grows with length is the commonest sign of hacking;
- agreement with human labels where the rows carry them (Spearman, Kendall's tau-b; for
  binary labels accuracy and Cohen's kappa at a threshold), each with a bootstrap 95% CI;
- determinism, when the same rollouts were scored several times: the share whose value
  changed and whose verdict (value >= threshold) flipped;
- pass@k, maj@n and avg@n over the groups, overall and per subset (`referee.report.passk`);
- judge panels' agreement: Krippendorff's alpha between members, and each member's agreement
  with human labels and their error correlation (`referee.report.panel`).
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from referee.errors import RolloutError
from referee.report.panel import build_panels
from referee.report.passk import FailedAs, build_passk, math_answer
from referee.report.results import (
    Agreement,
    ComponentLength,
    Determinism,
    Distribution,
    GrpoSignal,
    JudgeUsage,
    LengthCorrelation,
    Missing,
    Preferences,
    Report,
    Statistic,
    StepPosition,
    StepRewards,
)
from referee.report.rows import ReportRow
from referee.report.stats import (
    AlphaLevel,
    Estimate,
    bootstrap,
    cohen_kappa,
    histogram,
    kendall_tau,
    pearson,
    quantile,
    spearman,
)
from referee.rollouts.jsonl import RowError, RowOk
from referee.rollouts.scored import ScoredRow

__all__ = [
    "AGREEMENT_STATISTICS",
    "LABEL_KEYS",
    "MISSING_REASONS",
    "PREFERENCE_KEYS",
    "SUBSET_KEYS",
    "PassKOptions",
    "ReportRow",
    "agreement_of",
    "build_report",
    "join_rows",
    "label_value",
    "missing_lines",
    "preference_value",
    "subset_value",
]

AGREEMENT_STATISTICS = ("spearman", "kendall_tau", "accuracy", "cohen_kappa")
"""The statistics of agreement with human labels a report may hold, in the order shown
(accuracy and kappa only for pass/fail labels)."""

LABEL_KEYS = ("label", "human_label", "human_score", "human", "gold_score")
"""Metadata keys read as a human label when no `--label` is given, first found wins."""

PREFERENCE_KEYS = ("preferred", "chosen", "human_preferred")
"""Metadata keys read as a human preference (true: the attempt a person preferred in its
group, false: one they did not) when no `--preference` is given."""

SUBSET_KEYS = ("subset", "data_source")
"""Metadata keys read as a rollout's subset (for pass@k per subset) when no `--subset-key` is
given, first found wins (``data_source`` is verl's)."""

MISSING_REASONS = 5
"""How many reasons a component's `Missing` lists, most common first."""
_REASON_CHARS = 160

SCATTER_POINTS = 1500
BOOTSTRAP_MAX = 2000  # bootstrap on a seeded sample of at most this many pairs


def _distribution(values: Sequence[float], missing: int) -> Distribution:
    if not values:
        return Distribution(count=0, missing=missing)
    ordered = sorted(values)
    n = len(ordered)
    mean = sum(ordered) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in ordered) / n)
    return Distribution(
        count=n,
        missing=missing,
        mean=mean,
        std=std,
        min=ordered[0],
        p50=quantile(ordered, 0.5),
        max=ordered[-1],
        histogram=tuple(histogram(ordered)),
    )


def _sample(pairs: list[tuple[float, float]], limit: int) -> list[tuple[float, float]]:
    if len(pairs) <= limit:
        return pairs
    return random.Random(0).sample(pairs, limit)


def _why(row: ReportRow, name: str, names: Sequence[str]) -> str:
    """Why component `name` gave no value on `row`: the total's failure where it names the
    component, else the component's part of the row's reason (``name: why; other: ...``)."""
    where = row.failure_where
    if where is not None and (where == name or where.startswith(name + ".")):
        message = row.failure_message or ""
        why = message[len(name) + 2 :] if message.startswith(f"{name}: ") else message
        return _cut(why)
    reason = row.reason or ""
    start = re.search(rf"(?:^|; |\()({re.escape(name)}): ", reason)
    if start is None:
        return "no reason given"
    end = len(reason)
    for other in names:
        found = re.compile(rf"; {re.escape(other)}: ").search(reason, start.end())
        if found is not None:
            end = min(end, found.start())
    why = reason[start.end() : end]
    if end == len(reason) and why.count(")") > why.count("("):
        why = why[: why.rfind(")")]  # the headline's "(...)" around the components' reasons
    return _cut(why)


def _cut(text: str) -> str:
    text = text.strip() or "no reason given"
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 3] + "..."


def _missing(rows: Sequence[ReportRow]) -> dict[str, Missing]:
    """Per top-level component that ran and gave no value somewhere: how often, and why. (A
    component only ever skipped, by a gate, is not listed: that is the gate's design.)"""
    names = [n for n in _component_names(rows) if "." not in n]
    counts: dict[str, Counter[str]] = {}
    skipped: Counter[str] = Counter()
    for r in rows:
        skipped.update(n for n in r.skipped if n in names)
        for name, value in r.components.items():
            if value is None and "." not in name:
                counts.setdefault(name, Counter())[_why(r, name, names)] += 1
    out = {}
    for name in names:
        reasons = counts.get(name, Counter())
        if not reasons:
            continue
        top = dict(reasons.most_common(MISSING_REASONS))
        rest = sum(reasons.values()) - sum(top.values())
        if rest:
            top["(other)"] = rest
        out[name] = Missing(rows=sum(reasons.values()), skipped=skipped[name], reasons=top)
    return out


def _grpo(rows: Sequence[ReportRow]) -> GrpoSignal | None:
    groups: dict[str, list[float]] = {}
    for r in rows:
        if r.group is not None and r.value is not None:
            groups.setdefault(r.group, []).append(r.value)
    multi = [v for v in groups.values() if len(v) >= 2]
    if not multi:
        return None
    spreads = []
    flat = 0
    for values in multi:
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        spreads.append(std)
        flat += max(values) - min(values) < 1e-9
    return GrpoSignal(
        groups=len(multi),
        mean_group_size=sum(len(v) for v in multi) / len(multi),
        zero_variance_share=flat / len(multi),
        mean_within_group_std=sum(spreads) / len(spreads),
        within_group_std_histogram=tuple(histogram(spreads)),
    )


def _length(rows: Sequence[ReportRow]) -> LengthCorrelation | None:
    pairs = [(float(r.chars), r.value) for r in rows if r.chars is not None and r.value is not None]
    if len(pairs) < 3:
        return None
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    return LengthCorrelation(
        n=len(pairs),
        pearson=pearson(xs, ys),
        spearman=spearman(xs, ys),
        points=tuple(_sample(pairs, SCATTER_POINTS)),
        components=_component_lengths(rows),
    )


def _component_names(rows: Sequence[ReportRow]) -> list[str]:
    """Every component any row has, in order of first appearance."""
    names: dict[str, None] = {}
    for r in rows:
        names.update(dict.fromkeys(r.components))
    return list(names)


def _component_lengths(rows: Sequence[ReportRow]) -> dict[str, ComponentLength]:
    """Each component's correlation with completion length, over the rows that have it: a
    reward model's raw score shows its length bias even where a normalisation (a z-score
    within groups) or a combination hides it from the total."""
    out = {}
    for name in _component_names(rows):
        xs, ys = [], []
        for r in rows:
            value = r.components.get(name)
            if r.chars is not None and value is not None:
                xs.append(float(r.chars))
                ys.append(float(value))
        if len(xs) >= 3:
            rho = spearman(xs, ys)
            out[name] = ComponentLength(n=len(xs), pearson=pearson(xs, ys), spearman=rho)
    return out


def _agreement(rows: Sequence[ReportRow], label: str, threshold: float) -> Agreement | None:
    pairs = [(r.value, r.label) for r in rows if r.label is not None and r.value is not None]
    return agreement_of(pairs, label, threshold)


def agreement_of(
    pairs: Sequence[tuple[float, float]], label: str, threshold: float
) -> Agreement | None:
    """Agreement of (value, label) pairs with the labels; None under 3 pairs."""
    if len(pairs) < 3:
        return None
    sample = _sample(list(pairs), BOOTSTRAP_MAX)
    xs, ys = [p[0] for p in sample], [p[1] for p in sample]
    spearman_ci = Statistic.of(bootstrap(spearman, xs, ys, resamples=500))
    kendall_ci = Statistic.of(bootstrap(kendall_tau, xs, ys, resamples=200))
    if not set(ys) <= {0.0, 1.0}:
        return Agreement(label=label, n=len(pairs), spearman=spearman_ci, kendall_tau=kendall_ci)

    def accuracy(x: Sequence[float], y: Sequence[float]) -> float:
        return sum((a >= threshold) == (b == 1.0) for a, b in zip(x, y, strict=True)) / len(x)

    def kappa(x: Sequence[float], y: Sequence[float]) -> float | None:
        return cohen_kappa([a >= threshold for a in x], [b == 1.0 for b in y])

    return Agreement(
        label=label,
        n=len(pairs),
        spearman=spearman_ci,
        kendall_tau=kendall_ci,
        threshold=threshold,
        accuracy=Statistic.of(bootstrap(accuracy, xs, ys, resamples=500)),
        cohen_kappa=Statistic.of(bootstrap(kappa, xs, ys, resamples=500)),
    )


def _preferences(rows: Sequence[ReportRow], key: str) -> Preferences | None:
    """Pairwise accuracy against human preferences: within each group, every (preferred, not
    preferred) pair is right when the reward ranks the preferred attempt higher (a tie counts
    half). The CI resamples groups, since pairs of one group are not independent."""
    groups: dict[str, tuple[list[float], list[float]]] = {}
    for r in rows:
        if r.group is None or r.preferred is None or r.value is None:
            continue
        chosen, rejected = groups.setdefault(r.group, ([], []))
        (chosen if r.preferred else rejected).append(r.value)
    per_group = []
    for chosen, rejected in groups.values():
        if chosen and rejected:
            right = sum(1.0 if c > x else 0.5 if c == x else 0.0 for c in chosen for x in rejected)
            per_group.append((right, len(chosen) * len(rejected)))
    if not per_group:
        return None
    pairs = sum(n for _, n in per_group)
    value = sum(r for r, _ in per_group) / pairs
    rng = random.Random(0)
    draws = []
    for _ in range(500):
        sample = [per_group[rng.randrange(len(per_group))] for _ in per_group]
        draws.append(sum(r for r, _ in sample) / sum(n for _, n in sample))
    draws.sort()
    estimate = Estimate(value, quantile(draws, 0.025), quantile(draws, 0.975), pairs)
    return Preferences(key=key, groups=len(per_group), pairwise_accuracy=Statistic.of(estimate))


MAX_STEP_POSITIONS = 50


def _steps(rows: Sequence[ReportRow]) -> StepRewards | None:
    """Where in trajectories rewards are earned or lost: per-step values by position."""
    stepped = [r.steps for r in rows if r.steps]
    if not stepped:
        return None
    by_position: list[list[float]] = []
    for steps in stepped:
        for t, value in enumerate(steps[:MAX_STEP_POSITIONS]):
            if t == len(by_position):
                by_position.append([])
            by_position[t].append(value)
    flat = [v for steps in stepped for v in steps]
    return StepRewards(
        rollouts=len(stepped),
        mean_steps=len(flat) / len(stepped),
        by_position=tuple(
            StepPosition(
                step=t,
                count=len(values),
                mean=sum(values) / len(values),
                min=min(values),
                max=max(values),
            )
            for t, values in enumerate(by_position)
        ),
        histogram=tuple(histogram(flat)),
    )


def _determinism(repeats: Sequence[Sequence[float | None]], threshold: float) -> Determinism:
    n = len(repeats[0])
    changed = flipped = 0
    for i in range(n):
        values = [run[i] for run in repeats]
        if len(set(values)) > 1:
            changed += 1
        verdicts = {None if v is None else v >= threshold for v in values}
        if len(verdicts) > 1:
            flipped += 1
    return Determinism(
        repeats=len(repeats),
        rollouts=n,
        changed_share=changed / n if n else 0.0,
        verdict_flip_share=flipped / n if n else 0.0,
        threshold=threshold,
    )


@dataclass(frozen=True, slots=True)
class PassKOptions:
    """How the report computes pass@k, maj@n and avg@n (`referee.report.passk`).

    Attributes:
        ks: The k of pass@k (default: 1 and the powers of two up to the smallest group).
        threshold: The reward at or above which an attempt is correct.
        failed_as: A failed attempt (no reward) as an incorrect attempt, or left out.
        answers: Where the rows' answers came from (``metadata.KEY``, ``math``); None: the
            rows carry none and maj@n is not computed.
        subset_key: The metadata key the rows' subsets came from.
    """

    ks: Sequence[int] | None = None
    threshold: float = 1.0
    failed_as: FailedAs = "incorrect"
    answers: str | None = None
    subset_key: str | None = None


def build_report(
    rows: Iterable[ReportRow],
    *,
    label: str | None = None,
    preference: str | None = None,
    threshold: float = 0.5,
    repeats: Sequence[Sequence[float | None]] | None = None,
    source: str | None = None,
    passk: PassKOptions | None = None,
    panel_level: AlphaLevel | None = None,
) -> Report:
    """The diagnostics of scored rows (see the module docstring). `passk` sets how pass@k is
    computed (default `PassKOptions()`); `panel_level` fixes a panel's alpha level of
    measurement (default: nominal for 0/1 verdicts, else interval)."""
    kept = list(rows)
    options = passk or PassKOptions()
    agree = None
    if label is not None:
        named = label

        def agree(pairs: Sequence[tuple[float, float]]) -> Agreement | None:
            return agreement_of(pairs, named, threshold)

    totals = [r.value for r in kept if r.value is not None]
    components = {}
    for name in _component_names(kept):
        present = [r.components.get(name) for r in kept]
        values = [v for v in present if v is not None]
        components[name] = _distribution(values, len(present) - len(values))
    failures = Counter(r.failure for r in kept if r.failure is not None)
    costs = [r.cost for r in kept if r.cost is not None]
    latencies = sorted(r.latency for r in kept if r.latency is not None)
    tokens = [r.tokens for r in kept if r.tokens is not None]
    judge = None
    if costs or latencies or tokens:
        judge = JudgeUsage(
            cost_total=sum(costs),
            cost_per_row=sum(costs) / len(kept) if kept else 0.0,
            latency_p50=quantile(latencies, 0.5) if latencies else None,
            latency_p95=quantile(latencies, 0.95) if latencies else None,
            tokens_total=sum(tokens),
        )
    return Report(
        source=source,
        rows=len(kept),
        scored=len(totals),
        failed=len(kept) - len(totals),
        reward=_distribution(totals, len(kept) - len(totals)),
        components=components,
        failures=dict(failures.most_common()),
        missing=_missing(kept),
        judge=judge,
        grpo=_grpo(kept),
        length=_length(kept),
        agreement=None if label is None else _agreement(kept, label, threshold),
        preferences=None if preference is None else _preferences(kept, preference),
        steps=_steps(kept),
        determinism=None if not repeats or len(repeats) < 2 else _determinism(repeats, threshold),
        passk=build_passk(
            kept,
            ks=options.ks,
            threshold=options.threshold,
            failed_as=options.failed_as,
            answers=options.answers,
            subset_key=options.subset_key,
        ),
        panels=build_panels(kept, level=panel_level, label=label, agree=agree),
    )


def missing_lines(report: Report) -> list[str]:
    """The report's components with no value, one line each, for a report's first screen:
    ``answer: no value on 40 of 40 rollouts (rollout has no reference to compare against 40)``."""
    lines = []
    for name, m in report.missing.items():
        why = ", ".join(f"{k} {v}" for k, v in m.reasons.items())
        skipped = f"; skipped on {m.skipped}" if m.skipped else ""
        lines.append(f"{name}: no value on {m.rows} of {report.rows} rollouts ({why}){skipped}")
    return lines


def label_value(metadata: Mapping[str, Any], key: str | None) -> tuple[str | None, float | None]:
    """The human label in a rollout's metadata (the named key, or the first of LABEL_KEYS),
    as a number (booleans as 0/1); (key, None) where it is absent or not a number."""
    found = _key_of(metadata, key, LABEL_KEYS)
    value = metadata.get(found) if found is not None else None
    if isinstance(value, bool):
        return found, float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return found, float(value)
    return found, None


def _key_of(metadata: Mapping[str, Any], key: str | None, known: Sequence[str]) -> str | None:
    """The metadata key to read: the one named, else the first of `known` present."""
    if key is not None:
        return key
    return next((k for k in known if k in metadata), None)


def preference_value(
    metadata: Mapping[str, Any], key: str | None
) -> tuple[str | None, bool | None]:
    """The human preference flag in a rollout's metadata (the named key, or the first of
    PREFERENCE_KEYS): (key, True/False), or (key, None) where it is absent or not a bool."""
    found = _key_of(metadata, key, PREFERENCE_KEYS)
    value = metadata.get(found) if found is not None else None
    return found, value if isinstance(value, bool) else None


def paired(
    items: Iterable[RowOk | RowError], scores: Iterable[ScoredRow], source: str
) -> Iterator[tuple[RowOk | RowError, ScoredRow]]:
    """Each rollout with its scored row, in order, checked to be the rollouts that were scored.

    Raises:
        RolloutError: The two differ in length, or a row's id differs from its rollout's.
            `source` names the scored file.
    """
    for i, (item, scored) in enumerate(itertools.zip_longest(items, scores)):
        if item is None or scored is None:
            raise RolloutError(
                f"the scored file and the rollouts differ in length (at row {i + 1}); "
                "pass the rollouts file that was scored", source=source,
            )  # fmt: skip
        if isinstance(item, RowOk) and scored.id is not None and scored.id != item.rollout.id:
            raise RolloutError(
                f"the scored file has id {scored.id!r}, the rollouts {item.rollout.id!r}; "
                "pass the rollouts file that was scored", source=source, line=i + 1,
            )  # fmt: skip
        yield item, scored


def join_rows(
    items: Iterable[RowOk | RowError],
    scores: Iterable[ScoredRow],
    label: str | None,
    preference: str | None = None,
    *,
    source: str = "the scored file",
    subset_key: str | None = None,
    answer_key: str | None = None,
    math_answers: bool = False,
) -> tuple[list[ReportRow], str | None, str | None, str | None]:
    """Report rows from input items and their scored rows (in the same order), and the label,
    preference and subset keys found (`label_value`, `preference_value`, `subset_value`).
    Each row's answer (for maj@n) is the rollout's metadata at `answer_key`, or with
    `math_answers` its completion's final answer (`referee.report.passk.math_answer`).

    Raises:
        RolloutError: The two differ in length, or a row's id differs from its rollout's:
            not the rollouts that were scored. `source` names the scored file.
    """
    rows: list[ReportRow] = []
    found: str | None = label
    found_pref: str | None = preference
    found_subset: str | None = subset_key
    for item, scored in paired(items, scores, source):
        chars = None
        value = None
        preferred = None
        subset = answer = None
        if isinstance(item, RowOk):
            metadata = item.rollout.metadata
            chars = len(item.rollout.completion_text)
            key, value = label_value(metadata, label)
            found = found or key
            pkey, preferred = preference_value(metadata, preference)
            found_pref = found_pref or pkey
            skey, subset = subset_value(metadata, subset_key)
            found_subset = found_subset or (skey if subset is not None else None)
            if answer_key is not None:
                answer = _text_of(metadata.get(answer_key))
            elif math_answers:
                answer = math_answer(item.rollout.completion_text)
        rows.append(ReportRow.of(scored, chars=chars, label=value, preferred=preferred,
                                 subset=subset, answer=answer))  # fmt: skip
    return rows, found, found_pref, found_subset


def _text_of(value: object) -> str | None:
    """A metadata value as a subset name or an answer: text as it is, a number or a bool as
    JSON writes it; None for anything else (absent, null, a list or an object)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)) and math.isfinite(value):
        return str(value)
    return None


def subset_value(metadata: Mapping[str, Any], key: str | None) -> tuple[str | None, str | None]:
    """The subset a rollout's metadata names (the named key, or the first of SUBSET_KEYS):
    (key, name), or (key, None) where it is absent or not text or a number."""
    found = _key_of(metadata, key, SUBSET_KEYS)
    return found, _text_of(metadata.get(found)) if found is not None else None
