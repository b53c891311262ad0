"""referee's HTTP client for JSON APIs: one pooled aiohttp session per event loop, answers read
up to a limit, the retry rule, and the process-wide limit of calls in flight to a server.

The judges' OpenAI-compatible transport (`referee.judges.transport`) and served reward models
(`referee.rewards.learned`) both go through it, so they pool, retry and limit the same way.

- The session: made on a loop's first call (a forked child makes its own), kept open by an
  async generator the loop finalises at shutdown, so a loop run by ``asyncio.run`` closes it by
  itself; `close_session` closes it sooner.
- One attempt (`post`, `post_json`) returns the answer or a `Retry` (a timeout, a 408, 409,
  429 or 5xx, a lost connection: a failure a later attempt may not meet) and raises
  `JudgeError` for the rest; the caller does the retries (`Retry.wait`).
- A server's answer is read in chunks up to a limit (`MAX_BODY` by default): a server that
  answers with hundreds of MB costs a `JudgeError` naming the limit, not the process's
  memory. An error answer's first `_MAX_ERROR_BODY` bytes are read, the rest dropped.
- `calls_in_flight`: one semaphore per event loop, model and server, whoever calls.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import threading
import time
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

from referee.errors import JudgeError, MissingDependency

__all__ = [
    "MAX_BODY",
    "Retry",
    "calls_in_flight",
    "close_session",
    "post",
    "post_json",
    "retry_after",
]

MAX_BODY = 32 * 2**20
"""The largest answer read from a server, in bytes (after decompression): a chat completion
of a few thousand tokens with their logprobs is well under a MB."""
_MAX_ERROR_BODY = 64 * 2**10  # an error's message is cut at 300 characters anyway
_CHUNK = 64 * 2**10


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
    # No pool limit: the callers' max_in_flight is the limit, per model and server.
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
    JSON answer, or a `Retry` (a timeout, a 408, 409, 429 or 5xx, a lost connection).

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
    answer = await post(url, json.dumps(payload).encode(), api_key, timeout, what, max_body)
    if isinstance(answer, Retry):
        return answer
    try:
        return json.loads(answer)
    except ValueError:
        raise JudgeError(f"{what} failed: the answer is not JSON: {answer[:200]!r}") from None


async def post(
    url: str, body: bytes, api_key: str | None, timeout: float, what: str, max_body: int
) -> bytes | Retry:
    """One POST of the JSON `body`: the answer's bytes (HTTP 200), or a Retry.

    Raises:
        JudgeError: A failure no retry mends (a 4xx other than 408, 409 and 429, an answer
            longer than `max_body`).
    """
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


def _failure(status: int, body: bytes) -> str:
    name = _ERROR_NAMES.get(status, "ServerError" if status >= 500 else "APIError")
    try:
        payload = json.loads(body)
        error = payload.get("error", payload) if isinstance(payload, dict) else payload
        message = error.get("message", error) if isinstance(error, dict) else error
    except ValueError:
        message = body.decode("utf-8", "replace")
    return f"{name} (HTTP {status}): {str(message)[:300]}"


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


# --- calls in flight ---------------------------------------------------------------------------

_semaphores: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str, str | None], asyncio.Semaphore]
] = weakref.WeakKeyDictionary()


def calls_in_flight(model: str, api_base: str | None, size: int) -> asyncio.Semaphore:
    """The limit of calls in flight to this model on this server, in the running event loop.

    An asyncio semaphore belongs to one event loop, and `referee.score` may run several loops
    in a process: one semaphore per loop and model. The first caller's `size` sets it.
    """
    per_loop = _semaphores.setdefault(asyncio.get_running_loop(), {})
    key = (model, api_base)
    if key not in per_loop:
        per_loop[key] = asyncio.Semaphore(size)
    return per_loop[key]
