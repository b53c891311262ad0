"""`retrieval`: what a search agent retrieved, against the passages that answer the question.

Retrieved documents come from the trajectory's tool results (of the tools named in `tools`,
or all): a JSON list of documents (or ``{"results": [...]}``) with an ``id`` (``doc_id``,
``docid``), else with ``text``/``content``; plain text results are taken whole. A relevant
passage counts as retrieved when its id is among the retrieved ids, or, for passages given as
text, when its text appears in a retrieved document (case and spacing ignored).

The reference: a list of relevant ids or passage texts, or ``{"ids": [...]}`` /
``{"passages": [...]}``, or ``{"relevance": {id: grade}}`` for graded nDCG.

Components: ``recall``, ``precision``, ``ndcg`` (over the retrieved order, at `k`), and
``cites`` (the share of the final answer's citations, ``[id]`` by default, that point to a
document it retrieved; absent when it cites nothing). The value is the component named by
`metric`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from referee.errors import NotApplicable
from referee.registry import register
from referee.reward import CheckReward, Need
from referee.rewards._common import normalize_text
from referee.rollout import Rollout
from referee.scores import Score
from referee.trajectory import trajectory
from referee.verifiers.patterns import compile_pattern
from referee.workers import RunIn

__all__ = ["Retrieval"]

_ID_KEYS = ("id", "doc_id", "docid", "document_id")
_TEXT_KEYS = ("text", "content", "passage", "snippet", "body")


@dataclass(frozen=True, slots=True)
class _Doc:
    id: str | None
    text: str


def _docs_of(result: str) -> list[_Doc]:
    try:
        value = json.loads(result)
    except ValueError:
        return [_Doc(None, result)]
    if isinstance(value, Mapping):
        value = value.get("results", value.get("documents", [value]))
    if not isinstance(value, list):
        return [_Doc(None, result)]
    docs = []
    for item in value:
        if isinstance(item, Mapping):
            doc_id = next((str(item[k]) for k in _ID_KEYS if item.get(k) is not None), None)
            text = next((str(item[k]) for k in _TEXT_KEYS if isinstance(item.get(k), str)), "")
            docs.append(_Doc(doc_id, text))
        else:
            docs.append(_Doc(None, str(item)))
    return docs


def _relevance(reference: Any) -> tuple[dict[str, float], bool]:
    """Relevant items with their grades, and whether they are ids (else passage texts)."""
    if isinstance(reference, Mapping):
        if isinstance(reference.get("relevance"), Mapping):
            return {str(k): float(v) for k, v in reference["relevance"].items()}, True
        if isinstance(reference.get("ids"), list):
            return {str(i): 1.0 for i in reference["ids"]}, True
        if isinstance(reference.get("passages"), list):
            return {str(p): 1.0 for p in reference["passages"]}, False
    if isinstance(reference, list) and reference:
        texts = all(isinstance(r, str) and len(r.split()) > 3 for r in reference)
        return {str(r): 1.0 for r in reference}, not texts
    raise NotApplicable(
        "retrieval needs the relevant passages: a list of ids or texts, or {ids: [...]}, "
        "{passages: [...]} or {relevance: {id: grade}}"
    )


@register("retrieval")
@dataclass(kw_only=True)
class Retrieval(CheckReward):
    """Scores what a search agent retrieved against the passages that answer the question.

    Retrieved documents come from the trajectory's tool results (of the tools named in
    `tools`, or all): a JSON list of documents (or ``{"results": [...]}``) with an ``id``
    (``doc_id``, ``docid``), else with ``text``/``content``; plain text results are taken
    whole. A relevant passage counts as retrieved when its id is among the retrieved ids,
    or, for passages given as text, when its text appears in a retrieved document (case and
    spacing ignored).

    The reference is a list of relevant ids or passage texts, or ``{"ids": [...]}`` /
    ``{"passages": [...]}``, or ``{"relevance": {id: grade}}`` for graded nDCG; a rollout
    without one is ``not_applicable``. The components are ``recall``, ``precision``, ``f1``,
    ``ndcg`` (over the retrieved order, at `k`) and ``cites`` (the share of the final
    answer's citations that point to a document it retrieved; absent when it cites
    nothing), each in [0, 1]; the value is the one `metric` names. With ``metric: cites``, a
    final answer that cites nothing is ``not_applicable``.

    Attributes:
        tools: Names of the tools whose results are retrievals (default: every tool).
        metric: Which component is the value: ``recall``, ``precision``, ``f1``, ``ndcg`` or
            ``cites``.
        k: nDCG's cutoff (default: every retrieved document).
        citation: A regex whose first group is a cited id in the final answer (default:
            ``[id]``).

    Example:
        ```yaml
        type: retrieval
        tools: [search, open_page]
        metric: ndcg
        k: 10
        ```

    Scores:
        ```yaml
        - prompt: When was the Eiffel Tower completed?
          completion:
            - role: assistant
              content: ""
              tool_calls: [{id: c1, name: search, arguments: '{"query": "Eiffel Tower completed"}'}]
            - role: tool
              tool_call_id: c1
              content: '[{"id": "d1", "text": "Done in 1889."}, {"id": "d7", "text": "Metro."}]'
            - role: assistant
              content: ""
              tool_calls: [{id: c2, name: open_page, arguments: '{"id": "d3"}'}]
            - {role: tool, tool_call_id: c2, content: '[{"id": "d3", "text": "For the fair."}]'}
            - {role: assistant, content: "It was completed in 1889 [d1] [d3]."}
          reference: {relevance: {d1: 2, d3: 1}}
          value: 0.9639404333166532
        - prompt: When was the Eiffel Tower completed?
          completion:
            - role: assistant
              content: ""
              tool_calls: [{id: c1, name: search, arguments: '{"query": "Paris landmarks"}'}]
            - role: tool
              tool_call_id: c1
              content: '[{"id": "d7", "text": "Paris metro."}, {"id": "d8", "text": "The Louvre."}]'
            - {role: assistant, content: "I believe it was 1901 [d8]."}
          reference: {relevance: {d1: 2, d3: 1}}
          value: 0.0
        ```
    """

    default_run_in: ClassVar[RunIn] = "inline"  # its cost is bounded

    tools: list[str] | None = None
    metric: Literal["recall", "precision", "ndcg", "f1", "cites"] = "recall"
    k: int | None = None
    citation: str = r"\[([^\[\]]+)\]"
    name: str = "retrieval"

    def needs(self) -> frozenset[Need]:
        """The relevant documents, and the completion as chat messages (calls, results)."""
        return frozenset({"reference", "messages"})

    def __post_init__(self) -> None:
        # Run on the policy's final answer: RE2 where it can, else under a timeout.
        self._citation = compile_pattern(self.citation)

    def check(self, rollout: Rollout) -> Score:
        relevant, by_id = _relevance(rollout.reference)
        traj = trajectory(rollout)
        docs: list[_Doc] = []
        for call in traj.calls:
            if call.result is not None and (self.tools is None or call.name in self.tools):
                docs.extend(_docs_of(call.result))
        # Which relevant item (if any) each retrieved document is, in retrieved order.
        hits: list[str | None] = []
        if by_id:
            hits = [d.id if d.id in relevant else None for d in docs]
        else:
            wanted = {p: normalize_text(p) for p in relevant}
            for d in docs:
                text = normalize_text(d.text)
                hits.append(next((p for p, w in wanted.items() if w and w in text), None))
        found = {h for h in hits if h is not None}
        recall = len(found) / len(relevant)
        precision = (sum(h is not None for h in hits) / len(hits)) if hits else 0.0
        f1 = 2 * recall * precision / (recall + precision) if recall + precision else 0.0
        cutoff = hits[: self.k] if self.k else hits
        seen: set[str] = set()
        dcg = 0.0
        for rank, h in enumerate(cutoff):
            if h is not None and h not in seen:
                seen.add(h)
                dcg += (2 ** relevant[h] - 1) / math.log2(rank + 2)
        ideal = sorted(relevant.values(), reverse=True)[: len(cutoff) or len(relevant)]
        idcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
        ndcg = dcg / idcg if idcg else 0.0
        components: dict[str, float | None] = {
            "recall": recall, "precision": precision, "ndcg": ndcg, "f1": f1,
        }  # fmt: skip
        cited = self._citation.findall(traj.final_answer)
        retrieved_ids = {d.id for d in docs if d.id is not None}
        components["cites"] = (
            sum(c.strip() in retrieved_ids for c in cited) / len(cited) if cited else None
        )
        value = components[self.metric]
        if value is None:
            return Score.failed("not_applicable", "the final answer cites nothing", self.name)
        return Score(
            value=value,
            components=components,
            reason=f"retrieved {len(found)} of {len(relevant)} relevant in {len(docs)} documents",
        )
