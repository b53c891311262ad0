"""The judge client: every model call of referee goes through here, and through litellm.

A call asks for a verdict shaped by a pydantic model. The client:

- asks for JSON-schema output where the provider supports it, else extracts JSON tolerantly;
  an invalid reply gets exactly one repair attempt, then the call fails;
- retries timeouts, 429 and 5xx with exponential backoff and jitter, honouring Retry-After;
- limits concurrency and requests per minute per model, shared by every judge of the process;
- records tokens and cost (litellm's bundled cost map, offline) and stops at a spend cap:
  further calls fail with ``Failure("budget")``, never a silent 0;
- caches verdicts persistently (`VerdictCache`), so scoring a log again makes no call.

Failures raise `JudgeError` (``judge``), `JudgeTimeout` (``timeout``) or `BudgetExceeded`
(``budget``), which a reward turns into a `Failure` on its Score.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from referee.errors import MissingDependency, RewardError
from referee.judges.cache import cache_key, shared_cache
from referee.verifiers.jsontext import parse_json

__all__ = [
    "BudgetExceeded",
    "JudgeClient",
    "JudgeError",
    "JudgeTimeout",
    "Verdict",
    "set_spend_cap",
    "spent",
]

T = TypeVar("T", bound=BaseModel)

_sleep = asyncio.sleep  # one place for tests to observe the waits (with _clock)
_clock = time.monotonic


class JudgeError(RewardError):
    """A judge call failed after its retries, or its reply never fit the verdict's shape."""

    failure_type = "judge"


class JudgeTimeout(JudgeError):
    """Every attempt of a judge call ran past its timeout."""

    failure_type = "timeout"


class BudgetExceeded(RewardError):
    """The process's judge spend cap is reached: no more calls."""

    failure_type = "budget"


# --- the process-wide budget, rate limiters and concurrency limits ------------------------------


class _Budget:
    def __init__(self) -> None:
        self.limit: float | None = None
        self.spent = 0.0
        self.lock = threading.Lock()

    def check(self) -> None:
        with self.lock:
            if self.limit is not None and self.spent >= self.limit:
                raise BudgetExceeded(
                    f"judge spend cap of ${self.limit:.4f} reached (spent ${self.spent:.4f})"
                )

    def charge(self, cost: float) -> None:
        with self.lock:
            self.spent += cost


_BUDGET = _Budget()


def set_spend_cap(usd: float | None) -> None:
    """Cap what the judges of this process may spend, in US dollars (None: no cap)."""
    _BUDGET.limit = usd


def spent() -> float:
    """What the judges of this process have spent so far, in US dollars."""
    return _BUDGET.spent


class _RateLimiter:
    """A token bucket of `per_minute` requests, refilled continuously."""

    def __init__(self, per_minute: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, per_minute / 60.0)
        self.tokens = self.capacity
        self.stamp = _clock()
        self.lock = threading.Lock()

    async def acquire(self) -> None:
        while True:
            with self.lock:
                now = _clock()
                self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
                self.stamp = now
                if self.tokens >= 1.0:
                    self.tokens -= 1.0
                    return
                wait = (1.0 - self.tokens) / self.rate
            await _sleep(wait)


class _TokenBudget:
    """Tokens per minute: a bucket refilled at `per_minute`, charged with each response's
    real tokens after the call; a call waits while the bucket is overdrawn."""

    def __init__(self, per_minute: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = per_minute
        self.tokens = per_minute
        self.stamp = _clock()
        self.lock = threading.Lock()

    def _refill(self) -> None:
        now = _clock()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    async def acquire(self) -> None:
        while True:
            with self.lock:
                self._refill()
                if self.tokens > 0:
                    return
                wait = -self.tokens / self.rate + 1e-3
            await _sleep(wait)

    def charge(self, used: int) -> None:
        with self.lock:
            self._refill()
            self.tokens -= used


_limiters: dict[tuple[str, str | None, float, str], _RateLimiter | _TokenBudget] = {}
_limiters_lock = threading.Lock()
_semaphores: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str, str | None], asyncio.Semaphore]
] = weakref.WeakKeyDictionary()


def _limiter(model: str, api_base: str | None, rpm: float) -> _RateLimiter:
    """The process's requests-per-minute limiter for this model."""
    limiter = _shared((model, api_base, rpm, "rpm"), lambda: _RateLimiter(rpm))
    assert isinstance(limiter, _RateLimiter)  # the "rpm" keys hold only these
    return limiter


def _token_budget(model: str, api_base: str | None, tpm: float) -> _TokenBudget:
    """The process's tokens-per-minute budget for this model."""
    budget = _shared((model, api_base, tpm, "tpm"), lambda: _TokenBudget(tpm))
    assert isinstance(budget, _TokenBudget)  # the "tpm" keys hold only these
    return budget


def _shared(
    key: tuple[str, str | None, float, str], make: Callable[[], _RateLimiter | _TokenBudget]
) -> _RateLimiter | _TokenBudget:
    with _limiters_lock:
        if key not in _limiters:
            _limiters[key] = make()
        return _limiters[key]


