"""Scores from logprobs: the expected value of a verdict's score over the model's top candidate
tokens at that score's position (G-Eval style), rather than the one token it sampled.

A judge that hesitates between 3 and 4 samples one of them; the expectation (3.4, say) is a
finer, lower-variance signal from the same single call. It needs the server to return
``logprobs`` with ``top_logprobs`` (OpenAI, vLLM, SGLang and llama.cpp's server do; OpenAI's
shape: ``choices[0].logprobs.content[i].top_logprobs``).

The client finds, for every scalar value of the reply's JSON (`candidates_at_values`), the token
in which the value starts, and keeps that position's candidates, each with the text it puts
where the value starts (the sampled token's prefix, say a space, taken off). A reward then
maps candidates to the literals a value may take (`expected`): ``4`` or ``4,`` is 4; a
candidate that could begin two literals (``1`` on a 1..10 scale, where ``10`` may be two
tokens) or none (``"``) is left out, and the rest are renormalised. No expectation (None) when
the sampled token itself is such a candidate (``10`` written as ``1`` then ``0``): the reward
then takes the sampled value, as it does when the server gives no logprobs.

vLLM (V1) reports logprobs of the raw model distribution, before temperature and penalties;
OpenAI and SGLang report the distribution the token was sampled from. Either way the
expectation is over what the model believes, and a temperature of 0 still gives it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["BOOLEAN", "Candidates", "candidates_at_values", "expected", "pointer", "scale"]

BOOLEAN: Mapping[str, float] = {"true": 1.0, "false": 0.0}
"""A pass/fail value's literals and their scores."""


def scale(low: int, high: int) -> dict[str, float]:
    """An integer scale's literals and their scores, normalised to [0, 1]."""
    return {str(v): (v - low) / (high - low) for v in range(low, high + 1)}


def pointer(*path: str | int) -> str:
    """The JSON Pointer (RFC 6901) of a value: ``pointer("criteria", "accuracy")`` is
    ``/criteria/accuracy``."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


Candidates = tuple[tuple[str, float], ...]
"""The candidates for one scalar value of a reply, at the token where it starts: (the text
each puts where the value starts, its logprob), the sampled token first."""


def expected(candidates: Candidates | None, literals: Mapping[str, float]) -> float | None:
    """The expected score over the candidates that read as one of `literals` (literal text ->
    score), renormalised.

    None when there are no candidates, or the sampled one does not read as exactly one literal
    (the value spans tokens and its first could begin several: ``1`` of ``10``).
    """
    if not candidates or _literal(candidates[0][0], literals) is None:
        return None
    mass: dict[str, float] = {}
    for text, logprob in candidates:
        literal = _literal(text, literals)
        if literal is not None:
            mass[literal] = mass.get(literal, 0.0) + math.exp(logprob)
    total = sum(mass.values())
    if total <= 0.0:
        return None
    return sum(literals[lit] * m for lit, m in mass.items()) / total


def _literal(text: str, literals: Mapping[str, float]) -> str | None:
    """The one literal `text` can begin, or that it holds whole before a delimiter."""
    found = {lit for lit in literals if lit.startswith(text)}
    for lit in literals:
        if len(text) > len(lit) and text.startswith(lit):
            after = text[len(lit)]
            if not (after.isalnum() or after in "._+-"):
                found.add(lit)
    return found.pop() if len(found) == 1 else None


# --- where each value starts, and the tokens there ----------------------------------------------

_WS = re.compile(r"[ \t\n\r]*")
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\.)*"')
_SCALAR = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|true|false|null")


class _Malformed(ValueError):
    pass


def _spans(text: str, start: int) -> dict[str, tuple[int, int]]:
    """The (start, end) of every scalar in the JSON value at `start`, by JSON Pointer."""
    out: dict[str, tuple[int, int]] = {}

    def skip(pos: int) -> int:
        match = _WS.match(text, pos)
        return match.end() if match else pos

    def value(pos: int, path: tuple[str | int, ...], depth: int) -> int:
        if depth > 64:
            raise _Malformed("too deep")
        pos = skip(pos)
        head = text[pos : pos + 1]
        if head in ("{", "["):
            closing, pos, index = ("}" if head == "{" else "]"), skip(pos + 1), 0
            while text[pos : pos + 1] != closing:
                key: str | int = index
                if head == "{":
                    string = _STRING.match(text, pos)
                    if string is None:
                        raise _Malformed("a key")
                    key, pos = json.loads(string.group()), skip(string.end())
                    if text[pos : pos + 1] != ":":
                        raise _Malformed("a colon")
                    pos += 1
                pos = skip(value(pos, (*path, key), depth + 1))
                index += 1
                if text[pos : pos + 1] == ",":
                    pos = skip(pos + 1)
                elif text[pos : pos + 1] != closing:
                    raise _Malformed("a comma")
            return pos + 1
        if match := (_STRING if head == '"' else _SCALAR).match(text, pos):
            end = match.end()
        else:
            raise _Malformed("a value")
        out[pointer(*path)] = (pos, end)
        return end

    value(start, (), 0)
    return out


def _first_json(text: str) -> int | None:
    """Where the reply's first JSON object or array starts (as the verdict parser reads it)."""
    decoder = json.JSONDecoder()
    pos = 0
    for _ in range(64):
        starts = [p for p in (text.find("{", pos), text.find("[", pos)) if p >= 0]
        if not starts:
            return None
        try:
            decoder.raw_decode(text, min(starts))
            return min(starts)
        except ValueError:
            pos = min(starts) + 1
    return None


