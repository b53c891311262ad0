"""Pulling the part to grade out of a completion: a JSON value, or a final answer."""

from __future__ import annotations

import re
from typing import Literal

from referee.verifiers.jsontext import JsonExtract, ParsedJson, parse_json
from referee.verifiers.patterns import Pattern, compile_pattern

__all__ = [
    "AnswerExtract",
    "JsonExtract",
    "ParsedJson",
    "extract_answer",
    "fenced_blocks",
    "parse_json",
]

AnswerExtract = Literal["full", "last_line", "answer_tag", "boxed", "last_number"]
"""Which part of a completion is the answer: all of it (stripped), its last non-empty line, the
text of the last ``<answer>...</answer>``, the content of the last ``\\boxed{...}``, or the
last number in the text."""

# On RE2: with `re`, a text of many unclosed tags takes quadratic time (a minute for 300 kB).
_ANSWER_TAG = compile_pattern(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+")


_FENCE_LANG = re.compile(r"[ \t]*([A-Za-z0-9_+-]*)")


def fenced_blocks(text: str) -> list[tuple[int, str, str]]:
    """(end, language tag, body) of every fenced block: what
    ``re.finditer(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", text, re.DOTALL)`` finds,
    scanned with `str.find` in linear time (the regex rescans the rest of the text from every
    unclosed fence: two seconds for 60 kB of backticks).

    A fence opens at three backticks; its tag is the word after them on that line, its body
    the lines after it, up to the next three backticks.
    """
    blocks: list[tuple[int, str, str]] = []
    at = text.find("```")
    while at >= 0:
        newline = text.find("\n", at + 3)
        close = -1 if newline < 0 else text.find("```", newline + 1)
        if close < 0:
            break  # no later fence can be closed either
        lang = _FENCE_LANG.match(text, at + 3, newline)
        blocks.append((close + 3, lang[1] if lang else "", text[newline + 1 : close]))
        at = text.find("```", close + 3)
    return blocks


def _last_boxed(text: str) -> str | None:
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        return None
    i = text.index("{", start) + 1
    depth = 1
    for j in range(i, len(text)):
        ch = text[j]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[i:j]
    return None


def extract_answer(
    text: str, extract: AnswerExtract = "full", pattern: Pattern | None = None
) -> str | None:
    """The answer part of `text`, or None when there is none.

    With `pattern`, the last match's first group (or whole match, when it has no group) wins
    over `extract`; a first group that took no part in that match is no answer.
    """
    if pattern is not None:
        last = None
        for last in pattern.finditer(text):  # noqa: B007 - we want the last match
            pass
        answer = None if last is None else last.group(1 if pattern.groups else 0)
        return None if answer is None else answer.strip()
    if extract == "full":
        return text.strip()
    if extract == "last_line":
        for line in reversed(text.splitlines()):
            if line.strip():
                return line.strip()
        return None
    if extract == "answer_tag":
        tags = _ANSWER_TAG.findall(text)
        return tags[-1].strip() if tags else None
    if extract == "boxed":
        boxed = _last_boxed(text)
        return None if boxed is None else boxed.strip()
    numbers = _NUMBER.findall(text)
    return numbers[-1].replace(",", "") if numbers else None
