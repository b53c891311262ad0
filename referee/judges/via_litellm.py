"""litellm: the transport for every provider that is not OpenAI-compatible, and the cost map
and capability table behind both transports.

litellm is imported on first use, once, with its console banners off and its cost map read
from the package (it would fetch one from the internet otherwise).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import os
from typing import Any

from referee._http import Retry, retry_after
from referee.errors import JudgeError, MissingDependency
from referee.judges.transport import Completion, Request

__all__ = ["import_litellm", "load", "price", "send_litellm", "supports_schema"]


# litellm prints "Give Feedback / Get Help" banners (and a provider list) to the console on every
# failed call. A failed judge call is referee's to report, once, as a JudgeError and then a
# Failure on the rollout's Score: a trainer's console is no place for a banner per rollout.
@functools.cache
def _import() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def import_litellm() -> Any:
    """The litellm module, configured for referee.

    Raises:
        MissingDependency: litellm is not installed (``pip install "referee[judges]"``).
    """
    try:
        return _import()
    except ImportError:
        raise MissingDependency("litellm", "judges", "LLM judges") from None


async def load() -> None:
    """Import litellm in a worker thread, once: it takes seconds, and the event loop (a
    trainer's, or ``referee serve``'s) keeps serving meanwhile. Without litellm, nothing."""
    if _import.cache_info().currsize == 0:
        with contextlib.suppress(MissingDependency):
            await asyncio.to_thread(import_litellm)


@functools.cache
def _rates(model: str) -> tuple[float, float]:
    try:
        litellm = import_litellm()
        per_prompt, per_completion = litellm.cost_per_token(
            model=model, prompt_tokens=1_000_000, completion_tokens=1_000_000
        )
    except Exception:
        return 0.0, 0.0  # a model missing from the cost map (a local server) costs nothing known
    return float(per_prompt) / 1e6, float(per_completion) / 1e6


def price(model: str, prompt_tokens: int, completion_tokens: int) -> float:
    """What a call cost in US dollars, at litellm's per-token prices for `model` (0.0 for a
    model its cost map does not know, or without litellm)."""
    rate_in, rate_out = _rates(model)
    return prompt_tokens * rate_in + completion_tokens * rate_out


@functools.cache
def supports_schema(model: str) -> bool:
    """Whether litellm says `model` takes a JSON-schema response format."""
    try:
        return bool(import_litellm().supports_response_schema(model=model))
    except Exception:
        return False


@functools.cache
def _retryable(litellm: Any) -> tuple[type[BaseException], ...]:
    e = litellm.exceptions
    return (
        e.Timeout, e.RateLimitError, e.APIConnectionError, e.InternalServerError,
        e.ServiceUnavailableError, e.BadGatewayError, asyncio.TimeoutError,
    )  # fmt: skip


async def send_litellm(request: Request) -> Completion | Retry:
    """One attempt through ``litellm.acompletion`` (its own retries off: the client's honour
    Retry-After and the spend cap).

    Raises:
        JudgeError: A failure no retry mends.
    """
    litellm = import_litellm()
    kwargs: dict[str, Any] = {
        "model": request.model,
        "messages": request.messages,
        "timeout": request.timeout,
        "num_retries": 0,
        "max_retries": 0,
        **request.params,
    }
    if "response_format" in kwargs:  # litellm may rewrite it; the client shares its schemas
        kwargs["response_format"] = copy.deepcopy(kwargs["response_format"])
    if request.api_base:
        kwargs["api_base"] = request.api_base
    if request.api_key:
        kwargs["api_key"] = request.api_key
    try:
        response = await asyncio.wait_for(
            litellm.acompletion(**kwargs), timeout=request.timeout + 5.0
        )
    except _retryable(litellm) as exc:
        timed_out = isinstance(exc, litellm.exceptions.Timeout | asyncio.TimeoutError)
        return Retry(f"{type(exc).__name__}: {exc}", timed_out, _retry_after(exc))
    except Exception as exc:
        raise JudgeError(f"judge call failed: {type(exc).__name__}: {exc}") from None
    choice = response.choices[0]
    text = choice.message.content or ""
    # litellm has read the body whole by now (its providers' clients give no way to stop
    # early): the limit can only keep a huge reply from going further (the parser, the
    # cache). referee's own transport stops reading at the limit.
    if len(text) > request.max_body or len(text.encode("utf-8", "replace")) > request.max_body:
        raise JudgeError(
            f"judge call failed: the reply is longer than {request.max_body} bytes; a larger "
            "limit is the client's max_reply_bytes"
        )
    usage = getattr(response, "usage", None)
    try:
        cost = float(litellm.completion_cost(completion_response=response))
    except Exception:
        cost = 0.0  # a model missing from the cost map (a local server) costs nothing known
    return Completion(
        text=text,
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        cost=cost,
        logprobs=_logprobs(getattr(choice, "logprobs", None)),
    )


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or getattr(exc, "litellm_response_headers", None)
    return retry_after(headers)


def _logprobs(logprobs: Any) -> list[dict[str, Any]] | None:
    """``choices[0].logprobs.content`` as plain dicts, whatever objects litellm built."""
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if content is None:
        content = getattr(logprobs, "content", None)
    if not isinstance(content, list):
        return None
    return [t.model_dump() if hasattr(t, "model_dump") else dict(t) for t in content]
