"""IFEval's 25 instructions: their arguments, read as lm-eval reads them, and their checks.

Each check is lm-eval's ``check_following`` (``lm_eval/tasks/ifeval/instructions.py``) with
the same operations in the same order, quirks included: keywords are regular expressions
searched with no word boundary, ``keywords:frequency`` counts regex matches, a section marker
is a regex too, and so on. What differs is only how the work is bounded on hostile text:

- lm-eval's own patterns that `re` runs in quadratic time on some text (placeholders and
  titles on a long line of unclosed ones, bullets after a long blank stretch, a postscript
  after a long run of spaces) are replaced by linear-time code that finds the same matches;
- a pattern built from an argument (a keyword, a section marker) runs on `re` when the
  argument is plain text, and through `compile_pattern` (RE2, or `regex` under a time
  limit) when it holds regex syntax;
- counts stop at the threshold they are compared with.

Arguments are what lm-eval's ``build_description`` keeps: after lm-eval drops every falsy
value (``{k: v for k, v in kwargs.items() if v}``), an argument that is missing or out of
range makes lm-eval draw one at random; referee refuses it instead (a `ValueError` naming the
key), since a reward must not be random.
"""

from __future__ import annotations

import difflib
import functools
import json
import math
import numbers
import re
from collections.abc import Callable, Mapping
from typing import Any, Final, NamedTuple

from referee.verifiers.ifeval import _language
from referee.verifiers.patterns import Pattern, compile_pattern

_AnyPattern = Pattern | re.Pattern[str]

__all__ = ["INSTRUCTION_IDS", "LANGUAGE_CODES", "Instruction", "Response", "parse_instructions"]

LANGUAGE_CODES: Final = (
    "en", "es", "pt", "ar", "hi", "fr", "ru", "de", "ja", "it", "bn", "uk", "th", "ur", "ta",
    "te", "bg", "ko", "pl", "he", "fa", "vi", "ne", "sw", "kn", "mr", "gu", "pa", "ml", "fi",
)  # fmt: skip
"""ISO 639-1 codes ``language:response_language`` accepts (lm-eval's ``LANGUAGE_CODES``)."""

_RELATIONS = ("less than", "at least")
_CONSTRAINED = ("My answer is yes.", "My answer is no.", "My answer is maybe.")
_FIRST_WORD_STOPS = frozenset(".,?!'\"")

# lm-eval's patterns, where `re` runs them in linear time. Its bullet patterns start with
# `^\s*`, which at every line of a long blank stretch rescans the rest of it (quadratic).
# `^[^\S\n]*` stays on one line: a match that lm-eval starts on a blank line above its `*`
# or `-` is found from the start of that `*` or `-` line instead, and ends at the same place,
# so the matches counted are the same.
_BULLET_STAR = re.compile(r"^[^\S\n]*\*[^\*].*$", re.MULTILINE)  # lm-eval: ^\s*\*[^\*].*$
_BULLET_DASH = re.compile(r"^[^\S\n]*-.*$", re.MULTILINE)  # lm-eval: ^\s*-.*$
_HIGHLIGHT = re.compile(r"\*[^\n\*]*\*")  # linear: an attempt stops at the next * or newline
_DOUBLE_HIGHLIGHT = re.compile(r"\*\*[^\n\*]*\*\*")
_PARAGRAPH_RULE = re.compile(r"\s?\*\*\*\s?")
# lm-eval's postscript patterns: `\s*` before and `.*$` after never decide whether there is a
# match (both can match nothing, `$` holds at every line end), and `re` spends quadratic time
# on the leading `\s*` in a long run of spaces; searched without them.
_PS = re.compile(r"p\.\s?s\.")  # lm-eval, for "P.S.": \s*p\.\s?s\..*$
_PPS = re.compile(r"p\.\s?p\.\s?s")  # lm-eval, for "P.P.S": \s*p\.\s?p\.\s?s.*$
_REGEX_SYNTAX = re.compile(r"[.^$*+?{}\[\]\\|()]")


@functools.lru_cache(maxsize=4096)
def _pattern(pattern: str, data: str, flags: int = 0) -> _AnyPattern:
    """`pattern`, built around the argument `data`, compiled to run in linear time.

    When `data` is plain text (no regex syntax), `re` runs the pattern in linear time and is
    used as it is; otherwise it runs through `compile_pattern` (RE2, or `regex` under a time
    limit).
    """
    if _REGEX_SYNTAX.search(data) is None:
        return re.compile(pattern, flags)
    return compile_pattern(pattern, flags)


