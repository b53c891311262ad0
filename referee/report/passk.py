"""pass@k, maj@n and avg@n over groups of attempts at one prompt, as a `PassAtK`.

A problem is a group: the rows with the same group id (rows with none are left out and
counted). Per problem with n attempts of which c are correct (reward >= the threshold):

- **pass@k**: the unbiased estimator of Chen et al. 2021, 1 - C(n-c, k) / C(n, k)
  (`referee.report.stats.pass_at_k`); a problem with fewer than k attempts is left out of
  that k and counted (`GroupRate.excluded`);
- **avg@n**: the mean reward over the problem's scored attempts (pass@1's expectation when
  rewards are 0 or 1);
- **maj@n**: the most common answer among the n attempts is looked up: the problem scores the
  share of that answer's attempts that are correct. A tie between answers scores the mean
  over the tied answers, never the first in list order. Attempts with no answer do not vote;
  a problem where none has one scores 0 and is counted (`no_answer`). maj@k for k < n is not
  given: its expectation over subsets has no cheap exact form.

Each is averaged over problems, with the standard error over problems (sd / sqrt(problems))
and a bootstrap 95% interval; overall, and per subset where the rows carry one.

A failed attempt (no reward) is never correct: ``failed_as="incorrect"`` keeps it as an
incorrect attempt (n counts it, c does not; it votes in maj@n and loses), ``"excluded"``
leaves it out as if it had not been made. Either way their number is in the result.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from referee.errors import VerifierTimeout
from referee.report.results import GroupRate, PassAtK, PassAtKSlice, Report
from referee.report.stats import pass_at_k, quantile

if TYPE_CHECKING:
    from referee.report.rows import ReportRow

__all__ = ["FailedAs", "build_passk", "default_ks", "math_answer", "parse_ks", "passk_lines"]

FailedAs = Literal["incorrect", "excluded"]
"""What a failed attempt (no reward) is to pass@k and maj@n: an incorrect attempt, or none."""

RESAMPLES = 1000


@dataclass(frozen=True, slots=True)
class _Attempt:
    value: float | None
    answer: str | None


def parse_ks(text: str) -> tuple[int, ...]:
    """The k values of ``--k 1,4,8``: positive integers, sorted, each once.

    Raises:
        ValueError: An item is not a positive integer (the message names it).
    """
    ks = set()
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit() or int(item) < 1:
            raise ValueError(f"--k takes positive integers separated by commas, e.g. 1,4,8; "
                             f"got {item!r} in {text!r}")  # fmt: skip
        ks.add(int(item))
    return tuple(sorted(ks))


def default_ks(sizes: Iterable[int]) -> tuple[int, ...]:
    """1 and every power of two up to the smallest group's number of attempts."""
    smallest = min((s for s in sizes if s > 0), default=1)
    ks = [1]
    while ks[-1] * 2 <= smallest:
        ks.append(ks[-1] * 2)
    return tuple(ks)


def _correct(value: float | None, threshold: float) -> bool:
    return value is not None and value >= threshold


def _majority(attempts: Sequence[_Attempt], threshold: float) -> float | None:
    """maj@n of one problem: the correct share of the most common answer's attempts, a tie
    scoring the mean over the tied answers; None where no attempt has an answer."""
    votes: dict[str, list[bool]] = {}
    for a in attempts:
        if a.answer is not None:
            votes.setdefault(a.answer, []).append(_correct(a.value, threshold))
    if not votes:
        return None
    top = max(len(v) for v in votes.values())
    tied = [v for v in votes.values() if len(v) == top]
    return sum(sum(v) / len(v) for v in tied) / len(tied)


def _rate(values: Sequence[float], excluded: int, seed: int = 0) -> GroupRate:
    """The mean of per-problem scores with its standard error and bootstrap interval."""
    n = len(values)
    if n == 0:
        return GroupRate(value=None, se=None, ci_low=None, ci_high=None, problems=0,
                         excluded=excluded)  # fmt: skip
    # Equal values have their own mean and no spread: fsum(values) / n can miss the value by
    # an ulp, and the spread around that is float noise (the report printed "± 2.27e-17").
    mean = values[0] if min(values) == max(values) else math.fsum(values) / n
    se = low = high = None
    if n >= 2:
        sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
        se = sd / math.sqrt(n)
        if sd == 0:
            low = high = mean
        else:
            rng = random.Random(seed)
            draws = sorted(math.fsum(rng.choices(values, k=n)) / n for _ in range(RESAMPLES))
            low, high = quantile(draws, 0.025), quantile(draws, 0.975)
    return GroupRate(value=mean, se=se, ci_low=low, ci_high=high, problems=n, excluded=excluded)


