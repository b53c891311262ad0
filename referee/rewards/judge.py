"""Judge rewards: a model grades one completion (`rubric_judge`, `checklist_judge`,
`reference_judge`, `pairwise_judge`).

Each holds a `JudgeClient` (``client``; `referee.judges.options`) and shows the judge its
material fenced off from the instructions (`referee.judges.prompts`), so text injected into a
completion cannot move the score.

With ``score_from: logprobs``, a scale or pass/fail value is the expected score over the
judge's top candidate tokens at that value (`referee.judges.logprobs`), from the same single
call. Where the server gives no logprobs, or a value's candidates cannot be read (a scale
value written as several tokens), that value is the sampled one, and the Score's reason says
which.

Given ``models: [...]`` instead of ``model``, each is a panel (`referee.judges.panel`): every
member computes the reward's value on its own (its ``samples`` aggregated first), at once, and
the panel votes (``vote``, ``quorum``); each member's value and cost are components.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from referee.errors import NotApplicable
from referee.judges.client import JudgeClient, JudgeError, Verdict
from referee.judges.logprobs import BOOLEAN, expected, pointer, scale
from referee.judges.options import PanelOptions
from referee.judges.panel import decide, poll
from referee.judges.prompts import (
    RUBRIC_SHAPE,
    as_text,
    fence_for,
    judge_messages,
    response_text,
    rubric_task,
    verdict_model,
)
from referee.judges.rubric import Criterion, Rubric, load_rubric
from referee.registry import register
from referee.reward import AsyncReward, Need
from referee.rewards._common import clip_text
from referee.rollout import Rollout
from referee.scores import Score

__all__ = [
    "ChecklistJudge",
    "PairwiseJudge",
    "ReferenceJudge",
    "RubricJudge",
    "fence_for",
    "verdict_model",
]

ScoreFrom = Literal["sample", "logprobs"]
"""Where a scale or pass/fail value comes from: the token the judge wrote (``sample``), or the
expected score over its top candidate tokens there (``logprobs``)."""


@dataclass(kw_only=True)
class _JudgeReward(PanelOptions, AsyncReward):
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


@register("rubric_judge")
@dataclass(kw_only=True)
class RubricJudge(_JudgeReward):
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
        return _score(total, components, verdicts, self._note(verdicts, sampled))


class _ChecklistVerdict(BaseModel):
    items: list[bool]
    reasoning: str = ""


@register("checklist_judge")
@dataclass(kw_only=True)
class ChecklistJudge(_JudgeReward):
    """A judge answers yes or no for each checklist item; the value is the weighted share of yeses.

    The judge sees the prompt and the response, and answers every item in order; each answer
    (1.0 yes, 0.0 no) is a component, ``item1``, ``item2``, ..., and the value is their
    weighted mean, in [0, 1]. With ``score_from: logprobs`` an item is the probability of
    ``true``. A rollout with no checklist (no `items`, no ``reference.checklist``) or with a
    malformed item is ``not_applicable``; a reply with the wrong number of answers, or a call
    that fails after the client's retries, is ``Failure("judge")``.

    Attributes:
        items: The checklist for every rollout: item texts, or ``{text, weight}`` mappings
            (weight 1 when omitted). When omitted, each rollout's ``reference.checklist``, in
            the same shape (per-prompt checklists).

    Example:
        ```yaml
        type: checklist_judge
        model: openai/Qwen/Qwen2.5-7B-Instruct
        api_base: http://127.0.0.1:8000/v1
        items:
          - The reply answers the question that was asked.
          - {text: Every figure it quotes has its unit., weight: 2}
          - It says when it is unsure instead of guessing.
        ```

    Scores:
        ```yaml
        needs: [judge]
        rollouts:
          - prompt: How far is the Moon, and how long does its light take to reach us?
            completion: About 384,400 km; its light takes roughly 1.3 seconds to reach Earth.
            judge: '{"items": [true, true, true], "reasoning": "Answers both, with units."}'
            value: 1.0
          - prompt: How far is the Moon, and how long does its light take to reach us?
            completion: It is about 384,400 away, and its light takes exactly 1 second.
            judge: '{"items": [true, false, false], "reasoning": "No unit; overconfident."}'
            value: 0.25
        ```
    """

    items: list[str | dict[str, Any]] | None = None
    name: str = "checklist_judge"

    def needs(self) -> frozenset[Need]:
        """The checklist, from the reference unless `items` is given."""
        return frozenset() if self.items is not None else frozenset({"reference"})

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

    def _prepare(self, rollout: Rollout) -> tuple[list[tuple[str, float]], list[dict[str, Any]]]:
        checklist = self._checklist(rollout)
        task = "Checklist (answer each in order, true if the RESPONSE satisfies it):\n" + "\n".join(
            f"{i + 1}. {text}" for i, (text, _) in enumerate(checklist)
        )
        material = [
            ("PROMPT", as_text(rollout.prompt_text)),
            ("RESPONSE", response_text(rollout)),
        ]
        shape = '{"items": [<true|false for each item, in order>], "reasoning": "<short>"}'
        return checklist, judge_messages(task, material, shape)

    async def _judge(
        self,
        client: JudgeClient,
        prepared: tuple[list[tuple[str, float]], list[dict[str, Any]]],
    ) -> Score:
        checklist, messages = prepared
        verdicts = await self._ask(
            client, messages, _ChecklistVerdict, f"checklist:{len(checklist)}"
        )
        for v in verdicts:
            if len(v.value.items) != len(checklist):
                raise JudgeError(
                    f"the judge answered {len(v.value.items)} items of {len(checklist)}"
                )
        components: dict[str, float | None] = {}
        sampled: list[str] = []
        for i in range(len(checklist)):
            raw = [bool(v.value.items[i]) for v in verdicts]
            plain = [float(r) for r in raw]
            values, read = self._values(verdicts, pointer("items", i), plain, BOOLEAN)
            if not read:
                sampled.append(f"item{i + 1}")
            components[f"item{i + 1}"] = self._combine(values, raw)
        total = sum(w for _, w in checklist)
        value = sum(w * (components[f"item{i + 1}"] or 0.0) for i, (_, w) in enumerate(checklist))
        return _score(value / total, components, verdicts, self._note(verdicts, sampled))


class _EquivalenceVerdict(BaseModel):
    equivalent: bool
    reasoning: str = ""


_EQUIVALENT = pointer("equivalent")


@register("reference_judge")
@dataclass(kw_only=True)
class ReferenceJudge(_JudgeReward):
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
        return _score(self._combine(values, raw), {}, verdicts, note)


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
class PairwiseJudge(_JudgeReward):
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


def _literals(criterion: Criterion) -> dict[str, float] | None:
    """A criterion's literals and their scores: true/false, or every integer of a scale (None
    for a scale too wide to list, whose values are then the sampled ones)."""
    if criterion.scale is None:
        return dict(BOOLEAN)
    if criterion.scale.max - criterion.scale.min > 100:
        return None
    return scale(criterion.scale.min, criterion.scale.max)


def _score(
    value: float,
    components: dict[str, float | None],
    verdicts: list[Any],
    note: str | None = None,
) -> Score:
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
