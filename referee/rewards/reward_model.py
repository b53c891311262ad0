"""Deprecated: moved to `referee.rewards.learned` (the module
`referee.rewards.learned.reward_model`)."""

from referee._moved import warn_moved
from referee.rewards.learned.reward_model import GroupRewardModel, Normalize, RewardModel

__all__ = ["GroupRewardModel", "Normalize", "RewardModel"]

warn_moved("referee.rewards.reward_model", "referee.rewards.learned")
