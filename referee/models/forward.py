"""Texts to model outputs: tokenized once, cut to the model's length rule, batched, read.

Runs on a shared model's thread (`referee.models.loading.Shared.submit`): tokenizing and
forwards are CPU- or GPU-bound and never run on an event loop.

The length rule (`encode`): an input of more than `max_length` tokens is, by `overflow`,

- ``fail``: not run; its rollout gets ``Failure("not_applicable")`` naming both lengths;
- ``truncate_left``: cut to its last `max_length` tokens, so the model still reads the end of
  the completion, where a reward model reads its score (the prompt's start goes first).

Text longer than ``max_length * CHARS_PER_TOKEN`` characters is over the limit without being
tokenized (no tokenizer's tokens cover that much text on average), so a hostile 20 MB
completion costs nothing; with ``truncate_left`` only its last that many characters are
tokenized.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from referee.errors import NotApplicable
from referee.models.batching import plan
from referee.models.loading import Loaded, torch_module

__all__ = [
    "CHARS_PER_TOKEN",
    "Encoded",
    "Overflow",
    "encode",
    "length_limit",
    "run_batches",
    "sequence_reader",
    "step_reader",
]

Overflow = Literal["fail", "truncate_left"]
"""What happens to an input longer than ``max_length`` (see the module docstring)."""

CHARS_PER_TOKEN = 64
"""Characters a token is assumed to cover at most, on average, before tokenizing."""

R = TypeVar("R")
Reader = Callable[[Any, Sequence[Sequence[int]]], list[R]]
"""Reads a batch's values: ``read(model_output_logits, rows_of_ids) -> one value per row``."""


@dataclass(frozen=True, slots=True)
class Encoded:
    """One input's token ids, and how many were cut from its left (``truncate_left``; at
    least 1 when any was, whether before tokenizing or after)."""

    ids: list[int]
    cut: int = 0


def length_limit(loaded: Loaded, max_length: int | None) -> int:
    """The token limit in force: `max_length`, else the tokenizer's ``model_max_length``
    where it is a real limit, else the model's ``max_position_embeddings``.

    Raises:
        NotApplicable: None of them is known (then set ``max_length``).
    """
    if max_length is not None:
        return max_length
    limits = [loaded.max_position] if loaded.max_position else []
    tokenizer_limit = getattr(loaded.tokenizer, "model_max_length", None)
    if isinstance(tokenizer_limit, int) and 0 < tokenizer_limit < 10_000_000:
        limits.append(tokenizer_limit)
    if not limits:
        raise NotApplicable(
            f"the reward model {loaded.spec.path!r} states no length limit: set max_length"
        )
    return min(limits)


def encode(
    tokenizer: Any,
    texts: Sequence[str],
    max_length: int,
    overflow: Overflow,
    keep: Sequence[int | None] | None = None,
) -> list[Encoded | NotApplicable]:
    """Token ids for each text (no special tokens added: a chat template writes its own, and
    TRL adds none), under the length rule; a `NotApplicable` where a text gets no input.

    Args:
        keep: Per text, the character from which ``truncate_left`` may cut nothing (where a
            process reward model's steps start); a cut that would reach it fails instead.
    """
    out: list[Encoded | NotApplicable | None] = [None] * len(texts)
    todo: list[int] = []
    chunks: list[str] = []
    cap = max_length * CHARS_PER_TOKEN
    for i, text in enumerate(texts):
        if len(text) > cap:
            if overflow == "fail":
                out[i] = NotApplicable(
                    f"the input is {len(text):,} characters: over max_length ({max_length} "
                    "tokens) without tokenizing; set overflow: truncate_left to score its end"
                )
                continue
            text = text[-cap:]
        todo.append(i)
        chunks.append(text)
    for i, chunk, row in zip(todo, chunks, _tokenize(tokenizer, chunks), strict=True):
        if isinstance(row, NotApplicable):
            out[i] = row
            continue
        fitted = _fit(row, len(texts[i]) > cap, max_length, overflow)
        protect = None if keep is None else keep[i]
        if isinstance(fitted, Encoded) and fitted.cut and protect is not None:
            # Where the first token kept starts, in the text: past `protect`, the cut took
            # some of what must stay whole.
            offsets = tokenizer(chunk, add_special_tokens=False, return_offsets_mapping=True)
            first = offsets["offset_mapping"][len(row) - len(fitted.ids)]
            start = first[0] + len(texts[i]) - len(chunk)
            if start > protect:
                fitted = NotApplicable(
                    f"the completion alone is over max_length ({max_length} tokens): "
                    "truncate_left may cut only the prompt"
                )
        out[i] = fitted
    return out  # type: ignore[return-value]


