"""The built-in rewards, in families: `text`, `structured`, `math`, `agent`, `judged` (a grader
decides: LLM judges, group ranking, tournaments, OpenAI's graders), `code`, `learned` (reward
models), `patch`, `harbor`, and the modules `python` and `sql`. Each class is also a spec type
(its registered name).

Importing this package imports no reward: a class is imported from its module when it is first
asked for (``from referee.rewards import MathAnswer``), and a spec imports only the types it
names (`referee.registry.BUILTIN`).
"""

from __future__ import annotations

from referee._lazy import exports as _exports

TYPE_CHECKING = False  # `typing.TYPE_CHECKING` without importing typing (type checkers know it)
if TYPE_CHECKING:
    from typing import Any as _Any

    from referee.rewards.agent import FinalAnswer, Retrieval, ToolUse
    from referee.rewards.code import FunctionTests, IoTests, PytestTests, PythonTests
    from referee.rewards.harbor import HarborTask
    from referee.rewards.judged import (
        ChecklistJudge,
        GroupRank,
        OpenAIGrader,
        PairwiseJudge,
        PairwiseTournament,
        ReferenceJudge,
        RubricJudge,
    )
    from referee.rewards.learned import GroupRewardModel, ProcessRewardModel, RewardModel
    from referee.rewards.math import MathAnswer, ReasoningGym
    from referee.rewards.patch import PatchTests
    from referee.rewards.python import AsyncPythonReward, PythonReward
    from referee.rewards.sql import SqlMatch
    from referee.rewards.structured import (
        FieldMatch,
        FieldRule,
        JsonSchema,
        JsonValid,
        ToolCallMatch,
    )
    from referee.rewards.text import (
        Contains,
        ExactMatch,
        Format,
        InstructionFollowing,
        Length,
        Regex,
        Repetition,
        TextSimilarity,
    )

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

# each family's names from the family, which imports each from its own module in turn
_EXPORTS = {
    "referee.rewards.agent": ("FinalAnswer", "Retrieval", "ToolUse"),
    "referee.rewards.code": ("FunctionTests", "IoTests", "PytestTests", "PythonTests"),
    "referee.rewards.harbor": ("HarborTask",),
    "referee.rewards.judged": ("ChecklistJudge", "GroupRank", "OpenAIGrader", "PairwiseJudge",
                               "PairwiseTournament", "ReferenceJudge", "RubricJudge"),
    "referee.rewards.learned": ("GroupRewardModel", "ProcessRewardModel", "RewardModel"),
    "referee.rewards.math": ("MathAnswer", "ReasoningGym"),
    "referee.rewards.patch": ("PatchTests",),
    "referee.rewards.python": ("AsyncPythonReward", "PythonReward"),
    "referee.rewards.sql": ("SqlMatch",),
    "referee.rewards.structured": ("FieldMatch", "FieldRule", "JsonSchema", "JsonValid",
                                   "ToolCallMatch"),
    "referee.rewards.text": ("Contains", "ExactMatch", "Format", "InstructionFollowing", "Length",
                             "Regex", "Repetition", "TextSimilarity"),
}  # fmt: skip

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
