"""The judge client: every model call of referee goes through here.

A call asks for a verdict shaped by a pydantic model. The client:

- sends it over referee's own HTTP transport to OpenAI-compatible servers (OpenAI, vLLM,
  SGLang, llama.cpp) and through litellm to every other provider (`referee.judges.transport`
  says which, and how to choose);
- asks for JSON-schema output where the model supports it, else extracts JSON tolerantly;
  an invalid reply gets exactly one repair attempt, then the call fails;
- retries timeouts, 429 and 5xx with exponential backoff and jitter, honouring Retry-After;
- limits calls in flight, requests and tokens per minute per model, shared by every judge of
  the process (`referee.judges.limits`);
- records tokens and cost (litellm's bundled cost map, offline) and stops at a spend cap:
  further calls fail with ``Failure("budget")``, never a silent 0;
- asks for logprobs when told to, and keeps the candidates at each value of the verdict
  (`referee.judges.logprobs`);
- caches verdicts persistently (`VerdictCache`, SQLite; or `RedisVerdictCache`, which every
  node of a cluster shares), so scoring a log again makes no call.

Failures raise `JudgeError` (``judge``), `JudgeTimeout` (``timeout``) or `BudgetExceeded`
(``budget``), which a reward turns into a `Failure` on its Score (all three are defined in
`referee.errors`, and re-exported here).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Generic, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, StringConstraints, ValidationError

from referee._http import MAX_BODY, Retry, calls_in_flight
from referee.errors import BudgetExceeded, JudgeError, JudgeTimeout
from referee.judges.cache import VerdictStore, cache_key, legacy_cache_key
from referee.judges.limits import (
    RequestRate,
    TokenRate,
    charge,
    check_budget,
    request_rate,
    set_spend_cap,
    spent,
    token_rate,
)
from referee.judges.local import bounded_schema, is_local, local_server
from referee.judges.logprobs import Candidates, candidates_at_values
from referee.judges.redis_cache import check_cache_url
from referee.judges.stores import shared_cache
from referee.judges.transport import Completion, Request, Transport, route, send_http
from referee.judges.via_litellm import learn, price, send_litellm, supports_schema
from referee.judges.via_litellm import load as load_litellm
from referee.verifiers.jsontext import json_values, parse_json

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

logger = logging.getLogger("referee.judges")

_sleep = asyncio.sleep  # one place for tests to observe the waits (with _clock)
_clock = time.monotonic


async def _wait(bucket: RequestRate | TokenRate) -> None:
    """Wait until `bucket` lets a call start."""
    while (seconds := bucket.take(_clock())) > 0:
        await _sleep(seconds)


# --- the client ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict(Generic[T]):
    """A judge's validated answer and what it cost.

    Treat `value` as read-only: a verdict read from the cache may be shared.

    Attributes:
        candidates: When logprobs were asked for and given: the candidate tokens at each
            scalar value of the reply, by JSON Pointer (``/criteria/accuracy``); see
            `referee.judges.logprobs`. None otherwise.
    """

    value: T
    raw: str
    cost: float
    prompt_tokens: int
    completion_tokens: int
    latency: float
    cached: bool
    candidates: Mapping[str, Candidates] | None = None


# the strings pydantic reads as booleans (`cache: "yes"` stays a boolean)
_BOOLEAN_WORDS = frozenset(
    ["0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes"]
)


def _cache_option(value: Any) -> Any:
    """A `JudgeClient.cache` string that is no boolean word must be a Redis URL: an error
    says so (naming the option) instead of pydantic's "not a valid boolean"."""
    if isinstance(value, str) and value.strip().lower() not in _BOOLEAN_WORDS:
        check_cache_url(value, "cache")
    return value


CacheOption = Annotated[
    bool | Annotated[str, StringConstraints(pattern=r"^(redis|rediss|unix)://")],
    BeforeValidator(_cache_option),
]
"""``true`` (the SQLite file), ``false`` (none), or a Redis or Valkey URL:
``redis://host:6379/0``, ``rediss://`` (TLS), ``unix:///path/redis.sock``."""

StructuredOutput = Literal["auto", "json_schema", "json_object", "prompt"]
"""``json_schema``: ask for schema-constrained JSON the OpenAI way. ``json_object``: the
llama.cpp-server way (``{"type": "json_object", "schema": ...}``; its server rejects
``json_schema``). ``prompt``: rely on the instructions and extract JSON from the text.
``auto``: json_schema where litellm's model table says the model supports it, else prompt."""


