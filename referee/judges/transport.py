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
way for both. `post_json` is the same HTTP client for other JSON APIs (served reward
models). Costs come from litellm's bundled cost map on both (`referee.judges.via_litellm`).

A server's answer is read in chunks up to a limit (`Request.max_body`, `MAX_BODY` by default):
a server that answers with hundreds of MB costs a `JudgeError` naming the limit, not the
process's memory. An error answer's first `_MAX_ERROR_BODY` bytes are read, the rest dropped.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import random
import threading
import time
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Literal

from referee.errors import JudgeError, MissingDependency

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

MAX_BODY = 32 * 2**20
"""The largest answer read from a server, in bytes (after decompression): a chat completion
of a few thousand tokens with their logprobs is well under a MB."""
_MAX_ERROR_BODY = 64 * 2**10  # an error's message is cut at 300 characters anyway
_CHUNK = 64 * 2**10


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


@dataclass(frozen=True, slots=True)
class Retry:
    """An attempt that failed in a way a later one may not: a timeout, a 429 or 5xx, a lost
    connection. `retry_after` is the server's Retry-After, in seconds, when it sent one."""

    reason: str
    timed_out: bool = False
    retry_after: float | None = None

    def wait(self, attempt: int, backoff: float, max_backoff: float) -> float:
        """Seconds to wait before attempt `attempt` + 2: the server's Retry-After, else
        ``backoff * 2 ** attempt`` (at most `max_backoff`) with jitter, half to all of it."""
        if self.retry_after is not None:
            return self.retry_after
        return min(max_backoff, backoff * 2.0**attempt) * random.uniform(0.5, 1.0)


def retry_after(headers: Any) -> float | None:
    """The wait a response's headers ask for, in seconds: ``retry-after-ms`` (OpenAI's),
    ``retry-after`` in seconds or as an HTTP date; None when absent or unreadable."""
    if not headers or not hasattr(headers, "get"):
        return None
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            return max(0.0, float(ms) / 1000.0)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            return max(0.0, parsedate_to_datetime(str(value)).timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


# --- the session: one per event loop -----------------------------------------------------------

_ERROR_NAMES = {
    400: "BadRequestError",
    401: "AuthenticationError",
    403: "PermissionDeniedError",
    404: "NotFoundError",
    408: "Timeout",
    409: "ConflictError",
    413: "RequestTooLargeError",
    422: "UnprocessableEntityError",
    429: "RateLimitError",
    500: "InternalServerError",
    502: "BadGatewayError",
    503: "ServiceUnavailableError",
    504: "GatewayTimeoutError",
}
_RETRYABLE = frozenset({408, 409, 429})  # and every 5xx

_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[Any, Any, int]] = (
    weakref.WeakKeyDictionary()
)
_sessions_lock = threading.Lock()


def _aiohttp() -> Any:
    try:
        import aiohttp
    except ImportError:
        raise MissingDependency("aiohttp", "judges", "LLM judges") from None
    return aiohttp


async def _keeper(loop: asyncio.AbstractEventLoop, session: Any) -> AsyncIterator[None]:
    """Holds the loop's session open until the loop shuts its async generators down (as
    ``asyncio.run`` does before closing a loop), then closes it there, on its own loop."""
    try:
        yield
    finally:
        with _sessions_lock:
            held = _sessions.get(loop)
            if held is not None and held[0] is session:
                del _sessions[loop]
        await session.close()


async def _session() -> Any:
    """The running loop's pooled session (made on first use; a forked child makes its own)."""
    loop = asyncio.get_running_loop()
    held = _sessions.get(loop)
    if held is not None and held[2] == os.getpid() and not held[0].closed:
        return held[0]
    aiohttp = _aiohttp()
    # No pool limit: the client's max_in_flight is the limit, per model and server.
    connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=30.0)
    session = aiohttp.ClientSession(connector=connector, skip_auto_headers=("User-Agent",))
    keeper = _keeper(loop, session)
    # Runs to its yield without suspending (so no other call of this loop gets in between),
    # and registers it with the loop, which finalises it at shutdown.
    await keeper.__anext__()
    with _sessions_lock:
        _sessions[loop] = (session, keeper, os.getpid())
    return session


