"""Rewards on agent trajectories: `tool_use` (each turn's tool calls, a process reward),
`final_answer` (any reward on the final answer) and `retrieval` (what a search agent
retrieved, against the relevant documents).

Each module is imported when one of its names is first asked for (`referee._lazy`).
"""

from referee._lazy import exports as _exports

TYPE_CHECKING = False  # `typing.TYPE_CHECKING` without importing typing (type checkers know it)
if TYPE_CHECKING:
    from referee.rewards.agent.final_answer import FinalAnswer
    from referee.rewards.agent.retrieval import Retrieval
    from referee.rewards.agent.tool_use import ToolUse, tool_schemas

__all__ = [
    "FinalAnswer",
    "Retrieval",
    "ToolUse",
    "tool_schemas",
]

_EXPORTS = {
    "referee.rewards.agent.final_answer": ("FinalAnswer",),
    "referee.rewards.agent.retrieval": ("Retrieval",),
    "referee.rewards.agent.tool_use": ("ToolUse", "tool_schemas"),
}

if not TYPE_CHECKING:  # undefined for mypy, so a misspelt name stays an error
    __getattr__, __dir__ = _exports(__name__, _EXPORTS, globals())
