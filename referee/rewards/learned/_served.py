"""Served reward models: vLLM's pooling and classification APIs, and OpenRLHF's remote RM.

Requests go over referee's HTTP client, the judges' too (`referee._http.post_json`: one pooled
session per event loop), with the judges' retries (timeouts, 408, 409, 429 and 5xx, with
backoff and Retry-After) and the process-wide limit of calls in flight per model and server
(`referee._http.calls_in_flight`). Rollouts go `batch_size` to a request.

The protocols (request -> answer), every text already rendered by referee
(`referee.models.inputs`) and sent with ``add_special_tokens: false``:

- ``vllm_pooling`` (``vllm serve MODEL --runner pooling``; vLLM's reward-model API):
  ``POST {root}/pooling`` ``{"model", "input": [texts], "task": "classify",
  "use_activation": false}`` -> ``{"data": [{"index", "data": [score]}]}``; for a process
  reward model ``"task": "token_classify"`` -> ``"data": [[p0, p1], ...]``, one row per step:
  the server must pool at the step separator (STEP pooling; vLLM's default for
  ``Qwen2ForProcessRewardModel``, else ``--pooler-config '{"pooling_type": "STEP",
  "step_tag_id": ID}'``). ``use_activation: false`` asks for the raw score (the logit), which
  referee normalises itself.
- ``vllm_classify``: ``POST {root}/classify`` ``{"model", "input": [texts], "use_activation":
  false}`` -> ``{"data": [{"index", "label", "probs": [score], "num_classes": 1}]}``.
- ``openrlhf`` (``python -m openrlhf.cli.serve_rm``, or any server of OpenRLHF's
  ``--remote_rm_url``): ``POST {api_base}`` (the full URL, e.g. ``http://host:5000/get_reward``)
  ``{"query": [texts], "prompts": [prompt texts], "labels": [references]}`` ->
  ``{"rewards": [...]}``.

vLLM serves these at its root: an ``api_base`` ending in ``/v1`` has it dropped. vLLM's
``/score`` is not a protocol here: it encodes ``(text_1, text_2)`` as a tokenizer pair (a
cross-encoder's input), not the single sequence a reward model reads.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from referee._http import Retry, calls_in_flight, post_json
from referee.errors import JudgeError, JudgeTimeout

__all__ = ["Protocol", "Served", "StepProtocol"]

Protocol = Literal["vllm_pooling", "vllm_classify", "openrlhf"]
"""How a served sequence reward model is asked (see the module docstring)."""

StepProtocol = Literal["vllm_pooling"]
"""How a served process reward model is asked (see the module docstring)."""

_WHAT = "reward model call"


@dataclass(frozen=True, kw_only=True)
class Served:
    """A reward model behind HTTP, and how to call it (the reward's options, gathered)."""

    api_base: str
    model: str | None
    protocol: Protocol
    api_key_env: str | None
    request_timeout: float
    retries: int
    backoff: float
    max_backoff: float
    max_in_flight: int
    batch_size: int

    def _url(self, endpoint: str) -> str:
        if self.protocol == "openrlhf":
            return self.api_base
        root = self.api_base.rstrip("/").removesuffix("/v1")
        return f"{root}/{endpoint}"

    def _api_key(self) -> str | None:
        if self.api_key_env is None:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise JudgeError(f"the API key variable {self.api_key_env!r} is not set")
        return key

    async def scores(
        self,
        texts: Sequence[str],
        prompts: Sequence[str],
        labels: Sequence[str],
        out: list[Any],
        at: Sequence[int],
    ) -> None:
        """Score `texts` (one sequence score each) into ``out[at[i]]``: a float, or the
        exception that failed its request."""
        await self._batched(
            len(texts), out, at, lambda s: self._scores(texts[s], prompts[s], labels[s])
        )

    async def steps(
        self, texts: Sequence[str], label: int, out: list[Any], at: Sequence[int]
    ) -> None:
        """Each text's per-step probabilities of class `label` into ``out[at[i]]``."""
        await self._batched(len(texts), out, at, lambda s: self._steps(texts[s], label))

    async def _batched(self, n: int, out: list[Any], at: Sequence[int], ask: Any) -> None:
        async def one(start: int) -> None:
            part = slice(start, min(n, start + self.batch_size))
            try:
                values = await ask(part)
            except Exception as exc:
                values = [exc] * (part.stop - part.start)
            for i, value in zip(at[part], values, strict=True):
                out[i] = value

        await asyncio.gather(*(one(s) for s in range(0, n, self.batch_size)))

    async def _scores(
        self, texts: Sequence[str], prompts: Sequence[str], labels: Sequence[str]
    ) -> list[float]:
        body: dict[str, Any]
        if self.protocol == "openrlhf":
            body = {"query": list(texts), "prompts": list(prompts), "labels": list(labels)}
            answer = await self._post(self._url(""), body)
            rewards = answer.get("rewards") if isinstance(answer, dict) else None
            if not isinstance(rewards, list) or len(rewards) != len(texts):
                raise JudgeError(
                    f"{_WHAT} failed: the answer has no 'rewards' list of {len(texts)} values: "
                    f"{str(answer)[:200]}"
                )
            return [_number(r) for r in rewards]
        body = {"input": list(texts), "use_activation": False, "add_special_tokens": False}
        if self.protocol == "vllm_pooling":
            body["task"] = "classify"
        if self.model is not None:
            body["model"] = self.model
        endpoint = "pooling" if self.protocol == "vllm_pooling" else "classify"
        rows = _data(await self._post(self._url(endpoint), body), len(texts))
        key = "data" if endpoint == "pooling" else "probs"
        out = []
        for row in rows:
            value = row.get(key)
            if isinstance(value, list) and len(value) == 1:
                value = value[0]
            if isinstance(value, list):
                raise JudgeError(
                    f"{_WHAT} failed: the model gives {len(value)} values per input, a reward "
                    "model one (serve a single-label sequence-classification model)"
                )
            out.append(_number(value))
        return out

    async def _steps(self, texts: Sequence[str], label: int) -> list[list[float]]:
        body: dict[str, Any] = {
            "input": list(texts),
            "task": "token_classify",
            "add_special_tokens": False,
        }
        if self.model is not None:
            body["model"] = self.model
        rows = _data(await self._post(self._url("pooling"), body), len(texts))
        out = []
        for row in rows:
            steps = row.get("data")
            if not isinstance(steps, list) or not all(isinstance(s, list) for s in steps):
                raise JudgeError(f"{_WHAT} failed: 'data' is not a list of rows: {str(row)[:200]}")
            if any(len(s) <= label for s in steps):
                raise JudgeError(f"{_WHAT} failed: a step row has no class {label}")
            out.append([_number(s[label]) for s in steps])
        return out

    async def _post(self, url: str, body: dict[str, Any]) -> Any:
        key = self._api_key()
        last = Retry("no attempt was made")
        for attempt in range(self.retries + 1):
            async with calls_in_flight(self.model or url, self.api_base, self.max_in_flight):
                answer = await post_json(
                    url, body, api_key=key, timeout=self.request_timeout, what=_WHAT
                )
            if not isinstance(answer, Retry):
                return answer
            last = answer
            if attempt < self.retries:
                await asyncio.sleep(last.wait(attempt, self.backoff, self.max_backoff))
        if last.timed_out:
            raise JudgeTimeout(
                f"{_WHAT} timed out {self.retries + 1} times ({self.request_timeout:g}s each)"
            )
        raise JudgeError(f"{_WHAT} failed after {self.retries + 1} attempts: {last.reason}")


def _data(answer: Any, count: int) -> list[dict[str, Any]]:
    """vLLM's ``data`` rows, in input order (by ``index``), checked for count and shape."""
    rows = answer.get("data") if isinstance(answer, dict) else None
    if (
        not isinstance(rows, list)
        or len(rows) != count
        or not all(isinstance(r, dict) for r in rows)
    ):
        raise JudgeError(
            f"{_WHAT} failed: the answer has no 'data' list of {count} rows: {str(answer)[:200]}"
        )
    if all(isinstance(r.get("index"), int) for r in rows):
        rows = sorted(rows, key=lambda r: r["index"])
    return rows


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise JudgeError(f"{_WHAT} failed: {value!r} is not a finite number")
    return float(value)
