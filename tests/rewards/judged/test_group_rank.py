"""group_rank against a scripted ranking judge on 127.0.0.1, on both transports."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest

import referee
from referee.judges.testing import FakeJudgeServer, Reply
from referee.rewards.judged import group_rank
from tests.support.extras import JUDGES
from tests.support.rollouts import make
from tests.support.transports import each_transport  # noqa: F401 (autouse: both transports)

pytestmark = JUDGES


def attempts(request: dict[str, Any]) -> list[str]:
    system, user = (m["content"] for m in request["messages"][:2])
    fence = re.search(r"<<([0-9a-f]{24})>>", system).group(1)  # type: ignore[union-attr]
    return re.findall(rf"ATTEMPT \d+:\n<<{fence}>>\n(.*?)\n<</{fence}>>", user, re.DOTALL)


def fair(request: dict[str, Any]) -> Reply:
    """Scores an attempt by how many stars it has, out of 4: an absolute, order-free quality."""
    return Reply(json.dumps({"scores": [min(1.0, a.count("*") / 4) for a in attempts(request)]}))


def first_slot(request: dict[str, Any]) -> Reply:
    count = len(attempts(request))
    return Reply(json.dumps({"scores": [1.0] + [0.0] * (count - 1)}))  # loves slot one


def rank(server: FakeJudgeServer, **kw: Any) -> Any:
    spec = {"type": "group_rank", "model": "openai/gpt-4.1-mini", "api_base": server.url}
    return referee.load({**spec, "cache": False, "structured": "prompt", **kw})


def group(*texts: str, name: str = "g") -> list[referee.Rollout]:
    return [make(t, id=f"{name}{i}", group=name, prompt="Q?") for i, t in enumerate(texts)]


def test_ranks_a_group_and_shares_scores_of_identical_attempts() -> None:
    with FakeJudgeServer(fair) as server:
        scores = referee.score(rank(server, orders=2), group("**", "****", "", "**"))
        assert len(server.requests) == 2  # one call per order, for the whole group
        assert all(len(attempts(r)) == 3 for r in server.requests)  # the duplicate judged once
    assert [s.value for s in scores] == [0.5, 1.0, 0.0, 0.5]


def test_identical_attempts_cost_no_call() -> None:
    with FakeJudgeServer(fair) as server:
        scores = referee.score(rank(server), group("same", "same", "same"))
        assert server.requests == []
    assert [s.value for s in scores] == [0.5, 0.5, 0.5]


def test_a_slot_biased_judge_gives_no_edge_with_every_order() -> None:
    with FakeJudgeServer(first_slot) as server:
        scores = referee.score(rank(server, orders="all"), group("a", "b", "c", "d"))
        assert len(server.requests) == 4
    assert [s.value for s in scores] == [0.25] * 4  # each attempt held slot one exactly once


def test_wrong_score_count_fails_the_whole_group() -> None:
    with FakeJudgeServer(lambda r: Reply('{"scores": [1.0]}')) as server:
        scores = referee.score(rank(server, orders=1), group("a", "b", "c"))
        assert len(server.requests) == 2  # the call and one repair
    assert all(s.value is None and s.failure and s.failure.type == "judge" for s in scores)


def test_the_common_prefix_is_not_shown() -> None:
    with FakeJudgeServer(fair) as server:
        referee.score(rank(server, orders=1), group("Let me think.\n*", "Let me think.\n***"))
        shown = attempts(server.requests[0])
    assert sorted(shown) == ["*", "***"]


def test_the_arrival_order_of_a_group_changes_nothing() -> None:
    # A judge that favours the first slot: the attempts' order must not be the trainer's.
    texts = ["alpha", "beta", "gamma"]
    seen = []
    for order in (texts, texts[::-1], texts[1:] + texts[:1]):
        with FakeJudgeServer(first_slot) as server:
            scores = referee.score(rank(server, orders=1), group(*order))
            seen.append({t: s.value for t, s in zip(order, scores, strict=True)})
            assert len(server.requests) == 1
    assert seen[0] == seen[1] == seen[2]
    assert sorted(seen[0].values()) == [0.0, 0.0, 1.0]


def test_large_groups_split_with_an_anchor_stay_comparable() -> None:
    texts = ["**", "", "*", "***", "****", "**", "*"]  # 5 distinct
    with FakeJudgeServer(fair) as server:
        scores = referee.score(rank(server, orders=1, max_group=3), group(*texts))
        sizes = [len(attempts(r)) for r in server.requests]
    assert sizes == [3, 3]  # the anchor and two others in each
    assert [s.value for s in scores] == [t.count("*") / 4 for t in texts]


def test_groups_are_ranked_separately() -> None:
    with FakeJudgeServer(fair) as server:
        scores = referee.score(
            rank(server, orders=1), group("*", "**", name="p") + group("***", "", name="q")
        )
        assert len(server.requests) == 2
    assert [s.value for s in scores] == [0.25, 0.5, 0.75, 0.0]


@pytest.mark.parametrize(
    ("options", "words"), [({"orders": 0}, "orders"), ({"max_group": 1}, "max_group")]
)
def test_bad_options(options: dict[str, Any], words: str) -> None:
    with pytest.raises(referee.SpecError, match=words):
        referee.load({"type": "group_rank", "model": "openai/x", **options})


def test_ranks_trajectories_by_their_calls_and_results_not_only_the_answer() -> None:
    """Two agents with the same final answer: one looked it up (a result with stars, which
    the scripted judge rewards), one guessed. The judge sees each whole path."""

    def agent(i: int, looked_up: bool) -> referee.Rollout:
        turns: list[dict[str, Any]] = []
        if looked_up:
            call = {"id": "c", "type": "function",
                    "function": {"name": "search", "arguments": '{"q": "capital"}'}}  # fmt: skip
            turns += [{"role": "assistant", "content": "Searching.", "tool_calls": [call]},
                      {"role": "tool", "tool_call_id": "c", "content": "Paris ****"}]  # fmt: skip
        turns.append({"role": "assistant", "content": "Paris."})
        return referee.Rollout(id=str(i), prompt="Q?", group="g", completion=turns)  # type: ignore[arg-type]

    with FakeJudgeServer(fair) as server:
        scores = referee.score(rank(server, orders=2), [agent(0, False), agent(1, True)])
        shown = attempts(server.requests[0])
    assert any("[call] search" in a and "[result of search] Paris ****" in a for a in shown)
    assert [s.value for s in scores] == [0.0, 1.0]


def test_imports_no_private_names() -> None:
    """group_rank shares the judge rewards' prompts and options through public names only."""
    tree = ast.parse(Path(group_rank.__file__).read_text(encoding="utf-8"))
    private = [
        f"{node.module}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.name.startswith("_")
    ]
    assert private == []
