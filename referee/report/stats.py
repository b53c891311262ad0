"""The statistics a reward report needs, in plain Python: ranks, Pearson, Spearman, Kendall's
tau-b (O(n log n), Knight's algorithm), Cohen's kappa, Krippendorff's alpha, the unbiased
pass@k estimator, histograms, percentile bootstrap."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "AlphaLevel",
    "Estimate",
    "bootstrap",
    "cohen_kappa",
    "histogram",
    "kendall_tau",
    "krippendorff_alpha",
    "pass_at_k",
    "pearson",
    "quantile",
    "ranks",
    "spearman",
]


def ranks(values: Sequence[float]) -> list[float]:
    """Average ranks (1-based), ties sharing the mean of their positions."""
    order = sorted(range(len(values)), key=values.__getitem__)
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        rank = (i + j) / 2 + 1
        for k in range(i, j + 1):
            out[order[k]] = rank
        i = j + 1
    return out


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson's r; None when either side is constant or there are fewer than 2 points."""
    n = len(x)
    if n < 2:
        return None
    mx, my = sum(x) / n, sum(y) / n
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return None
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho: Pearson's r of the average ranks."""
    return pearson(ranks(x), ranks(y))


def _merge_count(values: list[float]) -> int:
    """Sort `values` in place (merge sort); return the number of strict inversions."""
    n = len(values)
    if n < 2:
        return 0
    mid = n // 2
    left, right = values[:mid], values[mid:]
    swaps = _merge_count(left) + _merge_count(right)
    i = j = k = 0
    while i < len(left) and j < len(right):
        if right[j] < left[i]:
            values[k] = right[j]
            j += 1
            swaps += len(left) - i
        else:
            values[k] = left[i]
            i += 1
        k += 1
    values[k:] = left[i:] + right[j:]
    return swaps


