"""`group_rank`: a judge scores all the attempts at one prompt against each other (RULER-style).

One call per order ranks a whole GRPO group from 0 to 1 under a rubric. To make that cheap
and fair:

- the attempts' common prefix is stripped (the judge compares what differs);
- identical attempts are judged once and share a score; a group of identical attempts costs no
  call at all (its scores are equal whatever the judge says);
- the attempts are shown in several orders and the scores averaged, so a judge that favours a
  slot gives it no edge (``orders: all`` puts every attempt in every slot once);
- a reply with the wrong number of scores fails validation, gets one repair attempt, and then
  the whole group is a Failure;
- a group larger than `max_group` is split into chunks that share an anchor attempt, and each
  chunk's scores are shifted so the anchor scores the same in all of them.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from referee.judges.options import JudgeOptions
from referee.judges.prompts import as_text, judge_messages, response_text
from referee.judges.rubric import Rubric, load_rubric
from referee.registry import register
from referee.reward import GroupRewardBase, RewardResult
from referee.rollout import Rollout
from referee.scores import Score

__all__ = ["GroupRank"]


def _strip_common_prefix(texts: list[str]) -> list[str]:
    """The texts without the prefix they all share (cut at a line start, so words stay whole)."""
    if len(texts) < 2:
        return texts
    # The common prefix of all is that of the lexicographically smallest and largest.
    low, high = min(texts), max(texts)
    size = 0
    while size < len(low) and low[size] == high[size]:
        size += 1
    cut = low.rfind("\n", 0, size) + 1
    return [t[cut:] for t in texts]


class _Ranking(BaseModel):
    scores: list[float]
    reasoning: str = ""


def _scores_model(count: int) -> type[_Ranking]:
    """The verdict for `count` attempts: exactly `count` scores (a wrong count is invalid, so
    it takes the repair path)."""
    scores = (list[float], Field(min_length=count, max_length=count))
    return create_model(f"Ranking{count}", __base__=_Ranking, scores=scores)


@register("group_rank")
@dataclass(kw_only=True)
class GroupRank(JudgeOptions, GroupRewardBase):
    """A judge scores the attempts of a group from 0 to 1 relative to each other.

    A group reward (RULER-style): the rollouts that share a ``group`` (the attempts at one prompt, a
    GRPO group) are shown to the judge together, with the prompt, under a rubric, and each gets a
    score in [0, 1] relative to the others, whatever order they arrive in (the judge sees them in an
    order of their own, by a hash of each). The attempts' common prefix is stripped; identical
    attempts are judged once and share a score, and a group of identical attempts costs no call
    (each scores 0.5). Each order's scores are clipped to [0, 1] and averaged over the orders, so a
    judge that favours a slot gives it no edge. A group larger than `max_group` is split into chunks
    that share an anchor attempt, each chunk's scores shifted so that the anchor scores the same in
    all.

    A reply with the wrong number of scores gets one repair call, and then the whole group is
    ``Failure("judge")``, as is a call that fails after the client's retries.

    Attributes:
        rubric: The rubric the attempts are compared under (a shipped name, ``referee rubrics
            list``, or a rubric file); its description and criteria are shown to the judge.
        orders: How many orders each group is shown in, one call each (cyclic rotations
            spread evenly, so each attempt visits different slots); ``all``: every rotation,
            each attempt in every slot once.
        max_group: The most attempts in one call; larger groups are split with an anchor.
        concurrency: Groups ranked at once (the client's ``max_in_flight`` caps the calls).

    Example:
        ```yaml
        type: group_rank
        rubric: helpfulness
        model: openai/Qwen/Qwen2.5-7B-Instruct
        api_base: http://127.0.0.1:8000/v1
        orders: 3
        max_group: 8
        ```

    Scores:
        ```yaml
        needs: [judge]
        judge:
          # One call per order (three rotations); each reply scores the attempts in the order shown.
          - shown: [Restart the router, Ask your provider, Buy a new laptop]
            reply: '{"scores": [1.0, 0.6, 0.0], "reasoning": "the first is the usual fix"}'
          - shown: [Ask your provider, Buy a new laptop, Restart the router]
            reply: '{"scores": [0.5, 0.0, 0.9], "reasoning": "restarting comes first"}'
          - shown: [Buy a new laptop, Restart the router, Ask your provider]
            reply: '{"scores": [0.1, 0.8, 0.7], "reasoning": "a laptop will not help"}'
        rollouts:
          - prompt: My Wi-Fi keeps dropping every few minutes. What should I do?
            completion: Restart the router, then move it away from the microwave.
            group: wifi
            value: 0.9
          - prompt: My Wi-Fi keeps dropping every few minutes. What should I do?
            completion: Ask your provider whether there is an outage in your area.
            group: wifi
            value: 0.6
          - prompt: My Wi-Fi keeps dropping every few minutes. What should I do?
            completion: Buy a new laptop.
            group: wifi
            value: 0.03333333333333333
        ```
    """

    rubric: str = "helpfulness"
    orders: int | Literal["all"] = 2
    max_group: int = 8
    name: str = "group_rank"
    _rubric: Rubric = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.orders, int) and self.orders < 1:
            raise ValueError(f"orders must be at least 1 (or 'all'), got {self.orders}")
        if self.max_group < 2:
            raise ValueError(f"max_group must be at least 2, got {self.max_group}")
        self._rubric = load_rubric(self.rubric)
        super().__post_init__()

    def _permutations(self, count: int) -> list[list[int]]:
        """Cyclic rotations, spread evenly: every attempt visits different slots."""
        k = count if self.orders == "all" else min(int(self.orders), count)
        return [[(i + (r * count) // k) % count for i in range(count)] for r in range(k)]

    def _messages(self, prompt: str, attempts: list[str]) -> list[dict[str, Any]]:
        rubric = self._rubric
        task = "\n".join([
            f"Score each ATTEMPT from 0 to 1 relative to the others, under the rubric "
            f"{rubric.name} (v{rubric.version}): {rubric.description}",
            *(f"- {c.id}: {c.description}" for c in rubric.criteria),
            f"Give exactly {len(attempts)} scores, one per attempt, in the order shown; "
            "the best attempt should get a score near 1, the worst near 0.",
        ])  # fmt: skip
        material = [("PROMPT", prompt)] + [
            (f"ATTEMPT {i + 1}", text) for i, text in enumerate(attempts)
        ]
        shape = (
            '{"scores": [<a number from 0 to 1 for each attempt, in order>], '
            '"reasoning": "<short>"}'
        )
        return judge_messages(task, material, shape)

    async def _rank(self, prompt: str, attempts: list[str]) -> tuple[list[float], float, int]:
        """Scores of `attempts` averaged over the orders, the cost, and the tokens."""
        schema = _scores_model(len(attempts))
        perms = self._permutations(len(attempts))
        verdicts = await asyncio.gather(*(
            self.client.judge(
                self._messages(prompt, [attempts[i] for i in perm]), schema,
                version=f"rank:{self._rubric.name}@{self._rubric.version}",
            )
            for perm in perms
        ))  # fmt: skip
        totals = [0.0] * len(attempts)
        for perm, verdict in zip(perms, verdicts, strict=True):
            scores = verdict.value.scores
            for slot, attempt in enumerate(perm):
                totals[attempt] += min(1.0, max(0.0, float(scores[slot])))
        tokens = sum(v.prompt_tokens + v.completion_tokens for v in verdicts)
        return [t / len(perms) for t in totals], sum(v.cost for v in verdicts), tokens

    async def evaluate_group(self, rollouts: Sequence[Rollout]) -> Sequence[RewardResult]:
        texts = _strip_common_prefix([response_text(r) for r in rollouts])
        # The judge is shown the distinct attempts in an order of their own (by a hash of
        # each): a trainer's arrival order (verl's workers, NeMo Gym's requests) changes
        # nothing, and the same group always costs the same calls.
        unique = sorted(set(texts), key=lambda t: hashlib.sha256(t.encode()).digest())
        if len(unique) == 1:
            return [Score(value=0.5, reason="all attempts identical: no call")] * len(rollouts)
        prompt = as_text(rollouts[0].prompt_text)
        anchor, rest = unique[0], unique[1:]
        size = self.max_group - 1  # each chunk: the anchor and up to max_group - 1 others
        chunks = [rest[i : i + size] for i in range(0, len(rest), size)]
        results = await asyncio.gather(*(self._rank(prompt, [anchor, *c]) for c in chunks))
        base = results[0][0][0]  # the anchor's score in the first chunk
        by_text = {anchor: base}
        cost, tokens = 0.0, 0
        for chunk, (scores, spent, used) in zip(chunks, results, strict=True):
            shift = base - scores[0]  # align chunks on the anchor
            for text, s in zip(chunk, scores[1:], strict=True):
                by_text[text] = min(1.0, max(0.0, s + shift))
            cost += spent
            tokens += used
        share = cost / len(rollouts)
        return [
            Score(
                value=by_text[t],
                reason=f"ranked among {len(unique)} distinct attempts",
                cost=share,
                tokens=tokens // len(rollouts),
            )
            for t in texts
        ]
