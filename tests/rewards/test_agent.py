from __future__ import annotations

import pytest

import referee
from referee import Rollout
from referee.rewards import FinalAnswer
from tests.support.rewards import stepped
from tests.support.trajectories import agent, call


def turn(*calls: dict) -> dict:
    return {"role": "assistant", "content": "", "tool_calls": list(calls)}


PARIS = '{"city": "Paris"}'


def test_tool_use_gives_a_value_per_turn() -> None:
    rollout = agent(
        turn(call("get_weather", PARIS, "1")),
        {"role": "tool", "tool_call_id": "1", "content": "sunny"},
        {"role": "assistant", "content": "", "tool_calls": [
            call("get_weather", '{"town": "Paris"}', "2"), call("get_time", "{}", "3")]},
        turn(call("get_weather", PARIS, "4")),
        {"role": "tool", "tool_call_id": "4", "content": "Error: rate limited"},
        {"role": "assistant", "content": "Sunny."},
    )  # fmt: skip
    [s] = referee.score(referee.load({"type": "tool_use"}), [rollout])
    # turn 0 fine; turn 1: bad arguments and an unknown tool; turn 2: an error result and a
    # repeat of turn 0's call (0.5 - 0.5); turn 3: the answer
    assert s.steps == (1.0, 0.0, 0.0, 1.0)
    assert s.value == pytest.approx(0.5)
    assert "unknown tool 'get_time'" in (s.reason or "") and "repeated" in (s.reason or "")
    assert "required property" in (s.reason or "")


def test_step_budget_and_discounted_fold() -> None:
    turns = []
    for i in range(4):
        turns.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [call("get_weather", f'{{"city": "c{i}"}}', str(i))],
            }
        )
        turns.append({"role": "tool", "tool_call_id": str(i), "content": "ok"})
    spec = {"type": "tool_use", "max_steps": 2, "fold": "discounted", "gamma": 0.5}
    [s] = referee.score(referee.load(spec), [agent(*turns)])
    assert s.steps == (1.0, 1.0, 0.0, 0.0) and s.value == pytest.approx(1.5)


def test_bfcl_type_names_and_tools_in_the_spec() -> None:
    bfcl = [{"name": "calc_area", "parameters": {"type": "dict", "required": ["r"],
             "properties": {"r": {"type": "float"}}}}]  # fmt: skip
    reward = referee.load({"type": "tool_use", "tools": bfcl})
    good = Rollout(completion=[{"role": "assistant", "content": "",
                                "tool_calls": [call("calc_area", '{"r": 2.5}')]}])  # fmt: skip
    bad = Rollout(completion=[{"role": "assistant", "content": "",
                               "tool_calls": [call("calc_area", '{"r": "big"}')]}])  # fmt: skip
    assert [s.value for s in referee.score(reward, [good, bad])] == [1.0, 0.0]


def test_tool_use_without_definitions_is_not_applicable() -> None:
    rollout = Rollout(completion=[{"role": "assistant", "content": "",
                                   "tool_calls": [call("x", "{}")]}])  # fmt: skip
    [s] = referee.score(referee.load({"type": "tool_use"}), [rollout])
    assert s.value is None and s.failure is not None and s.failure.type == "not_applicable"


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


def test_combinations_keep_steps_aligned() -> None:
    a, b = stepped(1.0, 0.0, 1.0, name="a"), stepped(0.5, 0.5, 0.0, name="b")
    rollout = [Rollout(completion="x")]
    [w] = referee.score(referee.weighted({"a": (a, 0.6), "b": (b, 0.4)}), rollout)
    assert w.steps == pytest.approx((0.8, 0.2, 0.6))
    [m] = referee.score(referee.minimum({"a": a, "b": b}), rollout)
    assert m.steps == (0.5, 0.0, 0.0)
    plain = stepped(1.0, name="plain")  # one step only: counts differ, steps cannot align
    [n] = referee.score(referee.weighted({"a": a, "plain": plain}), rollout)
    assert n.steps is None and n.value is not None
    [c] = referee.score(referee.clip(referee.scale(a, 2.0), -1.0, 1.5), rollout)
    assert c.steps == (1.5, 0.0, 1.5)


def test_a_transform_keeps_judge_tokens() -> None:
    @referee.reward
    def judged(rollout: Rollout) -> referee.Score:
        return referee.Score(value=0.5, tokens=60, cost=0.01)

    [s] = referee.score(referee.scale(judged, 2.0), [Rollout(completion="x")])
    assert s.value == 1.0 and s.tokens == 60 and s.cost == 0.01


@pytest.mark.parametrize(
    ("first", "second", "repeated"),
    [
        ('{"city": "Paris", "days": 2}', '{"days": 2, "city": "Paris"}', True),  # key order
        ('{"city": "Paris", "units": ["C"]}', '{"units": ["C"], "city": "Paris"}', True),
        ('{"city": "Paris", "metric": true}', '{"city": "Paris", "metric": 1}', False),
        ('{"city": "Paris", "days": 1}', '{"city": "Paris", "days": 1.0}', False),
        ('{"city": "Paris", "units": ["C"]}', '{"city": "Paris", "units": ["F"]}', False),
    ],
)
def test_a_repeat_is_the_same_arguments_as_json(first: str, second: str, repeated: bool) -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}]  # fmt: skip
    rollout = Rollout(
        completion=[turn(call("get_weather", first, "1")), turn(call("get_weather", second, "2"))],
        metadata={"tools": tools},
    )
    [s] = referee.score(referee.load({"type": "tool_use"}), [rollout])
    assert s.steps == (1.0, 0.5 if repeated else 1.0)
    assert ("repeated" in (s.reason or "")) is repeated


def test_tool_use_reads_bfcl_function_lists_from_metadata() -> None:
    bfcl = [{"name": "calc_area", "parameters": {"type": "dict", "required": ["r"],
             "properties": {"r": {"type": "float"}}}}]  # fmt: skip
    reward = referee.load({"type": "tool_use"})
    rollouts = [
        Rollout(completion=[turn(call("calc_area", arguments))], metadata={"function": bfcl})
        for arguments in ('{"r": 2.5}', '{"r": "big"}', ' {"r": 1} ', '{"r": 1} x')
    ]
    values = [s.value for s in referee.score(reward, rollouts)]
    assert values == [1.0, 0.0, 1.0, 0.0]  # whitespace around the JSON is fine, text after not