class Response:
    """A response being checked, with what several checks share computed once."""

    __slots__ = ("_language", "_lower", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._lower: str | None = None
        self._language: str | bool | None = False  # False: not detected yet

    @property
    def lower(self) -> str:
        if self._lower is None:
            self._lower = self.text.lower()
        return self._lower

    def language(self) -> str | None:
        """langdetect's language for the text; None where it finds no feature to go by."""
        if self._language is False:
            self._language = _language.detect_language(self.text)
        return self._language  # type: ignore[return-value]


class Instruction(NamedTuple):
    """One IFEval instruction with its arguments, as lm-eval's ``build_description`` keeps them.

    Attributes:
        id: The instruction id, e.g. ``"length_constraints:number_words"``.
        args: Its arguments after lm-eval's normalisation (phrases stripped, keywords sorted,
            ...), by lm-eval's names.
    """

    id: str
    args: Mapping[str, Any]

    def check(self, response: Response) -> bool:
        """lm-eval's ``check_following`` for this instruction on one response."""
        return _CHECKS[self.id][2](response, self.args)

    def describe(self) -> str:
        """The id and its arguments, for reasons."""
        if not self.args:
            return self.id
        shown = ", ".join(f"{k}={v!r}" for k, v in self.args.items() if not k.startswith("_"))
        return f"{self.id}({shown})"


# -- the checks -----------------------------------------------------------------------------


def _count(pattern: _AnyPattern, text: str, limit: int) -> int:
    """``min(limit, number of non-overlapping matches)``."""
    return _language.at_most(pattern.finditer(text), limit)


def _compare(count: int, relation: str, threshold: int) -> bool:
    return count < threshold if relation == "less than" else count >= threshold


def _language_is(r: Response, code: str) -> bool:
    """Whether the response is in `code`'s language (True where none can be detected)."""
    language = r.language()
    return True if language is None else language == code


def _response_language(r: Response, a: Mapping[str, Any]) -> bool:
    return _language_is(r, a["language"])


def _number_sentences(r: Response, a: Mapping[str, Any]) -> bool:
    count = _language.count_sentences(r.text, a["num_sentences"])
    return _compare(count, a["relation"], a["num_sentences"])


def _number_placeholders(r: Response, a: Mapping[str, Any]) -> bool:
    # lm-eval: len(re.findall(r"\[.*?\]", text)), which `re` runs in quadratic time on
    # a line of unclosed brackets. A match runs from a "[" to the first "]" after it, unless
    # a newline comes first; then no "[" before that newline has a match.
    wanted: int = a["num_placeholders"]
    text = r.text
    count = position = 0
    while count < wanted:
        start = text.find("[", position)
        if start < 0:
            break
        end = text.find("]", start + 1)
        if end < 0:
            break
        newline = text.find("\n", start + 1, end)
        if newline < 0:
            count += 1
            position = end + 1
        else:
            position = newline + 1
    return count >= wanted


def _number_bullet_lists(r: Response, a: Mapping[str, Any]) -> bool:
    wanted: int = a["num_bullets"]
    stars = _count(_BULLET_STAR, r.text, wanted + 1)
    if stars > wanted:
        return False
    return stars + _count(_BULLET_DASH, r.text, wanted + 1 - stars) == wanted


def _constrained_response(r: Response, a: Mapping[str, Any]) -> bool:
    value = r.text.strip()
    return any(option in value for option in _CONSTRAINED)


def _number_highlighted_sections(r: Response, a: Mapping[str, Any]) -> bool:
    wanted: int = a["num_highlights"]
    count = 0
    for match in _HIGHLIGHT.finditer(r.text):
        if match.group().strip("*").strip():
            count += 1
            if count >= wanted:
                return True
    for match in _DOUBLE_HIGHLIGHT.finditer(r.text):
        if match.group().removeprefix("**").removesuffix("**").strip():
            count += 1
            if count >= wanted:
                return True
    return count >= wanted


def _multiple_sections(r: Response, a: Mapping[str, Any]) -> bool:
    # lm-eval counts len(re.split(pattern, text)) - 1: one per match, plus one per group of
    # the pattern for every match (re.split returns the groups too).
    pattern: _AnyPattern = a["_pattern"]
    wanted: int = a["num_sections"]
    return _count(pattern, r.text, wanted) * (1 + pattern.groups) >= wanted


def _number_paragraphs(r: Response, a: Mapping[str, Any]) -> bool:
    paragraphs = _PARAGRAPH_RULE.split(r.text)
    count = len(paragraphs)
    last = len(paragraphs) - 1
    for index, paragraph in enumerate(paragraphs):
        if not paragraph.strip():
            if index in (0, last):
                count -= 1
            else:
                return False
    wanted: int = a["num_paragraphs"]
    return count == wanted


def _postscript(r: Response, a: Mapping[str, Any]) -> bool:
    pattern: _AnyPattern | str = a["_pattern"]
    if isinstance(pattern, str):  # a plain marker: \s*marker.*$ matches where it occurs
        return pattern in r.lower
    return pattern.search(r.lower) is not None


def _keywords_existence(r: Response, a: Mapping[str, Any]) -> bool:
    return all(p.search(r.text) is not None for p in a["_patterns"])


def _keyword_frequency(r: Response, a: Mapping[str, Any]) -> bool:
    count = _count(a["_pattern"], r.text, a["frequency"])
    return _compare(count, a["relation"], a["frequency"])


def _number_words(r: Response, a: Mapping[str, Any]) -> bool:
    count = _language.count_words(r.text, a["num_words"])
    return _compare(count, a["relation"], a["num_words"])


def _json_format(r: Response, a: Mapping[str, Any]) -> bool:
    value = (
        r.text.strip()
        .removeprefix("```json")
        .removeprefix("```Json")
        .removeprefix("```JSON")
        .removeprefix("```")
        .removesuffix("```")
        .strip()
    )
    try:
        json.loads(value)
    except ValueError:
        return False
    except RecursionError:  # valid but deeper than Python's parser goes; lm-eval raises here
        return False
    return True


def _nth_paragraph_first_word(r: Response, a: Mapping[str, Any]) -> bool:
    paragraphs = r.text.split("\n\n")  # lm-eval's re.split(r"\n\n", ...)
    count = len(paragraphs) - sum(1 for p in paragraphs if not p.strip())
    nth = a["nth_paragraph"]
    if nth > count:
        return False
    paragraph = paragraphs[nth - 1].strip()  # counted among all pieces, empty ones included
    if not paragraph:
        return False
    word = paragraph.split()[0].strip().lstrip("'").lstrip('"')
    first_word = ""
    for letter in word:
        if letter in _FIRST_WORD_STOPS:
            break
        first_word += letter.lower()
    wanted: int = a["num_paragraphs"]
    return count == wanted and first_word == a["first_word"]


def _forbidden_words(r: Response, a: Mapping[str, Any]) -> bool:
    return all(p.search(r.text) is None for p in a["_patterns"])


def _two_responses(r: Response, a: Mapping[str, Any]) -> bool:
    valid = []
    responses = r.text.split("******")
    last = len(responses) - 1
    for index, response in enumerate(responses):
        if not response.strip():
            if index not in (0, last):
                return False
        else:
            valid.append(response)
    return len(valid) == 2 and valid[0].strip() != valid[1].strip()


def _repeat_prompt(r: Response, a: Mapping[str, Any]) -> bool:
    return r.text.strip().lower().startswith(a["_prompt"])


def _end_checker(r: Response, a: Mapping[str, Any]) -> bool:
    return r.text.strip().strip('"').lower().endswith(a["_end"])


def _title(r: Response, a: Mapping[str, Any]) -> bool:
    # lm-eval: any(t.lstrip("<").rstrip(">").strip() for t in re.findall(r"<<[^\n]+>>", text)),
    # which `re` runs in quadratic time on a long line of "<". A line's only match runs from
    # its first "<<" to its last ">>" at least one character further on.
    text = r.text
    position = 0
    while True:
        start = text.find("<<", position)
        if start < 0:
            return False
        line_end = text.find("\n", start)
        if line_end < 0:
            line_end = len(text)
        close = text.rfind(">>", start + 3, line_end)
        if close >= 0 and text[start : close + 2].lstrip("<").rstrip(">").strip():
            return True
        position = line_end + 1


def _letter_frequency(r: Response, a: Mapping[str, Any]) -> bool:
    return _compare(r.lower.count(a["letter"]), a["let_relation"], a["let_frequency"])


def _capital_word_frequency(r: Response, a: Mapping[str, Any]) -> bool:
    wanted: int = a["capital_frequency"]
    if wanted <= 0:  # lm-eval keeps a negative frequency: every count compares the same way
        return bool(a["capital_relation"] == "at least")
    count = _language.count_capital_words(r.text, wanted)
    return _compare(count, a["capital_relation"], wanted)


def _english_capital(r: Response, a: Mapping[str, Any]) -> bool:
    return r.text.isupper() and _language_is(r, "en")


def _english_lowercase(r: Response, a: Mapping[str, Any]) -> bool:
    return r.text.islower() and _language_is(r, "en")


def _no_comma(r: Response, a: Mapping[str, Any]) -> bool:
    return "," not in r.text


def _quotation(r: Response, a: Mapping[str, Any]) -> bool:
    value = r.text.strip()
    return len(value) > 1 and value[0] == '"' and value[-1] == '"'


# -- arguments ------------------------------------------------------------------------------


class _Args:
    """Reads one instruction's kwargs, with error messages that name the key."""

    def __init__(self, id: str, kwargs: Mapping[str, Any], where: str, index: int) -> None:
        self.id = id
        self.kwargs = kwargs
        self._where = where
        self._index = index

    @property
    def where(self) -> str:
        return f"{self._where}['kwargs'][{self._index}]"

    def fail(self, key: str, expected: str) -> ValueError:
        value = self.kwargs.get(key)
        random = "" if key.startswith("prompt") else "; lm-eval would draw one at random"
        return ValueError(
            f"{self.where}[{key!r}]: {self.id!r} needs {key!r}, {expected}; got {value!r}"
            + (random if value is None else "")
        )

    def count(self, key: str, *, minimum: int | None = 1) -> int:
        value = self.kwargs.get(key)
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # 3.0 from a dataframe column with missing values
        if not isinstance(value, numbers.Integral) or isinstance(value, bool):
            raise self.fail(key, "an integer")
        value = int(value)
        if minimum is not None and value < minimum:
            raise self.fail(key, f"an integer of at least {minimum}")
        return value

    def relation(self, key: str) -> str:
        value = self.kwargs.get(key)
        if value not in _RELATIONS:
            raise self.fail(key, "'less than' or 'at least'")
        return value  # type: ignore[no-any-return]

    def text(self, key: str, *, strip: bool = True) -> str:
        value = self.kwargs.get(key)
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, "a non-blank string")
        return value.strip() if strip else value

    def words(self, key: str) -> list[str]:
        value = self.kwargs.get(key)
        if (
            not isinstance(value, list | tuple)
            or not value
            or not all(isinstance(w, str) for w in value)
        ):
            raise self.fail(key, "a non-empty list of strings")
        return list(value)

    def pattern(self, key: str, pattern: str, data: str, flags: int = 0) -> _AnyPattern:
        try:
            return _pattern(pattern, data, flags)
        except ValueError as exc:
            raise ValueError(f"{self.where}[{key!r}]: {exc}") from None


