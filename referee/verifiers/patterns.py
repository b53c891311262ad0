"""Regular expressions from spec files, run so that no completion can make them hang.

A pattern a spec author writes is matched against what the policy writes, and the policy will
find the inputs that make a backtracking engine take exponential time (``^(a+)+$`` on
``"a" * 34 + "!"``). `compile_pattern` keeps Python's `re` syntax and meaning, and runs the
pattern on RE2 (``google-re2``), whose time is linear in the text, wherever RE2 can express
it. The rest runs on the `regex` module with a timeout, so that a runaway match is stopped and
reported as `VerifierTimeout` for that rollout alone (which a check scores 0 with the reason,
``fault: timeout``: the policy's verdict, docs/threat-model.md, "Blame").

What falls back to `regex`, and why (RE2 guarantees linear time by having no backtracking,
so it has nothing that needs it):

- backreferences (``\\1``, ``(?P=name)``), conditionals (``(?(1)a|b)``);
- lookahead and lookbehind (``(?=``, ``(?!``, ``(?<=``, ``(?<!``);
- atomic groups (``(?>...)``) and possessive repeats (``a*+``);
- a non-MULTILINE ``$`` anywhere but at the very end of the pattern (`re`'s ``$`` also
  matches before a final newline, which RE2 can only mimic at the end);
- repeat counts above 1000 and patterns too large for RE2's memory budget;
- ``re.ASCII`` with IGNORECASE, and ``\\W``/``\\S``/``\\D`` inside a negated set next to
  other items (RE2 cannot write those sets);
- on non-ASCII text only: ``\\b`` and ``\\B`` (RE2's are ASCII-only; on ASCII text they agree);
- on text with lone surrogates only (RE2 needs valid UTF-8).

The pattern is parsed by `re`'s own parser and written out for each engine (see
`referee.verifiers._pattern_syntax`), so both engines match what `re` matches: ``\\w``,
``\\d`` and ``\\s`` keep `re`'s Unicode sets, ``^``/``$``/``.`` their MULTILINE and DOTALL
meaning, ``\\Z`` is end of text, and IGNORECASE folds the Turkish dotted and dotless i as `re`
does. Known differences that remain: a character assigned in a newer Unicode version than
Python's may count as a letter or digit for RE2 (for `re` it is unassigned); and after an
empty match, `re` first retries the same position for a non-empty match, while here the next
match starts one character later (only patterns that prefer matching nothing, such as
``|a`` or ``a*?``, notice); and ``\\B`` matches an empty text, as `re` does only from Python
3.14 on.
"""

from __future__ import annotations

import contextlib
import functools
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import re2  # type: ignore[import-untyped]  # google-re2 ships no annotations
import regex  # type: ignore[import-untyped]

from referee.errors import VerifierTimeout
from referee.verifiers._pattern_syntax import Translation, Unsupported, translate

__all__ = ["DEFAULT_TIMEOUT", "Pattern", "PatternMatch", "compile_pattern"]

DEFAULT_TIMEOUT = 2.0
"""Seconds one call may run on the backtracking engine before it is stopped."""

_ALLOWED_FLAGS = re.IGNORECASE | re.MULTILINE | re.DOTALL | re.VERBOSE | re.ASCII | re.UNICODE
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a pattern RE2 refuses is expected, not worth a log line


@functools.lru_cache(maxsize=1024)
def compile_pattern(pattern: str, flags: int = 0, *, timeout: float = DEFAULT_TIMEOUT) -> Pattern:
    """`pattern` (Python `re` syntax and meaning), ready to match hostile text.

    Args:
        pattern: The regular expression.
        flags: `re` flags: IGNORECASE, MULTILINE, DOTALL, VERBOSE, ASCII.
        timeout: Seconds one call may take when the pattern runs on the backtracking engine.

    Raises:
        ValueError: The pattern is not valid for `re`, or uses another flag.
    """
    if flags & ~_ALLOWED_FLAGS:
        raise ValueError(f"unsupported regex flags {re.RegexFlag(flags & ~_ALLOWED_FLAGS)!r}")
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout}")
    try:
        compiled = re.compile(pattern, flags)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
    return Pattern(pattern, flags, timeout, compiled.groups, dict(compiled.groupindex))


