"""`final_answer`: any reward applied to a trajectory's final answer, under its deadline."""

from __future__ import annotations

import pytest

import referee
from referee import Rollout
from referee.rewards import FinalAnswer
from tests.support.trajectories import agent, call

PARIS = '{"city": "Paris"}'


def test_final_answer_applies_any_reward_to_the_last_assistant_text() -> None:
    spec = {"type": "final_answer", "reward": {"type": "math_answer"}}
    reward = referee.load(spec)
    right = agent(
        {"role": "assistant", "content": "I'll compute \\boxed{3}",
         "tool_calls": [call("get_weather", '{"city": "x"}', "1")]},
        {"role": "tool", "tool_call_id": "1", "content": "4"},
        {"role": "assistant", "content": "The answer is \\boxed{4}."},
    )  # fmt: skip
    wrong = agent({"role": "assistant", "content": "\\boxed{5}"})
    right = right.model_copy(update={"reference": "4"})
    wrong = wrong.model_copy(update={"reference": "4"})
    assert [s.value for s in referee.score(reward, [right, wrong])] == [1.0, 0.0]
    components = {"answer": {**spec, "weight": 0.7}, "process": {"type": "tool_use", "weight": 0.3}}
    combined = referee.load({"combine": "weighted", "components": components})
    [s] = referee.score(combined, [right])
    assert s.value == pytest.approx(1.0) and s.components["answer"] == 1.0


def test_final_answer_needs_a_reward() -> None:
    with pytest.raises(referee.SpecError):
        referee.load({"type": "final_answer", "reward": 3})


@referee.reward(deadline=5, run_in="inline")  # final_answer's deadline bounds inline scoring
def spin_on_loop(rollout: Rollout) -> float:
    while rollout.completion_text == "loop":
        pass
    return 1.0


def test_final_answer_deadline_bounds_the_whole_rollout() -> None:
    reward = FinalAnswer(reward=spin_on_loop, deadline=0.2)
    rollouts = [agent({"role": "assistant", "content": text}) for text in ("ok", "loop")]
    scores = referee.score(reward, rollouts)
    assert scores[0].value == 1.0
    # A sync check past its deadline spun on the policy's output: its verdict, 0 (issue 44).
    assert scores[1].value == 0.0 and scores[1].failure is None and scores[1].fault == "timeout"
    assert "final_answer ran past its deadline" in (scores[1].reason or "")
    spec = referee.load({"type": "final_answer", "deadline": 0.2, "reward": {"type": "json_valid"}})
    assert isinstance(spec, FinalAnswer) and spec.deadline_seconds == 0.2
    with pytest.warns(FutureWarning, match="write deadline: 0.2"):  # the old spelling
        old = referee.load(
            {"type": "final_answer", "timeout": 0.2, "reward": {"type": "json_valid"}}
        )
    assert old.deadline_seconds == 0.2


def test_final_answer_deadline_needs_a_sync_reward() -> None:
    @referee.reward
    async def waits(rollout: Rollout) -> float:
        return 1.0

    with pytest.raises(ValueError, match="set deadline on the inner reward"):
        FinalAnswer(reward=waits, deadline=1)
    assert FinalAnswer(reward=waits).deadline_seconds is None
