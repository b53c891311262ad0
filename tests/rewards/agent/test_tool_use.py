"""`tool_use`: a value per assistant turn, for how it used tools; steps through combinations."""

from __future__ import annotations

import pytest

import referee
from referee import Rollout
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


def test_a_trajectory_without_calls_earns_no_calls() -> None:
    """A guess that leaves the tools unused is not paid as if every call were well formed
    (the agent demo paid "guessed, no tools" more than "tool error, wrong answer")."""
    guess = agent({"role": "assistant", "content": "Probably sunny."})
    [s] = referee.score(referee.load({"type": "tool_use"}), [guess])
    assert (s.value, s.steps, s.reason) == (0.0, (0.0,), "no tool calls")
    assert s.components == {"calls": 0.0, "steps": 1.0}
    optional = referee.load({"type": "tool_use", "no_calls": 1.0})  # tools optional: as before
    [t] = referee.score(optional, [guess])
    assert t.value == 1.0 and t.steps == (1.0,)


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
