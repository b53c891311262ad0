"""Deprecated: moved to `referee.rewards.learned` (the module
`referee.rewards.learned.process_reward_model`)."""

from referee._moved import warn_moved
from referee.rewards.learned.process_reward_model import ProcessRewardModel

__all__ = ["ProcessRewardModel"]

warn_moved("referee.rewards.process_reward_model", "referee.rewards.learned")
