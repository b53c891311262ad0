from __future__ import annotations

import pytest

from referee import Rollout
from referee.steps import fold_steps
from referee.trajectory import toolset_of, trajectory
from tests.support.trajectories import TOOLS, agent, call


def test_turns_calls_results_and_the_final_answer() -> None:
    rollout = agent(
        {"role": "assistant", "content": "Let me check.",
         "tool_calls": [call("get_weather", '{"city": "Paris"}', "c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny, 21C"},
        {"role": "assistant", "content": None,
         "tool_calls": [call("get_weather", "{broken", "c2"), call("nope", "{}", "c3")]},
        {"role": "tool", "tool_call_id": "c3", "content": "Error: no such tool"},
        {"role": "assistant", "content": "Sunny and 21C."},
    )  # fmt: skip
    t = trajectory(rollout)
    assert [s.index for s in t.steps] == [0, 1, 2]
    assert t.final_answer == "Sunny and 21C."
    first, broken, missing = t.calls
    assert first.arguments == {"city": "Paris"} and first.result == "sunny, 21C"
    assert broken.arguments is None and "not valid JSON" in (broken.argument_error or "")
    assert broken.result is None and missing.result == "Error: no such tool"
    assert trajectory(rollout) is t  # parsed once per rollout


def test_plain_text_is_one_step_and_its_own_answer() -> None:
    t = trajectory(Rollout(completion="42"))
    assert len(t.steps) == 1 and t.final_answer == "42" and t.calls == ()


def test_results_without_ids_answer_calls_in_order() -> None:
    t = trajectory(agent(
        {"role": "assistant", "content": "", "tool_calls": [call("a", "{}"), call("b", "{}")]},
        {"role": "tool", "content": "ra"}, {"role": "tool", "content": "rb"},
    ))  # fmt: skip
    assert [c.result for c in t.calls] == ["ra", "rb"]
    assert t.final_answer == ""  # every turn called a tool: the last turn's text


@pytest.mark.parametrize(
    ("how", "gamma", "want"),
    [("sum", 1.0, 1.5), ("mean", 1.0, 0.5), ("last", 1.0, 0.0), ("discounted", 0.5, 1.25)],
)
def test_folds(how: str, gamma: float, want: float) -> None:
    assert fold_steps([1.0, 0.5, 0.0], how, gamma) == pytest.approx(want)  # type: ignore[arg-type]
    assert fold_steps([], how) == 0.0  # type: ignore[arg-type]


def test_equal_tool_definitions_share_one_toolset_and_what_is_derived_from_it() -> None:
    import copy

    first, second = agent(), Rollout(completion="x", metadata={"tools": copy.deepcopy(TOOLS)})
    built = []
    toolset = trajectory(first).toolset
    assert trajectory(second).toolset is toolset and set(toolset.definitions) == {"get_weather"}
    for r in (first, second):
        trajectory(r).toolset.derive("test.names", lambda d: built.append(1) or sorted(d))
    assert built == [1]
    # Not merely equal in Python: true is not 1 in a schema, so they are different toolsets
    const_true = [
        {"name": "f", "parameters": {"type": "object", "properties": {"a": {"const": True}}}}
    ]
    const_one = [{"name": "f", "parameters": {"type": "object", "properties": {"a": {"const": 1}}}}]
    assert toolset_of(const_true) is not toolset_of(const_one)
    assert toolset_of(const_true) is toolset_of(copy.deepcopy(const_true))
    # Its private copy: the caller's list changed afterwards does not change it
    kept = toolset_of(const_true)
    const_true[0]["name"] = "g"
    assert set(kept.definitions) == {"f"} and set(toolset_of(const_true).definitions) == {"g"}
    bfcl = Rollout(completion="", metadata={"function": const_one})  # BFCL's name for the list
    assert trajectory(bfcl).toolset is toolset_of(const_one)