def _tied_pairs(values: Sequence[float]) -> int:
    return sum(c * (c - 1) // 2 for c in Counter(values).values())


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b in O(n log n) (Knight 1966); None when either side is constant."""
    n = len(x)
    if n < 2:
        return None
    pairs = sorted(zip(x, y, strict=True))
    n0 = n * (n - 1) // 2
    n1 = _tied_pairs([p[0] for p in pairs])
    n2 = _tied_pairs([p[1] for p in pairs])
    n3 = _tied_pairs(pairs)  # type: ignore[arg-type]
    if n0 in (n1, n2):
        return None
    ys = [p[1] for p in pairs]
    swaps = _merge_count(ys)
    concordant_minus_discordant = n0 - n1 - n2 + n3 - 2 * swaps
    return concordant_minus_discordant / math.sqrt((n0 - n1) * (n0 - n2))


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's kappa of two raters' categorical labels; None when chance agreement is 1."""
    n = len(a)
    if n == 0:
        return None
    observed = sum(1 for p, q in zip(a, b, strict=True) if p == q) / n
    ca, cb = Counter(a), Counter(b)
    expected = sum(ca[k] * cb.get(k, 0) for k in ca) / (n * n)
    if expected >= 1:
        return None
    return (observed - expected) / (1 - expected)


AlphaLevel = Literal["nominal", "ordinal", "interval", "ratio"]
"""Krippendorff's levels of measurement: which distance between two values alpha uses."""


def krippendorff_alpha(
    units: Sequence[Sequence[float | None]], level: AlphaLevel = "interval"
) -> float | None:
    """Krippendorff's alpha of the values raters gave to units: `units[u][r]` is rater r's
    value for unit u, None where r gave none (missing values are left out, as Krippendorff
    does: a unit with fewer than two values adds nothing). The same number as the
    `krippendorff` package's ``alpha(reliability_data=..., level_of_measurement=level)`` (its
    reliability data is this table transposed), computed without numpy and without a
    values-by-values matrix except for ``ordinal``. None where alpha is undefined: fewer than
    two distinct values, or no unit with two values.
    """
    pairable = [[v for v in unit if v is not None] for unit in units]
    pairable = [values for values in pairable if len(values) >= 2]
    counts: Counter[float] = Counter()  # n_c: how often each value is pairable
    for values in pairable:
        counts.update(values)
    n = sum(counts.values())
    if len(counts) < 2 or n < 2:
        return None
    distance = _alpha_distance(level, counts)
    observed = 0.0  # sum over units of (sum over ordered pairs of raters' distance) / (m_u - 1)
    for values in pairable:
        observed += _pairs_distance(Counter(values), level, distance) / (len(values) - 1)
    expected = _pairs_distance(counts, level, distance) / (n - 1)
    if expected == 0:
        return None
    return 1 - observed / expected


def _alpha_distance(level: AlphaLevel, counts: Counter[float]) -> Callable[[float, float], float]:
    """The squared distance alpha uses at `level`; ordinal's depends on the values' counts."""
    if level == "nominal":
        return lambda a, b: float(a != b)
    if level == "interval":
        return lambda a, b: float((a - b) ** 2)
    if level == "ratio":
        return lambda a, b: 0.0 if a + b == 0 else float(((a - b) / (a + b)) ** 2)
    domain = sorted(counts)
    cumulative = [0.0]  # cumulative[i]: the counts of the values below domain[i]
    for v in domain:
        cumulative.append(cumulative[-1] + counts[v])
    index = {v: i for i, v in enumerate(domain)}

    def ordinal(a: float, b: float) -> float:
        i, j = sorted((index[a], index[b]))
        between = cumulative[j + 1] - cumulative[i]
        return (between - (counts[a] + counts[b]) / 2) ** 2

    return ordinal


def _pairs_distance(
    counts: Counter[float], level: AlphaLevel, distance: Callable[[float, float], float]
) -> float:
    """The sum of `distance` over ordered pairs of distinct elements of the multiset `counts`
    (pairs of equal values are at distance 0 at every level): in closed form for nominal and
    interval, whose values may be many (scores on a continuous scale)."""
    n = sum(counts.values())
    if level == "nominal":
        return float(n * n - sum(c * c for c in counts.values()))
    if level == "interval":
        s1 = math.fsum(c * v for v, c in counts.items())
        s2 = math.fsum(c * v * v for v, c in counts.items())
        return max(0.0, 2 * n * s2 - 2 * s1 * s1)
    values = list(counts)
    total = 0.0
    for i, a in enumerate(values):
        for b in values[i + 1 :]:
            total += 2 * counts[a] * counts[b] * distance(a, b)
    return total


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k from n attempts of which c are correct (Chen et al.
    2021): 1 - C(n-c, k) / C(n, k), as the paper's stable product 1 - prod_{i=n-c+1}^{n}
    (1 - k/i).

    Raises:
        ValueError: k is not in 1..n, or c is not in 0..n.
    """
    if not 1 <= k <= n or not 0 <= c <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n and 0 <= c <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The q-quantile of already sorted values, linearly interpolated."""
    if not sorted_values:
        raise ValueError("quantile of no values")
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def histogram(values: Sequence[float], bins: int = 20) -> list[tuple[float, float, int]]:
    """Equal-width bins over the values' range: (low, high, count); one bin if constant."""
    if not values:
        return []
    lo, hi = min(values), max(values)
    if lo == hi:
        return [(lo, hi, len(values))]
    width = (hi - lo) / bins
    counts = [0] * bins
    for v in values:
        counts[min(int((v - lo) / width), bins - 1)] += 1
    return [(lo + i * width, lo + (i + 1) * width, c) for i, c in enumerate(counts)]


@dataclass(frozen=True)
class Estimate:
    """A statistic with its percentile-bootstrap 95% confidence interval."""

    value: float | None
    low: float | None
    high: float | None
    n: int

    def to_dict(self) -> dict[str, float | int | None]:
        return {"value": self.value, "ci_low": self.low, "ci_high": self.high, "n": self.n}


def bootstrap(
    stat: Callable[[Sequence[float], Sequence[float]], float | None],
    x: Sequence[float],
    y: Sequence[float],
    *,
    resamples: int = 1000,
    seed: int = 0,
) -> Estimate:
    """`stat(x, y)` with a 95% percentile-bootstrap interval over resampled pairs (seeded, so a
    report is reproducible)."""
    value = stat(x, y)
    n = len(x)
    if value is None or n < 3:
        return Estimate(value, None, None, n)
    rng = random.Random(seed)
    draws: list[float] = []
    for _ in range(resamples):
        idx = [rng.randrange(n) for _ in range(n)]
        v = stat([x[i] for i in idx], [y[i] for i in idx])
        if v is not None:
            draws.append(v)
    if len(draws) < resamples // 2:
        return Estimate(value, None, None, n)
    draws.sort()
    return Estimate(value, quantile(draws, 0.025), quantile(draws, 0.975), n)
