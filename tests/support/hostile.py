"""Hostile inputs, and a guard that fails a test rather than let it hang on one.

`HOSTILE`: completions that have crashed or stalled rewards elsewhere (huge, deep, ReDoS bait,
undecodable); `BILLION_LAUGHS`: a YAML bomb; `guarded`: a call in a thread of its own.
"""

from __future__ import annotations

import textwrap
import threading
from collections.abc import Callable
from typing import TypeVar

import referee
from referee import Score
from tests.support.rollouts import make

T = TypeVar("T")

HOSTILE = {
    "20 MB of words": "lorem ipsum dolor " * 1_200_000,
    "10 MB without spaces": "x" * 10_000_000,
    "JSON nested 200,000 deep": "[" * 200_000 + "]" * 200_000,
    "object nested 100,000 deep": '{"a":' * 100_000 + "1" + "}" * 100_000,
    "brackets 200,000 deep, unclosed": "(" * 200_000,
    "NaN and Infinity": '{"a": NaN, "b": Infinity, "c": -Infinity}',
    "duplicate keys": '{"a": 1, "a": 2}',
    "a 5,000-digit integer": '{"a": ' + "9" * 5_000 + ', "b": [1, 2]}',
    "a 100,000-digit integer": '{"a": ' + "7" * 100_000 + "}",
    "a number past float range": '{"a": 1e400, "b": [1e-400]}',
    "a 5,000-digit decimal": '{"a": 0.' + "3" * 5_000 + "}",
    "a huge boxed number": "\\boxed{" + "9" * 50_000 + "}",
    "a huge power": "\\boxed{9^{9^{9^{9}}}}",
    "lone surrogates (undecodable bytes)": "answer \udcff\udcfe \\boxed{1}",
    "NUL and control characters": "\x00\x01\x1b[31m{}\x7f",
    "zero-width and right-to-left": (
        '\u200b\u200d\u2066{\u202e"a": 1\u202c}\ufeff \\boxed{\u200b1}'
    ),
    "empty": "",
    "unbalanced boxed": "\\boxed{" * 10_000,
    "many braces": "{" * 200_000,
    # ReDoS bait for the patterns the built-ins use (answer tags, fences, `Answer: (\w+)`,
    # think/answer shapes, numbers) and for the classic nested-quantifier pattern.
    "ReDoS: a run with no end": "a" * 50_000 + "!",
    "ReDoS: unclosed answer tags": "<answer>" * 40_000,
    "ReDoS: unclosed think tags": "<think>" * 40_000 + "<answer>",
    "ReDoS: unclosed fences": "```python\n" * 40_000,
    "ReDoS: almost an answer line": "Answer: " * 40_000 + "!",
    "ReDoS: digits and dots": "1." * 100_000 + "x",
    "ReDoS: whitespace runs": " \t" * 200_000 + "x",
}
# Hang guard: far above any reward's deadline plus a second, so a stall fails the test instead
# of the suite. It is not a timing assertion: a loaded machine is slow, not wrong.
GUARD = 120.0


def guarded(fn: Callable[[], T]) -> T:
    """``fn()`` in a thread of its own; fails the test if it never returns."""
    result: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.append(fn())
        except BaseException as exc:  # re-raised below, in the test's thread
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(GUARD)
    assert not thread.is_alive(), f"no answer within {GUARD:g}s"
    if errors:
        raise errors[0]
    return result[0]


def score_guarded(reward: referee.Reward, completion: str, reference: object) -> Score:
    """One rollout scored in a thread of its own; fails the test if it never returns."""
    [score] = guarded(lambda: referee.score(reward, [make(completion, reference)]))
    return score


BILLION_LAUGHS = textwrap.dedent(
    """\
    type: json_valid
    a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
    b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
    c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
    d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
    e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
    f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
    g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
    h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
    i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
    """
)
