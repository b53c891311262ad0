"""Patterns from specs: `re`'s meaning, RE2 where it can run them, never a hang."""

from __future__ import annotations

import pickle
import re
import sys
import threading
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from referee.errors import VerifierTimeout
from referee.verifiers.patterns import compile_pattern

# A backreference keeps this on the backtracking engine, and `regex` takes exponential time
# on it (unlike on ^(a+)+$, which it short-cuts).
REDOS_FALLBACK = r"^(a|a)+\1b"
BAIT = "a" * 40 + "!"


def _same_as_re(pattern: str, text: str, flags: int = 0) -> None:
    """Every method gives what `re` gives."""
    ours, theirs = compile_pattern(pattern, flags), re.compile(pattern, flags)
    assert [m.group() for m in ours.finditer(text)] == [m.group() for m in theirs.finditer(text)]
    assert [m.groups() for m in ours.finditer(text)] == [m.groups() for m in theirs.finditer(text)]
    assert ours.findall(text) == theirs.findall(text)
    assert bool(ours.search(text)) == bool(theirs.search(text))
    full, full_re = ours.fullmatch(text), theirs.fullmatch(text)
    assert (full and full.groups()) == (full_re and full_re.groups())


@pytest.mark.parametrize(
    ("pattern", "flags", "text", "engine"),
    [
        (r"^(a+)+$", 0, "aaa\n", "re2"),  # re's $ matches before a final newline
        (r"a$", 0, "a\na\n", "re2"),
        (r"(?P<n>\d+)\.?$", 0, "12.\n", "re2"),  # named group before the final $
        (r"(?m)^\d+$", 0, "1\n22\n", "re2"),  # MULTILINE ^ and $
        (r"\Z", 0, "ab\n", "re2"),  # end of text (RE2 spells it \z)
        (r"(\w+)@(\d+)", 0, "héllo@٣4 x@1", "re2"),  # Unicode \w and \d
        (r"\s+", 0, "a\x1c\x0b\u3000b\x85c", "re2"),  # all 29 of str.isspace
        (r"[\W\d]+", 0, "ab1_é !", "re2"),  # \W inside a set
        (r"(?a)\w+", 0, "é_ab", "re2"),  # re.ASCII classes
        (r"(?i)istanbul", 0, "İSTANBUL ıstanbul ISTANBUL", "re2"),  # re folds i, I, İ, ı
        (r"(?i)[h-j]+", 0, "Iıİ", "re2"),
        (r"(?i)[^i]", 0, "Iıİx", "re2"),
        (r"\bfoo\b", 0, "a foo b", "re2"),  # ASCII text: RE2's \b is re's
        (r"\bfoo\b", 0, "éfoo foo", "re2"),  # non-ASCII text: handed to regex
        (r"<answer>(.*?)</answer>", re.S, "<answer>1</answer> <answer>\n2</answer>", "re2"),
        (r".+", re.S, "a\nb", "re2"),
        (r"(?s:a.)b", 0, "a\nb", "re2"),
        (r"\d{2,3}?", 0, "12345", "re2"),  # lazy bounded repeat
        (r"(?x) a  b  # comment", 0, "ab", "re2"),
        (r"(a)|b", 0, "b", "re2"),  # a group that took no part
        (r"x*", 0, "abxd", "re2"),  # empty matches, as re 3.7+ places them
        ("", 0, "ab", "re2"),
        (r"\B", 0, "ab cd", "re2"),
        (r"(a)\1", 0, "xaay", "regex"),  # backreference
        (r"(?<=x)\d+", 0, "x12 y3", "regex"),  # lookbehind
        (r"\w+(?!\d)", 0, "ab1 cd", "regex"),  # negative lookahead
        (r"(?>a+)b", 0, "aab", "regex"),  # atomic group
        (r"a*+b", 0, "aab", "regex"),  # possessive repeat
        (r"(a)?(?(1)b|c)", 0, "ab c", "regex"),  # conditional
        (r"a|$", 0, "ba\n", "regex"),  # $ not at the end of the pattern
        (r"[^\W\d_]+", 0, "ab1_é", "regex"),  # \W in a negated set, with more
        (r"a{1001}", 0, "a" * 1002, "regex"),  # beyond RE2's repeat limit
        (r"\bé\w+", 0, "x éa éb", "re2"),  # Unicode \b: this text goes to regex
    ],
)
def test_matches_what_re_matches(pattern: str, flags: int, text: str, engine: str) -> None:
    assert compile_pattern(pattern, flags).engine == engine
    _same_as_re(pattern, text, flags)