class PatternMatch:
    """One match: its groups, as `re.Match` gives them."""

    __slots__ = ("_index", "_source", "_spans")

    def __init__(
        self, source: str | bytes, spans: tuple[tuple[int, int], ...], index: Mapping[str, int]
    ) -> None:
        self._source = source
        self._spans = spans
        self._index = index

    def group(self, which: int | str = 0) -> str | None:
        """The text of group `which` (a number or a name); None when it took no part."""
        number = self._index[which] if isinstance(which, str) else which
        start, end = self._spans[number]
        if start < 0:
            return None
        part = self._source[start:end]
        return part.decode("utf-8") if isinstance(part, bytes) else part

    def groups(self, default: str | None = None) -> tuple[str | None, ...]:
        """Every group after the whole match; `default` for those that took no part."""
        out = (self.group(i) for i in range(1, len(self._spans)))
        return tuple(default if g is None else g for g in out)

    def groupdict(self, default: str | None = None) -> dict[str, str | None]:
        """Named groups by name."""
        out = {name: self.group(name) for name in self._index}
        return {name: default if g is None else g for name, g in out.items()}

    def __repr__(self) -> str:
        return f"<PatternMatch {self.group()!r}>"


@dataclass(frozen=True, slots=True)
class _Re2:
    """A pattern's RE2 programs: one to search with, one for full matches."""

    search: Any
    full: Any
    syntax: Translation


