"""OpenRLHF: the number `referee score` gives, from both of OpenRLHF's remote-reward forms.

OpenRLHF (0.11) scores a rollout in its rollout executor
(``openrlhf.utils.agent.SingleTurnAgentExecutor``), one sample per call. It sends the *query*:
the prompt's token ids and the response's, decoded together with ``skip_special_tokens=False``.
So the response ends in the token the model stopped on, the chat template's end-of-turn or
end-of-text marker (``<|im_end|>``, ``<|eot_id|>``, ``</s>``, ...), which no JSON parser or
exact match accepts: scored as sent, a perfect answer would train as 0.0. Two forms, both
named by ``--reward.remote_url`` (0.11's name; ``--remote_rm_url`` in earlier versions):

- ``--reward.remote_url http://host:8000/get_reward``: `referee serve`
  (`referee.backends.server`). Several URLs, comma-separated, share the load. OpenRLHF's
  client (a bare ``aiohttp.ClientSession``) sends no headers of its own, but it sends a URL's
  credentials as basic authentication, which `referee serve` takes as its token:
  ``http://referee:<token>@host:8000/get_reward`` (a URL-safe token with no comma, since
  OpenRLHF splits the option on commas).
- ``--reward.remote_url /abs/path/reward_func.py``: a Python file whose ``reward_func(queries,
  prompts, labels)`` OpenRLHF loads with ``importlib`` (under the module name ``reward_func``)
  and calls in a thread, one sample at a time. ``referee openrlhf-func SPEC -o FILE`` writes
  one; it binds `RewardFunc`, which may also be used in a file of your own.

Both answer alike, ``{"rewards": [...], "scores": [...], "extra_logs": {...}}`` with one value
per query (the shape of `reward_response`), and read a query alike (`rollouts_from`):

1. The completion is the query after its prompt. Where the decoded prompt differs from the
   prompt as sent (a tokenizer that cleans up spaces on decoding, like Llama 3's) it is found
   ignoring whitespace; where OpenRLHF cut the prompt's start off to fit ``max_len``, the
   query starts with the rest of it, and the completion follows that. A query in which its
   prompt cannot be found gets ``Failure("invalid_input")`` (so ``failure_value`` with
   ``referee_failed`` set), never a score of the whole query.
2. The end markers (`EndMarkers`) are stripped from the end of the completion, repeatedly and
   with the whitespace between them (``}<|im_end|><|endoftext|>`` -> ``}``); whitespace the
   model wrote before the first is kept, as in the text the model produced. By default, the
   markers of the common chat templates (`COMMON_END_MARKERS`: ChatML, Llama 3 and 4,
   Mistral/Llama 2, Gemma, Phi-3, DeepSeek, plain EOS, and common pad tokens); or markers you
   name (``--end-marker``); or a model's own, read from its tokenizer (``--tokenizer PATH``:
   its EOS and pad tokens, the EOS ids of its ``generation_config.json``, and the special
   tokens its chat template puts after an assistant turn); or none (``--no-strip-markers``).
   OpenRLHF 0.11 sends no pad tokens (its queries are unpadded); they are stripped for clients
   that pad.

A label that is a JSON object or array as text is decoded (the reference a field comparison
needs). OpenRLHF needs a number for every sample, so a rollout that gets no score is given
``failure_value`` with ``extra_logs["referee_failed"]`` = 1.0; see `extra_logs` for the
components.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import textwrap
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from referee.backends._common import decode_json_text, resolve
from referee.errors import MissingDependency, RolloutError
from referee.reward import Reward, is_sync, top_components
from referee.reward import score as score_rollouts
from referee.rollout import Rollout
from referee.score import Score

__all__ = [
    "COMMON_END_MARKERS",
    "EndMarkers",
    "RewardFunc",
    "completion_of",
    "component_keys",
    "extra_logs",
    "reward_func_source",
    "reward_response",
    "rollouts_from",
]

logger = logging.getLogger("referee.openrlhf")

COMMON_END_MARKERS: tuple[str, ...] = (
    # End of turn.
    "<|im_end|>",  # ChatML: Qwen, Phi-4, Yi, InternLM, SmolLM
    "<|eot_id|>",  # Llama 3
    "<|eom_id|>",  # Llama 3.1, after a tool call
    "<|eot|>",  # Llama 4
    "<end_of_turn>",  # Gemma
    "<|end|>",  # Phi-3
    "<｜end▁of▁sentence｜>",  # DeepSeek V2/V3/R1 and their distills
    # End of text (EOS).
    "</s>",  # Llama 2, Mistral, sentencepiece models
    "<|endoftext|>",  # GPT-2 lineage, Qwen, Phi
    "<|end_of_text|>",  # Llama 3 base, Granite
    "<eos>",  # Gemma
    # Padding.
    "<pad>",
    "<|pad|>",
    "<|finetune_right_pad_id|>",  # Llama 3.1
    "[PAD]",
)
"""The end markers stripped by default: end of turn, end of text, pad, of the common templates."""

_MIN_OVERLAP = 16
"""Non-space characters a cut prompt's rest must share with the query's start to be taken."""

_SENTINEL = "\x00referee-assistant-turn\x00"


@dataclass(frozen=True)
class EndMarkers:
    """The tokens a decoded OpenRLHF query carries after the response, stripped before scoring.

    Attributes:
        markers: The marker texts; empty strips nothing (`EndMarkers.none()`).

    Example:
        ```python
        EndMarkers().strip('{"a": 1}<|im_end|>')          # '{"a": 1}'
        EndMarkers(("<|my_end|>",)).strip("x<|my_end|>")  # 'x'
        ```
    """

    markers: tuple[str, ...] = COMMON_END_MARKERS

    def __post_init__(self) -> None:
        if isinstance(self.markers, str):
            raise TypeError(f"markers must be a tuple of strings, not the string {self.markers!r}")
        cleaned: list[str] = []
        for marker in self.markers:
            if not isinstance(marker, str) or not marker.strip():
                raise ValueError(
                    f"an end marker must be non-blank text, found {marker!r}; "
                    f"to strip nothing use EndMarkers.none() (--no-strip-markers)"
                )
            if marker.strip() not in cleaned:
                cleaned.append(marker.strip())  # matched after trailing whitespace anyway
        object.__setattr__(self, "markers", tuple(cleaned))

    @classmethod
    def none(cls) -> EndMarkers:
        """Strip nothing: the query after its prompt is scored as it is."""
        return cls(())

    @classmethod
    def from_tokenizer(cls, path: str | Path) -> EndMarkers:
        """A model's own markers, read from its tokenizer (a local directory).

        Its EOS and pad tokens, the EOS ids of its ``generation_config.json`` where it has
        one, and the special tokens its chat template writes after an assistant message.
        Needs ``transformers``.
        """
        return cls(_tokenizer_markers(Path(path)))

    def strip(self, text: str) -> str:
        """`text` without the markers at its end (and the whitespace between them)."""
        if not self.markers:
            return text
        ends = self.markers
        while True:
            body = text.rstrip()
            if not body.endswith(ends):
                return text
            marker = max((m for m in ends if body.endswith(m)), key=len)
            text = body[: len(body) - len(marker)]

    def describe(self) -> str:
        """The markers, for a log line."""
        return ", ".join(self.markers) if self.markers else "(none)"


def _tokenizer_markers(path: Path) -> tuple[str, ...]:
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise MissingDependency(
            "transformers", "trl", "reading end markers from a tokenizer"
        ) from exc
    if not path.is_dir():
        raise FileNotFoundError(
            f"tokenizer {str(path)!r}: no such directory; give the local directory of the "
            f"model or tokenizer (its tokenizer_config.json)"
        )
    try:
        tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except Exception as exc:  # transformers raises many kinds; the user needs the path and why
        raise ValueError(
            f"tokenizer {str(path)!r}: transformers cannot load it: {type(exc).__name__}: {exc}"
        ) from exc
    ids: list[int] = [i for i in (tok.eos_token_id, tok.pad_token_id) if isinstance(i, int)]
    generation = path / "generation_config.json"
    if generation.is_file():
        try:
            eos = json.loads(generation.read_text()).get("eos_token_id")
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as exc:
            raise ValueError(f"{generation}: not a JSON object: {exc}") from exc
        ids += [eos] if isinstance(eos, int) else [i for i in eos or () if isinstance(i, int)]
    found = [str(tok.decode([i], skip_special_tokens=False)) for i in ids]
    found += _template_end_of_turn(tok, path)
    markers = tuple(dict.fromkeys(m.strip() for m in found if m.strip()))
    if not markers:
        raise ValueError(
            f"tokenizer {str(path)!r} has no EOS, pad or end-of-turn token to strip; name the "
            f"markers instead (--end-marker TEXT, EndMarkers((...)))"
        )
    return markers


def _template_end_of_turn(tok: Any, path: Path) -> list[str]:
    """The special tokens the chat template writes right after an assistant message."""
    if not getattr(tok, "chat_template", None):
        return []
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": _SENTINEL}]
    try:
        text = tok.apply_chat_template(messages, tokenize=False)
    except Exception as exc:  # a template may refuse this shape; EOS and pad still hold
        logger.warning("tokenizer %s: its chat template did not render (%s)", path, exc)
        return []
    if not isinstance(text, str) or _SENTINEL not in text:
        return []
    tail = text[text.rindex(_SENTINEL) + len(_SENTINEL) :]
    specials = {str(t) for t in getattr(tok, "all_special_tokens", ())}
    decoder = getattr(tok, "added_tokens_decoder", {}) or {}
    specials |= {str(t.content) for t in decoder.values() if getattr(t, "special", False)}
    return sorted((s for s in specials if s.strip() and s in tail), key=tail.index)


# --- reading a query --------------------------------------------------------------------------


def completion_of(query: str, prompt: str) -> str | None:
    """The response in an OpenRLHF query: the text after its prompt, end markers not stripped.

    None where the prompt cannot be found at the query's start (see the module docstring for
    how a decoded prompt that differs in whitespace, or was cut to fit, is still found).
    """
    if not prompt or query.startswith(prompt):
        return query[len(prompt) :]
    end = _loose_prefix_end(query, prompt)
    if end is None:
        end = _cut_prompt_end(query, prompt)
    return None if end is None else query[end:]


def _loose_prefix_end(query: str, prompt: str) -> int | None:
    """Where `prompt` ends in `query`, whitespace aside (decoding may add or drop spaces)."""
    i, n = 0, len(query)
    for ch in prompt:
        if ch.isspace():
            continue
        while i < n and query[i].isspace():
            i += 1
        if i == n or query[i] != ch:
            return None
        i += 1
    return _after_tail(query, prompt, i)


def _cut_prompt_end(query: str, prompt: str) -> int | None:
    """Where the rest of a prompt cut from the left ends in `query` (OpenRLHF keeps the last
    tokens of a prompt that is too long): the longest end of the prompt that starts the query,
    whitespace aside, and at least `_MIN_OVERLAP` characters of it."""
    solid = "".join(prompt.split())
    head: list[str] = []
    where: list[int] = []
    for i, ch in enumerate(query):
        if len(head) == len(solid):
            break
        if not ch.isspace():
            head.append(ch)
            where.append(i)
    # Knuth-Morris-Pratt: the longest prefix of `head` that is a suffix of `solid`.
    fail = [0] * len(head)
    k = 0
    for i in range(1, len(head)):
        while k and head[i] != head[k]:
            k = fail[k - 1]
        if head[i] == head[k]:
            k += 1
        fail[i] = k
    k = 0
    for ch in solid:
        while k and (k == len(head) or ch != head[k]):
            k = fail[k - 1]
        if k < len(head) and ch == head[k]:
            k += 1
    if k < min(_MIN_OVERLAP, len(solid)):
        return None
    return _after_tail(query, prompt, where[k - 1] + 1)


def _after_tail(query: str, prompt: str, i: int) -> int:
    """Past the prompt's trailing whitespace too, where the query's whitespace there holds it
    (whitespace after it is the response's own: Mistral's answers start with a space)."""
    tail = prompt[len(prompt.rstrip()) :]
    if not tail:
        return i
    run = query[i : len(query) - len(query[i:].lstrip())]
    at = run.find(tail)
    return i if at < 0 else i + at + len(tail)


def _sequence(value: Any, name: str) -> Sequence[Any]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise RolloutError(f"must be a list, found {type(value).__name__}", source=name)
    return value


def rollouts_from(
    queries: Any,
    prompts: Any = None,
    labels: Any = None,
    *,
    end_markers: EndMarkers | None = None,
    names: tuple[str, str, str] = ("queries", "prompts", "labels"),
) -> list[Rollout | Score]:
    """OpenRLHF's ``(queries, prompts, labels)`` as rollouts to score.

    A query whose prompt cannot be found in it gives a failed `Score` in its place. `prompts`
    and `labels` may be empty or None (no prompt, no reference). `names` name the three in
    error messages (``/get_reward``'s keys are ``query``, ``prompts``, ``labels``).

    Raises:
        RolloutError: Input of the wrong shape; its ``source`` names the key and index
            (``query[3]``). One whose cause is a RecursionError is a label nested too deep;
            one whose cause is a pydantic ValidationError a label that is no JSON value.
    """
    markers = EndMarkers() if end_markers is None else end_markers
    q_name, p_name, l_name = names
    queries = _sequence(queries, q_name)
    prompts = [] if prompts is None else _sequence(prompts, p_name)
    labels = [] if labels is None else _sequence(labels, l_name)
    for key, values in ((p_name, prompts), (l_name, labels)):
        if values and len(values) != len(queries):
            raise RolloutError(
                f"{len(values)} {key} for {len(queries)} queries; send one per query", source=key
            )
    out: list[Rollout | Score] = []
    for i, query in enumerate(queries):
        prompt = prompts[i] if prompts else ""
        if not isinstance(query, str):
            raise RolloutError(
                f"must be a string, found {type(query).__name__}", source=f"{q_name}[{i}]"
            )
        if prompt is None:
            prompt = ""
        if not isinstance(prompt, str):
            raise RolloutError(
                f"must be a string, found {type(prompt).__name__}", source=f"{p_name}[{i}]"
            )
        try:
            label = decode_json_text(labels[i] if labels else None)
        except RecursionError as exc:  # Python's json recurses once per level of nesting
            raise RolloutError(
                "JSON nested too deep to read: send flatter JSON", source=f"{l_name}[{i}]"
            ) from exc
        completion = completion_of(query, prompt)
        if completion is None:
            out.append(_prompt_not_found(i, query, prompt, names))
            continue
        try:
            rollout = Rollout(
                id=str(i), prompt=prompt, completion=markers.strip(completion), reference=label
            )
        except ValidationError as exc:
            raise RolloutError(exc.errors()[0]["msg"], source=f"{l_name}[{i}]") from exc
        out.append(rollout)
    return out


def _prompt_not_found(i: int, query: str, prompt: str, names: tuple[str, str, str]) -> Score:
    message = (
        f"{names[0]}[{i}] does not start with its prompt ({names[1]}[{i}], "
        f"{_clip(prompt)}); it starts {_clip(query)}: send the query as prompt + response"
    )
    return Score.failed("invalid_input", message, "openrlhf")


def _clip(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


# --- answering ----------------------------------------------------------------------------------


def extra_logs(
    scores: Sequence[Score], components: Sequence[str], failure_value: float
) -> dict[str, list[float]]:
    """OpenRLHF's ``extra_logs``: every key with one number per sample, as it needs.

    ``referee_failed`` is 1.0 where the rollout got no score. For each top-level component,
    ``referee/<component>`` and ``referee/<component>/skipped``: a skipped component (a gate,
    or a failure, before it stopped the rollout) has no value, and OpenRLHF averages each key
    over the batch, so it reads NaN rather than a number that would pass for a score, with its
    ``/skipped`` flag 1.0. A component that ran and failed reads `failure_value`, as the
    reward does.
    """
    extra = {"referee_failed": [0.0 if s.value is not None else 1.0 for s in scores]}
    for name in components:
        skipped = [name in s.skipped for s in scores]
        extra[f"referee/{name}"] = [
            math.nan if skip else failure_value if (v := s.components.get(name)) is None else v
            for s, skip in zip(scores, skipped, strict=True)
        ]
        extra[f"referee/{name}/skipped"] = [float(skip) for skip in skipped]
    return extra


def reward_response(
    scores: Sequence[Score], components: Sequence[str], failure_value: float
) -> dict[str, Any]:
    """What OpenRLHF reads: ``{"rewards", "scores", "extra_logs"}``, one value per sample.

    ``scores`` (what its dynamic filtering reads) equals ``rewards``: referee has one number.
    """
    rewards = [failure_value if s.value is None else s.value for s in scores]
    return {
        "rewards": rewards,
        "scores": list(rewards),
        "extra_logs": extra_logs(scores, components, failure_value),
    }


def component_keys(reward: Reward) -> list[str]:
    """The top-level components `extra_logs` reports for `reward`."""
    return [n for n, _ in top_components(reward) if n != reward.name]


# --- the reward_func form -----------------------------------------------------------------------


class RewardFunc:
    """OpenRLHF's ``reward_func(queries, prompts, labels)`` for a referee reward.

    Bind it as ``reward_func`` in a file and pass the file to ``--reward.remote_url``;
    ``referee openrlhf-func SPEC -o FILE`` writes such a file. It answers as ``/get_reward``
    does (`reward_response`: lists, one value per query), which OpenRLHF reads as it reads its
    HTTP client's answer. OpenRLHF calls it from several threads at once: a sync reward scores
    in the calling thread, an async one (a judge) on one event loop of its own, in a daemon
    thread, so its connections are pooled across calls. Picklable.

    Example:
        ```python
        # reward_func.py, passed as --reward.remote_url /abs/path/reward_func.py
        from referee.backends.openrlhf import RewardFunc

        reward_func = RewardFunc("/abs/path/extraction.yaml")
        ```

    Args:
        reward_or_spec: A reward, or a spec (path or mapping) to load.
        end_markers: What to strip from the end of each response (default: the common
            templates' markers, `COMMON_END_MARKERS`).
        failure_value: The reward of a rollout that gets no score.
        concurrency: How many rollouts an async reward scores at once within a call.
    """

    def __init__(
        self,
        reward_or_spec: Reward | str | Path | Mapping[str, Any],
        *,
        end_markers: EndMarkers | None = None,
        failure_value: float = 0.0,
        concurrency: int | None = None,
    ) -> None:
        self.reward = resolve(reward_or_spec)
        self.end_markers = EndMarkers() if end_markers is None else end_markers
        self.failure_value = float(failure_value)
        self.concurrency = concurrency
        self._setup()

    def _setup(self) -> None:
        self._components = component_keys(self.reward)
        self._sync = is_sync(self.reward)
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("reward", "end_markers", "failure_value",
                                              "concurrency")}  # fmt: skip

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._setup()

    def __call__(self, queries: Any, prompts: Any = None, labels: Any = None) -> dict[str, Any]:
        items = rollouts_from(queries, prompts, labels, end_markers=self.end_markers)
        rollouts = [r for r in items if isinstance(r, Rollout)]
        scored = iter(self._score(rollouts) if rollouts else [])
        scores = [next(scored) if isinstance(r, Rollout) else r for r in items]
        return reward_response(scores, self._components, self.failure_value)

    def _score(self, rollouts: list[Rollout]) -> list[Score]:
        if self._sync:
            return score_rollouts(self.reward, rollouts)
        coro = self.reward.score_batch(rollouts, concurrency=self.concurrency)
        future: Future[list[Score]] = asyncio.run_coroutine_threadsafe(coro, self._event_loop())
        return future.result()

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(
                    target=loop.run_forever, name="referee-openrlhf", daemon=True
                ).start()
                self._loop = loop
            return self._loop

    def __repr__(self) -> str:
        return (
            f"RewardFunc({self.reward.name!r}, end_markers={self.end_markers.describe()}, "
            f"failure_value={self.failure_value})"
        )


def reward_func_source(
    spec: str | Path,
    *,
    end_markers: EndMarkers | None = None,
    failure_value: float = 0.0,
    written_to: str | Path | None = None,
) -> str:
    """The text of a ``reward_func.py`` for OpenRLHF's ``--reward.remote_url``, bound to `spec`.

    The spec is named by its absolute path and loaded (and so checked) when OpenRLHF loads the
    file; the markers are written out, so the file says what it strips. `written_to`, where
    the file will be, goes into its docstring's command line.
    """
    path = Path(spec).resolve()
    markers = EndMarkers() if end_markers is None else end_markers
    where = "/abs/path/to/this/file.py" if written_to is None else str(Path(written_to).resolve())
    default = markers == EndMarkers()
    # The default is written by name: the file then follows referee's list as it grows.
    marker_arg = "EndMarkers()" if default else f"EndMarkers({markers.markers!r})"
    stripped = (
        "the common chat templates' end markers (COMMON_END_MARKERS in referee.backends.openrlhf)"
        if default
        else markers.describe()
    )
    doc = (
        f"OpenRLHF reward function for the referee spec {str(path)!r}.\n\n"
        f"Written by `referee openrlhf-func`. Pass this file to OpenRLHF:\n\n"
        f"    --reward.remote_url {where}\n\n"
    ) + textwrap.fill(
        "It scores as `referee serve`'s /get_reward does, with the same numbers, and strips "
        f"the same end markers from each response: {stripped}.",
        width=96,
    )
    # Text from the user (paths, markers) must not end the docstring or escape out of it.
    doc = doc.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return (
        f'"""{doc}\n"""\n\n'
        f"from referee.backends.openrlhf import EndMarkers, RewardFunc\n\n"
        f"reward_func = RewardFunc(\n"
        f"    {str(path)!r},\n"
        f"    end_markers={marker_arg},\n"
        f"    failure_value={float(failure_value)!r},\n"
        f")\n"
    )
