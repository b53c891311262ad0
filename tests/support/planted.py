"""Scripted judges with biases planted at known sizes, for `referee audit-judge`'s tests and
benchmark: each reads what a real judge is shown (the fenced texts of referee's prompt) and
answers over real HTTP (`FakeJudgeServer`). Their coins are hashes of the request, so a run is
reproducible and the realised shares are samples of the planted ones."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from referee import Rollout
from referee.judges.testing import Reply

_FENCED = re.compile(r"([A-Z][A-Z ]*):\n<<(\w+)>>\n(.*?)\n<</\2>>", re.DOTALL)

SCALE = 100  # the rubric's scale: 0..100, so a value is score / 100


def shown(request: dict[str, Any]) -> dict[str, str]:
    """The fenced texts of a judge request, by label (``RESPONSE``, ``ANSWER A``, ...)."""
    user = request["messages"][-1]["content"]
    return {label: text for label, _, text in _FENCED.findall(user)}


def coin(request: dict[str, Any], salt: str = "") -> float:
    """A uniform number in [0, 1) from the request (its messages and seed) and `salt`."""
    key = json.dumps([request["messages"], request.get("seed"), salt], sort_keys=True)
    return int(hashlib.sha256(key.encode()).hexdigest()[:12], 16) / 16**12


def correct(text: str) -> bool:
    """The planted truth: an answer is right when it names Paris."""
    return "Paris" in text


def rubric(folder: Path) -> Path:
    """A one-criterion rubric on a 0..100 scale, written to `folder`."""
    path = folder / "quality.yaml"
    path.write_text(
        "name: quality\nversion: '1'\ndescription: Is the answer right?\n"
        "requires_reference: false\ncriteria:\n  - id: quality\n"
        "    description: The answer is right.\n    weight: 1\n"
        f"    scale: {{min: 0, max: {SCALE}}}\n"
    )
    return path


def rubric_spec(url: str, folder: Path, **options: Any) -> dict[str, Any]:
    """A `rubric_judge` on `rubric(folder)` asking the server at `url`."""
    return {"type": "rubric_judge", "rubric": str(rubric(folder)), "model": "openai/planted",
            "api_base": url, "cache": False, "structured": "prompt", **options}  # fmt: skip


def pairwise_spec(url: str, **options: Any) -> dict[str, Any]:
    return {"type": "pairwise_judge", "model": "openai/planted", "api_base": url,
            "cache": False, "structured": "prompt", **options}  # fmt: skip


def _score(value: int) -> Reply:
    value = max(0, min(SCALE, value))
    return Reply(json.dumps({"criteria": {"quality": value}, "reasoning": "scripted"}))


def fair_pointwise(request: dict[str, Any]) -> Reply:
    """Right answers 80, wrong ones 20: no eye for length, lists, injections or seeds."""
    return _score(80 if correct(shown(request).get("RESPONSE", "")) else 20)


def length_biased(per_100_chars: int) -> Callable[[dict[str, Any]], Reply]:
    """A fair judge that adds `per_100_chars` points (of 100) per 100 characters."""

    def script(request: dict[str, Any]) -> Reply:
        text = shown(request).get("RESPONSE", "")
        base = 60 if correct(text) else 10
        return _score(round(base + per_100_chars * len(text) / 100))

    return script


def noisy(share: float) -> Callable[[dict[str, Any]], Reply]:
    """A fair judge that answers a uniform random score `share` of the time."""

    def script(request: dict[str, Any]) -> Reply:
        if coin(request, "noise") < share:
            return _score(int(coin(request, "value") * (SCALE + 1)))
        return fair_pointwise(request)

    return script


def flipping(share: float) -> Callable[[dict[str, Any]], Reply]:
    """A fair judge that gives the wrong verdict `share` of the time."""

    def script(request: dict[str, Any]) -> Reply:
        right = correct(shown(request).get("RESPONSE", ""))
        if coin(request, "flip") < share:
            right = not right
        return _score(80 if right else 20)

    return script


def tongue_tied(share: float) -> Callable[[dict[str, Any]], Reply]:
    """A fair judge that answers prose, no verdict, `share` of the time (a small model that
    cannot keep to the JSON)."""

    def script(request: dict[str, Any]) -> Reply:
        if coin(request, "tied") < share:
            return Reply("I think the answer is quite good overall.")
        return fair_pointwise(request)

    return script


def slot_biased(share: float) -> Callable[[dict[str, Any]], Reply]:
    """A pairwise judge that answers "A" `share` of the time, and otherwise by correctness
    (a tie where both or neither are right)."""

    def script(request: dict[str, Any]) -> Reply:
        texts = shown(request)
        better = "tie"
        if coin(request, "slot") < share:
            better = "A"
        else:
            a, b = correct(texts.get("ANSWER A", "")), correct(texts.get("ANSWER B", ""))
            better = "A" if a and not b else "B" if b and not a else "tie"
        return Reply(json.dumps({"better": better, "reasoning": "scripted"}))

    return script


def rollouts(n: int = 40, *, labelled: bool = True) -> list[Rollout]:
    """`n` answers to one question in groups of two, half right, each with a human label
    that says which (`metadata.label`) and a system (`metadata.system`, four of them)."""
    answers = [
        "The capital of France is Paris. It has been the capital for {n} centuries.",
        "The capital of France is Lyon. It has been a large city for {n} centuries.",
    ]
    out = []
    for i in range(n):
        text = answers[i % 2].format(n=i + 2)  # every text its own, so every coin its own
        metadata: dict[str, Any] = {"system": f"s{i % 4}"}
        if labelled:
            metadata["label"] = 1.0 if correct(text) else 0.0
        out.append(Rollout(id=f"r{i}", group=f"g{i // 2}", prompt="What is the capital of France?",
                           completion=text, metadata=metadata))  # fmt: skip
    return out