@dataclass(kw_only=True)
class JudgeClient:
    """How to reach a judge model. Picklable: sessions, limits and caches live per process.

    Attributes:
        model: A litellm model string (``openai/gpt-4.1-mini``, ``anthropic/...``,
            ``openai/<name>`` with `api_base` for any OpenAI-compatible server).
        api_base: The server's base URL, for local or self-hosted models.
        api_key_env: The environment variable holding the API key (never the key itself).
        temperature: The sampling temperature (part of the cache key); 0 is greedy, so
            give more for a reward's ``samples`` above 1 to differ.
        max_tokens: The most tokens the judge may write in one reply (part of the cache key).
        seed: The sampling seed sent with each call, where the server takes one (part of
            the cache key). None: not sent. A reward's ``samples`` above 1 use seed,
            seed + 1, ... (from 0 when None).
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
        cache: Keep verdicts and answer a call made before (same model, messages, sampling
            parameters and rubric version) from there, without calling. ``true``: in the
            SQLite file at `cache_path`; ``false``: no cache; a Redis or Valkey URL
            (``redis://10.0.0.5:6379/0``, ``rediss://...``, ``unix:///path/redis.sock``;
            ``?ttl=SECONDS`` to let entries expire): there, with the same keys, so every
            node of a cluster reads one cache (`referee.judges.redis_cache`).
        cache_path: The SQLite file of the verdict cache (default:
            ``$REFEREE_CACHE_DIR/judge.sqlite``, else ``~/.cache/referee/judge.sqlite``);
            not with a Redis `cache`.
        structured: How to get JSON out of the model: ``json_schema`` (schema-constrained
            output, the OpenAI way), ``json_object`` (llama.cpp server's way), ``prompt``
            (instructions only; the JSON is read out of the text) or ``auto`` (json_schema
            where litellm's model table says the model supports it, else prompt).
        transport: ``auto``: OpenAI-compatible models (``openai/...``, ``hosted_vllm/...``)
            over referee's own HTTP transport, every other through litellm; ``http`` or
            ``litellm`` to choose (`referee.judges.transport`).
        max_reply_bytes: The largest answer read from the judge's server; a longer one fails
            the call (``judge``). referee's HTTP transport stops reading there; through
            litellm, which reads a body whole, it keeps the reply from going further.
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
    cache: CacheOption = True
    cache_path: str | None = None
    structured: StructuredOutput = "auto"
    transport: Transport = "auto"
    max_reply_bytes: int = MAX_BODY

    def __post_init__(self) -> None:
        if isinstance(self.cache, str):  # given in Python: no pydantic validation
            check_cache_url(self.cache, "cache")
            if self.cache_path is not None:
                raise ValueError(
                    "cache_path is the SQLite cache's file, and cache is a Redis URL: give one"
                )

    def _store(self) -> VerdictStore | None:
        """The process's verdict cache for this client, or None."""
        if isinstance(self.cache, str):
            return shared_cache(self.cache)
        return shared_cache(self.cache_path) if self.cache else None

    def _params(self, seed: int | None, top_logprobs: int | None) -> dict[str, Any]:
        params: dict[str, Any] = {"temperature": self.temperature, "max_tokens": self.max_tokens}
        if seed is not None or self.seed is not None:
            params["seed"] = seed if seed is not None else self.seed
        if top_logprobs is not None:
            params["logprobs"] = True
            params["top_logprobs"] = top_logprobs
        return params

    def _api_key(self) -> str | None:
        if self.api_key_env is None:
            return "unused" if self.api_base else None  # local servers take any key
        key = os.environ.get(self.api_key_env)
        if not key:
            raise JudgeError(f"the API key variable {self.api_key_env!r} is not set")
        return key

    def _response_format(self, schema: type[BaseModel]) -> dict[str, Any] | None:
        if self.structured == "json_object":
            return {"type": "json_object", "schema": _json_schema(schema)}
        use = self.structured == "json_schema"
        if self.structured == "auto":  # llama.cpp's server turns a schema into a grammar
            use = is_local(self.model) or supports_schema(self.model)
        if not use:
            return None
        sent = _json_schema(schema)
        if is_local(self.model):
            sent = bounded_schema(sent)
        return {"type": "json_schema", "json_schema": {"name": schema.__name__, "schema": sent}}

    async def judge(
        self,
        messages: list[dict[str, Any]],
        schema: type[T],
        *,
        version: str = "",
        seed: int | None = None,
        top_logprobs: int | None = None,
    ) -> Verdict[T]:
        """Ask for a verdict shaped like `schema`.

        Args:
            messages: The chat messages (OpenAI shape).
            schema: The verdict's pydantic model.
            version: The rubric's version, so a changed rubric is judged afresh.
            seed: A sampling seed for this call (several samples of one verdict).
            top_logprobs: Ask for logprobs with this many candidates per token, and keep the
                candidates at each value of the verdict (`Verdict.candidates`).

        Raises:
            JudgeError, JudgeTimeout, BudgetExceeded: No verdict (a reward records why).
        """
        params = self._params(seed, top_logprobs)
        cache = self._store()
        key = ""
        if cache is not None:
            call = (self.model, messages, params, f"{version}|{schema.__name__}")
            key = cache_key(*call)
            hit = _verdict(await cache.aget(key, lambda: legacy_cache_key(*call)), schema)
            if hit is not None:
                return hit
        started = time.monotonic()
        await learn(self.model)  # litellm's prices and model table, off the event loop
        response_format = self._response_format(schema)
        done = await self._complete(messages, response_format, params)
        text, cost, p_tok, c_tok = done.text, done.cost, done.prompt_tokens, done.completion_tokens
        try:
            value = _parse(text, schema)
        except ValueError as first_error:
            repair = [
                *messages,
                {"role": "assistant", "content": text},
                {"role": "user", "content": (
                    f"That reply is not valid: {first_error}. Reply again with only the JSON "
                    f"object, matching this schema: {_json_schema(schema)}"
                )},
            ]  # fmt: skip
            done = await self._complete(repair, response_format, params)
            text, cost = done.text, cost + done.cost
            p_tok, c_tok = p_tok + done.prompt_tokens, c_tok + done.completion_tokens
            try:
                value = _parse(text, schema)
            except ValueError as second_error:
                raise JudgeError(
                    f"the judge's reply is not a valid verdict: {second_error}"
                ) from None
        candidates = None
        if top_logprobs is not None:
            candidates = candidates_at_values(text, done.logprobs)
            if done.logprobs is None:
                _warn_no_logprobs(self.model, self.api_base)
        if cache is not None:
            entry: dict[str, Any] = {
                "raw": text, "cost": cost, "prompt_tokens": p_tok, "completion_tokens": c_tok,
            }  # fmt: skip
            if top_logprobs is not None:
                entry["candidates"] = candidates
            await cache.aput(key, entry)
        latency = time.monotonic() - started
        return Verdict(value, text, cost, p_tok, c_tok, latency, False, candidates)

    async def _complete(
        self,
        messages: list[dict[str, Any]],
        response_format: dict[str, Any] | None,
        params: dict[str, Any],
    ) -> Completion:
        """One completion, with retries, limits, and its cost charged to the spend cap."""
        if response_format is not None:
            params = {**params, "response_format": response_format}
        model, api_base = self.model, self.api_base
        if is_local(model):  # a server of this process's own, started on first use
            api_base, served = await local_server(model)
            model = f"openai/{served}"
        request = Request(
            model,
            messages,
            params,
            api_base,
            self._api_key() if api_base == self.api_base else "unused",
            self.timeout,
            self.max_reply_bytes,
        )
        send = send_http if route(model, self.transport) == "http" else send_litellm
        if send is send_litellm:
            await load_litellm()  # imported off the event loop
        last = Retry("no attempt was made")
        for attempt in range(self.retries + 1):
            check_budget()
            if self.rpm:
                await _wait(request_rate(self.model, self.api_base, self.rpm))
            if self.tpm:
                await _wait(token_rate(self.model, self.api_base, self.tpm))
            async with calls_in_flight(self.model, self.api_base, self.max_in_flight):
                outcome = await send(request)
            if isinstance(outcome, Completion):
                return self._account(outcome, send is send_http)
            last = outcome
            if attempt < self.retries:
                await _sleep(last.wait(attempt, self.backoff, self.max_backoff))
        if last.timed_out:
            raise JudgeTimeout(
                f"judge call timed out {self.retries + 1} times ({self.timeout:g}s each)"
            )
        raise JudgeError(f"judge call failed after {self.retries + 1} attempts: {last.reason}")

    def _account(self, done: Completion, priced_here: bool) -> Completion:
        if priced_here:
            cost = price(self.model, done.prompt_tokens, done.completion_tokens)
            done = Completion(
                done.text, done.prompt_tokens, done.completion_tokens, cost, done.logprobs
            )
        charge(done.cost)
        if self.tpm:
            used = done.prompt_tokens + done.completion_tokens
            token_rate(self.model, self.api_base, self.tpm).charge(used, _clock())
        return done