def _slice(
    groups: Sequence[Sequence[_Attempt]],
    ks: Sequence[int],
    threshold: float,
    failed_as: FailedAs,
    with_answers: bool,
) -> PassAtKSlice:
    failed = sum(1 for g in groups for a in g if a.value is None)
    if failed_as == "excluded":
        groups = [[a for a in g if a.value is not None] for g in groups]
    sizes = [len(g) for g in groups]
    pass_at = {}
    for k in ks:
        scores = [pass_at_k(len(g), sum(_correct(a.value, threshold) for a in g), k)
                  for g in groups if len(g) >= k]  # fmt: skip
        pass_at[str(k)] = _rate(scores, len(groups) - len(scores), seed=k)
    means = []
    for g in groups:
        scored = [a.value for a in g if a.value is not None]
        if scored:
            means.append(math.fsum(scored) / len(scored))
    maj = None
    no_answer = 0
    if with_answers:
        majorities = []
        for g in groups:
            if not g:
                continue
            score = _majority(g, threshold)
            no_answer += score is None
            majorities.append(0.0 if score is None else score)
        maj = _rate(majorities, len(groups) - len(majorities))
    return PassAtKSlice(
        problems=len(groups),
        attempts=sum(sizes),
        failed=failed,
        min_attempts=min(sizes, default=0),
        max_attempts=max(sizes, default=0),
        pass_at=pass_at,
        avg=_rate(means, len(groups) - len(means)),
        maj=maj,
        no_answer=no_answer,
    )


def build_passk(
    rows: Iterable[ReportRow],
    *,
    ks: Sequence[int] | None = None,
    threshold: float = 1.0,
    failed_as: FailedAs = "incorrect",
    answers: str | None = None,
    subset_key: str | None = None,
) -> PassAtK | None:
    """pass@k, maj@n and avg@n of the rows' groups (see the module docstring); None where no
    row has a group. `ks` defaults to `default_ks` of the groups' sizes; `answers` names where
    the rows' `answer` came from (None: maj@n is not computed); `subset_key`, where their
    `subset` did.

    Raises:
        ValueError: A k is below 1.
    """
    if ks is not None and any(k < 1 for k in ks):
        raise ValueError(f"pass@k needs every k >= 1; got {list(ks)}")
    groups: dict[str, list[_Attempt]] = {}
    subsets: dict[str, str] = {}
    ungrouped = 0
    for r in rows:
        if r.group is None:
            ungrouped += 1
            continue
        groups.setdefault(r.group, []).append(_Attempt(r.value, r.answer))
        if r.subset is not None:
            subsets.setdefault(r.group, r.subset)  # a group's first attempt with one names it
    if not groups:
        return None
    if ks is None:
        drop = failed_as == "excluded"
        ks = default_ks(sum(1 for a in g if not drop or a.value is not None)
                        for g in groups.values())  # fmt: skip
    ks = tuple(sorted(set(ks)))
    with_answers = answers is not None
    by_subset: dict[str, list[list[_Attempt]]] = {}
    for group, subset in subsets.items():
        by_subset.setdefault(subset, []).append(groups[group])
    return PassAtK(
        threshold=threshold,
        failed_as=failed_as,
        ks=ks,
        answers=answers,
        subset_key=subset_key if by_subset else None,
        ungrouped=ungrouped,
        overall=_slice(list(groups.values()), ks, threshold, failed_as, with_answers),
        subsets={
            name: _slice(by_subset[name], ks, threshold, failed_as, with_answers)
            for name in sorted(by_subset)
        },
    )


def _extract(completion: str) -> str | None:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    configs = (LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig())
    parsed = parse(completion, extraction_config=configs, parsing_timeout=None)
    return str(parsed[0]) if parsed else None


def math_answer(completion: str, timeout: float = 5.0) -> str | None:
    """A completion's final math answer as math-verify reads it (``\\boxed{}`` first, then
    LaTeX or a plain expression), in its parsed form, so ``\\frac{1}{2}`` and ``1/2`` are one
    answer; None where there is none or reading it ran past `timeout` seconds."""
    # The verifier's own preparation: math-verify imported before the deadline starts, and its
    # warning that its own timeout is off (ours is on) silenced.
    from referee.verifiers.math import _prepare, call_with_deadline

    _prepare()
    try:
        return call_with_deadline(_extract, timeout, completion)
    except VerifierTimeout:
        return None


def _value(rate: GroupRate) -> str:
    if rate.value is None:
        return "-"
    se = "" if rate.se is None else f" ± {rate.se:.3g}"
    return f"{rate.value:.4g}{se}"


def passk_lines(report: Report) -> list[str]:
    """The report's pass@k, maj@n and avg@n, one line overall and one per subset, for the
    terminal: ``pass@1 0.5 ± 0.05, pass@4 0.8 ± 0.04, maj@n 0.7 ± 0.05, avg@n 0.5 ± 0.05
    (20 problems, 4 attempts each)``."""
    passk = report.passk
    if passk is None:
        return []
    lines = []
    for name, part in [("", passk.overall), *passk.subsets.items()]:
        rates = [f"pass@{k} {_value(rate)}" for k, rate in part.pass_at.items()]
        if part.maj is not None:
            rates.append(f"maj@n {_value(part.maj)}")
        rates.append(f"avg@n {_value(part.avg)}")
        failed = f", {part.failed} failed counted {passk.failed_as}" if part.failed else ""
        where = f"{passk.subset_key}={name}: " if name else ""
        each = (str(part.min_attempts) if part.min_attempts == part.max_attempts
                else f"{part.min_attempts}-{part.max_attempts}")  # fmt: skip
        lines.append(f"{where}{', '.join(rates)} ({part.problems} problems, {each} attempts "
                     f"each{failed})")  # fmt: skip
    return lines
