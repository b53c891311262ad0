"""The baseline of the learn benchmark: the strict spec's reward written by hand, in TRL's own
style (TRL's docs write rewards as plain functions of ``completions`` and the dataset's
columns, e.g. ``format_reward`` and ``accuracy_reward``), with no referee in the loop.

    reward_funcs=[valid_reward, fields_reward], reward_weights=[0.2, 0.8]

It asks what ``strict.yaml`` asks, as a person would code it in an afternoon: the first
``{...}`` in the completion, parsed with ``json.loads``; the two keys and nothing else, a
company of two or more characters without brackets, an amount that is a positive number or a
string with a digit; the company equal after lower-casing and trimming, the amount within 1%.
It is not referee's reward: its JSON search and its normalisation are simpler, so some
completions score differently. `benchmarks/bench_learn.py` counts how many.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

_OBJECT = re.compile(r"\{.*?\}", re.DOTALL)
_NOT_NUMBER = re.compile(r"[^0-9.eE+-]")


def _text(completion: Any) -> str:
    """A conversational completion's text (TRL passes a list of messages) or a plain string."""
    if isinstance(completion, list):
        return str(completion[-1]["content"]) if completion else ""
    return str(completion)


def _answer(completion: Any) -> dict[str, Any] | None:
    """The completion's answer when it is valid under the strict spec's rules, else None."""
    match = _OBJECT.search(_text(completion))
    if match is None:
        return None
    try:
        answer = json.loads(match.group(0))
    except ValueError:
        return None
    if not isinstance(answer, dict) or set(answer) != {"company", "amount"}:
        return None
    company, amount = answer["company"], answer["amount"]
    if not isinstance(company, str) or len(company) < 2 or re.search(r"[<>{}]", company):
        return None
    if isinstance(amount, bool) or not isinstance(amount, int | float | str):
        return None
    if isinstance(amount, str) and not re.search(r"[0-9]", amount):
        return None
    if isinstance(amount, int | float) and not amount > 0:
        return None
    return answer


def _amount(value: Any) -> float | None:
    if isinstance(value, int | float):
        return float(value)
    try:
        number = float(_NOT_NUMBER.sub("", str(value)))
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def valid_reward(completions: list[Any], **kwargs: Any) -> list[float]:
    """1.0 when the completion holds a valid answer object, else 0.0."""
    return [1.0 if _answer(c) is not None else 0.0 for c in completions]


def fields_reward(completions: list[Any], reference: list[Any], **kwargs: Any) -> list[float]:
    """The share of the two fields right; 0.0 without a valid answer (the gate)."""
    out = []
    for completion, ref in zip(completions, reference, strict=True):
        answer = _answer(completion)
        if answer is None:
            out.append(0.0)
            continue
        company = answer["company"].strip().lower() == str(ref["company"]).strip().lower()
        amount = _amount(answer["amount"])
        close = amount is not None and math.isclose(amount, ref["amount"], rel_tol=0.01)
        out.append((company + close) / 2)
    return out


FUNCS = [valid_reward, fields_reward]
WEIGHTS = [0.2, 0.8]