class Pattern:
    """A compiled pattern: RE2 where it can, else `regex` under `timeout`.

    Build one with `compile_pattern`. The methods mirror `re.Pattern`'s; a call that runs past
    `timeout` on the backtracking engine raises `VerifierTimeout`.

    Attributes:
        pattern: The pattern as written.
        flags: Its `re` flags.
        timeout: Seconds allowed per call on the backtracking engine.
        groups: How many capturing groups it has.
        groupindex: Group names to numbers.
        engine: ``"re2"`` when RE2 runs it (on every text, or on ASCII text when
            `fallback_reason` says so), ``"regex"`` when the backtracking engine runs it.
        fallback_reason: Why (some) texts go to the backtracking engine; None if none do.
    """

    def __init__(
        self, pattern: str, flags: int, timeout: float, groups: int, groupindex: dict[str, int]
    ) -> None:
        self.pattern = pattern
        self.flags = flags
        self.timeout = timeout
        self.groups = groups
        self.groupindex: Mapping[str, int] = groupindex
        self.fallback_reason: str | None = None
        self._re2: _Re2 | None = None
        self._regex: Any = None
        try:
            syntax = translate(pattern, flags, "re2")
            search = re2.compile(syntax.text, _RE2_OPTIONS)
            full = search if syntax.full == syntax.text else re2.compile(syntax.full, _RE2_OPTIONS)
        except (Unsupported, re2.error) as exc:
            self.fallback_reason = _reason(exc)
        else:
            self._re2 = _Re2(search, full, syntax)
            if syntax.ascii_only:
                self.fallback_reason = "\\b and \\B on non-ASCII text"
        self.engine: Literal["re2", "regex"] = "regex" if self._re2 is None else "re2"
        if self.fallback_reason is not None:
            self._program()  # so that a pattern `regex` refuses is refused here, not per rollout

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (self.pattern, self.flags, self.timeout)

    def __repr__(self) -> str:
        return f"<Pattern {self.pattern!r} on {self.engine}>"

    def search(self, text: str) -> PatternMatch | None:
        """The first match anywhere in `text`, or None."""
        data = self._re2_text(text)
        if self._re2 is not None and data is not None:
            return next(self._re2_matches(self._re2, data), None)
        with self._limit():
            found = self._program().search(text, timeout=self.timeout, concurrent=True)
        return None if found is None else self._wrap(text, found)

    def fullmatch(self, text: str) -> PatternMatch | None:
        """The match of the whole of `text`, or None."""
        data = self._re2_text(text)
        if self._re2 is not None and data is not None:
            found = self._re2.full.fullmatch(data)
            return None if found is None else self._wrap(data, found)
        with self._limit():
            found = self._program().fullmatch(text, timeout=self.timeout, concurrent=True)
        return None if found is None else self._wrap(text, found)

    def finditer(self, text: str) -> Iterator[PatternMatch]:
        """Every non-overlapping match, left to right."""
        data = self._re2_text(text)
        if self._re2 is not None and data is not None:
            return self._re2_matches(self._re2, data)
        with self._limit():  # all at once, so that a timeout is raised here
            found = list(self._program().finditer(text, timeout=self.timeout, concurrent=True))
        return iter([self._wrap(text, m) for m in found])

    def findall(self, text: str) -> list[Any]:
        """As `re.findall`: the matches, or their group (a tuple of groups, if several)."""
        if self.groups == 0:
            return [m.group() for m in self.finditer(text)]
        if self.groups == 1:
            return [m.groups("")[0] for m in self.finditer(text)]
        return [m.groups("") for m in self.finditer(text)]

    # -- engines ----------------------------------------------------------------------------
    def _re2_text(self, text: str) -> bytes | None:
        """`text` as RE2 reads it (UTF-8), or None when this text goes to `regex`."""
        if self._re2 is None or (self._re2.syntax.ascii_only and not text.isascii()):
            return None
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates (undecodable bytes) are not UTF-8
            return None

    def _re2_matches(self, re2_: _Re2, data: bytes) -> Iterator[PatternMatch]:
        pos, end = 0, len(data)
        while pos <= end:
            found = re2_.search.search(data, pos)
            if found is None:
                return
            yield self._wrap(data, found, dollar_group=re2_.syntax.dollar_group)
            start = found.start()
            stop = found.start(self.groups + 1) if re2_.syntax.dollar_group else found.end()
            pos = stop if stop > start else stop + _char_width(data, stop)

    def _program(self) -> Any:
        if self._regex is None:
            self._regex = _regex_program(self.pattern, self.flags)
        return self._regex

    @contextlib.contextmanager
    def _limit(self) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        except TimeoutError:
            elapsed = time.monotonic() - started
            raise VerifierTimeout(
                f"pattern /{self.pattern}/ ran past its {self.timeout:g}s limit on this text "
                f"(stopped after {elapsed:.2f}s; it runs on the backtracking engine because of "
                f"{self.fallback_reason or 'this text'})"
            ) from None

    def _wrap(self, source: str | bytes, found: Any, *, dollar_group: bool = False) -> PatternMatch:
        spans = tuple(found.span(i) for i in range(self.groups + 1))
        if dollar_group:  # the match ends where the stand-in for `$` begins
            spans = ((spans[0][0], found.span(self.groups + 1)[0]), *spans[1:])
        return PatternMatch(source, spans, self.groupindex)


def _rebuild(pattern: str, flags: int, timeout: float) -> Pattern:
    return compile_pattern(pattern, flags, timeout=timeout)


def _reason(exc: Exception) -> str:
    if isinstance(exc, Unsupported):
        return str(exc)
    message = exc.args[0] if exc.args else exc
    text = message.decode(errors="replace") if isinstance(message, bytes) else str(message)
    return f"RE2 refuses it ({text})"


def _regex_program(pattern: str, flags: int) -> Any:
    """The pattern for the `regex` module, with `re`'s meaning where it can be written."""
    try:
        return regex.compile(translate(pattern, flags, "regex").text, regex.VERSION0)
    except (Unsupported, regex.error):
        pass
    # As written: `regex` reads Python syntax, with its own Unicode sets for \w, \d, \s.
    try:
        return regex.compile(pattern, flags | regex.VERSION0)
    except regex.error as exc:
        raise ValueError(f"regular expression {pattern!r} cannot run time-limited: {exc}") from None


def _char_width(data: bytes, at: int) -> int:
    """Bytes of the UTF-8 character starting at `at` (1 at the end of the text)."""
    if at >= len(data):
        return 1
    lead = data[at]
    return 1 if lead < 0xC0 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
