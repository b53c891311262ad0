"""The built-in rewards, one module per family. Each is also a spec type (its registered name)."""

from referee.rewards.agent import FinalAnswer, ToolUse
from referee.rewards.code import IoTests, PytestTests, PythonTests
from referee.rewards.fields import FieldMatch, FieldRule
from referee.rewards.instruction_following import InstructionFollowing
from referee.rewards.json import JsonSchema, JsonValid
from referee.rewards.judge import ChecklistJudge, PairwiseJudge, ReferenceJudge, RubricJudge
from referee.rewards.length import Length, Repetition
from referee.rewards.math import MathAnswer
from referee.rewards.patch import PatchTests
from referee.rewards.process_reward_model import ProcessRewardModel
from referee.rewards.ranking import GroupRank
from referee.rewards.reasoning import ReasoningGym
from referee.rewards.retrieval import Retrieval
from referee.rewards.reward_model import GroupRewardModel, RewardModel
from referee.rewards.similarity import TextSimilarity
from referee.rewards.text import Contains, ExactMatch, Format, Regex
from referee.rewards.tools import ToolCallMatch

__all__ = [
    "ChecklistJudge",
    "Contains",
    "ExactMatch",
    "FieldMatch",
    "FieldRule",
    "FinalAnswer",
    "Format",
    "GroupRank",
    "GroupRewardModel",
    "InstructionFollowing",
    "IoTests",
    "JsonSchema",
    "JsonValid",
    "Length",
    "MathAnswer",
    "PairwiseJudge",
    "PatchTests",
    "ProcessRewardModel",
    "PytestTests",
    "PythonTests",
    "ReasoningGym",
    "ReferenceJudge",
    "Regex",
    "Repetition",
    "Retrieval",
    "RewardModel",
    "RubricJudge",
    "TextSimilarity",
    "ToolCallMatch",
    "ToolUse",
]