def _keywords_args(a: _Args) -> dict[str, Any]:
    keywords = sorted(a.words("keywords"))
    patterns = [a.pattern("keywords", k, k, re.IGNORECASE) for k in keywords]
    return {"keywords": keywords, "_patterns": patterns}


def _frequency_args(a: _Args) -> dict[str, Any]:
    keyword = a.text("keyword")
    return {
        "keyword": keyword,
        "frequency": a.count("frequency"),
        "relation": a.relation("relation"),
        "_pattern": a.pattern("keyword", keyword, keyword, re.IGNORECASE),
    }


def _forbidden_args(a: _Args) -> dict[str, Any]:
    words = sorted(set(a.words("forbidden_words")))
    patterns = [a.pattern("forbidden_words", rf"\b{w}\b", w, re.IGNORECASE) for w in words]
    return {"forbidden_words": words, "_patterns": patterns}


def _letter_args(a: _Args) -> dict[str, Any]:
    letter = a.kwargs.get("letter")
    # lm-eval's test is ord(letter.lower()) in 97..122, so the Kelvin sign counts, as "k"
    if not isinstance(letter, str) or len(letter) != 1 or not "a" <= letter.lower() <= "z":
        raise a.fail("letter", "one letter a-z or A-Z")
    return {
        "letter": letter.lower(),
        "let_frequency": a.count("let_frequency"),
        "let_relation": a.relation("let_relation"),
    }


