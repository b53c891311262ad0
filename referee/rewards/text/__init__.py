"""Rewards on the completion's text: `exact_match`, `contains`, `regex` and `format`
(`matching`), `length` and `repetition` (`length`), `text_similarity` (`similarity`: BLEU,
ROUGE, chrF, edit distance) and IFEval's `instruction_following`.

Each module is imported when one of its names is first asked for (`referee._lazy`).
"""

from referee._lazy import exports as _exports

TYPE_CHECKING = False  # `typing.TYPE_CHECKING` without importing typing (type checkers know it)
if TYPE_CHECKING:
    from referee.rewards.text.instruction_following import InstructionFollowing
    from referee.rewards.text.length import Length, LengthUnit, Repetition
    from referee.rewards.text.matching import Contains, ExactMatch, Format, Regex, RegexFlag
    from referee.rewards.text.similarity import (
        BleuTokenizer,
        RougeMeasure,
        SimilarityMetric,
        TextSimilarity,
    )

__all__ = [
    "BleuTokenizer",
    "Contains",
    "ExactMatch",
    "Format",
    "InstructionFollowing",
    "Length",
    "LengthUnit",
    "Regex",
    "RegexFlag",
    "Repetition",
    "RougeMeasure",
    "SimilarityMetric",
    "TextSimilarity",
]

_EXPORTS = {
    "referee.rewards.text.instruction_following": ("InstructionFollowing",),
    "referee.rewards.text.length": ("Length", "LengthUnit", "Repetition"),
    "referee.rewards.text.matching": ("Contains", "ExactMatch", "Format", "Regex", "RegexFlag"),
    "referee.rewards.text.similarity": (
        "BleuTokenizer",
        "RougeMeasure",
        "SimilarityMetric",
        "TextSimilarity",
    ),
}

if not TYPE_CHECKING:  # undefined for mypy, so a misspelt name stays an error
    __getattr__, __dir__ = _exports(__name__, _EXPORTS, globals())