def _token_texts(text: str, tokens: Sequence[Mapping[str, Any]]) -> list[str] | None:
    """Each token's text, when together they spell `text` (by their strings, else their bytes)."""
    texts = [str(t.get("token", "")) for t in tokens]
    if "".join(texts) == text:
        return texts
    if all(isinstance(t.get("bytes"), list) for t in tokens):
        # Tokens that split a character: each one's text is what it adds to the decoded whole.
        raw = b"".join(bytes(t["bytes"]) for t in tokens)
        if raw.decode("utf-8", "replace") != text:
            return None
        out, done = [], 0
        cumulative = b""
        for t in tokens:
            cumulative += bytes(t["bytes"])
            upto = len(cumulative.decode("utf-8", "ignore"))
            out.append(text[done:upto])
            done = upto
        return out
    return None


def candidates_at_values(
    text: str, tokens: Sequence[Mapping[str, Any]] | None
) -> dict[str, Candidates] | None:
    """The candidates at every scalar value of the JSON in `text`, by JSON Pointer.

    Args:
        text: The reply.
        tokens: Its ``logprobs.content`` (OpenAI's shape); None when the server gave none.

    Returns:
        None when there are no logprobs, or they do not spell the reply.
    """
    if not tokens:
        return None
    texts = _token_texts(text, tokens)
    start = _first_json(text)
    if texts is None or start is None:
        return None
    try:
        spans = _spans(text, start)
    except (_Malformed, ValueError, IndexError):
        return None
    bounds, offset = [], 0
    for t in texts:
        bounds.append((offset, offset + len(t)))
        offset += len(t)
    out: dict[str, Candidates] = {}
    index = 0
    for path, (begin, _) in sorted(spans.items(), key=lambda item: item[1][0]):
        while index < len(bounds) and bounds[index][1] <= begin:
            index += 1
        if index == len(bounds):
            break
        prefix = text[bounds[index][0] : begin]
        out[path] = _candidates(tokens[index], texts[index], prefix)
    return out


def _candidates(token: Mapping[str, Any], sampled: str, prefix: str) -> Candidates:
    """The position's candidates (the sampled token first), with `prefix` taken off each; a
    candidate without it keeps its text, less leading blanks when the prefix is blank."""
    seen: dict[str, float] = {sampled: float(token.get("logprob", 0.0))}
    for alt in token.get("top_logprobs") or ():
        seen.setdefault(str(alt.get("token", "")), float(alt.get("logprob", -9999.0)))
    out = []
    for candidate, logprob in seen.items():
        if candidate.startswith(prefix):
            out.append((candidate[len(prefix) :], logprob))
        elif not prefix.strip():
            out.append((candidate.lstrip(), logprob))
    return tuple(out)
