"""Judge rewards: a model grades one completion (`rubric_judge`, `checklist_judge`,
`reference_judge`, `pairwise_judge`).

Each holds a `JudgeClient` (``client``; `referee.judges.options`) and shows the judge its
material fenced off from the instructions (`referee.judges.prompts`), so text injected into a
completion cannot move the score.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from referee.errors import NotApplicable
from referee.judges.client import JudgeError
from referee.judges.options import JudgeOptions
from referee.judges.prompts import (
    RUBRIC_SHAPE,
    as_text,
    fence_for,
    judge_messages,
    response_text,
    rubric_task,
    verdict_model,
)
from referee.judges.rubric import Rubric, load_rubric
from referee.registry import register
from referee.reward import AsyncReward
from referee.rewards._common import clip_text
from referee.rollout import Rollout
from referee.score import Score

__all__ = [
    "ChecklistJudge",
    "PairwiseJudge",
    "ReferenceJudge",
    "RubricJudge",
    "fence_for",
    "verdict_model",
]


@dataclass(kw_only=True)
class _JudgeReward(JudgeOptions, AsyncReward):
    """What the pointwise judge rewards share: the client, samples and their aggregation."""

    samples: int = 1
    aggregate: Literal["mean", "majority"] = "mean"

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise ValueError(f"samples must be at least 1, got {self.samples}")
        super().__post_init__()

    async def _ask(
        self, messages: list[dict[str, Any]], schema: type[BaseModel], version: str
    ) -> list[Any]:
        """`samples` verdicts, with seeds seed, seed + 1, ... (distinct cache keys)."""
        if self.samples == 1:
            return [await self.client.judge(messages, schema, version=version)]
        base = self.client.seed or 0
        return list(await asyncio.gather(*(
            self.client.judge(messages, schema, version=version, seed=base + i)
            for i in range(self.samples)
        )))  # fmt: skip

    def _combine(self, values: list[float], raw: list[Any]) -> float:
        """One value from several samples: their mean, or the most common raw answer (a tie
        takes the stricter, lower one)."""
        if self.aggregate == "mean":
            return sum(values) / len(values)
        counts: dict[Any, int] = {}
        for r in raw:
            counts[r] = counts.get(r, 0) + 1
        best = max(counts.values())
        winners = [v for v, r in zip(values, raw, strict=True) if counts[r] == best]
        return min(winners)

    def _reference(self, rollout: Rollout, what: str) -> str:
        reference = as_text(rollout.reference)
        if not reference:
            raise NotApplicable(f"{what} needs a reference answer; the rollout has none")
        return reference


@register("rubric_judge")
@dataclass(kw_only=True)
class RubricJudge(_JudgeReward):
    """A model grades the completion under a rubric; every criterion is a component.

    Attributes:
        rubric: A shipped rubric's name (``referee rubrics list``) or a rubric file.
        client: The judge model and how to call it (`JudgeClient`: ``model``, ``api_base``,
            ``timeout``, ``cache``, ...); a spec may write its options flat.
        concurrency: Rollouts scored at once (the client's ``max_in_flight`` caps the calls).
        samples: Ask this many times (the client's seed, seed + 1, ...; use a temperature
            above 0) and aggregate each criterion (also for `checklist_judge` and
            `reference_judge`).
        aggregate: ``mean`` of the samples, or ``majority`` (a tie takes the lower value).
    """

    rubric: str
    name: str = "rubric_judge"
    _rubric: Rubric = field(init=False, repr=False, compare=False)
    _verdict: type[BaseModel] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._rubric = load_rubric(self.rubric)
        self._verdict = verdict_model(self._rubric)

    def messages(self, rollout: Rollout) -> list[dict[str, Any]]:
        """The judge's messages for `rollout`: instructions, rubric, fenced material."""
        rubric = self._rubric
        material = [("PROMPT", as_text(rollout.prompt_text))]
        if rubric.requires_reference:
            material.append(
                ("REFERENCE ANSWER", self._reference(rollout, f"rubric {rubric.name!r}"))
            )
        material.append(("RESPONSE", response_text(rollout)))
        return judge_messages(rubric_task(rubric), material, RUBRIC_SHAPE)

    async def evaluate(self, rollout: Rollout) -> Score:
        version = f"{self._rubric.name}@{self._rubric.version}"
        verdicts = await self._ask(self.messages(rollout), self._verdict, version)
        samples = [v.value.criteria.model_dump() for v in verdicts]
        components: dict[str, float | None] = {}
        for c in self._rubric.criteria:
            raw = [s[c.id] for s in samples]
            components[c.id] = self._combine([c.normalise(r) for r in raw], raw)
        weight = sum(c.weight for c in self._rubric.criteria)
        total = sum(c.weight * (components[c.id] or 0.0) for c in self._rubric.criteria) / weight
        return _score(total, components, verdicts)


class _ChecklistVerdict(BaseModel):
    items: list[bool]
    reasoning: str = ""


@register("checklist_judge")
@dataclass(kw_only=True)
class ChecklistJudge(_JudgeReward):
    """Yes or no for each checklist item; the score is the weighted share of yeses.

    Attributes:
        items: The checklist: item texts, or ``{text, weight}`` mappings. When omitted, each
            rollout's ``reference.checklist`` (per-prompt checklists).
        client, concurrency, samples, aggregate: As for `rubric_judge`.
    """

    items: list[str | dict[str, Any]] | None = None
    name: str = "checklist_judge"

    def _checklist(self, rollout: Rollout) -> list[tuple[str, float]]:
        raw: Any = self.items
        if raw is None:
            ref = rollout.reference
            raw = ref.get("checklist") if isinstance(ref, dict) else None
            if not isinstance(raw, list) or not raw:
                raise NotApplicable("checklist_judge needs items, or reference.checklist")
        out = []
        for item in raw:
            if isinstance(item, str):
                out.append((item, 1.0))
            elif isinstance(item, dict) and isinstance(item.get("text"), str):
                out.append((item["text"], float(item.get("weight", 1.0))))
            else:
                raise NotApplicable(f"a checklist item must be text or {{text, weight}}: {item!r}")
        return out

    async def evaluate(self, rollout: Rollout) -> Score:
        checklist = self._checklist(rollout)
        task = "Checklist (answer each in order, true if the RESPONSE satisfies it):\n" + "\n".join(
            f"{i + 1}. {text}" for i, (text, _) in enumerate(checklist)
        )
        material = [
            ("PROMPT", as_text(rollout.prompt_text)),
            ("RESPONSE", response_text(rollout)),
        ]
        shape = '{"items": [<true|false for each item, in order>], "reasoning": "<short>"}'
        verdicts = await self._ask(
            judge_messages(task, material, shape), _ChecklistVerdict, f"checklist:{len(checklist)}"
        )
        for v in verdicts:
            if len(v.value.items) != len(checklist):
                raise JudgeError(
                    f"the judge answered {len(v.value.items)} items of {len(checklist)}"
                )
        components: dict[str, float | None] = {}
        for i in range(len(checklist)):
            raw = [bool(v.value.items[i]) for v in verdicts]
            components[f"item{i + 1}"] = self._combine([float(r) for r in raw], raw)
        total = sum(w for _, w in checklist)
        value = sum(w * (components[f"item{i + 1}"] or 0.0) for i, (_, w) in enumerate(checklist))
        return _score(value / total, components, verdicts)


class _EquivalenceVerdict(BaseModel):
    equivalent: bool
    reasoning: str = ""


@register("reference_judge")
@dataclass(kw_only=True)
class ReferenceJudge(_JudgeReward):
    """1.0 when the judge finds the response's final answer equivalent to the reference.

    The natural fallback behind a cheap check: ``combine: cascade`` with ``math_answer``
    (``no_answer: fail``) first, so the judge is asked only where the check cannot decide.
    """

    name: str = "reference_judge"

    async def evaluate(self, rollout: Rollout) -> Score:
        task = (
            "Is the final answer in the RESPONSE equivalent to the REFERENCE ANSWER? Equivalent "
            "means the same answer in any form (units, notation, wording); partial or hedged "
            "answers are not equivalent."
        )
        material = [
            ("QUESTION", as_text(rollout.prompt_text)),
            ("REFERENCE ANSWER", self._reference(rollout, "reference_judge")),
            ("RESPONSE", response_text(rollout)),
        ]
        shape = '{"equivalent": <true|false>, "reasoning": "<short>"}'
        verdicts = await self._ask(
            judge_messages(task, material, shape), _EquivalenceVerdict, "reference:1"
        )
        raw = [bool(v.value.equivalent) for v in verdicts]
        return _score(self._combine([float(r) for r in raw], raw), {}, verdicts)


class _PairVerdict(BaseModel):
    better: Literal["A", "B", "tie"]
    reasoning: str = ""


@register("pairwise_judge")
@dataclass(kw_only=True)
class PairwiseJudge(_JudgeReward):
    """The response against the reference answer, judged in both orders.

    Each order gives the response 1 (better), 0.5 (tie) or 0 (worse); a judge that prefers
    one slot gives it no edge, since the response sits in both. When the two orders disagree
    the result is a tie (``disagreement: tie``) or a Failure (``fail``).

    Attributes:
        criterion: What "better" means, for the judge.
        disagreement: What two orders that disagree give.
        client, concurrency: As for `rubric_judge`.
    """

    criterion: str = (
        "Which answer responds to the question better: more correct, then more helpful?"
    )
    disagreement: Literal["tie", "fail"] = "tie"
    name: str = "pairwise_judge"

    def __post_init__(self) -> None:
        if self.samples != 1:
            raise ValueError("pairwise_judge already asks twice (both orders); samples must be 1")
        super().__post_init__()

    async def evaluate(self, rollout: Rollout) -> Score:
        question = as_text(rollout.prompt_text)
        reference = self._reference(rollout, "pairwise_judge")
        response = response_text(rollout)
        shape = '{"better": "A" | "B" | "tie", "reasoning": "<short>"}'
        orders = [(response, reference), (reference, response)]
        verdicts = await asyncio.gather(*(
            self.client.judge(
                judge_messages(
                    self.criterion,
                    [("QUESTION", question), ("ANSWER A", a), ("ANSWER B", b)],
                    shape,
                ),
                _PairVerdict,
                version="pairwise:1",
            )
            for a, b in orders
        ))  # fmt: skip
        # the response is A in the first order, B in the second
        first = {"A": 1.0, "tie": 0.5, "B": 0.0}[verdicts[0].value.better]
        second = {"B": 1.0, "tie": 0.5, "A": 0.0}[verdicts[1].value.better]
        if first != second and self.disagreement == "fail":
            raise JudgeError(f"the two orders disagree ({first:g} and {second:g})")
        value = first if first == second else 0.5
        cost = verdicts[0].cost + verdicts[1].cost
        return Score(
            value=value,
            components={"response_first": first, "reference_first": second},
            reason="orders agree" if first == second else "orders disagree: a tie",
            cost=cost,
            latency=max(v.latency for v in verdicts),
            tokens=sum(v.prompt_tokens + v.completion_tokens for v in verdicts),
        )


def _score(value: float, components: dict[str, float | None], verdicts: list[Any]) -> Score:
    reasoning = str(getattr(verdicts[0].value, "reasoning", "") or "")
    if len(verdicts) > 1:
        reasoning = f"{len(verdicts)} samples; first: {reasoning}"
    return Score(
        value=value,
        components=components,
        reason=clip_text(reasoning, 300) if reasoning else "judged",
        cost=sum(v.cost for v in verdicts),
        latency=max(v.latency for v in verdicts),
        tokens=sum(v.prompt_tokens + v.completion_tokens for v in verdicts),
    )