def _tokenize(tokenizer: Any, texts: list[str]) -> list[list[int] | NotApplicable]:
    """Token ids of each text, in one call; text by text if that call fails, so one text the
    tokenizer refuses fails alone."""
    if not texts:
        return []
    try:
        return [list(row) for row in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    except Exception:
        out: list[list[int] | NotApplicable] = []
        for text in texts:
            try:
                out.append(list(tokenizer(text, add_special_tokens=False)["input_ids"]))
            except Exception as exc:
                out.append(NotApplicable(f"the tokenizer refused the input: {exc}"))
        return out


def _fit(
    ids: list[int], text_cut: bool, max_length: int, overflow: Overflow
) -> Encoded | NotApplicable:
    if not ids:
        return NotApplicable("nothing to score: the rendered input is empty")
    if len(ids) <= max_length and not text_cut:
        return Encoded(ids)
    if overflow == "fail":
        return NotApplicable(
            f"the input is {len(ids):,} tokens, over max_length ({max_length}); set "
            "overflow: truncate_left to score its end"
        )
    return Encoded(ids[-max_length:], max(1, len(ids) - max_length))


def run_batches(
    loaded: Loaded,
    rows: Sequence[list[int] | None],
    read: Reader[R],
    out: list[Any],
    *,
    batch_tokens: int,
    max_batch: int,
    cancel: threading.Event,
) -> None:
    """Forward every row that is not None, batched by `plan`, and store ``read``'s value for
    row ``i`` at ``out[i]``. Stops before the next batch once `cancel` is set (a deadline
    passed: a forward in progress cannot be stopped)."""
    torch = torch_module()
    todo = [i for i, row in enumerate(rows) if row is not None]
    lengths = [len(rows[i]) for i in todo]  # type: ignore[arg-type]
    device = loaded.spec.device
    for batch in plan(lengths, batch_tokens, max_batch):
        if cancel.is_set():
            return
        members = [todo[b] for b in batch]
        batch_rows: list[list[int]] = [rows[i] for i in members]  # type: ignore[misc]
        longest = max(len(r) for r in batch_rows)
        # Right padding, as TRL pads a reward model's inputs: a row's real tokens sit at the
        # same positions as when it runs alone, so its value does not depend on its batch.
        ids = [r + [loaded.pad_id] * (longest - len(r)) for r in batch_rows]
        mask = [[1] * len(r) + [0] * (longest - len(r)) for r in batch_rows]
        with torch.inference_mode():
            output = loaded.model(
                input_ids=torch.tensor(ids, device=device),
                attention_mask=torch.tensor(mask, device=device),
            )
            logits = output.logits if hasattr(output, "logits") else output[0]
            values = read(logits, batch_rows)
        for i, value in zip(members, values, strict=True):
            out[i] = value


def sequence_reader(logits: Any, rows: Sequence[Sequence[int]]) -> list[float]:
    """A sequence-classification head's score of each row (it pools at the row's last token
    that is not padding itself): ``logits[:, 0]`` as GRPOTrainer reads it."""
    return [float(v) for v in logits[:, 0].float().cpu().tolist()]


def step_reader(separator_id: int, label: int) -> Reader[list[float]]:
    """Reads a token head at each position holding `separator_id`: the softmax probability
    of class `label` (the sigmoid of the one logit, for a one-label head)."""

    def read(logits: Any, rows: Sequence[Sequence[int]]) -> list[list[float]]:
        out: list[list[float]] = []
        scores = logits.float()
        for r, row in enumerate(rows):
            at = [t for t, token in enumerate(row) if token == separator_id]
            if not at:
                out.append([])
                continue
            picked = scores[r, at]
            probs = (
                picked.sigmoid()[:, 0] if picked.shape[-1] == 1 else picked.softmax(-1)[:, label]
            )
            out.append([float(v) for v in probs.cpu().tolist()])
        return out

    return read
