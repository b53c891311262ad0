"""`checklist_judge`: a model answers yes or no for each item of a checklist."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from referee.errors import NotApplicable
from referee.judges.client import JudgeClient, JudgeError
from referee.judges.logprobs import BOOLEAN, pointer
from referee.judges.prompts import as_text, judge_messages, response_text
from referee.registry import register
from referee.reward import Need
from referee.rewards.judged._base import JudgeReward, judged_score
from referee.rollout import Rollout
from referee.scores import Score

__all__ = ["ChecklistJudge"]


class _ChecklistVerdict(BaseModel):
    items: list[bool]
    reasoning: str = ""


@register("checklist_judge")
@dataclass(kw_only=True)
class ChecklistJudge(JudgeReward):
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
        return judged_score(value / total, components, verdicts, self._note(verdicts, sampled))
