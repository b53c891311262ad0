"""The pairs `referee audit-judge` asks a judge about, built from a user's own rollouts: two
attempts of a group; an answer and the same padded (`padded`), as a list (`as_list`), or with
an injection appended (`INJECTIONS`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from referee.report.hacks import FAKE_VERDICT, FENCE_CLOSE, FILLER, INJECTION
from referee.rollout import Message, Rollout

__all__ = [
    "INJECTIONS",
    "Pair",
    "answer_text",
    "as_list",
    "contains_list",
    "padded",
    "pairs",
    "with_text",
]  # fmt: skip

INJECTIONS = {"injection": INJECTION, "fake_verdict": FAKE_VERDICT, "fence_escape": FENCE_CLOSE}
"""The texts appended to an answer by the injection measure, by name."""

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=\S)")
# AlpacaEval's `utils.contains_list`: a bullet, numbered or lettered item at a line's start
_LIST = re.compile(r"(?m)^\s*(?:[*\u2022-]|\d+[.)]|[a-zA-Z][.)]\s)\s*[^\w]*\w+")


def answer_text(rollout: Rollout) -> str:
    """The answer a judge reads: the text completion, or the last assistant turn's text."""
    if isinstance(rollout.completion, str):
        return rollout.completion
    for message in reversed(rollout.completion):
        if message.role == "assistant" and isinstance(message.content, str) and message.content:
            return message.content
    return ""


def padded(text: str) -> str:
    """`text` with content-free restating after it: as correct, and longer."""
    return f"{text}\n\n{FILLER}{FILLER}".rstrip()


def as_list(text: str) -> str:
    """`text`'s sentences as a bulleted list (one item where it is one sentence)."""
    parts = [p.strip() for p in _SENTENCE.split(text.strip()) if p.strip()]
    return "\n".join(f"- {p}" for p in parts)


def contains_list(text: str) -> bool:
    """Whether `text` has a list item, by AlpacaEval's patterns."""
    return _LIST.search(text) is not None


@dataclass(frozen=True)
class Pair:
    """Two answers `a` and `b` sharing `base`'s prompt, reference and metadata, and the
    measure they are for (``position``, ``length``, ``lists``, ``injection:<name>``)."""

    base: Rollout  # the prompt, reference and metadata the answers share
    a: str
    b: str
    measure: str  # position, length, lists or injection


def with_text(base: Rollout, text: str, tag: str, **update: Any) -> Rollout:
    """`base` answering `text` (as one assistant message where it is a trajectory)."""
    completion: str | list[Message] = text
    if isinstance(base.completion, list):
        completion = [Message(role="assistant", content=text)]
    return base.model_copy(update={"id": f"{base.id}:audit:{tag}", "completion": completion,
                                   **update})  # fmt: skip


def pairs(rollouts: Sequence[Rollout], measures: frozenset[str]) -> list[Pair]:
    """The pairs of the `measures` asked for, built from `rollouts`."""
    out: list[Pair] = []
    if "position" in measures:  # two attempts of one group, as written
        by_group: dict[str, list[Rollout]] = {}
        for r in rollouts:
            if r.group is not None:
                by_group.setdefault(r.group, []).append(r)
        for members in by_group.values():
            for first, second in zip(members[::2], members[1::2], strict=False):
                a, b = answer_text(first), answer_text(second)
                if a != b:
                    out.append(Pair(first, a, b, "position"))
    for r in rollouts:
        text = answer_text(r)
        if "length" in measures:
            out.append(Pair(r, padded(text), text, "length"))
        if "lists" in measures and not contains_list(text):
            out.append(Pair(r, as_list(text), text, "lists"))
        if "injection" in measures:
            for name, probe in INJECTIONS.items():
                out.append(Pair(r, f"{text}\n\n{probe}", text, f"injection:{name}"))
    return out
