"""What the pointwise judge rewards share (`JudgeReward`: the client, samples and their
aggregation, where values come from), and the Score a judged value makes (`judged_score`)."""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from referee.errors import NotApplicable
from referee.judges.client import JudgeClient, Verdict
from referee.judges.logprobs import expected
from referee.judges.options import PanelOptions
from referee.judges.panel import decide, poll
from referee.judges.prompts import as_text
from referee.reward import AsyncReward
from referee.rewards._common import clip_text
from referee.rollout import Rollout
from referee.scores import Score

__all__ = ["JudgeReward", "ScoreFrom", "judged_score"]

ScoreFrom = Literal["sample", "logprobs"]
"""Where a scale or pass/fail value comes from: the token the judge wrote (``sample``), or the
expected score over its top candidate tokens there (``logprobs``)."""


@dataclass(kw_only=True)
class JudgeReward(PanelOptions, AsyncReward):
    """What the pointwise judge rewards share: the client, samples and their aggregation,
    and where values come from.

    Attributes:
        samples: Ask the judge this many times per rollout, with seeds seed, seed + 1, ...
            (from the client's `seed`, else 0: distinct calls, each cached on its own; give a
            `temperature` above 0, or the samples agree), and aggregate each value over them.
        aggregate: How the samples make one value: ``mean``, or ``majority`` (the most common
            answer; a tie takes the lower value). ``majority`` needs ``score_from: sample``.
        score_from: ``sample``: each value is the one the judge wrote. ``logprobs``: the
            expected score over the judge's top candidate tokens where it wrote that value,
            from the same call (G-Eval style; a finer, lower-variance signal; for a yes/no
            value, the probability of ``true``). Where the server gives no logprobs, or a
            value's candidates cannot be read (a scale value written as several tokens), that
            value is the sampled one, and the Score's reason says so.
        top_logprobs: Candidates per token asked for with ``score_from: logprobs`` (OpenAI
            allows up to 20; vLLM up to its ``--max-logprobs``).
    """

    samples: int = 1
    aggregate: Literal["mean", "majority"] = "mean"
    score_from: ScoreFrom = "sample"
    top_logprobs: int = 20

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise ValueError(f"samples must be at least 1, got {self.samples}")
        if self.top_logprobs < 1:
            raise ValueError(f"top_logprobs must be at least 1, got {self.top_logprobs}")
        if self.score_from == "logprobs" and self.aggregate == "majority":
            raise ValueError(
                "aggregate: majority counts sampled answers, and score_from: logprobs gives "
                "expected values: use aggregate: mean with it"
            )
        if self.models is not None and self.vote == "majority" and self.score_from == "logprobs":
            raise ValueError(
                "vote: majority counts equal values, and score_from: logprobs gives expected "
                "values: use vote: mean or vote: median with it"
            )
        super().__post_init__()

    @abstractmethod
    def _prepare(self, rollout: Rollout) -> Any:
        """What the judge (every member of a panel) is shown for `rollout`, built once."""

    @abstractmethod
    async def _judge(self, client: JudgeClient, prepared: Any) -> Score:
        """One judge's Score for what `_prepare` made: the reward's value with that judge."""

    async def evaluate(self, rollout: Rollout) -> Score:
        prepared = self._prepare(rollout)
        if self._members is None:
            return await self._judge(self.client, prepared)
        ballots = await poll(self._members, lambda client: self._judge(client, prepared))
        return decide(ballots, self.vote, self.quorum or 1, self.name)

    async def _ask(
        self,
        client: JudgeClient,
        messages: list[dict[str, Any]],
        schema: type[BaseModel],
        version: str,
    ) -> list[Any]:
        """`samples` verdicts, with seeds seed, seed + 1, ... (distinct cache keys)."""
        top = self.top_logprobs if self.score_from == "logprobs" else None
        if self.samples == 1:
            return [await client.judge(messages, schema, version=version, top_logprobs=top)]
        base = client.seed or 0
        return list(await asyncio.gather(*(
            client.judge(messages, schema, version=version, seed=base + i, top_logprobs=top)
            for i in range(self.samples)
        )))  # fmt: skip

    def _values(
        self,
        verdicts: list[Verdict[Any]],
        path: str,
        plain: list[float],
        literals: Mapping[str, float] | None,
    ) -> tuple[list[float], bool]:
        """The value at `path` of each verdict: with ``score_from: logprobs``, the expected
        score over its candidates (`literals`: literal text -> score) where they can be read,
        else `plain` (the sampled values); and whether all came from logprobs."""
        if self.score_from != "logprobs":
            return plain, True
        if literals is None:
            return plain, False
        found = [expected((v.candidates or {}).get(path), literals) for v in verdicts]
        return [p if f is None else f for p, f in zip(plain, found, strict=True)], None not in found

    def _note(self, verdicts: list[Verdict[Any]], sampled: list[str]) -> str | None:
        """What the reason says of values that are sampled where logprobs were asked for."""
        if self.score_from != "logprobs":
            return None
        if all(v.candidates is None for v in verdicts):
            return "sampled values: no usable logprobs from the judge"
        if sampled:
            return f"sampled values for {', '.join(sampled)}: their logprobs could not be read"
        return None

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


def judged_score(
    value: float,
    components: dict[str, float | None],
    verdicts: list[Any],
    note: str | None = None,
) -> Score:
    """The Score of a judged `value`: the first verdict's reasoning (clipped) as its reason,
    with `note` beside it, and the cost, latency and tokens of all the `verdicts`."""
    reasoning = str(getattr(verdicts[0].value, "reasoning", "") or "")
    if len(verdicts) > 1:
        reasoning = f"{len(verdicts)} samples; first: {reasoning}"
    reason = clip_text(reasoning, 300) if reasoning else "judged"
    return Score(
        value=value,
        components=components,
        reason=f"{reason} [{note}]" if note else reason,
        cost=sum(v.cost for v in verdicts),
        latency=max(v.latency for v in verdicts),
        tokens=sum(v.prompt_tokens + v.completion_tokens for v in verdicts),
    )
