"""The process-wide limits on judge calls, on their own: buckets told the time, the spend cap."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from referee.judges import limits
from referee.judges.limits import BudgetExceeded, RequestRate, TokenRate


@pytest.fixture(autouse=True)
def no_cap() -> Iterator[None]:
    limits.set_spend_cap(None)
    yield
    limits.set_spend_cap(None)


def test_requests_per_minute_take_a_token_each() -> None:
    rate = RequestRate(60)  # one a second, at most one saved up
    assert rate.take(100.0) == 0.0
    assert rate.take(100.0) == pytest.approx(1.0)  # empty: a second to wait
    assert rate.take(100.25) == pytest.approx(0.75)  # a quarter refilled
    assert rate.take(101.0) == 0.0
    assert rate.take(200.0) == 0.0 and rate.take(200.0) > 0  # idle time saves one, not 100


def test_a_fast_rate_saves_a_seconds_worth() -> None:
    rate = RequestRate(600)  # ten a second
    assert [rate.take(5.0) for _ in range(11)] == [0.0] * 10 + [pytest.approx(0.1)]


def test_tokens_per_minute_wait_only_while_overdrawn() -> None:
    rate = TokenRate(60)  # a token a second
    assert rate.take(0.0) == 0.0
    rate.charge(50, 0.0)
    assert rate.take(0.0) == 0.0  # 10 left: calls may start
    rate.charge(40, 0.0)
    assert rate.take(10.0) == pytest.approx(20.0, abs=0.01)  # -30 + 10 refilled: 20 s more
    assert rate.take(30.1) == 0.0


def test_buckets_are_shared_per_model_and_server() -> None:
    a = limits.request_rate("openai/m", "http://a", 60)
    assert limits.request_rate("openai/m", "http://a", 60) is a
    assert limits.request_rate("openai/m", "http://b", 60) is not a
    assert limits.token_rate("openai/m", "http://a", 60) is limits.token_rate(
        "openai/m", "http://a", 60
    )


def test_spend_cap() -> None:
    before = limits.spent()
    limits.charge(0.5)
    assert limits.spent() == pytest.approx(before + 0.5)
    limits.check_budget()  # no cap
    limits.set_spend_cap(limits.spent() + 1.0)
    limits.check_budget()  # under it
    limits.charge(1.0)
    with pytest.raises(BudgetExceeded, match="spend cap"):
        limits.check_budget()
