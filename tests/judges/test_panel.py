"""The panel's vote on its own (`referee.judges.panel`), and how a judge reward holds a panel."""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import pytest

import referee
from referee.errors import BudgetExceeded, JudgeError, JudgeTimeout
from referee.judges import JudgeClient
from referee.judges.panel import Ballot, decide, member_name, member_names, poll
from referee.rewards import ReferenceJudge, RubricJudge
from referee.scores import Score


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("openai/gpt-4.1-mini", "gpt-4_1-mini"),  # the provider prefix goes, '.' becomes '_'
        ("openai/Qwen/Qwen2.5-7B-Instruct", "Qwen_Qwen2_5-7B-Instruct"),
        ("gpt-4o", "gpt-4o"),  # no prefix
        ("anthropic/claude 3:opus", "claude_3_opus"),
    ],
)
def test_member_name(model: str, name: str) -> None:
    assert member_name(model) == name


def test_member_names_are_deduplicated_around_given_ones() -> None:
    models = ["openai/a", "openai/a", "openai/a", "openai/b"]
    assert member_names(models, [None, None, "a_2", None]) == ["a", "a_3", "a_2", "b"]
    with pytest.raises(ValueError, match="same name"):
        member_names(models[:2], ["x", "x"])
    with pytest.raises(ValueError, match="letters, digits"):
        member_names(models[:1], ["a.b"])


def ballots(*values: float | None) -> list[Ballot]:
    return [
        Ballot(f"j{i}", None if v is None else Score(value=v, cost=0.01, tokens=5), "no verdict")
        for i, v in enumerate(values)
    ]


@pytest.mark.parametrize(
    ("values", "vote", "quorum", "want"),
    [
        ((1.0, 1.0, 0.0), "majority", 2, 1.0),
        ((1.0, None, 1.0), "majority", 2, 1.0),  # an abstention, two agree: still 2 of 3
        ((1.0, None, 0.0), "majority", 2, None),  # inspect_ai #4721: no majority, not list order
        ((0.0, None, 1.0), "majority", 2, None),  # ... in either order
        ((1.0, 1.0, 0.0, 0.0), "majority", 3, None),  # an even split
        ((1.0, 1.0, None, None), "majority", 2, None),  # 2 of 4 is no strict majority
        ((0.25, 0.5, 1.0), "mean", 2, 1.75 / 3),
        ((0.25, None, 1.0), "mean", 2, 0.625),  # over the members that answered
        ((0.25, 0.5, 1.0), "median", 2, 0.5),
        ((None, None, 1.0), "mean", 2, None),  # 1 answer, quorum 2
        ((None, None, 1.0), "mean", 1, 1.0),  # the control: quorum 1
    ],
)
def test_decide(values: tuple[float | None, ...], vote: Any, quorum: int, want: float) -> None:
    score = decide(ballots(*values), vote, quorum, "here")
    assert score.value == pytest.approx(want) if want is not None else score.value is None
    if want is None:
        assert score.failure is not None and score.failure.type == "judge"
        assert score.failure.where == "here"
    answered = sum(v is not None for v in values)
    assert score.cost == pytest.approx(0.01 * answered) and score.tokens == 5 * answered
    for i, v in enumerate(values):
        assert score.components[f"panel.j{i}"] == v


def test_components_are_voted_like_the_value() -> None:
    members = [
        Ballot("a", Score(value=1.0, components={"x": 1.0, "y": 0.0})),
        Ballot("b", Score(value=1.0, components={"x": 1.0, "y": 1.0})),
        Ballot("c", None, "timed out"),
    ]
    score = decide(members, "majority", 2, "w")
    assert score.value == 1.0 and score.components["x"] == 1.0
    assert score.components["y"] is None  # no strict majority on y
    assert score.reason == "panel 2/3 majority: 1 (a=1, b=1; c abstained: timed out)"
    assert decide(members, "mean", 2, "w").components["y"] == 0.5


def test_poll_abstains_on_judge_errors_and_raises_the_rest() -> None:
    clients = [(n, JudgeClient(model=f"openai/{n}")) for n in ("a", "b", "c")]

    def asker(raises: dict[str, Exception]) -> Any:
        async def ask(client: JudgeClient) -> Score:
            error = raises.get(client.model)
            if error is not None:
                raise error
            return Score(value=1.0)

        return ask

    got = asyncio.run(poll(clients, asker({"openai/b": JudgeTimeout("slow")})))
    assert [b.value for b in got] == [1.0, None, 1.0] and got[1].why == "slow"
    got = asyncio.run(poll(clients, asker({"openai/c": JudgeError("bad reply")})))
    assert got[2].why == "bad reply"
    with pytest.raises(BudgetExceeded):
        asyncio.run(poll(clients, asker({"openai/a": BudgetExceeded("cap")})))


def test_a_panel_in_python_pickles_and_keeps_its_members() -> None:
    shared = JudgeClient(model="openai/unused", api_base="http://127.0.0.1:9/v1", timeout=5)
    reward = ReferenceJudge(
        client=shared,
        models=["openai/a", {"model": "openai/b", "timeout": 50, "name": "slow_b"}],
        vote="mean",
    )
    assert reward.quorum == 2  # a strict majority of two
    clone = pickle.loads(pickle.dumps(reward))
    assert clone == reward and clone._members == reward._members
    assert reward._members is not None
    (a_name, a), (b_name, b) = reward._members
    assert (a_name, a.model, a.timeout, a.api_base) == ("a", "openai/a", 5, shared.api_base)
    assert (b_name, b.model, b.timeout, b.api_base) == ("slow_b", "openai/b", 50, shared.api_base)
    # the members are asked at once: the deadline is the slowest member's, not their sum
    alone = ReferenceJudge(client=JudgeClient(model="openai/b", timeout=50))
    assert reward.default_deadline() == alone.default_deadline()


def test_a_single_member_panel_is_allowed() -> None:
    reward = RubricJudge(rubric="helpfulness", client=JudgeClient(model="openai/x"),
                         models=["openai/x"])  # fmt: skip
    assert reward.quorum == 1


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"quorum": 2}, "quorum is a panel's option"),  # without models
        ({"models": ["openai/a"], "quorum": 2}, "between 1 and the 1 members"),
    ],
)
def test_python_errors(options: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        ReferenceJudge(client=JudgeClient(model="openai/x"), **options)


def test_a_spec_names_the_panel_keys() -> None:
    reward = referee.load({"type": "reference_judge", "models": ["openai/a", "openai/a"],
                           "timeout": 7, "vote": "median", "quorum": 1})  # fmt: skip
    assert isinstance(reward, ReferenceJudge) and reward._members is not None
    assert [(n, c.timeout) for n, c in reward._members] == [("a", 7), ("a_2", 7)]
