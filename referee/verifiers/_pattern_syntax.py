"""Python `re` patterns rewritten for RE2 or for the `regex` module, keeping `re`'s meaning.

The pattern is parsed by `re`'s own parser (so what it means is exactly what `re` would
match) and written back out node by node in the target's syntax. What differs between the
engines is spelled out rather than left to each engine's defaults:

- ``\\w``, ``\\d``, ``\\s`` mean what they mean in `re` (Unicode letters and numbers; Unicode
  decimal digits; the 29 characters `str.isspace` accepts), or their ASCII sets under
  ``re.ASCII``. RE2's own are ASCII, and the `regex` module's ``\\w`` also takes combining
  marks.
- ``^``, ``$`` and ``.`` are written with the MULTILINE/DOTALL state in force where they
  stand; ``\\Z`` (end of text in `re`) becomes RE2's ``\\z``.
- Under IGNORECASE, `re` folds i, I, dotted İ and dotless ı together; neither engine does, so
  those four are listed explicitly.

A construct the target cannot run with `re`'s meaning raises `Unsupported`; for RE2 those are
backreferences, lookaround, atomic groups, possessive repeats, conditionals, a ``$`` that is
not the pattern's last item, ``re.ASCII`` with IGNORECASE, and ``\\W``/``\\S``/``\\D`` inside a
negated set with other items. A Unicode ``\\b``/``\\B`` is written as RE2's ASCII one and
reported in `Translation.ascii_only`: exact on ASCII text only.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Dialect", "Translation", "Unsupported", "translate"]

# `re`'s parser is private but has kept this tree's shape since Python 2; a node it grows
# later is simply Unsupported, and the caller falls back to the pattern as written.
_parser: Any = importlib.import_module("re._parser")
_c: Any = importlib.import_module("re._constants")

Dialect = Literal["re2", "regex"]

_I, _M, _S, _A = re.IGNORECASE, re.MULTILINE, re.DOTALL, re.ASCII
_TURKISH_I = (0x49, 0x69, 0x130, 0x131)  # I i İ ı: one class under re's IGNORECASE

# Python's `\s` (str.isspace), as code point ranges; a test checks it against `re`.
_SPACE = ((0x09, 0x0D), (0x1C, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680),
          (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F),
          (0x3000, 0x3000))  # fmt: skip
_ASCII_SPACE = ((0x09, 0x0D), (0x20, 0x20))


_BACKTRACKING_ONLY = {
    "GROUPREF": "a backreference",
    "GROUPREF_EXISTS": "a conditional group",
    "ASSERT": "lookaround",
    "ASSERT_NOT": "negative lookaround",
    "ATOMIC_GROUP": "an atomic group",
}


class Unsupported(Exception):
    """The target engine cannot run this pattern with the meaning `re` gives it."""


@dataclass(frozen=True, slots=True)
class Translation:
    """A pattern in the target's syntax.

    Attributes:
        text: The pattern for search and iteration.
        full: The pattern for full matches (differs when `dollar_group` is set).
        dollar_group: `text` ends in an added group standing for `re`'s final ``$`` (which
            also matches before a final newline): the match ends where that group starts, and
            the group is not the caller's.
        ascii_only: Exact on ASCII text only (a Unicode ``\\b`` written as RE2's ASCII one).
    """

    text: str
    full: str
    dollar_group: bool = False
    ascii_only: bool = False


def translate(pattern: str, flags: int, dialect: Dialect) -> Translation:
    """`pattern` (Python syntax, already valid for `re`) in `dialect`'s syntax.

    Raises:
        Unsupported: The dialect cannot express some part of it with `re`'s meaning.
    """
    try:
        tree = _parser.parse(pattern, flags)
    except Exception as exc:  # a parser from another Python version: the caller falls back
        raise Unsupported(f"re's parser: {exc}") from None
    writer = _Writer(dialect, {gid: name for name, gid in tree.state.groupdict.items()})
    top = tree.state.flags
    nodes = list(tree)
    last = nodes[-1] if nodes else (None, None)
    dollar = dialect == "re2" and last[0] is _c.AT and last[1] is _c.AT_END and not top & _M
    body = writer.sequence(nodes[:-1] if dollar else nodes, top)
    prefix = "(?i)" if top & _I else ""
    if dialect == "regex" and top & _A:
        prefix += "(?a)"  # for case folding; RE2 has no such flag (and is refused it with I)
    if not dollar:
        return Translation(prefix + body, prefix + body, ascii_only=writer.ascii_only)
    # re's `$` matches at the end and before a final newline; RE2 has no lookahead, so the
    # newline is consumed by a trailing group that the match object then leaves out.
    return Translation(
        f"{prefix}(?:{body})(\\n?)\\z", prefix + body, True, ascii_only=writer.ascii_only
    )


class _Writer:
    """Writes `re` parse-tree nodes out in one dialect."""

    def __init__(self, dialect: Dialect, names: dict[int, str]) -> None:
        self.dialect = dialect
        self.names = names
        self.ascii_only = False

    # -- characters and sets ------------------------------------------------------------
    def char(self, code: int) -> str:
        if chr(code).isascii() and chr(code).isalnum():
            return chr(code)
        if self.dialect == "re2":
            return f"\\x{{{code:X}}}"
        return f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}"

    def ranges(self, spans: Iterable[tuple[int, int]]) -> str:
        return "".join(
            self.char(lo) if lo == hi else f"{self.char(lo)}-{self.char(hi)}" for lo, hi in spans
        )

    def category(self, cat: Any, flags: int) -> tuple[str, bool]:
        """(set body, negated) for a ``\\w``-style category."""
        name = cat.name.removeprefix("CATEGORY_")
        negated = name.startswith("NOT_")
        kind = name.removeprefix("NOT_")
        ascii_ = bool(flags & _A)
        if kind == "WORD":
            body = "0-9A-Za-z_" if ascii_ else "\\p{L}\\p{N}_"
        elif kind == "DIGIT":
            body = "0-9" if ascii_ else "\\p{Nd}"
        elif kind == "SPACE":
            body = self.ranges(_ASCII_SPACE if ascii_ else _SPACE)
        else:
            raise Unsupported(f"category {name}")
        return body, negated

    def set_(self, items: list[tuple[Any, Any]], flags: int) -> str:
        negate = bool(items) and items[0][0] is _c.NEGATE
        items = items[1:] if negate else items
        plain: list[tuple[int, int]] = []
        positive: list[str] = []
        negative: list[str] = []
        for op, av in items:
            if op is _c.LITERAL:
                plain.append((av, av))
            elif op is _c.RANGE:
                plain.append(av)
            elif op is _c.CATEGORY:
                body, negated = self.category(av, flags)
                (negative if negated else positive).append(body)
            else:
                raise Unsupported(f"set item {op}")
        if flags & _I and not flags & _A:
            plain += self._turkish_i(plain)
        inside = self.ranges(plain) + "".join(positive)
        if not negative:
            return f"[{'^' if negate else ''}{inside}]"
        if len(negative) == 1 and not inside:  # \W alone, or [^\W]
            return f"[{'' if negate else '^'}{negative[0]}]"
        parts = [f"[^{body}]" for body in negative] + ([f"[{inside}]"] if inside else [])
        if not negate:
            return f"(?:{'|'.join(parts)})"
        if self.dialect == "re2":
            raise Unsupported("a negated set holding \\W, \\S or \\D with other items")
        return f"(?:(?!{'|'.join(parts)})(?s:.))"

    def _turkish_i(self, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
        if any(lo <= code <= hi for code in _TURKISH_I for lo, hi in spans):
            return [(code, code) for code in _TURKISH_I]
        return []

    def literal(self, code: int, flags: int, negated: bool = False) -> str:
        if flags & _I and not flags & _A and code in _TURKISH_I:
            return f"[{'^' if negated else ''}{self.ranges((c, c) for c in _TURKISH_I)}]"
        if negated:
            return f"[^{self.char(code)}]"
        return self.char(code)

    # -- structure ----------------------------------------------------------------------
    def sequence(self, nodes: Iterable[tuple[Any, Any]], flags: int) -> str:
        return "".join(self.node(op, av, flags) for op, av in nodes)

    def node(self, op: Any, av: Any, flags: int) -> str:
        if flags & _A and flags & _I and self.dialect == "re2":
            raise Unsupported("re.ASCII with IGNORECASE (RE2 folds case over all of Unicode)")
        if op is _c.LITERAL:
            return self.literal(av, flags)
        if op is _c.NOT_LITERAL:
            return self.literal(av, flags, negated=True)
        if op is _c.ANY:
            return "(?s:.)" if flags & _S else "."
        if op is _c.IN:
            return self.set_(av, flags)
        if op is _c.BRANCH:
            return "(?:" + "|".join(self.sequence(alt, flags) for alt in av[1]) + ")"
        if op is _c.SUBPATTERN:
            gid, add, remove, body = av
            return self.group(gid, add, remove, body, flags)
        if op in (_c.MAX_REPEAT, _c.MIN_REPEAT, _c.POSSESSIVE_REPEAT):
            low, high, body = av
            return self.repeat(op, low, high, body, flags)
        if op is _c.AT:
            return self.at(av, flags)
        if self.dialect == "re2":
            raise Unsupported(_BACKTRACKING_ONLY.get(op.name, op.name))
        return self.regex_only(op, av, flags)

    def group(self, gid: int | None, add: int, remove: int, body: Any, flags: int) -> str:
        inner = self.sequence(body, (flags | add) & ~remove)
        if gid is not None:
            name = self.names.get(gid)
            return f"(?P<{name}>{inner})" if name else f"({inner})"
        switches = "i" if add & _I else ""
        switches += "-i" if remove & _I else ""
        if add & _A or remove & _A:
            raise Unsupported("a scoped ASCII flag")  # `regex` only takes it for the whole
        return f"(?{switches}:{inner})"

    def repeat(self, op: Any, low: int, high: int, body: Any, flags: int) -> str:
        inner = self.sequence(body, flags)
        if high == _c.MAXREPEAT:
            count = {0: "*", 1: "+"}.get(low, f"{{{low},}}")
        elif (low, high) == (0, 1):
            count = "?"
        else:
            count = f"{{{low}}}" if low == high else f"{{{low},{high}}}"
        if op is _c.MIN_REPEAT:
            count += "?"
        elif op is _c.POSSESSIVE_REPEAT:
            if self.dialect == "re2":
                raise Unsupported("a possessive repeat")
            count += "+"
        return f"(?:{inner}){count}"

    def at(self, code: Any, flags: int) -> str:
        if code is _c.AT_BEGINNING:
            return "(?m:^)" if flags & _M else "^"
        if code is _c.AT_BEGINNING_STRING:
            return "\\A"
        if code is _c.AT_END_STRING:
            return "\\z" if self.dialect == "re2" else "\\Z"
        if code is _c.AT_END:
            if flags & _M:
                return "(?m:$)"
            if self.dialect == "re2":
                raise Unsupported("a $ before the end of the pattern")
            return "$"
        if code in (_c.AT_BOUNDARY, _c.AT_NON_BOUNDARY):
            return self.boundary(code is _c.AT_BOUNDARY, flags)
        raise Unsupported(f"anchor {code}")

    def boundary(self, at: bool, flags: int) -> str:
        if self.dialect == "re2":
            # RE2's \b is ASCII: the same as re's on ASCII text, or under re.ASCII.
            if not flags & _A:
                self.ascii_only = True
            return "\\b" if at else "\\B"
        word = f"[{self.category(_c.CATEGORY_WORD, flags)[0]}]"
        if at:
            return f"(?:(?<={word})(?!{word})|(?<!{word})(?={word}))"
        return f"(?:(?<={word})(?={word})|(?<!{word})(?!{word}))"

    def regex_only(self, op: Any, av: Any, flags: int) -> str:
        """The constructs only the backtracking engine has."""
        if op is _c.GROUPREF:
            return f"(?:\\g<{av}>)"
        if op is _c.GROUPREF_EXISTS:
            gid, yes, no = av
            tail = "" if no is None else "|" + self.sequence(no, flags)
            return f"(?({gid}){self.sequence(yes, flags)}{tail})"
        if op in (_c.ASSERT, _c.ASSERT_NOT):
            direction, body = av
            kind = {(1, True): "=", (1, False): "!", (-1, True): "<=", (-1, False): "<!"}
            return f"(?{kind[direction, op is _c.ASSERT]}{self.sequence(body, flags)})"
        if op is _c.ATOMIC_GROUP:
            return f"(?>{self.sequence(av, flags)})"
        raise Unsupported(f"node {op}")
