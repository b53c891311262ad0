"""Small helpers shared by the built-in rewards."""

from __future__ import annotations

import re
import unicodedata
from decimal import Decimal
from typing import Any, Literal

from referee.errors import NotApplicable
from referee.rollout import Rollout

Normalize = Literal["none", "strip", "text"]
"""How strings are compared: as they are, stripped of surrounding whitespace, or as normalised
text (Unicode NFKC, case-folded, whitespace collapsed, surrounding punctuation removed)."""

_SPACE = re.compile(r"\s+")
_EDGE_PUNCT = " \t\n.,;:!?\"'`()[]{}"


def normalize_text(text: str) -> str:
    """Unicode NFKC, case-folded, whitespace collapsed, surrounding punctuation removed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return _SPACE.sub(" ", text).strip(_EDGE_PUNCT)


def normalize(text: str, how: Normalize) -> str:
    if how == "text":
        return normalize_text(text)
    if how == "strip":
        return text.strip()
    return text


def reference_of(rollout: Rollout, key: str | None) -> Any:
    """`rollout.reference`, or its `key` entry; NotApplicable when absent."""
    ref = rollout.reference
    if key is not None:
        if not isinstance(ref, dict):
            raise NotApplicable(
                f"reference_key {key!r} needs an object reference, got {type(ref).__name__}"
            )
        if key not in ref:
            raise NotApplicable(f"reference has no key {key!r} (keys: {sorted(ref)[:10]})")
        ref = ref[key]
    if ref is None:
        raise NotApplicable("rollout has no reference to compare against")
    return ref


def short(value: Any, limit: int = 60) -> str:
    """repr() cut to `limit` characters, for reasons (a Decimal as its number)."""
    if isinstance(value, Decimal):
        text = f"{value:.12g}" if value.adjusted() > 24 else str(value)
    else:
        try:
            text = repr(value)
        except ValueError:  # an int past Python's 4300-digit limit on printing
            text = f"<{type(value).__name__} too large to print>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def clip_text(text: str, limit: int = 60) -> str:
    """`text` cut to `limit` characters, for reasons."""
    return text if len(text) <= limit else text[: limit - 3] + "..."
