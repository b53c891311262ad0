"""What a signature is (`Ty`, `Param`, `Signature`), and the scanner every typed language's
reader uses: a source blanked of comments and literals, its brackets paired once."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "WINDOW",
    "Kind",
    "Param",
    "Passing",
    "Signature",
    "Source",
    "Ty",
    "Unsupported",
    "blank",
    "int_ty",
    "ints",
    "param_list",
    "split",
]

Kind = Literal["int", "float", "bool", "char", "str", "list", "map", "pair", "option", "any"]
Passing = Literal["", "ref", "mut", "str"]


class Unsupported(Exception):
    """The function's signature holds a type the drivers cannot build or print."""


@dataclass(frozen=True)
class Ty:
    """A parameter's or result's type, as far as the drivers need it.

    Attributes:
        kind: What JSON value it takes: ``int``, ``float``, ``bool``, ``char`` (a string of
            one character), ``str``, ``list``, ``map`` (an object), ``pair`` (a list of
            two), ``option`` (null or its one type), ``any`` (a result the driver prints
            whatever it is: ``void``, ``auto``).
        text: The language's spelling, where a driver writes it (Go's, Rust's).
        of: The element type (``list``, ``option``), key and value (``map``), the two
            (``pair``).
        lo: An integer's least value; a char's least code point.
        hi: An integer's greatest value; a char's greatest code point; for a string, 1 when
            it must be valid Unicode (no lone surrogate: UTF-8 languages), else 0.
        ref: Rust: passed as ``&`` (``ref``), ``&mut`` (``mut``) or by value (``""``);
            ``str`` for ``&str`` itself.
    """

    kind: Kind
    text: str = ""
    of: tuple[Ty, ...] = ()
    lo: int = 0
    hi: int = 0
    ref: Passing = ""


@dataclass(frozen=True)
class Param:
    """One parameter: its name (possibly empty) and type."""

    name: str
    ty: Ty


@dataclass(frozen=True)
class Signature:
    """The entry function as its source defines it.

    Attributes:
        name: Its name.
        params: Its parameters, in order.
        results: Its result types (Go may have several; none for ``void``).
        owner: The class (Java: the nested path, ``Outer.Inner``) or ``impl`` that holds
            it, else None.
        static: It needs no instance.
    """

    name: str
    params: tuple[Param, ...]
    results: tuple[Ty, ...] = ()
    owner: str | None = None
    static: bool = True


def ints(bits: int, signed: bool = True) -> tuple[int, int]:
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


def int_ty(text: str, bits: int, signed: bool = True) -> Ty:
    lo, hi = ints(bits, signed)
    return Ty("int", text, lo=lo, hi=hi)


# --- scanning ------------------------------------------------------------------------------

_C_LIKE = re.compile(
    r"//[^\n]*|/\*.*?(?:\*/|\Z)"  # comments
    r'|"(?:\\.|[^"\\\n])*"'  # strings
    r"|'(?:\\.[^'\n]{0,8}|[^'\\\n])'"  # characters ('\u00e9' included); not Rust lifetimes
    r"|`[^`]*`",  # Go's raw strings, JavaScript's templates
    re.S,
)
_PYTHON = re.compile(r'#[^\n]*|"""[\s\S]*?(?:"""|\Z)|\'\'\'[\s\S]*?(?:\'\'\'|\Z)'
                     r'|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'')  # fmt: skip


def blank(code: str, language: str) -> str:
    """`code` with its comments, and the insides of its string and character literals, as
    spaces (newlines kept): the same length, so positions hold, and nothing in a comment or a
    string can look like a definition."""
    pattern = _PYTHON if language == "python" else _C_LIKE

    def spaces(m: re.Match[str]) -> str:
        text = m.group(0)
        inner = re.sub(r"[^\n]", " ", text) if "\n" in text else " " * len(text)
        if text[0] in "\"'`" and len(text) >= 2:  # keep the quotes: a string is still there
            return text[0] + inner[1:-1] + text[-1]
        return inner

    return pattern.sub(spaces, code)


_CANDIDATES = 200  # occurrences of the name looked at: the definition is among the first
WINDOW = 400  # characters before a name, or after its parameters, that may hold its types
_LONGEST = 300  # characters of one parameter


@dataclass
class Source:
    """A blanked source and its brackets, paired once (the program is hostile: every scan of
    it is linear, whatever it holds)."""

    text: str
    pairs: dict[int, int] = field(default_factory=dict)
    _blocks: dict[str, list[tuple[str, int, int]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        open_at: dict[str, list[int]] = {"(": [], "{": [], "[": []}
        opener = {")": "(", "}": "{", "]": "["}
        for m in re.finditer(r"[(){}\[\]]", self.text):
            c = m.group(0)
            if c in open_at:
                open_at[c].append(m.start())
            elif open_at[opener[c]]:
                self.pairs[open_at[opener[c]].pop()] = m.start()

    def blocks(self, keyword: str) -> list[tuple[str, int, int]]:
        """(name, start, end) of each ``class``/``struct``/``impl`` body."""
        if keyword not in self._blocks:
            found = []
            pattern = rf"\b(?:{keyword})\s+(?:<[^>{{]{{0,200}}>\s*)?(\w+)[^{{;()]{{0,300}}\{{"
            for m in re.finditer(pattern, self.text):
                end = self.pairs.get(m.end() - 1, len(self.text))
                found.append((m.group(1), m.end() - 1, end))
            self._blocks[keyword] = found
        return self._blocks[keyword]

    def owners(self, keyword: str, at: int) -> list[str]:
        """The names of the blocks that hold position `at`, outermost first."""
        return [name for name, start, end in self.blocks(keyword) if start < at < end]

    def before(self, at: int) -> str:
        """The declaration's text before position `at`: back to the last ``;``, ``{`` or
        ``}``, at most `WINDOW` characters, without preprocessor lines."""
        low = max(0, at - WINDOW)
        start = max(self.text.rfind(c, low, at) for c in ";{}")
        lines = self.text[max(start + 1, low) : at].split("\n")
        if start < 0 and low > 0:
            lines = lines[1:]  # cut mid-line
        return " ".join(line for line in lines if not line.lstrip().startswith("#"))

    def candidates(self, pattern: str) -> list[re.Match[str]]:
        return list(itertools.islice(re.finditer(pattern, self.text), _CANDIDATES))


def split(text: str, sep: str = ",") -> list[str]:
    """`text` split at `sep` outside brackets of any kind (``<>`` included)."""
    parts, depth, last = [], 0, 0
    for i, c in enumerate(text):
        if c in "([{<":
            depth += 1
        elif c in ")]}>" and not (c == ">" and text[i - 1 : i] == "-"):
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(text[last:i])
            last = i + 1
    parts.append(text[last:])
    return [p.strip() for p in parts if p.strip()]


def param_list(text: str) -> list[str]:
    """A parameter list's parameters (`Unsupported` for one past `_LONGEST` characters)."""
    parts = split(text)
    for part in parts:
        if len(part) > _LONGEST:
            raise Unsupported(f"a parameter of {len(part)} characters")
    return parts
