"""Rewards with a checked answer: `math_answer` (`answer`: math-verify's reading of the answer
and the reference) and `reasoning_gym` (`reasoning_gym`: a reasoning-gym task's own scorer).

Each module is imported when one of its names is first asked for (`referee._lazy`).
"""

from referee._lazy import exports as _exports

TYPE_CHECKING = False  # `typing.TYPE_CHECKING` without importing typing (type checkers know it)
if TYPE_CHECKING:
    from referee.rewards.math.answer import MathAnswer
    from referee.rewards.math.reasoning_gym import (
        EVALS_ANSWER,
        ReasoningExtract,
        ReasoningGym,
        entry_reference,
    )

__all__ = [
    "EVALS_ANSWER",
    "MathAnswer",
    "ReasoningExtract",
    "ReasoningGym",
    "entry_reference",
]

_EXPORTS = {
    "referee.rewards.math.answer": ("MathAnswer",),
    "referee.rewards.math.reasoning_gym": (
        "EVALS_ANSWER",
        "ReasoningExtract",
        "ReasoningGym",
        "entry_reference",
    ),
}

if not TYPE_CHECKING:  # undefined for mypy, so a misspelt name stays an error
    __getattr__, __dir__ = _exports(__name__, _EXPORTS, globals())
