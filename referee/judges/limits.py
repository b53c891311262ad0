"""Process-wide limits on judge calls: the spend cap, requests and tokens per minute, and calls
in flight.

Every judge of a process shares them: two rewards calling the same model on the same server
draw on one requests-per-minute bucket, one tokens-per-minute bucket and one limit of calls in
flight, whatever reward or client object they come from. The buckets are told the time and say
how long to wait; the client owns the clock and the sleeping, so tests observe the waits in one
place (`referee.judges.client`). The limit of calls in flight is referee's HTTP client's
(`referee._http.calls_in_flight`, shared with served reward models), exported here too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from referee._http import calls_in_flight
from referee.errors import BudgetExceeded

__all__ = [
    "BudgetExceeded",
    "RequestRate",
    "TokenRate",
    "calls_in_flight",
    "charge",
    "check_budget",
    "request_rate",
    "set_spend_cap",
    "spent",
    "token_rate",
]


# --- the spend cap -----------------------------------------------------------------------------


class _Budget:
    def __init__(self) -> None:
        self.limit: float | None = None
        self.spent = 0.0
        self.lock = threading.Lock()


_BUDGET = _Budget()


def set_spend_cap(usd: float | None) -> None:
    """Cap what the judges of this process may spend, in US dollars (None: no cap)."""
    _BUDGET.limit = usd


def spent() -> float:
    """What the judges of this process have spent so far, in US dollars."""
    return _BUDGET.spent


def check_budget() -> None:
    """Refuse a call once the spend cap is reached.

    Raises:
        BudgetExceeded: What was spent has reached the cap.
    """
    with _BUDGET.lock:
        if _BUDGET.limit is not None and _BUDGET.spent >= _BUDGET.limit:
            raise BudgetExceeded(
                f"judge spend cap of ${_BUDGET.limit:.4f} reached (spent ${_BUDGET.spent:.4f})"
            )


def charge(cost: float) -> None:
    """Add a call's cost, in US dollars, to what the process has spent."""
    with _BUDGET.lock:
        _BUDGET.spent += cost


# --- rates -------------------------------------------------------------------------------------


class _Bucket:
    """A bucket of `capacity` tokens refilled continuously at `per_minute`."""

    def __init__(self, per_minute: float, capacity: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = capacity
        self.tokens = capacity
        self.stamp: float | None = None
        self.lock = threading.Lock()

    def _refill(self, now: float) -> None:
        if self.stamp is not None:
            self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now


class RequestRate(_Bucket):
    """Requests per minute: one token a request, at most a second's worth saved up."""

    def __init__(self, per_minute: float) -> None:
        super().__init__(per_minute, max(1.0, per_minute / 60.0))

    def take(self, now: float) -> float:
        """Take a request's token at time `now`: 0.0 when taken, else the seconds to wait
        before asking again."""
        with self.lock:
            self._refill(now)
            if self.tokens >= 1.0:
                self.tokens -= 1.0
                return 0.0
            return (1.0 - self.tokens) / self.rate


class TokenRate(_Bucket):
    """Tokens per minute: charged after each call with its real token count (unknown before
    it); a call waits while the bucket is overdrawn."""

    def __init__(self, per_minute: float) -> None:
        super().__init__(per_minute, per_minute)

    def take(self, now: float) -> float:
        """0.0 when a call may start at time `now`, else the seconds until the bucket refills
        past zero."""
        with self.lock:
            self._refill(now)
            if self.tokens > 0:
                return 0.0
            return -self.tokens / self.rate + 1e-3

    def charge(self, used: int, now: float) -> None:
        """Take the `used` tokens of a finished call."""
        with self.lock:
            self._refill(now)
            self.tokens -= used


_BucketT = TypeVar("_BucketT", bound=_Bucket)
_Key = tuple[str, str | None, float]
_requests: dict[_Key, RequestRate] = {}
_tokens: dict[_Key, TokenRate] = {}
_buckets_lock = threading.Lock()


def _shared(table: dict[_Key, _BucketT], key: _Key, make: Callable[[float], _BucketT]) -> _BucketT:
    with _buckets_lock:
        if key not in table:
            table[key] = make(key[2])
        return table[key]


def request_rate(model: str, api_base: str | None, rpm: float) -> RequestRate:
    """The process's requests-per-minute bucket for this model on this server."""
    return _shared(_requests, (model, api_base, rpm), RequestRate)


def token_rate(model: str, api_base: str | None, tpm: float) -> TokenRate:
    """The process's tokens-per-minute bucket for this model on this server."""
    return _shared(_tokens, (model, api_base, tpm), TokenRate)
