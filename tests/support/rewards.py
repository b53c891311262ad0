"""Rewards whose values a test sets: to see what composites, adapters and reports do with them."""

from __future__ import annotations

from dataclasses import dataclass, field

import referee
from referee import CheckReward, Rollout, Score
from tests.support.rollouts import make


@dataclass(kw_only=True)
class Fixed(CheckReward):
    """Returns `value` (None: a failure) and counts its calls."""

    value: float | None
    name: str = "fixed"
    calls: list[str] = field(default_factory=list)
    run_in = "inline"  # counts its calls in this process

    def check(self, rollout: Rollout) -> Score:
        self.calls.append(rollout.id)
        if self.value is None:
            return Score.failed("timeout", "no value", self.name)
        return Score(value=self.value, components={"inner": self.value}, reason=f"{self.name} ok")


def one(reward: referee.Reward) -> Score:
    return referee.score(reward, [make("x", id="r1")])[0]


def stepped(*values: float, name: str = "s") -> referee.Reward:
    @referee.reward(name=name)
    def fixed(rollout: Rollout) -> referee.Score:
        return referee.Score(value=sum(values) / len(values), steps=values)

    return fixed
