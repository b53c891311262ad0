"""Math answer equivalence with math-verify, under a timeout that works anywhere.

math-verify's own timeout uses ``signal.alarm``, which only works in the main thread of the
main interpreter: inside a trainer's thread pool or an async reward loop it raises. Here:

- in the main thread, a ``setitimer`` deadline (restoring whatever timer and handler were
  there before) interrupts parsing and comparison, at almost no cost;
- in any other thread, the check runs in a worker process of `referee.workers` (the one pool
  for checks that may spin in C), where the same deadline works, and a worker stuck past it
  (in C code that ignores signals) is killed and replaced (forked by the pool's zygote, in
  milliseconds). ``math_answer`` itself runs in those workers (its ``run_in`` is
  ``process``), so there its checks run in a worker's main thread.

Either way a check that runs out of time raises `VerifierTimeout`, which the reward scores 0
with the reason (``fault: timeout``): the answer made it spin, the policy's verdict, never a
masked Failure (docs/threat-model.md, "Blame").
"""

from __future__ import annotations

import functools
import re
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from referee.errors import VerifierTimeout

__all__ = ["AnswerKind", "MathVerdict", "call_with_deadline", "verify_math"]

AnswerKind = Literal["latex_or_expr", "latex", "expr", "boxed"]
"""What to extract from the completion: LaTeX (``$...$``, ``\\boxed{}``) or a plain expression
(``latex_or_expr``), LaTeX only, a plain expression only, or only ``\\boxed{}`` content."""

T = TypeVar("T")


class _Deadline(BaseException):
    """Raised by the timer; a BaseException so that math-verify's ``except Exception`` and
    sympy's internal handlers do not swallow it."""


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    def on_alarm(signum: int, frame: Any) -> None:
        raise _Deadline

    old_handler = signal.signal(signal.SIGALRM, on_alarm)
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        if old_delay:
            signal.setitimer(signal.ITIMER_REAL, old_delay, old_interval)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _run_with_deadline(fn: Callable[..., T], seconds: float, args: tuple[Any, ...]) -> T:
    try:
        with _deadline(seconds):
            return fn(*args)
    except _Deadline:
        raise VerifierTimeout(f"check did not finish within {seconds:g}s") from None


def call_with_deadline(fn: Callable[..., T], seconds: float, *args: Any) -> T:
    """``fn(*args)``, interrupted after `seconds`; works in any thread.

    In the main thread (a worker process's, or a plain script's) a ``setitimer`` deadline
    stops it between bytecodes. In any other thread it runs in a worker of `referee.workers`,
    killed past its deadline: `fn` must be a module-level function and its value plain data
    (it travels back as JSON; a tuple comes back a list).

    Raises:
        VerifierTimeout: `fn` did not finish in time.
    """
    if _in_main_thread():
        return _run_with_deadline(fn, seconds, args)
    from referee.workers import pool

    value: T = pool().call(_run_with_deadline, (fn, seconds, args), seconds)
    return value


@dataclass(frozen=True, slots=True)
class MathVerdict:
    """The outcome of one comparison; `gold` and `answer` are what was parsed, as text."""

    correct: bool
    gold: str
    answer: str | None


@functools.cache
def _quiet_math_verify() -> None:
    """math-verify warns once that its own timeout is off; ours is on, so the warning misleads."""
    import math_verify.grader
    import math_verify.parser

    math_verify.parser.TIMEOUT_WARNING_SHOWN = True
    math_verify.grader.TIMEOUT_WARNING_SHOWN = True


@functools.cache
def _prepare() -> None:
    """Import math-verify (and build its parsers) before any deadline starts: a first import
    takes a good part of a second, and must not count against the first check's time. A
    worker runs it when it loads ``math_answer`` (`MathAnswer.prepare`), and the zygote before
    it forks workers. A first verification then builds math-verify's patterns and sympy's
    parser (about 30 times a later one's time: 87 ms against 2.7 ms on an idle core, enough on
    a loaded machine to run an inline check past a short deadline), so two run here."""
    _quiet_math_verify()
    _configs("latex_or_expr")
    for reference, completion in (("1/2", r"so $\boxed{\frac{1}{2}}$"), ("3", "3")):
        _verify(reference, completion, "latex_or_expr", 6, True, True, True)


@functools.lru_cache(maxsize=16)
def _configs(kind: AnswerKind) -> tuple[Any, ...]:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig

    if kind == "latex":
        return (LatexExtractionConfig(boxed_match_priority=0),)
    if kind == "expr":
        return (ExprExtractionConfig(),)
    if kind == "boxed":
        return (LatexExtractionConfig(boxed_match_priority=0, try_extract_without_anchor=False),)
    return (LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig())


