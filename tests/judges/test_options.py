"""How a judge reward holds its client: passed whole in Python; flat or nested in a spec."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

import referee
from referee.judges import JudgeClient, JudgeOptions
from referee.judges.options import CLIENT_OPTIONS
from referee.rewards import RubricJudge

FLAT = {"type": "rubric_judge", "rubric": "helpfulness", "model": "openai/x", "timeout": 5}
NESTED = {"type": "rubric_judge", "rubric": "helpfulness",
          "client": {"model": "openai/x", "timeout": 5}}  # fmt: skip


def test_python_spec_flat_and_spec_nested_build_the_same_reward() -> None:
    python = RubricJudge(
        rubric="helpfulness", client=JudgeClient(model="openai/x", timeout=5), name="reward"
    )
    assert referee.load(FLAT) == referee.load(NESTED) == python
    assert python.client == JudgeClient(model="openai/x", timeout=5)


def test_one_client_can_serve_several_rewards() -> None:
    shared = JudgeClient(model="openai/x", rpm=100)
    a = RubricJudge(rubric="helpfulness", client=shared)
    b = RubricJudge(rubric="code-quality", client=shared)
    assert a.client is b.client


@pytest.mark.parametrize("spec", [FLAT, NESTED], ids=["flat", "nested"])
def test_the_client_travels_in_a_pickle(spec: dict[str, Any]) -> None:
    reward = referee.load(spec)
    clone = pickle.loads(pickle.dumps(reward))
    assert isinstance(clone, RubricJudge) and clone == reward
    assert clone.messages(referee.Rollout(prompt="q", completion="a"))  # its rubric is rebuilt


@pytest.mark.parametrize(
    ("options", "start", "detail"),
    [
        # a flat client option is checked as the client's, and named as the spec wrote it
        ({"model": "openai/x", "timeout": "soon"}, "timeout: invalid value", "valid number"),
        ({"model": "openai/x", "structured": "yaml"}, "structured: invalid value", "'prompt'"),
        # no client at all: the first thing it needs is named
        ({}, "model: rubric_judge needs option 'model'", ""),
        # nested: the location is under client
        ({"client": {"model": "openai/x", "modle": 1}}, "client.modle: unknown option", ""),
        # both ways at once is ambiguous
        ({"client": {"model": "openai/x"}, "timeout": 3}, "invalid value", "give its options"),
    ],
)
def test_errors_say_where(options: dict[str, Any], start: str, detail: str) -> None:
    with pytest.raises(referee.SpecError) as caught:
        referee.load({"type": "rubric_judge", "rubric": "helpfulness", **options})
    message = str(caught.value)
    assert message.startswith(f"<mapping>: {start}") and detail in message


def test_concurrency_is_the_rewards_and_the_client_has_no_such_option() -> None:
    # The one flat key both could have claimed: the reward's (rollouts at once), as on every
    # other async reward; the client's calls in flight are `max_in_flight`.
    assert "concurrency" not in CLIENT_OPTIONS and "max_in_flight" in CLIENT_OPTIONS
    reward = referee.load({**FLAT, "concurrency": 3})
    assert isinstance(reward, JudgeOptions)
    assert (reward.concurrency, reward.client.max_in_flight) == (3, 16)
    with pytest.raises(referee.SpecError, match="unknown option"):
        referee.load({**NESTED, "client": {"model": "openai/x", "concurrency": 3}})