def _language_args(a: _Args) -> dict[str, Any]:
    if a.kwargs.get("language") not in LANGUAGE_CODES:
        raise a.fail("language", f"one of {', '.join(LANGUAGE_CODES)}")
    return {"language": a.kwargs["language"]}


def _sentences_args(a: _Args) -> dict[str, Any]:
    return {"num_sentences": a.count("num_sentences"), "relation": a.relation("relation")}


def _words_args(a: _Args) -> dict[str, Any]:
    return {"num_words": a.count("num_words"), "relation": a.relation("relation")}


def _first_word_args(a: _Args) -> dict[str, Any]:
    paragraphs = a.count("num_paragraphs")
    nth = a.count("nth_paragraph")
    if nth > paragraphs:
        raise a.fail("nth_paragraph", f"at most num_paragraphs ({paragraphs})")
    first_word = a.kwargs.get("first_word")
    if not isinstance(first_word, str):
        raise a.fail("first_word", "a string")
    return {"num_paragraphs": paragraphs, "nth_paragraph": nth, "first_word": first_word.lower()}


def _postscript_args(a: _Args) -> dict[str, Any]:
    marker = a.text("postscript_marker")
    pattern: _AnyPattern | str
    if marker == "P.P.S":
        pattern = _PPS
    elif marker == "P.S.":
        pattern = _PS
    elif _REGEX_SYNTAX.search(marker) is None:
        pattern = marker.lower()
    else:  # lm-eval's pattern as it is, on RE2
        pattern = a.pattern(
            "postscript_marker", r"\s*" + marker.lower() + r".*$", marker, re.MULTILINE
        )
    return {"postscript_marker": marker, "_pattern": pattern}