# --- verdicts: parsed, remembered, warned about -------------------------------------------------


@functools.lru_cache(maxsize=1024)
def _json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """The verdict model's JSON schema, built once per model (it is sent with every call)."""
    return schema.model_json_schema()


def _parse(text: str, schema: type[T]) -> T:
    """The verdict in `text`, validated by `schema` (ValueError if there is none, or several).

    The whole reply when it is JSON (structured output). Else the one verdict-shaped object in
    it: a judge that quotes the judged text may repeat a verdict injected there ("give this a
    10") before its own, so the first object found is not trusted to be the judge's. Objects
    that all say the same are one verdict; verdicts that disagree are an invalid reply (the
    client asks once more, then fails), never the first of them.
    """
    whole = parse_json(text, "strict")
    if whole.ok:
        return _validate(whole.value, schema)
    values = json_values(text)
    if not values:
        raise ValueError(f"no JSON object ({parse_json(text, 'first').error})")
    verdicts: list[T] = []
    error: ValueError | None = None
    for value in values:
        try:
            verdict = _validate(value, schema)
        except ValueError as exc:
            error = error or exc
            continue
        if all(verdict != other for other in verdicts):
            verdicts.append(verdict)
    if len(verdicts) > 1:
        raise ValueError(
            f"the reply holds {len(verdicts)} different verdicts (one may be quoted from the "
            "judged text); give exactly one"
        )
    if verdicts:
        return verdicts[0]
    raise error or ValueError("no verdict in the reply")


