"""litellm: the transport for every provider that is not OpenAI-compatible, and the cost map
and capability table behind both transports.

litellm is imported on first use, once, with its console banners off and its cost map read
from the package (it would fetch one from the internet otherwise). What it says of a model is
kept between processes (below), so a process that judges over referee's own transport need not
import it at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import importlib.metadata
import json
import os
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from referee._http import Retry, retry_after
from referee._paths import cache_dir
from referee.errors import JudgeError, MissingDependency
from referee.judges.transport import Completion, Request

__all__ = ["import_litellm", "learn", "load", "price", "send_litellm", "supports_schema"]


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


# What litellm says of a model (its prices, whether it takes a JSON schema) is read from the
# cost map bundled with the installed litellm, so it is the same in every process until litellm
# changes. Importing litellm to ask costs about 6 s of CPU, in every reward worker, trainer and
# server process that judges, for a judge that is often a local server litellm does not know.
# The answers are kept in the cache folder, per litellm version, and a process that finds its
# model there does not import litellm. Kept only when litellm reads its bundled map (it fetches
# one otherwise, which can change) and only from a litellm referee imported itself (a process
# that imported litellm first may have registered prices of its own: it is asked directly).


@dataclass(frozen=True, slots=True)
class _Facts:
    per_prompt: float  # US dollars per token
    per_completion: float
    schema: bool  # takes a JSON-schema response format


_MEMO_LIMIT = 1000
"""Models kept in the answers file; past it the file starts afresh."""

_known: dict[str, _Facts] = {}
_memo_lock = threading.Lock()


def _memo_file() -> Path | None:
    if os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP", "True").lower() != "true":
        return None
    try:
        version = importlib.metadata.version("litellm")
    except importlib.metadata.PackageNotFoundError:
        return None
    return cache_dir() / "litellm" / f"{version}.json"


def _read_memo(path: Path) -> dict[str, Any]:
    try:
        memo = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}  # none yet, or torn: asked again and written afresh
    return memo if isinstance(memo, dict) else {}


def _from_memo(entry: Any) -> _Facts | None:
    if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[2], bool)):
        return None
    rates = entry[:2]
    if not all(isinstance(r, int | float) and not isinstance(r, bool) for r in rates):
        return None
    return _Facts(float(rates[0]), float(rates[1]), entry[2])


def _remember(path: Path, model: str, facts: _Facts) -> None:
    with _memo_lock, contextlib.suppress(OSError):
        memo = _read_memo(path)
        if len(memo) >= _MEMO_LIMIT:
            memo = {}
        memo[model] = [facts.per_prompt, facts.per_completion, facts.schema]
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False) as f:
            json.dump(memo, f)
        os.replace(f.name, path)  # a reader sees the old file or the new one, never half


def _ask(litellm: Any, model: str) -> _Facts:
    try:
        per_prompt, per_completion = litellm.cost_per_token(
            model=model, prompt_tokens=1_000_000, completion_tokens=1_000_000
        )
        rates = float(per_prompt) / 1e6, float(per_completion) / 1e6
    except Exception:
        rates = 0.0, 0.0  # a model missing from the cost map (a local server) costs nothing known
    try:
        schema = bool(litellm.supports_response_schema(model=model))
    except Exception:
        schema = False
    return _Facts(*rates, schema)


def _loaded() -> bool:
    return "litellm" in sys.modules


def _facts(model: str) -> _Facts:
    """What litellm says of `model`: from this process's answers, the answers file, or litellm
    (imported for it, once). Without litellm: no price, no schema."""
    known = _known.get(model)
    if known is not None:
        return known
    path = None if _loaded() else _memo_file()
    if path is not None:
        known = _from_memo(_read_memo(path).get(model))
    if known is None:
        try:
            known = _ask(import_litellm(), model)
        except MissingDependency:
            return _Facts(0.0, 0.0, False)
        if path is not None:
            _remember(path, model, known)
    _known[model] = known
    return known


async def learn(model: str) -> None:
    """Have what litellm says of `model` at hand (`price`, `supports_schema`), found in a
    worker thread the first time: reading it may import litellm, and the event loop keeps
    serving meanwhile."""
    if model not in _known:
        await asyncio.to_thread(_facts, model)


def price(model: str, prompt_tokens: int, completion_tokens: int) -> float:
    """What a call cost in US dollars, at litellm's per-token prices for `model` (0.0 for a
    model its cost map does not know, or without litellm)."""
    facts = _facts(model)
    return prompt_tokens * facts.per_prompt + completion_tokens * facts.per_completion


def supports_schema(model: str) -> bool:
    """Whether litellm says `model` takes a JSON-schema response format."""
    return _facts(model).schema


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
