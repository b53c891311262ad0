"""Learned-model rewards: a sequence reward model (`reward_model`) and a process reward model
(`process_reward_model`), in-process or served.

Their private helpers: what both share (options, the deadline, batching: `_base`) and the
served protocols (vLLM's pooling and classification APIs, OpenRLHF's remote RM: `_served`).
"""

from referee.rewards.learned.process_reward_model import ProcessRewardModel
from referee.rewards.learned.reward_model import GroupRewardModel, Normalize, RewardModel

__all__ = ["GroupRewardModel", "Normalize", "ProcessRewardModel", "RewardModel"]