async def close_session() -> None:
    """Close the running loop's HTTP session now (a loop run by ``asyncio.run`` closes it by
    itself; a long-lived loop that stops judging may call this). The next call opens another."""
    held = _sessions.get(asyncio.get_running_loop())
    if held is not None:
        await held[1].aclose()


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


def _failure(status: int, body: bytes) -> str:
    name = _ERROR_NAMES.get(status, "ServerError" if status >= 500 else "APIError")
    try:
        payload = json.loads(body)
        error = payload.get("error", payload) if isinstance(payload, dict) else payload
        message = error.get("message", error) if isinstance(error, dict) else error
    except ValueError:
        message = body.decode("utf-8", "replace")
    return f"{name} (HTTP {status}): {str(message)[:300]}"


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
    answer = await _post(
        url, body, _api_key(request), request.timeout, "judge call", request.max_body
    )
    return answer if isinstance(answer, Retry) else _completion(answer)


async def post_json(
    url: str,
    payload: Any,
    *,
    api_key: str | None,
    timeout: float,
    what: str,
    max_body: int = MAX_BODY,
) -> Any | Retry:
    """One attempt at ``POST url`` with a JSON body, on the loop's pooled session: the decoded
    JSON answer, or a `Retry` (a timeout, a 408, 409, 429 or 5xx, a lost connection). For
    servers other than chat models (served reward models) that want the same client.

    Args:
        url: The full URL.
        payload: The body, encoded as JSON.
        api_key: Sent as a bearer token when given.
        timeout: Seconds for the whole attempt.
        what: What the call is, for errors (``"reward model call"``).
        max_body: The largest answer to read, in bytes.

    Raises:
        JudgeError: A failure no retry mends (another 4xx, an answer that is not JSON, an
            answer longer than `max_body`).
    """
    answer = await _post(url, json.dumps(payload).encode(), api_key, timeout, what, max_body)
    if isinstance(answer, Retry):
        return answer
    try:
        return json.loads(answer)
    except ValueError:
        raise JudgeError(f"{what} failed: the answer is not JSON: {answer[:200]!r}") from None


async def _post(
    url: str, body: bytes, api_key: str | None, timeout: float, what: str, max_body: int
) -> bytes | Retry:
    """One POST of `body`: the answer's bytes (HTTP 200), or a Retry; raises `JudgeError`
    for a failure no retry mends (an answer longer than `max_body` among them)."""
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    aiohttp = _aiohttp()
    session = await _session()
    try:
        async with session.post(
            url, data=body, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout)
        ) as response:
            status = response.status
            if status == 200:
                answer = await _read(response, max_body)
                if answer is None:
                    raise JudgeError(
                        f"{what} failed: the answer from {url} is longer than {max_body} "
                        "bytes; a larger limit is the client's max_reply_bytes"
                    )
                return answer
            # An error's message is cut short anyway: its first bytes are enough.
            error = await _read(response, _MAX_ERROR_BODY, cut=True) or b""
            wait = retry_after(response.headers)
    except TimeoutError:
        return Retry(f"Timeout: no answer within {timeout:g}s", timed_out=True)
    except aiohttp.ClientError as exc:
        return Retry(f"APIConnectionError: {type(exc).__name__}: {exc}")
    reason = _failure(status, error)
    if status in _RETRYABLE or status >= 500:
        return Retry(reason, timed_out=status == 408, retry_after=wait)
    raise JudgeError(f"{what} failed: {reason}")


async def _read(response: Any, limit: int, *, cut: bool = False) -> bytes | None:
    """The body of `response`, read in chunks; as soon as it passes `limit` bytes, None (or
    with `cut`, its first `limit` bytes). The rest is never read: the connection is dropped,
    not drained."""
    declared = response.content_length
    if declared is not None and declared > limit and not cut:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(_CHUNK):
        size += len(chunk)
        if size > limit:
            response.close()
            if not cut:
                return None
            chunks.append(chunk[: len(chunk) - (size - limit)])
            break
        chunks.append(chunk)
    return b"".join(chunks)


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
