"""The judge client: every model call of referee goes through here, and through litellm.

A call asks for a verdict shaped by a pydantic model. The client:

- asks for JSON-schema output where the provider supports it, else extracts JSON tolerantly;
  an invalid reply gets exactly one repair attempt, then the call fails;
- retries timeouts, 429 and 5xx with exponential backoff and jitter, honouring Retry-After;
- limits calls in flight, requests and tokens per minute per model, shared by every judge of
  the process (`referee.judges.limits`);
- records tokens and cost (litellm's bundled cost map, offline) and stops at a spend cap:
  further calls fail with ``Failure("budget")``, never a silent 0;
- caches verdicts persistently (`VerdictCache`), so scoring a log again makes no call.

Failures raise `JudgeError` (``judge``), `JudgeTimeout` (``timeout``) or `BudgetExceeded`
(``budget``), which a reward turns into a `Failure` on its Score (all three are defined in
`referee.errors`, and re-exported here).
"""

from __future__ import annotations

import asyncio
import functools
import os
import random
import time
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from referee.errors import BudgetExceeded, JudgeError, JudgeTimeout, MissingDependency
from referee.judges.cache import cache_key, shared_cache
from referee.judges.limits import (
    RequestRate,
    TokenRate,
    calls_in_flight,
    charge,
    check_budget,
    request_rate,
    set_spend_cap,
    spent,
    token_rate,
)
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


# litellm prints "Give Feedback / Get Help" banners (and a provider list) to the console on every
# failed call. A failed judge call is referee's to report, once, as a JudgeError and then a
# Failure on the rollout's Score: a trainer's console is no place for a banner per rollout.
@functools.cache
def _import_litellm() -> Any:
    # Offline: litellm would otherwise fetch its cost map from the internet at import.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def _litellm() -> Any:
    try:
        return _import_litellm()
    except ImportError:
        raise MissingDependency("litellm", "judges", "LLM judges") from None


async def _wait(bucket: RequestRate | TokenRate) -> None:
    """Wait until `bucket` lets a call start."""
    while (seconds := bucket.take(_clock())) > 0:
        await _sleep(seconds)


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
        max_in_flight: Calls in flight at once to this model on this server, across the
            process (one limit per model and server: the first client to call sets its size).
            Not a reward's ``concurrency``, which counts rollouts scored at once.
        rpm: Requests per minute for this model, across the process (None: unlimited).
        tpm: Tokens per minute for this model, across the process (None: unlimited); charged
            with each response's real token count.
        cache: Keep verdicts in `cache_path` (default ``~/.cache/referee/judge.sqlite``).
        structured: How to get JSON out of the model (`StructuredOutput`).
    """

    # Validated like a reward's options when a spec gives them: an unknown one is an error.
    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

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
    max_in_flight: int = 16
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
            check_budget()
            if self.rpm:
                await _wait(request_rate(self.model, self.api_base, self.rpm))
            if self.tpm:
                await _wait(token_rate(self.model, self.api_base, self.tpm))
            async with calls_in_flight(self.model, self.api_base, self.max_in_flight):
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
                        token_rate(self.model, self.api_base, self.tpm).charge(used, _clock())
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
        charge(cost)
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