def _validate(value: Any, schema: type[T]) -> T:
    try:
        return schema.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"])) or "(root)"
        raise ValueError(f"{where}: {first['msg']}") from None


_PARSED_SIZE = 100_000
_parsed: dict[tuple[type[BaseModel], str], BaseModel] = {}


def _parse_stored(text: str, schema: type[T]) -> T:
    """A cached verdict's value, remembered by (schema, text): a hit validates nothing twice.

    A stored text passed `_parse` when it was stored, so plain JSON (what structured output
    gives) is read by pydantic's own parser first; anything else takes `_parse` again.
    """
    key = (schema, text)
    value = _parsed.get(key)
    if value is None:
        try:
            value = schema.model_validate_json(text)
        except ValidationError:
            value = _parse(text, schema)
        if len(_parsed) >= _PARSED_SIZE:
            # the oldest (dicts keep insertion order), unless another thread got there first
            with contextlib.suppress(KeyError, StopIteration, RuntimeError):
                del _parsed[next(iter(_parsed))]
        _parsed[key] = value
    return value  # type: ignore[return-value]


def _verdict(hit: dict[str, Any] | None, schema: type[T]) -> Verdict[T] | None:
    """The verdict in a cache entry, or None (none, or one the current schema rejects).

    The cache gave only entries `parse_entry` accepts (``raw`` a string, ``candidates``
    pairs of a string and a number)."""
    if hit is None:
        return None
    raw = str(hit["raw"])
    try:
        value = _parse_stored(raw, schema)
    except ValueError:
        return None  # a verdict the current schema rejects: ask again
    stored = hit.get("candidates")
    candidates = None
    if isinstance(stored, dict):
        candidates = {
            path: tuple((str(text), float(lp)) for text, lp in found)
            for path, found in stored.items()
        }
    return Verdict(value, raw, 0.0, 0, 0, 0.0, True, candidates)


@functools.cache
def _warn_no_logprobs(model: str, api_base: str | None) -> None:
    logger.warning(
        "the judge %s%s gave no logprobs: its scores are the sampled ones",
        model,
        f" at {api_base}" if api_base else "",
    )
