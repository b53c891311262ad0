"""IFEval's verifiable instructions, checked as lm-eval checks them, strict and loose.

`follows(instructions, response, mode)` gives one verdict per instruction, equal to
``follow_instruction_list`` of lm-eval's ``test_instruction_following_strict`` or
``test_instruction_following_loose`` (``lm_eval/tasks/ifeval/utils.py``) on the same data;
`parse_instructions` reads IFEval's ``instruction_id_list`` and ``kwargs`` as they are.

referee does not import lm-eval: importing its IFEval modules runs lm-eval's task manager
(``datasets``, pandas, ...) and downloads NLTK data at import. The 25 checks are written here,
operation for operation from lm-eval 0.4.13's ``instructions.py``, calling the libraries
lm-eval calls (NLTK's Punkt and Treebank tokenizers, langdetect); ``tests/rewards/text/
test_instruction_following.py`` runs both on thousands of responses per instruction and
requires equal verdicts in both modes. Where they differ, on purpose:

- an argument lm-eval would draw at random (missing, falsy, out of range) is a `ValueError`;
  so is a blank keyword, phrase or marker, and a regex argument that does not compile;
- langdetect is seeded with 0 on every call (lm-eval leaves it unseeded, so its language
  verdicts on an ambiguous text vary between runs; the agreement test seeds lm-eval too);
- ``detectable_format:json_format`` on JSON nested too deep for Python's parser is not
  followed (lm-eval raises `RecursionError`);
- a regex argument (keyword, section marker) runs on RE2 where `re` could take quadratic
  time; `referee.verifiers.patterns` keeps `re`'s meaning, except that after an empty match
  the next one starts a character later (a keyword such as ``a*`` counts differently);
- a NaN argument (a missing cell of a dataframe) counts as absent, an integral float as an
  integer.

Hostile responses are bounded: counts stop at the threshold they are compared with, only
sentences holding an upper-case letter are word-tokenized, langdetect reads a prefix that
gives it the same text, and lm-eval's patterns that `re` can run in quadratic time run on RE2.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Literal

from referee.verifiers.ifeval._instructions import (
    INSTRUCTION_IDS,
    LANGUAGE_CODES,
    Instruction,
    parse_instructions,
)
from referee.verifiers.ifeval._instructions import Response as _Response

__all__ = [
    "INSTRUCTION_IDS",
    "LANGUAGE_CODES",
    "Instruction",
    "Mode",
    "follows",
    "loose_variants",
    "parse_instructions",
]

Mode = Literal["strict", "loose"]
"""``strict``: the response as it is; ``loose``: an instruction is followed when any of
lm-eval's eight variants of the response (without its first line, its last line, both, and
each of those four with every ``*`` removed) follows it."""


def _blank(text: str) -> bool:
    return not text or text.isspace()  # `not text.strip()` without copying a long text


def follows(instructions: Sequence[Instruction], response: str, mode: Mode) -> list[bool]:
    """One verdict per instruction: lm-eval's ``follow_instruction_list`` in `mode`.

    A blank response follows nothing, in both modes (as in lm-eval).
    """
    if mode == "strict":
        if _blank(response):
            return [False] * len(instructions)
        checked = _Response(response)
        return [instruction.check(checked) for instruction in instructions]
    # Every check is a function of the text: a variant equal to an earlier one, or blank
    # (lm-eval skips those), is left out.
    texts = dict.fromkeys(t for t in loose_variants(response) if not _blank(t))
    variants = [_Response(text) for text in texts]
    return [any(instruction.check(v) for v in variants) for instruction in instructions]


def loose_variants(response: str) -> Iterator[str]:
    """lm-eval's eight loose-mode variants of `response`, in its order (blank ones included)."""
    yield response
    yield response.replace("*", "")
    # lm-eval splits on "\n" and joins r[1:], r[:-1], r[1:-1]: the text after the first
    # newline, before the last one, and between them ("" when there are too few).
    first_nl = response.find("\n")
    if first_nl < 0:
        first = last = both = ""
    else:
        last_nl = response.rfind("\n")
        first = response[first_nl + 1 :].strip()
        last = response[:last_nl].strip()
        both = response[first_nl + 1 : last_nl].strip() if last_nl > first_nl else ""
    yield first
    yield last
    yield both
    yield first.replace("*", "")
    yield last.replace("*", "")
    yield both.replace("*", "")
