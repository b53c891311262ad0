"""The hostile battery through the trainers' entry points: TRL's reward functions, verl's
`compute_score` and `referee serve`. Each input gives the trainer a number (or TRL's None, or
the server's null with a Failure) within the reward's deadline, never a hang or a crash.

A selection of `tests.support.hostile.HOSTILE` (the full battery runs per type in
tests/rewards/test_hostile.py) on a few types: a gated spec, a math check, the catastrophic
pattern from a spec, a user's function that loops on one input, and one that spins in C on
four (stdlib regex backtracking, a big-integer power, a sleep, a C extension's loop), where
only killing its worker process stops it (`referee.workers`).
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Iterator
from typing import Any

import pytest

import referee
from referee.backends import verl as rv
from referee.backends.trl import reward_funcs
from tests.support.hostile import HOSTILE, guarded
from tests.support.serving import post, running
from tests.support.spinning import c_spins, loops

INPUTS = {
    label: HOSTILE[label]
    for label in (
        "20 MB of words",
        "JSON nested 200,000 deep",
        "a 5,000-digit integer",
        "a huge power",
        "lone surrogates (undecodable bytes)",
        "NUL and control characters",
        "zero-width and right-to-left",
        "ReDoS: a run with no end",
    )
} | {
    "a user's check loops on it": "loop",
    # where a user's check spins in C (c_spins)
    "stdlib backtracking": "a" * 40 + "!",
    "a tower of powers": "9**9**9**9",
    "a sleep": "sleep",
    "a C extension's loop": "spin in C",
}
C_SPINS = ("stdlib backtracking", "a tower of powers", "a sleep", "a C extension's loop")


REWARDS: dict[str, referee.Reward] = {
    "gated spec": referee.load({
        "name": "extraction", "combine": "weighted",
        "components": {
            "valid": {"type": "json_schema", "schema": {"type": "object"}, "gate": True,
                      "weight": 0.2},
            "fields": {"type": "field_match", "fields": {"a": "number"}, "weight": 0.8},
        },
    }),
    "math_answer": referee.load({"type": "math_answer", "timeout": 2.0}),
    "regex ^(a+)+$": referee.load({"type": "regex", "regex": r"^(a+)+$"}),
    "user loop": loops,
    "user C spin": c_spins,
}  # fmt: skip
REFERENCE: dict[str, Any] = {"gated spec": {"a": 1}, "math_answer": "1"}


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, str]]:
    with (
        running(REWARDS["gated spec"]) as spec,
        running(REWARDS["math_answer"]) as math_answer,
        running(REWARDS["regex ^(a+)+$"]) as regex,
        running(loops) as loop,
        running(c_spins) as c_spin,
    ):
        yield {"gated spec": spec, "math_answer": math_answer, "regex ^(a+)+$": regex,
               "user loop": loop, "user C spin": c_spin}  # fmt: skip


STUCK = {("user loop", "a user's check loops on it")} | {("user C spin", c) for c in C_SPINS}
CASES = [(r, i) for r in REWARDS for i in INPUTS]
IDS = [f"{r}-{i}" for r, i in CASES]


@pytest.mark.parametrize(("name", "label"), CASES, ids=IDS)
def test_trl(name: str, label: str) -> None:
    [fn] = reward_funcs(REWARDS[name], log_metrics=False)
    reference = REFERENCE.get(name)

    def call() -> Any:
        values = fn(prompts=["p"], completions=[INPUTS[label]], reference=[reference])
        # A reward that waits (here: on its worker process) is an async function for TRL.
        return asyncio.run(values) if inspect.iscoroutine(values) else values

    [value] = guarded(call)
    assert value is None or math.isfinite(value)  # None: TRL's NaN, masked out of the mean
    if (name, label) in STUCK:
        assert value == 0.0  # its output made the check spin: the policy's verdict, not masked


@pytest.mark.parametrize(("name", "label"), CASES, ids=IDS)
def test_verl_compute_score(name: str, label: str) -> None:
    reward = REWARDS[name]
    result = guarded(lambda: rv.compute_score("x", INPUTS[label], REFERENCE.get(name), spec=reward))
    assert math.isfinite(result["score"])  # verl's reward tensor takes a number
    assert result["referee_failed"] in (0.0, 1.0)
    if (name, label) in STUCK:  # the policy's verdict (issue 44): 0, and no failure flagged
        assert result["referee_failed"] == 0.0 and result["score"] == 0.0


@pytest.mark.parametrize(("name", "label"), CASES, ids=IDS)
def test_http_server(servers: dict[str, str], name: str, label: str) -> None:
    rollout = {"completion": INPUTS[label], "reference": REFERENCE.get(name)}
    [score] = guarded(lambda: post(servers[name] + "/score", {"rollouts": [rollout]}))["scores"]
    assert (score["reward"] is None) == (score["failure"] is not None)
    if score["failure"] is not None:
        assert score["failure"]["type"] in {"timeout", "not_applicable"}, score["failure"]
    if (name, label) in STUCK:  # the policy's verdict (issue 44): 0 with the reason
        assert score["reward"] == 0.0 and score["fault"] == "timeout", score