# A bare reference that is one expression as a whole: LaTeX markup (``3\sqrt{5}``, ``2\pi``,
# ``\{1, 2\}``), or an interval or tuple (``[0, 1)``, ``(1, 2)``).
_LATEX_MARKUP = re.compile(r"[\\^_{}]")
_INTERVAL = re.compile(r"\s*[\[(][^\[\]()]*,[^\[\]()]*[\])]\s*")


def _is_whole(reference: str) -> bool:
    """Whether a bare reference is one expression that extraction targets would cut up."""
    return bool(_LATEX_MARKUP.search(reference) or _INTERVAL.fullmatch(reference))


@functools.lru_cache(maxsize=4096)
def _parse_gold(reference: str, kind: AnswerKind, whole: bool, fallback: bool) -> tuple[Any, ...]:
    r"""The reference answer, parsed once per distinct (reference, options): sympy objects are
    immutable.

    The reference is read with the extraction targets `kind` names, as the completion is
    (math-verify's harness reads gold and prediction alike), so ``1,22`` is the decimal
    1.22 on both sides. Two documented departures, each an option of `math_answer`:

    - `whole`: a bare reference written in LaTeX (``3\sqrt{5}``, ``2\pi``, ``\{1, 2\}``) or
      an interval (``[0, 1)``) is read whole, as one LaTeX expression; math-verify's targets
      would read one number out of it (``3``, ``2``), so ``\boxed{3}`` would match
      ``3\sqrt{5}``. This rule wins over the targets; plain-text references (``1,22``,
      ``1,000``, ``50%``) are read with the targets either way.
    - `fallback`: where the targets find nothing in the reference (``latex`` and ``boxed``
      read only delimited LaTeX, and a reference is seldom written that way), it is read as
      LaTeX or an expression instead; math-verify would fail every completion against it.
    """
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    _quiet_math_verify()
    delimited = "$" in reference or "\\boxed" in reference
    if whole and not delimited and _is_whole(reference):
        one = parse(f"${reference}$", extraction_config=(LatexExtractionConfig(),),
                    parsing_timeout=None)  # fmt: skip
        if one:
            return tuple(one)
    parsed = parse(reference, extraction_config=_configs(kind), parsing_timeout=None)
    if parsed or not fallback:
        return tuple(parsed)
    configs = (LatexExtractionConfig(), ExprExtractionConfig())
    for text in (reference,) if delimited else (f"${reference}$", reference):
        parsed = parse(text, extraction_config=configs, parsing_timeout=None)
        if parsed:
            return tuple(parsed)
    return ()


def _verify(
    reference: str,
    completion: str,
    kind: AnswerKind,
    float_rounding: int,
    strict: bool,
    whole: bool = True,
    fallback: bool = True,
) -> tuple[bool, str, str | None]:
    """The verdict as plain data (it may travel back from a worker as JSON)."""
    from math_verify import parse, verify

    _quiet_math_verify()
    gold = _parse_gold(reference, kind, whole, fallback)
    if not gold:
        raise ValueError(f"reference {reference[:80]!r} could not be parsed as a math answer")
    answer = parse(completion, extraction_config=_configs(kind), parsing_timeout=None)
    if not answer:
        return (False, str(gold[-1]), None)
    correct = verify(
        list(gold), answer, float_rounding=float_rounding, strict=strict, timeout_seconds=None
    )
    return (bool(correct), str(gold[-1]), str(answer[-1]))


def verify_math(
    reference: str,
    completion: str,
    *,
    kind: AnswerKind = "latex_or_expr",
    timeout: float = 5.0,
    float_rounding: int = 6,
    strict: bool = True,
    whole: bool = True,
    fallback: bool = True,
) -> MathVerdict:
    """Is the final answer in `completion` equivalent to `reference`? (math-verify)

    Both are read with the extraction targets `kind` names; `whole` and `fallback` are
    referee's two departures from math-verify in reading the reference (see `_parse_gold`).

    Raises:
        VerifierTimeout: Parsing or comparison ran past `timeout` seconds.
        ValueError: The reference itself cannot be parsed.
    """
    if _in_main_thread():
        _prepare()  # outside the deadline (a worker has run it when it loaded the reward)
    correct, gold, answer = call_with_deadline(
        _verify, timeout, reference, completion, kind, float_rounding, strict, whole, fallback
    )
    return MathVerdict(bool(correct), gold, answer)
