"""`reference_judge`: a model says whether the final answer is the reference answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from referee.judges.client import JudgeClient
from referee.judges.logprobs import BOOLEAN, pointer
from referee.judges.prompts import as_text, judge_messages, response_text
from referee.registry import register
from referee.reward import Need
from referee.rewards.judged._base import JudgeReward, judged_score
from referee.rollout import Rollout
from referee.scores import Score

__all__ = ["ReferenceJudge"]


class _EquivalenceVerdict(BaseModel):
    equivalent: bool
    reasoning: str = ""


_EQUIVALENT = pointer("equivalent")


@register("reference_judge")
@dataclass(kw_only=True)
class ReferenceJudge(JudgeReward):
    """1.0 when the judge finds the response's final answer equivalent to the reference.

    The judge sees the question, the reference answer (``rollout.reference``, as text) and the
    response, and says whether the final answer is the same answer in any form (units,
    notation, wording); a partial or hedged answer is not. The value is 1.0 or 0.0 (with
    several samples, their mean or majority); with ``score_from: logprobs``, the probability
    of ``true``, in [0, 1]. A rollout without a reference is ``not_applicable``; a call that
    fails after the client's retries is ``Failure("judge")``.

    The natural fallback behind a cheap check: ``combine: cascade`` with ``math_answer``
    (``no_answer: fail``) first, so the judge is asked only where the check cannot decide.

    Example:
        ```yaml
        type: reference_judge
        model: openai/Qwen/Qwen2.5-7B-Instruct
        api_base: http://127.0.0.1:8000/v1
        score_from: logprobs
        max_tokens: 256
        ```

    Scores:
        ```yaml
        needs: [judge]
        rollouts:
          - prompt: What is the boiling point of water at sea level, in Fahrenheit?
            completion: It boils at 212 degrees Fahrenheit.
            reference: 212 F
            judge:
              tokens:
                - {text: '{"equivalent":'}
                - {text: ' true', top: {' true': 0.9, ' false': 0.1}}
                - {text: ', "reasoning": "the same temperature"}'}
            value: 0.9
          - prompt: What is the boiling point of water at sea level, in Fahrenheit?
            completion: It boils at 100 degrees.
            reference: 212 F
            judge:
              tokens:
                - {text: '{"equivalent":'}
                - {text: ' false', top: {' false': 0.75, ' true': 0.25}}
                - {text: ', "reasoning": "100 is Celsius"}'}
            value: 0.25
        ```
    """

    name: str = "reference_judge"

    def needs(self) -> frozenset[Need]:
        """The reference answer."""
        return frozenset({"reference"})

    def _prepare(self, rollout: Rollout) -> list[dict[str, Any]]:
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
        return judge_messages(task, material, shape)

    async def _judge(self, client: JudgeClient, prepared: list[dict[str, Any]]) -> Score:
        verdicts = await self._ask(client, prepared, _EquivalenceVerdict, "reference:1")
        raw = [bool(v.value.equivalent) for v in verdicts]
        values, read = self._values(verdicts, _EQUIVALENT, [float(r) for r in raw], BOOLEAN)
        note = self._note(verdicts, [] if read else ["equivalent"])
        return judged_score(self._combine(values, raw), {}, verdicts, note)
