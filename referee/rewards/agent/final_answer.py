"""A reward applied to an agent trajectory's final answer (the last assistant text)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from referee.deadline import DEFAULT_TIMEOUT, check_timeout, each, run
from referee.errors import VerifierTimeout
from referee.registry import register
from referee.reward import (
    Part,
    Reward,
    RewardBase,
    SyncReward,
    failure_from_exception,
    is_sync,
    overrun_verdict,
)
from referee.rollout import Rollout
from referee.scores import Score
from referee.trajectory import trajectory

__all__ = ["FinalAnswer"]


@register("final_answer")
@dataclass(kw_only=True)
class FinalAnswer(RewardBase):
    """Applies any reward to the trajectory's final answer (the last assistant text).

    ``{type: final_answer, reward: {type: math_answer}}``: the inner reward sees a rollout
    whose completion is the final answer's text, its prompt, reference and metadata unchanged.
    Its value, components and Failures are the inner reward's; a trajectory that cannot be
    read (or takes past `DEFAULT_TIMEOUT` to read) is a Failure of its own.

    Attributes:
        reward: The reward to apply: a nested spec (``{type: ..., ...}``), of any type or a
            combination.
        deadline: Seconds one rollout may take through final_answer, reading the trajectory
            and the inner reward's scoring together (the inner reward must be sync). None:
            reading the trajectory is bounded by `DEFAULT_TIMEOUT`, the inner reward by its
            own deadline.

    Example:
        ```yaml
        type: final_answer
        reward:
          type: math_answer
          answer: boxed
        ```

    Scores:
        ```yaml
        - prompt: What is 6 times 7? Use the calculator.
          completion:
            - role: assistant
              content: Let me compute it.
              tool_calls: [{id: c1, name: calculator, arguments: '{"expression": "6 * 7"}'}]
            - {role: tool, tool_call_id: c1, content: "42"}
            - {role: assistant, content: 'The answer is $\\boxed{42}$.'}
          reference: "42"
          value: 1.0
        - prompt: What is 6 times 7? Use the calculator.
          completion:
            - role: assistant
              content: Let me compute it.
              tool_calls: [{id: c1, name: calculator, arguments: '{"expression": "6 + 7"}'}]
            - {role: tool, tool_call_id: c1, content: "13"}
            - {role: assistant, content: 'The answer is $\\boxed{13}$.'}
          reference: "42"
          value: 0.0
        ```
    """

    reward: Reward
    name: str = "final_answer"
    deadline: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.reward, Reward):
            raise TypeError("final_answer needs a reward to apply, e.g. reward: {type: ...}")
        self.deadline = check_timeout(self.deadline, self.name)
        if self.deadline is not None and not is_sync(self.reward):
            raise ValueError(
                f"{self.name}: a deadline on final_answer bounds inline scoring, but "
                f"{self.reward.name} cannot score inline; set deadline on the inner reward"
            )

    def children(self) -> Sequence[Part]:
        return [Part("reward", self.reward)]

    @property
    def is_sync(self) -> bool:
        return is_sync(self.reward)

    def default_deadline(self) -> float | None:
        """None: the inner reward carries its own."""
        return None

    def _answer(self, rollout: Rollout) -> Rollout:
        text = trajectory(rollout).final_answer
        return rollout.model_copy(update={"completion": text})

    def _read(self, rollout: Rollout) -> Rollout | Score:
        """The rollout the inner reward sees, or the Failure of reading its trajectory."""
        try:
            return run(self._answer, rollout, DEFAULT_TIMEOUT, self.name)
        except Exception as exc:  # reading the policy's trajectory ran long: its verdict
            return overrun_verdict(failure_from_exception(exc, self.name))

    def _score_inline(self, rollout: Rollout) -> Score:
        answer = self._read(rollout)
        if isinstance(answer, Score):
            return answer
        return cast(SyncReward, self.reward).score_sync(answer)

    def score_sync(self, rollout: Rollout) -> Score:
        if not is_sync(self.reward):
            return super().score_sync(rollout)
        if self.deadline is None:
            return self._score_inline(rollout)
        try:
            return run(self._score_inline, rollout, self.deadline, self.name)
        except VerifierTimeout as exc:  # sync checks on the policy's output: its verdict
            return Score.policy_fault("timeout", str(exc))

    async def score(self, rollout: Rollout) -> Score:
        return (await self.score_batch([rollout]))[0]

    async def score_batch(
        self, rollouts: Sequence[Rollout], *, concurrency: int | None = None
    ) -> list[Score]:
        if is_sync(self.reward):
            return each(self.score_sync, rollouts)
        read = each(self._read, rollouts)
        answers = [a for a in read if not isinstance(a, Score)]
        scored = iter(await self.reward.score_batch(answers, concurrency=concurrency))
        return [a if isinstance(a, Score) else next(scored) for a in read]
