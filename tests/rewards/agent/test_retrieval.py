from __future__ import annotations

import json
import math
import threading

import pytest

import referee
from referee import Rollout


def search_agent(results: list[object], answer: str, reference: object) -> Rollout:
    turns: list[dict[str, object]] = []
    for i, result in enumerate(results):
        function = {"name": "search", "arguments": json.dumps({"q": f"q{i}"})}
        call = {"id": str(i), "type": "function", "function": function}
        turns.append({"role": "assistant", "content": "", "tool_calls": [call]})
        content = result if isinstance(result, str) else json.dumps(result)
        turns.append({"role": "tool", "tool_call_id": str(i), "content": content})
    turns.append({"role": "assistant", "content": answer})
    return Rollout(prompt="who?", completion=turns, reference=reference)  # type: ignore[arg-type]


def test_recall_precision_ndcg_and_citations_by_id() -> None:
    rollout = search_agent(
        [[{"id": "d1", "text": "a"}, {"id": "d9", "text": "b"}], {"results": [{"doc_id": "d2"}]}],
        "It is X [d1] [d2] [d7].",
        ["d1", "d2", "d3"],
    )
    [s] = referee.score(referee.load({"type": "retrieval", "metric": "ndcg"}), [rollout])
    c = s.components
    assert c["recall"] == pytest.approx(2 / 3) and c["precision"] == pytest.approx(2 / 3)
    dcg = 1 + 1 / math.log2(4)  # d1 at rank 1, d2 at rank 3
    idcg = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert s.value == pytest.approx(dcg / idcg)
    assert c["cites"] == pytest.approx(2 / 3)  # [d7] was never retrieved


def test_passages_given_as_text_match_inside_results() -> None:
    gold = "The Eiffel Tower was completed in 1889 for the World's Fair."
    rollout = search_agent(
        ["Some noise.", "...history: the eiffel tower was completed in 1889 for the world's "
         "fair. It is..."],
        "1889",
        {"passages": [gold, "The tower is 330 metres tall and made of wrought iron."]},
    )  # fmt: skip
    [s] = referee.score(referee.load({"type": "retrieval"}), [rollout])
    assert s.value == pytest.approx(0.5) and s.components["precision"] == pytest.approx(0.5)
    assert s.components["cites"] is None


def test_graded_relevance_and_only_named_tools() -> None:
    rollout = search_agent([[{"id": "b"}, {"id": "a"}]], "done", {"relevance": {"a": 2, "b": 1}})
    [s] = referee.score(referee.load({"type": "retrieval", "metric": "ndcg"}), [rollout])
    assert 0 < s.value < 1  # type: ignore[operator]  # the better document came second
    [s] = referee.score(referee.load({"type": "retrieval", "tools": ["browse"]}), [rollout])
    assert s.value == 0.0  # search results are not retrievals of "browse"


def test_a_reference_of_the_wrong_shape_is_not_applicable() -> None:
    [s] = referee.score(referee.load({"type": "retrieval"}), [search_agent([], "x", 42)])
    assert s.failure is not None and s.failure.type == "not_applicable"


def test_a_citation_pattern_runs_on_the_final_answer_in_linear_time() -> None:
    """The citation regex reads the policy's text: it runs on RE2 like every spec pattern (it
    ran on `re`, where this answer backtracks for 2**40 steps and holds the core)."""
    reward = referee.load({"type": "retrieval", "metric": "cites", "citation": r"\[((?:d|d)+)\]"})
    hostile = search_agent([[{"id": "dd", "text": "a"}]], "[" + "d" * 40 + "!", ["dd"])
    done: list[object] = []
    worker = threading.Thread(
        target=lambda: done.extend(referee.score(reward, [hostile])), daemon=True
    )
    worker.start()
    worker.join(timeout=60)  # not a speed bar: on `re` it would not end this century
    assert done, "the citation pattern backtracked on the final answer"
    [s] = done
    assert s.failure is not None and s.failure.type == "not_applicable"  # it cites nothing
    [ok] = referee.score(reward, [search_agent([[{"id": "dd", "text": "a"}]], "[dd]", ["dd"])])
    assert ok.value == 1.0
