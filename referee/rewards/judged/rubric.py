"""`rubric_judge`: a model grades the completion under a rubric."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from referee.judges.client import JudgeClient
from referee.judges.logprobs import BOOLEAN, pointer, scale
from referee.judges.prompts import (
    RUBRIC_SHAPE,
    as_text,
    judge_messages,
    response_text,
    rubric_task,
    verdict_model,
)
from referee.judges.rubric import Criterion, Rubric, load_rubric
from referee.registry import register
from referee.reward import Need
from referee.rewards.judged._base import JudgeReward, judged_score
from referee.rollout import Rollout
from referee.scores import Score

__all__ = ["RubricJudge"]


@register("rubric_judge")
@dataclass(kw_only=True)
class RubricJudge(JudgeReward):
    """A model grades the completion under a rubric; every criterion is a component.

    The judge sees the prompt, the response (for a trajectory: each turn, its calls and their
    results) and, where the rubric asks for one, the rollout's reference answer, fenced off
    from its instructions so that text in the completion cannot move the score. It answers
    each criterion on the criterion's integer scale or as pass/fail; each answer is normalised
    to [0, 1] and is a component (keyed by the criterion's id), and the value is their
    weighted mean, in [0, 1].

    A rubric that needs a reference fails a rollout without one (``not_applicable``). A call
    that fails after the client's retries, or a reply that is no valid verdict even after one
    repair call, is ``Failure("judge")``; attempts that all run past the client's timeout are
    ``Failure("timeout")``.

    Attributes:
        rubric: A shipped rubric's name (``referee rubrics`` lists them) or the path of a rubric
            file (YAML: a name, a version and criteria, each with an id, a description, a
            weight and a ``scale`` or ``check: true``).

    Example:
        ```yaml
        type: rubric_judge
        rubric: factual-correctness
        model: openai/Qwen/Qwen2.5-7B-Instruct
        api_base: http://127.0.0.1:8000/v1
        temperature: 0.7
        samples: 3
        concurrency: 32
        ```

    Scores:
        ```yaml
        needs: [judge]
        rollouts:
          - prompt: Who wrote the first algorithm meant for a machine?
            completion: Ada Lovelace, in her 1843 notes on Babbage's Analytical Engine.
            reference: Ada Lovelace
            judge: >-
              {"criteria": {"agrees_with_reference": true, "no_contradiction": true,
              "no_unsupported_claims": 5}, "reasoning": "Correct, and the context is right."}
            value: 1.0
          - prompt: Who wrote the first algorithm meant for a machine?
            completion: Charles Babbage wrote it for his Difference Engine in 1822.
            reference: Ada Lovelace
            judge: >-
              {"criteria": {"agrees_with_reference": false, "no_contradiction": true,
              "no_unsupported_claims": 3}, "reasoning": "Names someone else."}
            value: 0.4166666666666667
          - prompt: Who wrote the first algorithm meant for a machine?
            completion: Alan Turing, at Bletchley Park in 1950.
            reference: Ada Lovelace
            judge: >-
              {"criteria": {"agrees_with_reference": false, "no_contradiction": false,
              "no_unsupported_claims": 1}, "reasoning": "Wrong person and an invented date."}
            value: 0.0
        ```
    """

    rubric: str
    name: str = "rubric_judge"
    _rubric: Rubric = field(init=False, repr=False, compare=False)
    _verdict: type[BaseModel] = field(init=False, repr=False, compare=False)
    _task: str = field(init=False, repr=False, compare=False)
    # each criterion with its value's JSON Pointer and literals, worked out once
    _criteria: list[tuple[Criterion, str, dict[str, float] | None]] = field(
        init=False, repr=False, compare=False
    )
    _weight: float = field(init=False, repr=False, compare=False)

    def needs(self) -> frozenset[Need]:
        """A reference answer where the rubric asks for one."""
        return frozenset({"reference"}) if self._rubric.requires_reference else frozenset()

    def __post_init__(self) -> None:
        super().__post_init__()
        self._rubric = load_rubric(self.rubric)
        self._verdict = verdict_model(self._rubric)
        self._task = rubric_task(self._rubric)
        self._criteria = [
            (c, pointer("criteria", c.id), _literals(c)) for c in self._rubric.criteria
        ]
        self._weight = sum(c.weight for c in self._rubric.criteria)

    def messages(self, rollout: Rollout) -> list[dict[str, Any]]:
        """The judge's messages for `rollout`: instructions, rubric, fenced material."""
        rubric = self._rubric
        material = [("PROMPT", as_text(rollout.prompt_text))]
        if rubric.requires_reference:
            material.append(
                ("REFERENCE ANSWER", self._reference(rollout, f"rubric {rubric.name!r}"))
            )
        material.append(("RESPONSE", response_text(rollout)))
        return judge_messages(self._task, material, RUBRIC_SHAPE)

    def _prepare(self, rollout: Rollout) -> list[dict[str, Any]]:
        return self.messages(rollout)

    async def _judge(self, client: JudgeClient, prepared: list[dict[str, Any]]) -> Score:
        version = f"{self._rubric.name}@{self._rubric.version}"
        verdicts = await self._ask(client, prepared, self._verdict, version)
        samples = [v.value.criteria.model_dump() for v in verdicts]
        components: dict[str, float | None] = {}
        sampled: list[str] = []
        for c, path, literals in self._criteria:
            raw = [s[c.id] for s in samples]
            values, read = self._values(verdicts, path, [c.normalise(r) for r in raw], literals)
            if not read:
                sampled.append(c.id)
            components[c.id] = self._combine(values, raw)
        total = sum(c.weight * (components[c.id] or 0.0) for c, _, _ in self._criteria)
        total /= self._weight
        return judged_score(total, components, verdicts, self._note(verdicts, sampled))


def _literals(criterion: Criterion) -> dict[str, float] | None:
    """A criterion's literals and their scores: true/false, or every integer of a scale (None
    for a scale too wide to list, whose values are then the sampled ones)."""
    if criterion.scale is None:
        return dict(BOOLEAN)
    if criterion.scale.max - criterion.scale.min > 100:
        return None
    return scale(criterion.scale.min, criterion.scale.max)