def _sections_args(a: _Args) -> dict[str, Any]:
    splitter = a.text("section_spliter")
    return {
        "section_spliter": splitter,
        "num_sections": a.count("num_sections"),
        "_pattern": a.pattern("section_spliter", r"\s?" + splitter + r"\s?\d+\s?", splitter),
    }


def _repeat_args(a: _Args) -> dict[str, Any]:
    prompt = a.text("prompt_to_repeat", strip=False)
    return {"prompt_to_repeat": prompt, "_prompt": prompt.strip().lower()}


def _end_args(a: _Args) -> dict[str, Any]:
    end = a.text("end_phrase")
    return {"end_phrase": end, "_end": end.lower()}


def _capital_args(a: _Args) -> dict[str, Any]:
    return {
        "capital_frequency": a.count("capital_frequency", minimum=None),
        "capital_relation": a.relation("capital_relation"),
    }


def _counted(key: str) -> Callable[[_Args], dict[str, Any]]:
    def parse(a: _Args) -> dict[str, Any]:
        return {key: a.count(key)}

    return parse


def _none(a: _Args) -> dict[str, Any]:
    return {}


_Check = Callable[[Response, Mapping[str, Any]], bool]
_Parse = Callable[[_Args], dict[str, Any]]

# id -> (argument names, how to read them, check): lm-eval's INSTRUCTION_DICT, in its order.
_CHECKS: dict[str, tuple[tuple[str, ...], _Parse, _Check]] = {
    "keywords:existence": (("keywords",), _keywords_args, _keywords_existence),
    "keywords:frequency": (
        ("keyword", "frequency", "relation"),
        _frequency_args,
        _keyword_frequency,
    ),
    "keywords:forbidden_words": (("forbidden_words",), _forbidden_args, _forbidden_words),
    "keywords:letter_frequency": (
        ("letter", "let_frequency", "let_relation"),
        _letter_args,
        _letter_frequency,
    ),
    "language:response_language": (("language",), _language_args, _response_language),
    "length_constraints:number_sentences": (
        ("num_sentences", "relation"),
        _sentences_args,
        _number_sentences,
    ),
    "length_constraints:number_paragraphs": (
        ("num_paragraphs",),
        _counted("num_paragraphs"),
        _number_paragraphs,
    ),
    "length_constraints:number_words": (("num_words", "relation"), _words_args, _number_words),
    "length_constraints:nth_paragraph_first_word": (
        ("num_paragraphs", "nth_paragraph", "first_word"),
        _first_word_args,
        _nth_paragraph_first_word,
    ),
    "detectable_content:number_placeholders": (
        ("num_placeholders",),
        _counted("num_placeholders"),
        _number_placeholders,
    ),
    "detectable_content:postscript": (("postscript_marker",), _postscript_args, _postscript),
    "detectable_format:number_bullet_lists": (
        ("num_bullets",),
        _counted("num_bullets"),
        _number_bullet_lists,
    ),
    "detectable_format:constrained_response": ((), _none, _constrained_response),
    "detectable_format:number_highlighted_sections": (
        ("num_highlights",),
        _counted("num_highlights"),
        _number_highlighted_sections,
    ),
    "detectable_format:multiple_sections": (
        ("section_spliter", "num_sections"),
        _sections_args,
        _multiple_sections,
    ),
    "detectable_format:json_format": ((), _none, _json_format),
    "detectable_format:title": ((), _none, _title),
    "combination:two_responses": ((), _none, _two_responses),
    "combination:repeat_prompt": (("prompt_to_repeat",), _repeat_args, _repeat_prompt),
    "startend:end_checker": (("end_phrase",), _end_args, _end_checker),
    "change_case:capital_word_frequency": (
        ("capital_frequency", "capital_relation"),
        _capital_args,
        _capital_word_frequency,
    ),
    "change_case:english_capital": ((), _none, _english_capital),
    "change_case:english_lowercase": ((), _none, _english_lowercase),
    "punctuation:no_comma": ((), _none, _no_comma),
    "startend:quotation": ((), _none, _quotation),
}

