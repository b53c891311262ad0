"""Rewards a grader decides: a model grades one completion (`rubric_judge`, `checklist_judge`,
`reference_judge`, `pairwise_judge`), ranks a group's attempts (`group_rank`) or compares them
in pairs (`pairwise_tournament`), and OpenAI's grader configs (`openai_grader`). The client
that calls the model is `referee.judges`; these are the reward types built on it.

Each judge holds a `JudgeClient` (``client``; `referee.judges.options`) and shows the judge its
material fenced off from the instructions (`referee.judges.prompts`: `fence_for` and
`verdict_model` are exported here too, for a judge reward of your own), so text injected into
a completion cannot move the score.

With ``score_from: logprobs``, a scale or pass/fail value is the expected score over the
judge's top candidate tokens at that value (`referee.judges.logprobs`), from the same single
call. Where the server gives no logprobs, or a value's candidates cannot be read (a scale
value written as several tokens), that value is the sampled one, and the Score's reason says
which.

Given ``models: [...]`` instead of ``model``, each pointwise judge is a panel
(`referee.judges.panel`): every member computes the reward's value on its own (its ``samples``
aggregated first), at once, and the panel votes (``vote``, ``quorum``); each member's value
and cost are components.

Each module is imported when one of its names is first asked for (`referee._lazy`).
"""

from referee._lazy import exports as _exports

TYPE_CHECKING = False  # `typing.TYPE_CHECKING` without importing typing (type checkers know it)
if TYPE_CHECKING:
    from referee.judges.prompts import fence_for, verdict_model
    from referee.rewards.judged.checklist import ChecklistJudge
    from referee.rewards.judged.group_rank import GroupRank
    from referee.rewards.judged.openai_graders import OpenAIGrader
    from referee.rewards.judged.pairwise import PairwiseJudge
    from referee.rewards.judged.reference import ReferenceJudge
    from referee.rewards.judged.rubric import RubricJudge
    from referee.rewards.judged.tournament import PairwiseTournament, tournament_pairs

__all__ = [
    "ChecklistJudge",
    "GroupRank",
    "OpenAIGrader",
    "PairwiseJudge",
    "PairwiseTournament",
    "ReferenceJudge",
    "RubricJudge",
    "fence_for",
    "tournament_pairs",
    "verdict_model",
]

_EXPORTS = {
    "referee.judges.prompts": ("fence_for", "verdict_model"),
    "referee.rewards.judged.checklist": ("ChecklistJudge",),
    "referee.rewards.judged.group_rank": ("GroupRank",),
    "referee.rewards.judged.openai_graders": ("OpenAIGrader",),
    "referee.rewards.judged.pairwise": ("PairwiseJudge",),
    "referee.rewards.judged.reference": ("ReferenceJudge",),
    "referee.rewards.judged.rubric": ("RubricJudge",),
    "referee.rewards.judged.tournament": ("PairwiseTournament", "tournament_pairs"),
}

if not TYPE_CHECKING:  # undefined for mypy, so a misspelt name stays an error
    __getattr__, __dir__ = _exports(__name__, _EXPORTS, globals())