def _semaphore(model: str, api_base: str | None, size: int) -> asyncio.Semaphore:
    # asyncio semaphores belong to one event loop: one per loop and model.
    per_loop = _semaphores.setdefault(asyncio.get_running_loop(), {})
    key = (model, api_base)
    if key not in per_loop:
        per_loop[key] = asyncio.Semaphore(size)
    return per_loop[key]


def _litellm() -> Any:
    # Offline: litellm would otherwise fetch its cost map from the internet at import.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError:
        raise MissingDependency("litellm", "judges", "LLM judges") from None
    return litellm


# --- the client ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict(Generic[T]):
    """A judge's validated answer and what it cost."""

    value: T
    raw: str
    cost: float
    prompt_tokens: int
    completion_tokens: int
    latency: float
    cached: bool


StructuredOutput = Literal["auto", "json_schema", "json_object", "prompt"]
"""``json_schema``: ask for schema-constrained JSON the OpenAI way. ``json_object``: the
llama.cpp-server way (``{"type": "json_object", "schema": ...}``; its server rejects
``json_schema``). ``prompt``: rely on the instructions and extract JSON from the text.
``auto``: json_schema where litellm says the model supports it, else prompt."""


@dataclass(kw_only=True)
class JudgeClient:
    """How to reach a judge model. Picklable: limits and caches live per process.

    Attributes:
        model: A litellm model string (``openai/gpt-4.1-mini``, ``anthropic/...``,
            ``openai/<name>`` with `api_base` for any OpenAI-compatible server).
        api_base: The server's base URL, for local or self-hosted models.
        api_key_env: The environment variable holding the API key (never the key itself).
        temperature, max_tokens, seed: Sampling parameters (part of the cache key).
        timeout: Seconds per attempt.
        retries: Attempts after the first, on timeouts, 429 and 5xx.
        backoff: First backoff in seconds; doubles per attempt, with jitter.
        max_backoff: The longest wait between attempts (a longer Retry-After is honoured).
        concurrency: Calls in flight at once for this model, across the process.
        rpm: Requests per minute for this model, across the process (None: unlimited).
        tpm: Tokens per minute for this model, across the process (None: unlimited); charged
            with each response's real token count.
        cache: Keep verdicts in `cache_path` (default ``~/.cache/referee/judge.sqlite``).
        structured: How to get JSON out of the model (`StructuredOutput`).
    """

    model: str
    api_base: str | None = None
    api_key_env: str | None = None
    temperature: float = 0.0
    max_tokens: int = 1024
    seed: int | None = None
    timeout: float = 60.0
    retries: int = 4
    backoff: float = 1.0
    max_backoff: float = 60.0
    concurrency: int = 16
    rpm: float | None = None
    tpm: float | None = None
    cache: bool = True
    cache_path: str | None = None
    structured: StructuredOutput = "auto"

    def _params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"temperature": self.temperature, "max_tokens": self.max_tokens}
        if self.seed is not None:
            params["seed"] = self.seed
        return params

    def _api_key(self) -> str | None:
        if self.api_key_env is None:
            return "unused" if self.api_base else None  # local servers take any key
        key = os.environ.get(self.api_key_env)
        if not key:
            raise JudgeError(f"the API key variable {self.api_key_env!r} is not set")
        return key

    def _response_format(self, schema: type[BaseModel]) -> dict[str, Any] | None:
        use = self.structured == "json_schema"
        if self.structured == "auto":
            try:
                use = bool(_litellm().supports_response_schema(model=self.model))
            except Exception:
                use = False
        if self.structured == "json_object":
            return {"type": "json_object", "schema": schema.model_json_schema()}
        if not use:
            return None
        return {
            "type": "json_schema",
            "json_schema": {"name": schema.__name__, "schema": schema.model_json_schema()},
        }

    async def judge(
        self,
        messages: list[dict[str, Any]],
        schema: type[T],
        *,
        version: str = "",
        seed: int | None = None,
    ) -> Verdict[T]:
        """Ask for a verdict shaped like `schema`.

        Args:
            messages: The chat messages (OpenAI shape).
            schema: The verdict's pydantic model.
            version: The rubric's version, so a changed rubric is judged afresh.
            seed: A sampling seed for this call (several samples of one verdict).

        Raises:
            JudgeError, JudgeTimeout, BudgetExceeded: No verdict (a reward records why).
        """
        cache = shared_cache(self.cache_path) if self.cache else None
        params = self._params() if seed is None else {**self._params(), "seed": seed}
        key = cache_key(self.model, messages, params, f"{version}|{schema.__name__}")
        if cache is not None:
            hit = cache.get(key)
            if hit is not None:
                try:
                    value = _parse(str(hit["raw"]), schema)
                    return Verdict(value, str(hit["raw"]), 0.0, 0, 0, 0.0, cached=True)
                except ValueError:
                    pass  # a verdict the current schema rejects: ask again
        started = time.monotonic()
        response_format = self._response_format(schema)
        text, cost, p_tok, c_tok = await self._complete(messages, response_format, params)
        try:
            value = _parse(text, schema)
        except ValueError as first_error:
            repair = [
                *messages,
                {"role": "assistant", "content": text},
                {"role": "user", "content": (
                    f"That reply is not valid: {first_error}. Reply again with only the JSON "
                    f"object, matching this schema: {schema.model_json_schema()}"
                )},
            ]  # fmt: skip
            text, more, p2, c2 = await self._complete(repair, response_format, params)
            cost, p_tok, c_tok = cost + more, p_tok + p2, c_tok + c2
            try:
                value = _parse(text, schema)
            except ValueError as second_error:
                raise JudgeError(
                    f"the judge's reply is not a valid verdict: {second_error}"
                ) from None
        if cache is not None:
            cache.put(
                key, {"raw": text, "cost": cost, "prompt_tokens": p_tok, "completion_tokens": c_tok}
            )
        return Verdict(value, text, cost, p_tok, c_tok, time.monotonic() - started, cached=False)

    async def _complete(
        self,
        messages: list[dict[str, Any]],
        response_format: dict[str, Any] | None,
        params: dict[str, Any],
    ) -> tuple[str, float, int, int]:
        """One completion with retries: (text, cost, prompt tokens, completion tokens)."""
        litellm = _litellm()
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "timeout": self.timeout,
            "num_retries": 0,  # the retries are ours (Retry-After, jitter, budget)
            "max_retries": 0,
            **params,
        }
        if self.api_base:
            kwargs["api_base"] = self.api_base
        api_key = self._api_key()
        if api_key:
            kwargs["api_key"] = api_key
        if response_format is not None:
            kwargs["response_format"] = response_format
        retryable = (
            litellm.exceptions.Timeout,
            litellm.exceptions.RateLimitError,
            litellm.exceptions.APIConnectionError,
            litellm.exceptions.InternalServerError,
            litellm.exceptions.ServiceUnavailableError,
            litellm.exceptions.BadGatewayError,
            asyncio.TimeoutError,
        )
        last: BaseException | None = None
        for attempt in range(self.retries + 1):
            _BUDGET.check()
            if self.rpm:
                await _limiter(self.model, self.api_base, self.rpm).acquire()
            if self.tpm:
                await _token_budget(self.model, self.api_base, self.tpm).acquire()
            async with _semaphore(self.model, self.api_base, self.concurrency):
                try:
                    response = await asyncio.wait_for(
                        litellm.acompletion(**kwargs), timeout=self.timeout + 5.0
                    )
                except retryable as exc:
                    last = exc
                except Exception as exc:
                    raise JudgeError(f"judge call failed: {type(exc).__name__}: {exc}") from None
                else:
                    result = self._account(litellm, response)
                    if self.tpm:
                        used = result[2] + result[3]
                        _token_budget(self.model, self.api_base, self.tpm).charge(used)
                    return result
            if attempt < self.retries:
                await _sleep(self._delay(attempt, last))
        if isinstance(last, litellm.exceptions.Timeout | asyncio.TimeoutError):
            raise JudgeTimeout(
                f"judge call timed out {self.retries + 1} times ({self.timeout:g}s each)"
            )
        raise JudgeError(
            f"judge call failed after {self.retries + 1} attempts: {type(last).__name__}: {last}"
        )

    def _delay(self, attempt: int, exc: BaseException | None) -> float:
        retry_after = _retry_after(exc)
        if retry_after is not None:
            return retry_after
        base: float = min(self.max_backoff, self.backoff * 2.0**attempt)
        return base * random.uniform(0.5, 1.0)

    def _account(self, litellm: Any, response: Any) -> tuple[str, float, int, int]:
        text = response.choices[0].message.content or ""
        usage = getattr(response, "usage", None)
        p_tok = int(getattr(usage, "prompt_tokens", 0) or 0)
        c_tok = int(getattr(usage, "completion_tokens", 0) or 0)
        try:
            cost = float(litellm.completion_cost(completion_response=response))
        except Exception:
            cost = 0.0  # a model missing from the cost map (a local server) costs nothing known
        _BUDGET.charge(cost)
        return text, cost, p_tok, c_tok


def _retry_after(exc: BaseException | None) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or getattr(exc, "litellm_response_headers", None)
    if not headers:
        return None
    value = headers.get("retry-after") if hasattr(headers, "get") else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _parse(text: str, schema: type[T]) -> T:
    """The verdict in `text`: its first JSON object, validated by `schema` (ValueError if not)."""
    parsed = parse_json(text, "first")
    if not parsed.ok:
        raise ValueError(f"no JSON object ({parsed.error})")
    try:
        return schema.model_validate(parsed.value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"])) or "(root)"
        raise ValueError(f"{where}: {first['msg']}") from None