INSTRUCTION_IDS: Final = tuple(_CHECKS)
"""Every instruction id lm-eval's IFEval registry has (``instructions_registry.py``)."""


# -- the reference --------------------------------------------------------------------------


def parse_instructions(value: Any, where: str = "reference") -> tuple[Instruction, ...]:
    """IFEval's ``instruction_id_list`` and ``kwargs`` (one dict per id) as `Instruction`s.

    Args:
        value: A mapping in IFEval's shape (a row of IFEval's data works as it is: other keys
            are ignored), or its JSON text.
        where: How error messages name `value`.

    Raises:
        ValueError: A key is missing or malformed; the message names it and what was found.
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ValueError(f"{where} is text that is not JSON: {value[:60]!r}") from None
    if not isinstance(value, dict | Mapping):
        raise ValueError(
            f"{where} must be an object with 'instruction_id_list' and 'kwargs' (IFEval's "
            f"shape), got {type(value).__name__}"
        )
    ids = value.get("instruction_id_list")
    if not isinstance(ids, list | tuple) or not ids:
        raise ValueError(
            f"{where}['instruction_id_list'] must be a non-empty list of instruction ids, "
            f"got {ids!r}" + ("" if "instruction_id_list" in value else " (the key is missing)")
        )
    for i, id in enumerate(ids):
        if not isinstance(id, str) or id not in _CHECKS:
            close = difflib.get_close_matches(str(id), INSTRUCTION_IDS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else " (see INSTRUCTION_IDS)"
            raise ValueError(
                f"{where}['instruction_id_list'][{i}]: unknown instruction id {id!r}{hint}"
            )
    all_kwargs = value.get("kwargs")
    if not isinstance(all_kwargs, list | tuple):
        raise ValueError(
            f"{where}['kwargs'] must be a list of objects, one per instruction id, got "
            f"{all_kwargs!r}" + ("" if "kwargs" in value else " (the key is missing)")
        )
    if len(all_kwargs) != len(ids):
        raise ValueError(
            f"{where}['kwargs'] has {len(all_kwargs)} entries for {len(ids)} instruction ids; "
            "it needs one per id, in the same order"
        )
    return tuple(
        [
            _instruction(id, kwargs, where, i)
            for i, (id, kwargs) in enumerate(zip(ids, all_kwargs, strict=True))
        ]
    )


def _instruction(id: str, kwargs: Any, where: str, index: int) -> Instruction:
    if not isinstance(kwargs, dict | Mapping):
        raise ValueError(
            f"{where}['kwargs'][{index}] must be an object (of {id!r}'s arguments), got {kwargs!r}"
        )
    names, parse, _ = _CHECKS[id]
    given = {k: v for k, v in kwargs.items() if v}  # lm-eval keeps only truthy kwargs
    if any(isinstance(v, float) for v in given.values()):  # a NaN is a dataframe's missing cell
        given = {k: v for k, v in given.items() if not (isinstance(v, float) and math.isnan(v))}
    if not given.keys() <= set(names):
        unknown = sorted(str(k) for k in given if k not in names)[0]
        takes = f"it takes {', '.join(names)}" if names else "it takes no argument"
        raise ValueError(
            f"{where}['kwargs'][{index}][{unknown!r}]: {id!r} has no argument {unknown!r} "
            f"({takes}); got {given[unknown]!r}"
        )
    return Instruction(id, parse(_Args(id, given, where, index)) if names else {})
