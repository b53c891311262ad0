from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from referee.report.stats import (
    bootstrap,
    cohen_kappa,
    histogram,
    kendall_tau,
    pearson,
    quantile,
    ranks,
    spearman,
)


def kendall_slow(x: list[float], y: list[float]) -> float | None:
    """tau-b by its definition, over every pair."""
    c = d = tx = ty = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        dx, dy = x[i] - x[j], y[i] - y[j]
        if dx == 0 and dy == 0:
            continue
        if dx == 0:
            tx += 1
        elif dy == 0:
            ty += 1
        elif (dx > 0) == (dy > 0):
            c += 1
        else:
            d += 1
    denominator = ((c + d + tx) * (c + d + ty)) ** 0.5
    return None if denominator == 0 else (c - d) / denominator


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=2, max_size=40))
def test_fast_kendall_equals_the_definition(pairs: list[tuple[int, int]]) -> None:
    x = [float(a) for a, _ in pairs]
    y = [float(b) for _, b in pairs]
    fast, slow = kendall_tau(x, y), kendall_slow(x, y)
    if slow is None or len(set(x)) < 2 or len(set(y)) < 2:
        assert fast is None or slow is None or fast == pytest.approx(slow)
    else:
        assert fast == pytest.approx(slow)


def test_known_values() -> None:
    assert ranks([10, 20, 20, 5]) == [2.0, 3.5, 3.5, 1.0]
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [1, 4, 9, 100]) == pytest.approx(1.0)
    assert kendall_tau([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert pearson([1, 1, 1], [1, 2, 3]) is None
    # Cohen's kappa, the textbook 2x2 example: 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no.
    a = ["y"] * 25 + ["n"] * 25
    b = ["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert histogram([0.0, 0.5, 1.0], bins=2) == [(0.0, 0.5, 1), (0.5, 1.0, 2)]
    assert histogram([3.0, 3.0]) == [(3.0, 3.0, 2)]


def test_bootstrap_interval_covers_the_value_and_is_reproducible() -> None:
    rng = random.Random(5)
    x = [rng.random() for _ in range(200)]
    y = [v + rng.gauss(0, 0.3) for v in x]
    est = bootstrap(spearman, x, y, resamples=300)
    assert est.low is not None and est.high is not None and est.value is not None
    assert est.low < est.value < est.high and 0.3 < est.value < 0.9
    assert bootstrap(spearman, x, y, resamples=300) == est
