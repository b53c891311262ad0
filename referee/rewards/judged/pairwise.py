"""`pairwise_judge`: a model compares the response with the reference answer, in both orders;
the pairwise question `pairwise_tournament` asks too."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from referee.judges.client import JudgeClient, JudgeError
from referee.judges.prompts import as_text, judge_messages, response_text
from referee.registry import register
from referee.reward import Need
from referee.rewards.judged._base import JudgeReward
from referee.rollout import Rollout
from referee.scores import Score

__all__ = ["PAIR_VERSION", "PairwiseJudge", "pair_messages"]


class _PairVerdict(BaseModel):
    better: Literal["A", "B", "tie"]
    reasoning: str = ""


PAIR_VERSION = "pairwise:1"
"""The cache version of a pairwise question (`pairwise_judge`'s and `pairwise_tournament`'s)."""


def pair_messages(criterion: str, question: str, a: str, b: str) -> list[dict[str, Any]]:
    """The judge's messages comparing answers `a` and `b` to `question` under `criterion`, each
    fenced off as data; the reply is ``{"better": "A" | "B" | "tie", "reasoning": ...}``."""
    material = [("QUESTION", question), ("ANSWER A", a), ("ANSWER B", b)]
    return judge_messages(criterion, material, _PAIR_SHAPE)


_PAIR_SHAPE = '{"better": "A" | "B" | "tie", "reasoning": "<short>"}'


@register("pairwise_judge")
@dataclass(kw_only=True)
class PairwiseJudge(JudgeReward):
    """A judge compares the response with the reference answer, in both orders.

    Each order gives the response 1 (better), 0.5 (tie) or 0 (worse); a judge that prefers
    one slot gives it no edge, since the response sits in both. When the two orders disagree
    the result is a tie (``disagreement: tie``) or a Failure (``fail``).

    The reference answer is ``rollout.reference`` as text (a rollout without one is
    ``not_applicable``); the value is 1.0, 0.5 or 0.0, and the components
    ``response_first`` and ``reference_first`` hold each order's verdict. A call that fails
    after the client's retries, or two orders that disagree with ``disagreement: fail``, is
    ``Failure("judge")``.

    Attributes:
        criterion: What "better" means, for the judge: the question it is asked about the
            two answers.
        disagreement: What two orders that disagree give: ``tie`` (0.5) or ``fail`` (a
            ``judge`` Failure, no score).
        samples: Must be 1: the judge is already asked twice, once per order.
        aggregate: Unused: each order is asked once.
        score_from: Must be ``sample``: a verdict of A, B or tie is not a scale.
        top_logprobs: Unused, since `score_from` is ``sample``.

    Example:
        ```yaml
        type: pairwise_judge
        model: openai/Qwen/Qwen2.5-7B-Instruct
        api_base: http://127.0.0.1:8000/v1
        criterion: Which answer explains the fix more clearly and correctly?
        disagreement: tie
        ```

    Scores:
        ```yaml
        needs: [judge]
        judge:
          # The response is answer A in the first order and B in the second.
          - shown: [Pin the dependency to 2.3.1, Upgrade everything]
            reply: '{"better": "A", "reasoning": "names the version"}'
          - shown: [Upgrade everything, Pin the dependency to 2.3.1]
            reply: '{"better": "B", "reasoning": "names the version"}'
          - shown: [Delete the lock file, Upgrade everything]
            reply: '{"better": "B", "reasoning": "deleting the lock file breaks builds"}'
          - shown: [Upgrade everything, Delete the lock file]
            reply: '{"better": "A", "reasoning": "deleting the lock file breaks builds"}'
          - shown: [Revert the last merge, Upgrade everything]
            reply: '{"better": "A", "reasoning": "first slot"}'
          - shown: [Upgrade everything, Revert the last merge]
            reply: '{"better": "A", "reasoning": "first slot"}'
        rollouts:
          - prompt: The build broke after a minor release of a dependency. How do we fix it?
            completion: Pin the dependency to 2.3.1, the last version the build passed with.
            reference: Upgrade everything to the latest versions.
            value: 1.0
          - prompt: The build broke after a minor release of a dependency. How do we fix it?
            completion: Delete the lock file and reinstall.
            reference: Upgrade everything to the latest versions.
            value: 0.0
          - prompt: The build broke after a minor release of a dependency. How do we fix it?
            completion: Revert the last merge and see.
            reference: Upgrade everything to the latest versions.
            value: 0.5
        ```
    """

    criterion: str = (
        "Which answer responds to the question better: more correct, then more helpful?"
    )
    disagreement: Literal["tie", "fail"] = "tie"
    name: str = "pairwise_judge"

    def needs(self) -> frozenset[Need]:
        """The reference answer it is compared with."""
        return frozenset({"reference"})

    def __post_init__(self) -> None:
        if self.samples != 1:
            raise ValueError("pairwise_judge already asks twice (both orders); samples must be 1")
        if self.score_from != "sample":
            raise ValueError(
                "pairwise_judge's verdict (A, B or tie) is not a scale: score_from must be sample"
            )
        super().__post_init__()

    def _prepare(self, rollout: Rollout) -> list[list[dict[str, Any]]]:
        question = as_text(rollout.prompt_text)
        reference = self._reference(rollout, "pairwise_judge")
        response = response_text(rollout)
        orders = [(response, reference), (reference, response)]
        return [pair_messages(self.criterion, question, a, b) for a, b in orders]

    async def _judge(self, client: JudgeClient, prepared: list[list[dict[str, Any]]]) -> Score:
        verdicts = await asyncio.gather(*(
            client.judge(messages, _PairVerdict, version=PAIR_VERSION) for messages in prepared
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
