"""The built-in rewards, one module per family (a sub-package where a family has helpers of its
own: `code`, `patch`, `learned`). Each is also a spec type (its registered name).

Importing this package imports no reward: a class is imported from its module when it is first
asked for (``from referee.rewards import MathAnswer``), and a spec imports only the types it
names (`referee.registry.BUILTIN`).
"""

from __future__ import annotations

from referee._lazy import exports as _exports

TYPE_CHECKING = False  # `typing.TYPE_CHECKING` without importing typing (type checkers know it)
if TYPE_CHECKING:
    from typing import Any as _Any

    from referee.rewards.agent import FinalAnswer, ToolUse
    from referee.rewards.code import FunctionTests, IoTests, PytestTests, PythonTests
    from referee.rewards.fields import FieldMatch, FieldRule
    from referee.rewards.harbor import HarborTask
    from referee.rewards.instruction_following import InstructionFollowing
    from referee.rewards.json import JsonSchema, JsonValid
    from referee.rewards.judge import ChecklistJudge, PairwiseJudge, ReferenceJudge, RubricJudge
    from referee.rewards.learned import GroupRewardModel, ProcessRewardModel, RewardModel
    from referee.rewards.length import Length, Repetition
    from referee.rewards.math import MathAnswer
    from referee.rewards.openai_graders import OpenAIGrader
    from referee.rewards.patch import PatchTests
    from referee.rewards.python import AsyncPythonReward, PythonReward
    from referee.rewards.ranking import GroupRank
    from referee.rewards.reasoning import ReasoningGym
    from referee.rewards.retrieval import Retrieval
    from referee.rewards.similarity import TextSimilarity
    from referee.rewards.sql import SqlMatch
    from referee.rewards.text import Contains, ExactMatch, Format, Regex
    from referee.rewards.tools import ToolCallMatch
    from referee.rewards.tournament import PairwiseTournament

__all__ = [
    "AsyncPythonReward",
    "ChecklistJudge",
    "Contains",
    "ExactMatch",
    "FieldMatch",
    "FieldRule",
    "FinalAnswer",
    "Format",
    "FunctionTests",
    "GroupRank",
    "GroupRewardModel",
    "HarborTask",
    "InstructionFollowing",
    "IoTests",
    "JsonSchema",
    "JsonValid",
    "Length",
    "MathAnswer",
    "OpenAIGrader",
    "PairwiseJudge",
    "PairwiseTournament",
    "PatchTests",
    "ProcessRewardModel",
    "PytestTests",
    "PythonReward",
    "PythonTests",
    "ReasoningGym",
    "ReferenceJudge",
    "Regex",
    "Repetition",
    "Retrieval",
    "RewardModel",
    "RubricJudge",
    "SqlMatch",
    "TextSimilarity",
    "ToolCallMatch",
    "ToolUse",
    "runs_where",
]

_EXPORTS = {
    "referee.rewards.agent": ("FinalAnswer", "ToolUse"),
    "referee.rewards.code": ("FunctionTests", "IoTests", "PytestTests", "PythonTests"),
    "referee.rewards.fields": ("FieldMatch", "FieldRule"),
    "referee.rewards.harbor": ("HarborTask",),
    "referee.rewards.instruction_following": ("InstructionFollowing",),
    "referee.rewards.json": ("JsonSchema", "JsonValid"),
    "referee.rewards.judge": ("ChecklistJudge", "PairwiseJudge", "ReferenceJudge", "RubricJudge"),
    "referee.rewards.learned": ("GroupRewardModel", "ProcessRewardModel", "RewardModel"),
    "referee.rewards.length": ("Length", "Repetition"),
    "referee.rewards.math": ("MathAnswer",),
    "referee.rewards.openai_graders": ("OpenAIGrader",),
    "referee.rewards.patch": ("PatchTests",),
    "referee.rewards.python": ("AsyncPythonReward", "PythonReward"),
    "referee.rewards.ranking": ("GroupRank",),
    "referee.rewards.reasoning": ("ReasoningGym",),
    "referee.rewards.retrieval": ("Retrieval",),
    "referee.rewards.similarity": ("TextSimilarity",),
    "referee.rewards.sql": ("SqlMatch",),
    "referee.rewards.text": ("Contains", "ExactMatch", "Format", "Regex"),
    "referee.rewards.tools": ("ToolCallMatch",),
    "referee.rewards.tournament": ("PairwiseTournament",),
}

if not TYPE_CHECKING:
    __getattr__, __dir__ = _exports(__name__, _EXPORTS, globals())


def runs_where(cls: type[_Any] | None) -> str:
    """Where a reward type's work runs, as `referee types` shows it (docs/deadlines.md):
    its `run_in` default for a check, ``sandbox``, ``parts`` for a wrapper of other rewards,
    else ``event loop``."""
    from referee.reward import CheckReward, RewardBase
    from referee.rewards._sandboxed import SandboxedReward

    if not isinstance(cls, type):
        return "?"
    if issubclass(cls, CheckReward):
        return str(cls.default_run_in)
    if issubclass(cls, SandboxedReward):
        return "sandbox"
    if getattr(cls, "children", RewardBase.children) is not RewardBase.children:
        return "parts"
    return "event loop"
