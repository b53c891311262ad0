"""The end markers a decoded OpenRLHF query carries after the response, and how to strip them.

OpenRLHF decodes prompt and response together with ``skip_special_tokens=False``, so the
response ends in the token the model stopped on: a chat template's end-of-turn or end-of-text
marker, which no JSON parser or exact match accepts. `EndMarkers` says which to strip: the
common templates' (`COMMON_END_MARKERS`), ones you name, a model's own (read from its
tokenizer), or none.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from referee.errors import MissingDependency, RefereeError

__all__ = ["COMMON_END_MARKERS", "BadMarkers", "EndMarkers", "choose_markers"]

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


class BadMarkers(ValueError):
    """Marker options that cannot be honoured; `option` names the one at fault (CLI flags)."""

    def __init__(self, message: str, option: str | None) -> None:
        super().__init__(message)
        self.option = option


def choose_markers(
    names: Sequence[str] = (), tokenizer: str | Path | None = None, *, strip: bool = True
) -> EndMarkers:
    """The markers asked for: `names` and a `tokenizer`'s own (both, where both are given),
    the common ones where neither is, none where not `strip`.

    Raises:
        BadMarkers: `strip` is False with markers named, the tokenizer cannot be read, or a
            name is blank. Its ``option`` is the CLI flag at fault (``--tokenizer``,
            ``--end-marker``), or None where the combination is.
    """
    if not strip:
        if names or tokenizer:
            raise BadMarkers("--no-strip-markers strips nothing: drop --end-marker/--tokenizer",
                             None)  # fmt: skip
        return EndMarkers.none()
    if not names and tokenizer is None:
        return EndMarkers()
    found: tuple[str, ...] = ()
    if tokenizer is not None:
        try:
            found = EndMarkers.from_tokenizer(tokenizer).markers
        except (RefereeError, ValueError, OSError) as exc:
            raise BadMarkers(str(exc), "--tokenizer") from exc
    try:
        return EndMarkers((*names, *found))
    except ValueError as exc:
        raise BadMarkers(str(exc), "--end-marker") from exc
