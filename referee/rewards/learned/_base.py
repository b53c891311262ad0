"""What the learned-model rewards share: their options, scoring in-process or over HTTP, the
deadline, and the batching of single ``score`` calls made at once.

In-process, a batch is rendered, tokenized and run on the shared model's own thread
(`referee.models.loading`): the event loop only waits. A whole ``score_batch`` call is one
job there, batched by length under ``batch_tokens``; ``score(rollout)`` calls made together
(verl's reward loop scores sample by sample, concurrently) are gathered into one batch.

The deadline bounds one ``score_batch`` call, since its rollouts wait on one another's
forwards: ``deadline`` when set (``timeout`` is its deprecated spelling); else, in-process,
`LOCAL_DEADLINE` (loading the model, once per process, is not counted); served, the worst
case of a request (``(retries + 1) * (request_timeout + 5) + retries * max_backoff``) for
each wave of ``max_in_flight`` requests.
Past it, the rollouts not yet scored get ``Failure("timeout")`` and those scored keep their
values; in-process, the forward in progress finishes (a thread cannot be stopped in one) and
no later batch of the call starts.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from referee.errors import VerifierTimeout
from referee.models.forward import Encoded, Overflow, Reader, encode, length_limit, run_batches
from referee.models.inputs import Template, conversational
from referee.models.loading import (
    DEVICE_PATTERN,
    Dtype,
    Head,
    Loaded,
    ModelSpec,
    check_model_path,
    load_tokenizer,
    resolve,
    shared,
)
from referee.reward import RewardBase, failure_from_exception
from referee.rewards.learned._served import Served
from referee.rollout import Rollout
from referee.scores import Score

__all__ = ["LOCAL_DEADLINE", "LearnedOptions", "LearnedReward", "Output"]

LOCAL_DEADLINE = 600.0
"""Seconds one ``score_batch`` call of an in-process model may take, when ``deadline`` is not
set: a batch of a step's rollouts through a 7B model can take a minute on one GPU, and far
longer on a shared or small one."""


@dataclass(frozen=True, slots=True)
class Output:
    """What the model gave for one rollout: its value (a score, or per-step values), how many
    tokens were cut from the left of its input, and what its rendering noted (steps)."""

    value: Any
    cut: int = 0
    extra: Any = None


@dataclass(kw_only=True)
class LearnedOptions:
    """The options of ``reward_model`` and ``process_reward_model``.

    Attributes:
        model: In-process: a local directory (saved with ``save_pretrained``; absolute or
            relative to the working directory) or a Hugging Face hub id. Served: the model's
            name on the server (vLLM's ``model`` field; optional).
        api_base: Score over HTTP on this server instead of in-process (see ``protocol``).
        tokenizer: The tokenizer whose chat template renders conversations (default: the
            model's own; served, `model`, which then must name a loadable tokenizer).
        template: ``auto``: the chat template for conversational rollouts, text as it is
            otherwise (TRL's rule, `referee.models.inputs`); ``chat``: the chat template for
            every rollout.
        max_length: In-process: tokens an input may have (default: the model's limit).
        overflow: In-process: a longer input is ``fail`` (``Failure("not_applicable")``) or
            ``truncate_left`` (its last `max_length` tokens: the prompt's start goes).
        device: In-process: ``auto`` (cuda where torch sees a GPU, else cpu), ``cpu``,
            ``mps``, ``cuda``, ``cuda:1``, ...
        dtype: In-process: ``auto`` (bfloat16 on a GPU, float32 on CPU), or ``float32``,
            ``bfloat16``, ``float16``.
        batch_tokens: In-process: padded tokens per forward batch (batch size times its
            longest input); rollouts are batched by length under it.
        max_batch: In-process: inputs per forward batch at most.
        trust_remote_code: Run the model's (or the tokenizer's) own code from its repository.
        api_key_env: Served: the environment variable holding the server's key.
        request_timeout: Served: seconds per request attempt.
        retries: Served: attempts after the first, on timeouts, 408, 409, 429 and 5xx.
        backoff: Served: the first wait between attempts, in seconds (doubling, with jitter).
        max_backoff: Served: the longest wait between attempts (a longer Retry-After is
            honoured).
        max_in_flight: Served: requests in flight to this model on this server, across the
            process.
        batch_size: Served: rollouts per request.
    """

    model: str | None = None
    api_base: str | None = None
    tokenizer: str | None = None
    template: Template = "auto"
    max_length: int | None = None
    overflow: Overflow = "fail"
    device: str = "auto"
    dtype: Dtype = "auto"
    batch_tokens: int = 16384
    max_batch: int = 64
    trust_remote_code: bool = False
    api_key_env: str | None = None
    request_timeout: float = 60.0
    retries: int = 2
    backoff: float = 1.0
    max_backoff: float = 30.0
    max_in_flight: int = 8
    batch_size: int = 32


class LearnedReward(LearnedOptions, RewardBase):
    """The base of the learned-model rewards: subclasses say how to render a rollout, read
    the model, and make a Score of what it gave."""

    head: ClassVar[Head]

    def __post_init__(self) -> None:
        if self.api_base is None:
            if not self.model:
                raise ValueError(f"{self.name} needs model (a local directory or a hub id)")
            check_model_path(self.model)
        if not DEVICE_PATTERN.fullmatch(self.device):
            raise ValueError(f"device must be auto, cpu, mps, cuda or cuda:N, got {self.device!r}")
        for option in ("batch_tokens", "max_batch", "max_in_flight", "batch_size"):
            if getattr(self, option) < 1:
                raise ValueError(f"{option} must be at least 1, got {getattr(self, option)}")
        if self.max_length is not None and self.max_length < 1:
            raise ValueError(f"max_length must be at least 1, got {self.max_length}")
        if self.retries < 0 or self.request_timeout <= 0:
            raise ValueError("retries must be 0 or more and request_timeout above 0")
        self._spec: ModelSpec | None = None
        self._pending: dict[
            asyncio.AbstractEventLoop, list[tuple[Rollout, asyncio.Future[Score]]]
        ] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    # --- what a subclass says ------------------------------------------------------------

    @abstractmethod
    def _render(self, rollout: Rollout, tokenizer: Any) -> tuple[str | None, Any]:
        """The text the model reads for `rollout` (None: nothing to run), and a note kept
        with its output."""

    def _keep(self, extra: Any) -> int | None:
        """The character of a rendered input from which ``truncate_left`` may cut nothing
        (None: it may cut anything)."""
        return None

    @abstractmethod
    def _reader(self, loaded: Loaded) -> Reader[Any]:
        """How to read the loaded model's output (raises if it is the wrong kind of model)."""

    @abstractmethod
    async def _ask(self, served: Served, texts: list[str], rollouts: list[Rollout],
                   extras: list[Any], out: list[Any], at: list[int]) -> None:  # fmt: skip
        """Served: ask for `texts` (of `rollouts`, with what rendering noted of each), storing
        each value at ``out[at[i]]``."""

    @abstractmethod
    def _one(self, output: Output | Exception) -> Score:
        """The Score of one rollout's output (or of the error that stood in for it)."""

    def _finish(
        self, outputs: Sequence[Output | Exception], rollouts: Sequence[Rollout]
    ) -> list[Score]:
        """The Scores of a batch's outputs: each one's `_one` (a group reward overrides it)."""
        return [self._one(o) for o in outputs]

    # --- the deadline --------------------------------------------------------------------

    def default_deadline(self) -> float | None:
        """Seconds one ``score_batch`` call may take where ``deadline`` is not set (the module
        docstring's rule, for a call of one request's worth of rollouts)."""
        if self.api_base is None:
            return LOCAL_DEADLINE
        return (self.retries + 1) * (self.request_timeout + 5.0) + self.retries * self.max_backoff

    def _batch_deadline(self, count: int) -> float:
        seconds = float(self.deadline_seconds or LOCAL_DEADLINE)  # never None here
        if self.api_base is None or self.deadline is not None:
            return seconds
        requests = math.ceil(count / self.batch_size)
        return seconds * math.ceil(requests / self.max_in_flight)

    # --- scoring -------------------------------------------------------------------------

    async def score(self, rollout: Rollout) -> Score:
        """Score one rollout; calls made at once on one event loop share one batch."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Score] = loop.create_future()
        pending = self._pending.get(loop)
        if pending is None:
            pending = self._pending[loop] = []
            # Runs after the tasks already scheduled have had their turn to join.
            loop.call_soon(self._flush, loop)
        pending.append((rollout, future))
        return await future

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        pending = self._pending.pop(loop, [])
        task = loop.create_task(self._settle(pending))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _settle(self, pending: list[tuple[Rollout, asyncio.Future[Score]]]) -> None:
        try:
            scores = await self.score_batch([r for r, _ in pending])
        except Exception as exc:  # score_batch gives Failures; this is a last resort
            scores = [failure_from_exception(exc, self.name)] * len(pending)
        for (_, future), s in zip(pending, scores, strict=True):
            if not future.done():
                future.set_result(s)

    async def score_batch(
        self, rollouts: Sequence[Rollout], *, concurrency: int | None = None
    ) -> list[Score]:
        """Score `rollouts` in one batched pass (`concurrency` does not apply: the model's
        batches, or ``max_in_flight`` requests, bound the work)."""
        items = list(rollouts)
        if not items:
            return []
        return self._finish(await self._outputs(items), items)

    async def _outputs(self, rollouts: list[Rollout]) -> list[Output | Exception]:
        """What the model gave for each rollout (in-process or served), under the deadline."""
        return await (self._local(rollouts) if self.api_base is None else self._served(rollouts))

    def load(self) -> Loaded:
        """Load the in-process model now (once per process; scoring loads it when needed).

        Raises:
            ValueError: The model is served (``api_base``): nothing loads in-process.
            ModelLoadError: It could not be loaded.
        """
        if self.api_base is not None:
            raise ValueError(f"{self.name} is served at {self.api_base}: nothing to load here")
        return shared(self._model_spec()).loaded.result()

    def _model_spec(self) -> ModelSpec:
        if self._spec is None:
            self._spec = resolve(
                str(self.model), self.head, self.device, self.dtype, self.tokenizer,
                self.trust_remote_code,
            )  # fmt: skip
        return self._spec

    async def _local(self, rollouts: list[Rollout]) -> list[Output | Exception]:
        try:
            spec = (
                self._spec if self._spec is not None else await asyncio.to_thread(self._model_spec)
            )
            model = shared(spec)
            await asyncio.wrap_future(model.loaded)  # outside the deadline: once per process
        except Exception as exc:
            return [exc] * len(rollouts)
        batch = _Batch(len(rollouts))
        cancel = threading.Event()
        job = model.submit(self._job, rollouts, batch, cancel)
        late = await self._wait(asyncio.wrap_future(job), len(rollouts), cancel.set)
        return batch.results(late)

    def _job(self, loaded: Loaded, rollouts: list[Rollout], batch: _Batch,
             cancel: threading.Event) -> None:  # fmt: skip
        """Render, tokenize and run one batch, on the model's thread."""
        if cancel.is_set():  # past its deadline while it waited for the thread: no one reads it
            return
        reader = self._reader(loaded)
        limit = length_limit(loaded, self.max_length)
        texts, at = _sort(self._render_each(rollouts, loaded.tokenizer), batch)
        rows: list[list[int] | None] = [None] * len(rollouts)
        keep = [self._keep(batch.meta[i][1]) for i in at]
        encoded = encode(loaded.tokenizer, texts, limit, self.overflow, keep)
        for i, e in zip(at, encoded, strict=True):
            if isinstance(e, Encoded):
                rows[i] = e.ids
                batch.meta[i] = (e.cut, batch.meta[i][1])
            else:
                batch.out[i] = e
        run_batches(loaded, rows, reader, batch.values, batch_tokens=self.batch_tokens,
                    max_batch=self.max_batch, cancel=cancel)  # fmt: skip

    async def _served(self, rollouts: list[Rollout]) -> list[Output | Exception]:
        batch = _Batch(len(rollouts))
        try:
            rendered = await asyncio.to_thread(self._render_all, rollouts)
        except Exception as exc:  # the tokenizer could not be loaded
            return [exc] * len(rollouts)
        texts, at = _sort(rendered, batch)
        served = Served(
            api_base=str(self.api_base), model=self.model, protocol=self._protocol(),
            api_key_env=self.api_key_env, request_timeout=self.request_timeout,
            retries=self.retries, backoff=self.backoff, max_backoff=self.max_backoff,
            max_in_flight=self.max_in_flight, batch_size=self.batch_size,
        )  # fmt: skip
        ask = self._ask(served, texts, [rollouts[i] for i in at],
                        [rendered[i][1] for i in at], batch.values, at)  # fmt: skip
        task = asyncio.ensure_future(ask)
        late = await self._wait(task, len(texts), task.cancel)
        return batch.results(late)

    def _protocol(self) -> Any:
        return getattr(self, "protocol", "vllm_pooling")

    def _render_all(self, rollouts: list[Rollout]) -> list[tuple[str | None, Any]]:
        """Served: each rollout's text (or its exception), the tokenizer loaded only where
        a chat template is needed."""
        tokenizer: Any = None
        if self.template == "chat" or any(conversational(r) for r in rollouts):
            name = self.tokenizer or self.model
            if name is None:
                raise ValueError(
                    f"{self.name}: rendering a conversation needs a chat template: set tokenizer"
                )
            tokenizer = load_tokenizer(name, self.trust_remote_code)
        return self._render_each(rollouts, tokenizer)

    def _render_each(self, rollouts: list[Rollout], tokenizer: Any) -> list[tuple[str | None, Any]]:
        """Each rollout's (text, extra), or (None, the exception its rendering raised)."""
        out: list[tuple[str | None, Any]] = []
        for rollout in rollouts:
            try:
                out.append(self._render(rollout, tokenizer))
            except Exception as exc:
                out.append((None, exc))
        return out

    async def _wait(
        self, work: asyncio.Future[Any], count: int, stop: Callable[[], Any]
    ) -> Exception | None:
        """Await `work` under the deadline of a batch of `count`; past it, `stop` it. What
        the rollouts still without a value get: a timeout, the exception `work` raised, or
        None (it finished)."""
        limit = self._batch_deadline(count)
        started = time.monotonic()
        try:
            await asyncio.wait_for(asyncio.shield(work), limit)
        except TimeoutError:
            stop()
            elapsed = time.monotonic() - started
            return VerifierTimeout(
                f"{self.name} ran past its deadline: stopped after {elapsed:.2f}s "
                f"(limit {limit:g}s)"
            )
        except Exception as exc:
            return exc
        return None


class _Batch:
    """What one batch has so far, per rollout, written as it comes (by the model's thread, or
    by the requests): a final output or exception (`out`), the model's value (`values`), and
    what rendering noted (`meta`: tokens cut, extra)."""

    def __init__(self, size: int) -> None:
        self.out: list[Any] = [None] * size
        self.values: list[Any] = [None] * size
        self.meta: list[tuple[int, Any]] = [(0, None)] * size

    def results(self, late: Exception | None) -> list[Output | Exception]:
        """A snapshot: each rollout's output or exception; `late` (or an error) where none
        came."""
        missing = late or RuntimeError("the model gave no value")
        results: list[Output | Exception] = []
        for out, value, (cut, extra) in zip(self.out, self.values, self.meta, strict=True):
            if out is not None:
                results.append(out)
            elif isinstance(value, Exception):
                results.append(value)
            elif value is not None:
                results.append(Output(value, cut, extra))
            else:
                results.append(missing)
        return results


def _sort(rendered: list[tuple[str | None, Any]], batch: _Batch) -> tuple[list[str], list[int]]:
    """The texts to score and their rollouts' places; a rollout that failed to render, or has
    nothing to score, gets its outcome in `batch` at once."""
    texts: list[str] = []
    at: list[int] = []
    for i, (text, extra) in enumerate(rendered):
        if isinstance(extra, Exception):
            batch.out[i] = extra
        elif text is None:
            batch.out[i] = Output(None, 0, extra)
        else:
            batch.meta[i] = (0, extra)
            texts.append(text)
            at.append(i)
    return texts, at
