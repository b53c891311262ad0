"""How a judge call reaches its model: a lean HTTP transport for OpenAI-compatible servers,
litellm for every other provider.

litellm spends milliseconds of CPU per call on its own work, on the caller's event loop, which
caps a trainer's judge traffic near a few hundred calls a second however many GPUs serve the
judge. OpenAI itself, vLLM, SGLang and llama.cpp's server all speak one protocol
(``POST {api_base}/chat/completions``), so calls to them go straight over aiohttp: one pooled
keep-alive session per event loop, closed with the loop.

Routing (`route`), by the client's ``transport`` option:

- ``auto`` (the default): ``openai/<name>`` and ``hosted_vllm/<name>`` models go over HTTP,
  to ``api_base`` when given (any OpenAI-compatible server), else to OpenAI
  (``$OPENAI_BASE_URL``, or ``https://api.openai.com/v1``); every other model string goes
  through litellm.
- ``http``: always over HTTP (an ``openai/`` or ``hosted_vllm/`` prefix is dropped on the
  wire; any other model string is sent as it is).
- ``litellm``: always through litellm (its provider-specific parameter mapping, for a server
  that needs it).

Both transports return a `Completion` or a `Retry` (a failure a later attempt may not meet)
and raise `JudgeError` for the rest; the client does the retries, limits and cache the same
way for both. The HTTP one is referee's HTTP client (`referee._http`: the pooled session,
`post_json` for other JSON APIs such as served reward models, `Retry`, `close_session`),
whose public names this module also exports. Costs come from litellm's bundled cost map on
both (`referee.judges.via_litellm`).

A server's answer is read in chunks up to a limit (`Request.max_body`, `MAX_BODY` by default):
a server that answers with hundreds of MB costs a `JudgeError` naming the limit, not the
process's memory.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from typing import Any, Literal

from referee._http import MAX_BODY, Retry, close_session, post, post_json, retry_after
from referee.errors import JudgeError

__all__ = [
    "HTTP_PROVIDERS",
    "MAX_BODY",
    "Completion",
    "Request",
    "Retry",
    "Transport",
    "close_session",
    "post_json",
    "retry_after",
    "route",
    "send_http",
]

Transport = Literal["auto", "http", "litellm"]
"""How a client reaches its model: ``auto`` (by the model string, see `route`), ``http``
(referee's own OpenAI-compatible transport) or ``litellm``."""

HTTP_PROVIDERS = frozenset({"openai", "hosted_vllm"})
"""The litellm provider prefixes that ``transport: auto`` sends over HTTP."""

OPENAI_BASE = "https://api.openai.com/v1"


def route(model: str, transport: Transport) -> Literal["http", "litellm"]:
    """Which transport a call to `model` takes under the option `transport`."""
    if transport != "auto":
        return transport
    provider, _, name = model.partition("/")
    return "http" if name and provider in HTTP_PROVIDERS else "litellm"


@dataclass(frozen=True, slots=True)
class Request:
    """One chat completion to ask for.

    Attributes:
        model: The litellm model string (``openai/gpt-4.1-mini``).
        messages: The chat messages (OpenAI shape).
        params: Sampling and output parameters, sent as they are (``temperature``,
            ``max_tokens``, ``seed``, ``response_format``, ``logprobs``, ``top_logprobs``).
        api_base: The server's base URL (None: the provider's own).
        api_key: The key to send (None: the transport's default).
        timeout: Seconds for the whole attempt.
        max_body: The largest answer to read, in bytes; a longer one is a `JudgeError`.
    """

    model: str
    messages: list[dict[str, Any]]
    params: dict[str, Any]
    api_base: str | None
    api_key: str | None
    timeout: float
    max_body: int = MAX_BODY


@dataclass(frozen=True, slots=True)
class Completion:
    """A model's answer: its text, tokens, cost, and the logprobs of its tokens when asked for
    and given (``choices[0].logprobs.content``, OpenAI's shape: dicts with ``token``,
    ``logprob``, ``bytes``, ``top_logprobs``)."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    cost: float
    logprobs: list[dict[str, Any]] | None = None


# --- one call ----------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _endpoint(model: str, api_base: str | None) -> tuple[str, str, bool]:
    """(URL, the model's name on the wire, whether this is OpenAI itself)."""
    base = api_base or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE")
    provider, _, name = model.partition("/")
    wire = name if name and provider in HTTP_PROVIDERS else model
    return f"{(base or OPENAI_BASE).rstrip('/')}/chat/completions", wire, base is None


def _api_key(request: Request) -> str | None:
    if request.api_key is not None:
        return request.api_key
    key = os.environ.get("OPENAI_API_KEY")
    if not key and request.api_base is None:
        raise JudgeError(
            "no API key for OpenAI: set OPENAI_API_KEY, or name the variable with api_key_env"
        )
    return key


async def send_http(request: Request) -> Completion | Retry:
    """One attempt over HTTP to an OpenAI-compatible server.

    Raises:
        JudgeError: A failure no retry mends (a 4xx other than 408, 409 and 429, an answer
            that is not a chat completion, no API key for OpenAI).
    """
    url, wire, openai = _endpoint(request.model, request.api_base)
    params = request.params
    if openai and "max_tokens" in params:
        # OpenAI's reasoning models refuse max_tokens; every OpenAI model takes this name.
        params = {**params, "max_completion_tokens": params["max_tokens"]}
        del params["max_tokens"]
    body = json.dumps({"model": wire, "messages": request.messages, **params}).encode()
    answer = await post(
        url, body, _api_key(request), request.timeout, "judge call", request.max_body
    )
    return answer if isinstance(answer, Retry) else _completion(answer)


def _completion(answer: bytes) -> Completion:
    try:
        payload = json.loads(answer)
        choice = payload["choices"][0]
        text = choice["message"].get("content") or ""
        usage = payload.get("usage") or {}
        logprobs = (choice.get("logprobs") or {}).get("content")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise JudgeError(
            f"judge call failed: the answer is not a chat completion: {answer[:200]!r}"
        ) from None
    return Completion(
        text=str(text),
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        cost=0.0,  # priced by the client, from litellm's cost map
        logprobs=logprobs if isinstance(logprobs, list) else None,
    )
