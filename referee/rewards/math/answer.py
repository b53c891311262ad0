"""`math_answer`: is the completion's final answer mathematically equal to the reference."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from referee.errors import NotApplicable
from referee.registry import register
from referee.reward import CheckReward, Need
from referee.rewards._common import clip_text, reference_of, short
from referee.rollout import Rollout
from referee.scores import Score
from referee.verifiers.math import AnswerKind, verify_math
from referee.verifiers.patterns import Pattern, compile_pattern
from referee.workers import RunIn

__all__ = ["MathAnswer"]


@register("math_answer")
@dataclass(kw_only=True)
class MathAnswer(CheckReward):
    """1.0 when the completion's final answer equals the reference, checked by math-verify.

    ``\\boxed{}`` answers are preferred; equivalent forms (``1/2``, ``0.5``, ``\\frac{1}{2}``)
    match. No answer in the completion scores 0; so does a check that runs past `timeout` (the
    answer made it spin: the policy's verdict, with the reason and ``fault: timeout``, never a
    masked sample); a reference that cannot be parsed is a Failure (no score).

    The reference is the answer as text or a number (``rollout.reference``, or its
    `reference_key` entry); a rollout without one is ``not_applicable``. It is read with the
    extraction targets `answer` names, as the completion is (math-verify's harness reads gold
    and prediction alike): with ``latex_or_expr`` or ``expr``, a plain reference ``1,22`` is
    the decimal 1.22, as a completion ``1,22`` is. The value is 1.0 or 0.0; the reason shows
    the answer found and the reference as parsed.

    Attributes:
        answer: What to extract from the completion: ``latex_or_expr`` (LaTeX, such as
            ``$...$`` or ``\\boxed{}``, or a plain expression), ``latex`` (LaTeX only),
            ``expr`` (a plain expression only) or ``boxed`` (only ``\\boxed{}`` content).
        pattern: A regex applied first; the last match's first group is what gets parsed
            (e.g. ``<answer>(.*?)</answer>``). No match is no answer.
        timeout: Seconds for parsing and comparing, enforced in any thread; also the limit
            for `pattern` if it needs the backtracking engine (it runs on RE2 otherwise).
        float_rounding: Decimal places used when comparing floats.
        strict: math-verify's strict mode (variables must match, no set/relation leniency).
        reference_key: Take the answer from this key of an object reference.
        no_answer: A completion with no answer to parse scores ``zero``, or is a Failure
            (``fail``) so that a ``cascade`` can hand it to a judge.
        whole_reference: Read a bare reference written in LaTeX (``3\\sqrt{5}``, ``2\\pi``,
            ``\\{1, 2\\}``) or an interval (``[0, 1)``) whole, as one LaTeX expression.
            math-verify's targets would read one number out of it (``3``), so ``\\boxed{3}``
            would match ``3\\sqrt{5}``; this rule wins over `answer`'s targets.
        reference_fallback: Where `answer`'s targets find nothing in the reference (``latex``
            and ``boxed`` read only delimited LaTeX), read it as LaTeX or an expression.
            math-verify would fail every completion; with this off, such a reference is a
            Failure (``not_applicable``).

    Example:
        ```yaml
        type: math_answer
        answer: boxed
        timeout: 10
        ```

    Scores:
        ```yaml
        - prompt: What is the probability that a fair coin lands heads?
          completion: One of two equally likely outcomes, so the answer is $\\boxed{\\frac{1}{2}}$.
          reference: "0.5"
          value: 1.0
        - prompt: What is the probability that a fair coin lands heads?
          completion: Two outcomes, so $\\boxed{2}$.
          reference: "0.5"
          value: 0.0
        - prompt: What is the probability that a fair coin lands heads?
          completion: It is one half.
          reference: "0.5"
          value: 0.0
        ```
    """

    # sympy can spin in C (a huge power, a pathological simplification), where no deadline
    # inside the process reaches it: a worker process, killed at the deadline.
    default_run_in: ClassVar[RunIn] = "process"

    answer: AnswerKind = "latex_or_expr"
    pattern: str | None = None
    timeout: float = 5.0
    float_rounding: int = 6
    strict: bool = True
    reference_key: str | None = None
    no_answer: Literal["zero", "fail"] = "zero"
    whole_reference: bool = True
    reference_fallback: bool = True
    name: str = "math_answer"
    _pattern: Pattern | None = field(init=False, repr=False, compare=False, default=None)

    def needs(self) -> frozenset[Need]:
        """The reference answer."""
        return frozenset({"reference"})

    def __post_init__(self) -> None:
        if self.timeout <= 0:
            raise ValueError(f"timeout must be positive, got {self.timeout}")
        if self.pattern is not None:
            self._pattern = compile_pattern(self.pattern, re.DOTALL, timeout=self.timeout)

    def default_deadline(self) -> float | None:
        """Just past ``timeout`` (twice it with a `pattern`, which has its own), which the
        check enforces itself between bytecodes: past this, a worker spinning in C is
        killed."""
        return self.timeout * (2 if self.pattern else 1) + 1.0

    def prepare(self) -> None:
        """Import math-verify and build its parsers, once per process, outside the deadline
        (a worker runs it when it loads this reward; the zygote before it forks workers)."""
        from referee.verifiers.math import _prepare

        _prepare()

    def check(self, rollout: Rollout) -> Score:
        ref: Any = reference_of(rollout, self.reference_key)
        if isinstance(ref, bool) or not isinstance(ref, (str, int, float)):
            raise NotApplicable(f"math_answer needs a text or number reference, got {short(ref)}")
        text = rollout.completion_text
        if self._pattern is not None:
            matches = self._pattern.findall(text)
            if not matches:
                if self.no_answer == "fail":
                    raise NotApplicable(f"no match for /{self.pattern}/")
                return Score(value=0.0, reason=f"no match for /{self.pattern}/")
            text = matches[-1] if isinstance(matches[-1], str) else matches[-1][0]
        try:
            verdict = verify_math(
                str(ref),
                text,
                kind=self.answer,
                timeout=self.timeout,
                float_rounding=self.float_rounding,
                strict=self.strict,
                whole=self.whole_reference,
                fallback=self.reference_fallback,
            )
        except ValueError as exc:
            raise NotApplicable(str(exc)) from None
        if verdict.answer is None:
            if self.no_answer == "fail":
                raise NotApplicable("no answer found to compare")
            return Score(value=0.0, reason="no answer found")
        if verdict.correct:
            return Score(
                value=1.0, reason=f"{clip_text(verdict.answer)} == {clip_text(verdict.gold)}"
            )
        return Score(value=0.0, reason=f"{clip_text(verdict.answer)} != {clip_text(verdict.gold)}")