# Small patterns from a grammar of what specs use, on short texts of the same alphabet:
# whatever engine runs them, the answers are re's.
_ATOMS = st.sampled_from(
    [
        *("a", "b", "x", "é", "İ", r"\n", ".", "(a|b)", "[ab]", "[^a]"),
        *(r"\d", r"\w", r"\s", r"\W", r"[\w-]", r"[^\s]", r"(?:\ba)", r"(?:a\B)"),
    ]
)
_QUANTIFIERS = st.sampled_from(["", "", "*", "+", "?", "*?", "+?", "{1,2}"])
_ANCHORS = st.sampled_from(["", "^", r"\A"])
_ENDS = st.sampled_from(["", "$", r"\Z"])


@st.composite
def _patterns(draw: Any) -> tuple[str, int]:
    body = "".join(
        f"({draw(_ATOMS)}{draw(_QUANTIFIERS)})" if draw(st.booleans()) else draw(_ATOMS)
        for _ in range(draw(st.integers(1, 4)))
    )
    flags = draw(st.sampled_from([0, re.I, re.M, re.S, re.I | re.M | re.S, re.A]))
    return draw(_ANCHORS) + body + draw(_ENDS), flags


@settings(max_examples=300, deadline=None)
@given(_patterns(), st.text(alphabet="ab é\nİı1x_", max_size=12))
def test_generated_patterns_agree_with_re(case: tuple[str, int], text: str) -> None:
    pattern, flags = case
    # The one documented difference: see test_empty_match_then_retry_differs_from_re.
    assume(not ("*?" in pattern and re.fullmatch(pattern, "", flags)))
    assume(text or "\\B" not in pattern)  # \B on empty text: re matches only from 3.14
    _same_as_re(pattern, text, flags)


def test_empty_match_then_retry_differs_from_re() -> None:
    """After an empty match re retries the same place for a longer one; RE2 moves on."""
    assert re.findall("a*?", "a") == ["", "a", ""]
    assert compile_pattern("a*?").findall("a") == ["", ""]


def test_python_whitespace_and_word_sets_match_re_on_every_assigned_character() -> None:
    import unicodedata

    every = "".join(
        chr(c)
        for c in range(sys.maxunicode + 1)
        if not 0xD800 <= c <= 0xDFFF and unicodedata.category(chr(c)) != "Cn"
    )
    for cls in (r"\w", r"\d", r"\s", r"\W"):
        assert compile_pattern(cls).findall(every) == re.findall(cls, every), cls


def test_catastrophic_pattern_on_re2_answers_at_once() -> None:
    pattern = compile_pattern(r"^(a+)+$")
    assert pattern.engine == "re2"
    assert pattern.search("a" * 34 + "!") is None
    assert pattern.search("a" * 100_000) is not None


def test_backtracking_pattern_past_its_timeout_raises_verifier_timeout() -> None:
    pattern = compile_pattern(REDOS_FALLBACK, timeout=0.2)
    assert pattern.engine == "regex"
    with pytest.raises(VerifierTimeout, match=r"stopped after \d+\.\d\ds.*backreference"):
        pattern.search(BAIT)


def test_lone_surrogates_go_to_the_other_engine() -> None:
    text = "answer \udcff 42"
    assert compile_pattern(r"\d+").findall(text) == ["42"]


def test_invalid_pattern_is_a_value_error_naming_it() -> None:
    with pytest.raises(ValueError, match=r"invalid regular expression '\(a'"):
        compile_pattern("(a")


def test_pickles_and_is_shared() -> None:
    pattern = compile_pattern(r"(\d+)", re.I, timeout=1.5)
    assert pickle.loads(pickle.dumps(pattern)) is pattern
    assert compile_pattern(r"(\d+)", re.I, timeout=1.5) is pattern


def test_match_groups_by_name() -> None:
    found = compile_pattern(r"(?P<key>\w+)=(?P<value>\d+)?").search("ab= cd=1")
    assert found is not None
    assert found.groupdict() == {"key": "ab", "value": None}
    assert found.group("key") == "ab"


def test_threads_are_never_stuck_on_a_pattern() -> None:
    """A generous guard: every call returns, on either engine, whatever the text."""
    results: list[Any] = []

    def work() -> None:
        results.append(compile_pattern(r"^(a+)+$").search("a" * 34 + "!"))
        try:
            compile_pattern(REDOS_FALLBACK, timeout=0.5).search(BAIT)
        except VerifierTimeout as exc:
            results.append(exc)

    threads = [threading.Thread(target=work, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive()
    assert results.count(None) == 2
    assert sum(isinstance(r, VerifierTimeout) for r in results) == 2
