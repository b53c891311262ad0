"""The entry function of a program, found in its source: where it is, and its parameter types.

`function_tests` must call a function written in a typed language with arguments of the
types it declares. This module finds the function's definition with regexes (over the source
with its comments and literals blanked), says which class holds it, and reads its parameter
and return types into a small model (`Ty`) that the drivers render values for. It parses
only what the drivers support; a type outside that set raises `Unsupported`, which the reward
reports as a limitation of its own (a Failure), never as the program's fault.

Supported types, per language (``T`` any supported type, nested):

- ``cpp``: the integer types (``int``, ``long``, ``long long``, ``unsigned ...``, ``short``,
  ``size_t``, ``int8_t`` ... ``uint64_t``), ``float``, ``double``, ``long double``, ``bool``,
  ``char`` (ASCII), ``string``; ``vector<T>``, ``deque<T>``, ``list<T>``, ``set<T>``,
  ``unordered_set<T>``, ``multiset<T>``; ``map<K, T>`` and ``unordered_map<K, T>`` with
  string, char or integer keys; ``pair<T, T>``; each possibly ``const`` and ``&``/``&&``;
  with or without ``std::``; aliases by ``typedef``, ``using`` or a one-word ``#define``
  are followed; a method may be defined outside its class. Results also: ``void``,
  ``auto``, ``optional<T>``, ``tuple<...>``, ``array<T, N>``.
- ``java``: ``int``, ``long``, ``short``, ``byte``, ``double``, ``float``, ``boolean``,
  ``char``, their boxes, ``String``; arrays of any of them to any depth (``T...`` too);
  ``List<T>``, ``ArrayList<T>``, ``LinkedList<T>``, ``Collection<T>``, ``Set<T>``,
  ``HashSet<T>``; ``Map<K, T>``, ``HashMap<K, T>``, ``TreeMap<K, T>`` with ``String``,
  ``Integer``, ``Long`` or ``Character`` keys. Results also: ``void``, ``Object``.
- ``go``: ``int``, ``int8`` ... ``int64``, ``uint`` ... ``uint64``, ``float64``,
  ``float32``, ``string``, ``bool``, ``byte`` and ``rune`` (from one-character strings);
  ``[]T``; ``map[K]T`` with string or integer keys; parameters grouped (``a, b int``);
  several results (a JSON list).
- ``rust``: ``i8`` ... ``i128``, ``isize``, ``u8`` ... ``u128``, ``usize``, ``f32``,
  ``f64``, ``bool``, ``char``, ``String``, ``&str``; ``Vec<T>``, ``&[T]``, ``&Vec<T>``,
  ``&mut Vec<T>``, ``&mut [T]``; ``Option<T>``; ``HashMap<K, T>`` and ``BTreeMap<K, T>``
  with string or integer keys. Results also: ``()``, tuples of up to three, ``VecDeque<T>``.

Python, JavaScript and TypeScript are called without types (their values are JSON).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "Param",
    "Signature",
    "Ty",
    "Unsupported",
    "blank",
    "defines",
    "fits",
    "map_key",
    "signature",
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


def _ints(bits: int, signed: bool = True) -> tuple[int, int]:
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


def _int(text: str, bits: int, signed: bool = True) -> Ty:
    lo, hi = _ints(bits, signed)
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
_WINDOW = 400  # characters before a name, or after its parameters, that may hold its types
_LONGEST = 300  # characters of one parameter


@dataclass
class _Source:
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
        ``}``, at most `_WINDOW` characters, without preprocessor lines."""
        low = max(0, at - _WINDOW)
        start = max(self.text.rfind(c, low, at) for c in ";{}")
        lines = self.text[max(start + 1, low) : at].split("\n")
        if start < 0 and low > 0:
            lines = lines[1:]  # cut mid-line
        return " ".join(line for line in lines if not line.lstrip().startswith("#"))

    def candidates(self, pattern: str) -> list[re.Match[str]]:
        return list(itertools.islice(re.finditer(pattern, self.text), _CANDIDATES))


def _split(text: str, sep: str = ",") -> list[str]:
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


def _params(text: str) -> list[str]:
    """A parameter list's parameters (`Unsupported` for one past `_LONGEST` characters)."""
    parts = _split(text)
    for part in parts:
        if len(part) > _LONGEST:
            raise Unsupported(f"a parameter of {len(part)} characters")
    return parts


def defines(language: str, code: str, name: str) -> bool:
    """Whether the source defines something called `name` that may be the function
    (Python, JavaScript, TypeScript: their drivers find it by name at run time)."""
    text = blank(code, language)
    n = re.escape(name)
    if language == "python":
        return bool(re.search(rf"\bdef\s+{n}\s*\(|^[ \t]*{n}[ \t]*(?::[^=\n]*)?=", text, re.M))
    return bool(
        re.search(
            rf"\bfunction\s*\*?\s*{n}\s*[<(]|\b(?:const|let|var)\s+{n}\b|\b{n}\s*[:=]"
            rf"|^[ \t]*(?:(?:static|async|public|private|protected|readonly)[ \t]+)*{n}\s*[<(]",
            text,
            re.M,
        )
    )


def signature(language: str, code: str, name: str) -> Signature | None:
    """The definition of function `name` in `code`, or None when there is none.

    Raises:
        Unsupported: It is there, but a parameter or result type is one the driver cannot
            build or print.
    """
    source = _Source(blank(code, language))
    if language == "cpp":
        return _cpp(source, name)
    if language == "java":
        return _java(source, name)
    if language == "go":
        return _go(source, name)
    if language == "rust":
        return _rust(source, name)
    raise ValueError(f"no signatures for {language}")


def fits(value: object, ty: Ty) -> str | None:
    """None when the JSON `value` can be passed as a `ty`; else why not."""
    k = ty.kind
    if k == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{_show(value)} is not an integer"
        if not ty.lo <= value <= ty.hi:
            return f"{_show(value)} is out of range for {ty.text}"
    elif k == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"{_show(value)} is not a number"
    elif k == "bool":
        if not isinstance(value, bool):
            return f"{_show(value)} is not a boolean"
    elif k == "char":
        if not isinstance(value, str) or len(value) != 1 or not ty.lo <= ord(value) <= ty.hi:
            return f"{_show(value)} is not one character {ty.text} can hold"
    elif k == "str":
        if not isinstance(value, str):
            return f"{_show(value)} is not a string"
        if ty.hi and not _unicode(value):
            return f"{_show(value)} is not valid Unicode (a lone surrogate)"
    elif k in ("list", "pair"):
        if not isinstance(value, list) or (k == "pair" and len(value) != 2):
            return f"{_show(value)} is not a list" + (" of two" if k == "pair" else "")
        types = ty.of if k == "pair" else (ty.of[0],) * len(value)
        return next((why for v, t in zip(value, types, strict=True) if (why := fits(v, t))), None)
    elif k == "map":
        if not isinstance(value, dict):
            return f"{_show(value)} is not an object"
        for key, item in value.items():
            why = fits(map_key(key, ty.of[0]), ty.of[0]) or fits(item, ty.of[1])
            if why:
                return why
    elif k == "option":
        return None if value is None else fits(value, ty.of[0])
    return None


def map_key(key: str, ty: Ty) -> object:
    """A JSON object's key as a map key of type `ty` (integers from their decimal text, as
    Python's ``json.dumps`` writes them: no sign but ``-``, no leading zero)."""
    if ty.kind == "int" and re.fullmatch(r"-?(?:0|[1-9]\d{0,39})", key):
        return int(key)
    return key


def _unicode(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# --- C++ -----------------------------------------------------------------------------------

_CPP_INTS: dict[str, Ty] = {}
for _names, _bits, _signed in (
    ("short|short int|signed short|signed short int|int16_t", 16, True),
    ("unsigned short|unsigned short int|uint16_t", 16, False),
    ("int|signed|signed int|int32_t", 32, True),
    ("unsigned|unsigned int|uint32_t", 32, False),
    ("long|long int|signed long|long long|long long int|signed long long|int64_t", 64, True),
    ("intmax_t|ptrdiff_t|ssize_t", 64, True),
    ("unsigned long|unsigned long int|unsigned long long|unsigned long long int", 64, False),
    ("size_t|uint64_t|uintmax_t", 64, False),
    ("int8_t", 8, True),
    ("uint8_t", 8, False),
):
    for _name in _names.split("|"):
        _CPP_INTS[_name] = _int(_name, _bits, _signed)
_CPP_SCALARS = {
    **_CPP_INTS,
    "float": Ty("float", "float"),
    "double": Ty("float", "double"),
    "long double": Ty("float", "long double"),
    "bool": Ty("bool", "bool"),
    "char": Ty("char", "char", lo=0, hi=127),
    "string": Ty("str", "string", hi=1),
}
_CPP_LISTS = {"vector", "deque", "list", "set", "unordered_set", "multiset"}
_CPP_MAPS = {"map", "unordered_map"}
_CPP_ALIAS = re.compile(
    r"\btypedef\s++([^;{}]{1,200}+);|\busing\s++(\w++)\s*+=\s*+([^;{}]{1,200}+);"
    r"|^[ \t]*+#[ \t]*+define[ \t]++(\w++)[ \t]++([\w:<>, \t]{1,200}+)$",
    re.M,
)
_CPP_SPECIFIERS = re.compile(
    r"\b(?:public|private|protected)\s*:(?!:)|\b(?:static|inline|virtual|constexpr|explicit"
    r"|friend|extern|register|thread_local)\b|\[\[[^\]]*\]\]|__attribute__\s*\(\([^)]*\)\)"
)
_TYPE_WORDS = {"int", "long", "short", "unsigned", "signed", "char", "double", "float", "bool"}


def _cpp_aliases(text: str) -> dict[str, str]:
    aliases = {}
    for m in _CPP_ALIAS.finditer(text):  # possessive: no backtracking on hostile text
        if m.group(1):
            typedef = re.fullmatch(r"(.*\S)\s+(\w+)\s*", m.group(1), re.S)
            if typedef:
                aliases[typedef.group(2)] = typedef.group(1)
        elif m.group(2):
            aliases[m.group(2)] = m.group(3)
        elif m.group(4) != "main":
            aliases[m.group(4)] = m.group(5).strip()
    return aliases


def _resolve(text: str, aliases: dict[str, str]) -> str:
    for _ in range(8):
        new = re.sub(r"\b\w+\b", lambda m: aliases.get(m.group(0), m.group(0)), text)
        if new == text:
            break
        text = new
    return text


def _cpp_type(raw: str, aliases: dict[str, str], result: bool = False) -> Ty:
    text = _resolve(re.sub(r"\bstd\s*::\s*", "", raw), aliases)
    text = re.sub(r"\bstd\s*::\s*", "", text)
    text = re.sub(r"\b(?:const|volatile|typename|struct|class)\b", " ", text)
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"\s*&&?$", "", text).strip()
    if result and text in ("void", "auto", "decltype(auto)"):
        return Ty("any", text)
    if text in _CPP_SCALARS:
        return _CPP_SCALARS[text]
    m = re.fullmatch(r"(\w+)\s*<(.*)>", text)
    if m:
        base, args = m.group(1), _split(m.group(2))
        if base in _CPP_LISTS and len(args) == 1:
            return Ty("list", base, (_cpp_type(args[0], aliases, result),))
        if base in _CPP_MAPS and len(args) == 2:
            key = _cpp_type(args[0], aliases)
            if key.kind not in ("str", "int", "char"):
                raise Unsupported(f"map keys of type {args[0]!r}")
            return Ty("map", base, (key, _cpp_type(args[1], aliases, result)))
        if base == "pair" and len(args) == 2:
            return Ty("pair", base, tuple(_cpp_type(a, aliases, result) for a in args))
        if result and base in ("optional", "tuple"):
            return Ty("any", base, tuple(_cpp_type(a, aliases, result) for a in args))
        if result and base == "array" and len(args) == 2:
            return Ty("list", base, (_cpp_type(args[0], aliases, result),))
    raise Unsupported(f"the type {raw.strip()!r}")


def _cpp(source: _Source, name: str) -> Signature | None:
    text = source.text
    aliases = _cpp_aliases(text)
    trailer = re.compile(
        r"\s*(?:const\b\s*)?(?:&{1,2}\s*)?(?:noexcept\b\s*(?:\([^)]{0,100}\)\s*)?)?"
        r"(?:(?:override|final)\b\s*){0,2}(?:->\s*([^{;]{1,300}?)\s*)?([{;])"
    )
    for m in source.candidates(rf"(?<![\w.:>]){re.escape(name)}\s*\("):
        if re.search(r"(?:->|::)\s*$", text[max(0, m.start() - _WINDOW) : m.start()]):
            continue  # a call through an object, or a definition out of its class
        opening = m.end() - 1
        closing = source.pairs.get(opening)
        after = trailer.match(text, closing + 1) if closing is not None else None
        if closing is None or after is None:
            continue  # a call
        owners = source.owners("class|struct", m.start())
        if after.group(2) == ";" and not owners:
            continue  # a declaration outside a class: the definition follows
        prefix = source.before(m.start())
        if re.search(r"\btemplate\b", prefix):
            raise Unsupported(f"a template function {name}")
        static = bool(re.search(r"\bstatic\b", prefix))
        returned = _CPP_SPECIFIERS.sub(" ", prefix).strip()
        if after.group(1) and returned == "auto":
            returned = after.group(1)
        if not returned or re.search(r"[=()!?+;]|\breturn\b|\bnew\b", returned):
            continue  # a constructor, or a call in an expression
        inside = text[opening + 1 : closing]
        params = [_cpp_param(p, aliases) for p in _params(inside) if p != "void"]
        results = (_cpp_type(returned, aliases, result=True),)
        return Signature(name, tuple(params), results, owners[-1] if owners else None, static)
    return None


def _cpp_param(text: str, aliases: dict[str, str]) -> Param:
    text = _split(text, "=")[0] if "=" in text else text
    if text.endswith("]") or "*" in text or "(" in text:
        raise Unsupported(f"the parameter {text!r}")
    m = re.fullmatch(r"(.*?[\w>&\s])\s*\b([A-Za-z_]\w*)", text)
    if m and m.group(2) not in _TYPE_WORDS and m.group(1).strip():
        return Param(m.group(2), _cpp_type(m.group(1), aliases))
    return Param("", _cpp_type(text, aliases))


# --- Java ----------------------------------------------------------------------------------

_JAVA_SCALARS = {
    "int": _int("int", 32),
    "Integer": _int("Integer", 32),
    "long": _int("long", 64),
    "Long": _int("Long", 64),
    "short": _int("short", 16),
    "Short": _int("Short", 16),
    "byte": _int("byte", 8),
    "Byte": _int("Byte", 8),
    "double": Ty("float", "double"),
    "Double": Ty("float", "Double"),
    "float": Ty("float", "float"),
    "Float": Ty("float", "Float"),
    "boolean": Ty("bool", "boolean"),
    "Boolean": Ty("bool", "Boolean"),
    "char": Ty("char", "char", lo=0, hi=0xFFFF),
    "Character": Ty("char", "Character", lo=0, hi=0xFFFF),
    "String": Ty("str", "String"),
}
_JAVA_LISTS = {"List", "ArrayList", "LinkedList", "Collection", "Iterable", "Set", "HashSet"}
_JAVA_MAPS = {"Map", "HashMap", "TreeMap"}
_JAVA_MODIFIERS = re.compile(
    r"@\w+(?:\s*\([^)]*\))?|\b(?:public|private|protected|static|final|synchronized|abstract"
    r"|native|strictfp|default)\b"
)


def _java_type(raw: str, result: bool = False) -> Ty:
    text = re.sub(r"\bjava\s*\.\s*(?:util|lang)\s*\.\s*", "", raw)
    text = re.sub(r"@\w+|\bfinal\b", " ", text)
    text = re.sub(r"\s+", "", text)
    if text.endswith("..."):
        text = text[:-3] + "[]"
    if result and text in ("void", "Object"):
        return Ty("any", text)
    if text.endswith("[]"):
        return Ty("list", text, (_java_type(text[:-2], result),))
    if text in _JAVA_SCALARS:
        return _JAVA_SCALARS[text]
    m = re.fullmatch(r"(\w+)<(.*)>", text)
    if m:
        base, args = m.group(1), _split(m.group(2))
        if base in _JAVA_LISTS and len(args) == 1:
            return Ty("list", text, (_java_type(args[0], result),))
        if base in _JAVA_MAPS and len(args) == 2:
            key = _java_type(args[0])
            if key.text not in ("String", "Integer", "Long", "Character"):
                raise Unsupported(f"map keys of type {args[0]!r}")
            return Ty("map", text, (key, _java_type(args[1], result)))
    raise Unsupported(f"the type {raw.strip()!r}")


def _java(source: _Source, name: str) -> Signature | None:
    text = source.text
    trailer = re.compile(r"\s*(?:throws\s+[\w.\s,]{1,300})?\{")
    for m in source.candidates(rf"(?<![\w.]){re.escape(name)}\s*\("):
        opening = m.end() - 1
        closing = source.pairs.get(opening)
        if closing is None or not trailer.match(text, closing + 1):
            continue
        prefix = source.before(m.start())
        static = bool(re.search(r"\bstatic\b", prefix))
        returned = _JAVA_MODIFIERS.sub(" ", prefix).strip()
        if returned.startswith("<"):
            raise Unsupported(f"a generic method {name}")
        if not returned or re.search(r"[=()!?+;]|\b(?:return|new|else)\b", returned):
            continue
        owners = source.owners("class|enum|record", m.start())
        params = [_java_param(p) for p in _params(text[opening + 1 : closing])]
        owner = ".".join(owners) if owners else None
        return Signature(name, tuple(params), (_java_type(returned, True),), owner, static)
    return None


def _java_param(text: str) -> Param:
    text = re.sub(r"@\w+(?:\s*\([^)]*\))?|\bfinal\b", " ", text).strip()
    m = re.fullmatch(r"(.+?)\s*\b([A-Za-z_$][\w$]*)", text)
    if not m:
        raise Unsupported(f"the parameter {text!r}")
    return Param(m.group(2), _java_type(m.group(1)))


# --- Go ------------------------------------------------------------------------------------

_GO_SCALARS = {
    "int": _int("int", 64),
    "int8": _int("int8", 8),
    "int16": _int("int16", 16),
    "int32": _int("int32", 32),
    "int64": _int("int64", 64),
    "uint": _int("uint", 64, False),
    "uint8": _int("uint8", 8, False),
    "uint16": _int("uint16", 16, False),
    "uint32": _int("uint32", 32, False),
    "uint64": _int("uint64", 64, False),
    "uintptr": _int("uintptr", 64, False),
    "float64": Ty("float", "float64"),
    "float32": Ty("float", "float32"),
    "bool": Ty("bool", "bool"),
    "string": Ty("str", "string", hi=1),
    "byte": Ty("char", "byte", lo=0, hi=127),
    "rune": Ty("char", "rune", lo=0, hi=0x10FFFF),
}


def _go_type(raw: str) -> Ty:
    text = re.sub(r"\s+", " ", raw).strip()
    if text in _GO_SCALARS:
        return _GO_SCALARS[text]
    if text.startswith("[]"):
        inner = _go_type(text[2:])
        return Ty("list", "[]" + inner.text, (inner,))
    m = re.fullmatch(r"map\s*\[(.+?)\]\s*(.+)", text)
    if m:
        key, value = _go_type(m.group(1)), _go_type(m.group(2))
        if key.kind not in ("str", "int"):
            raise Unsupported(f"map keys of type {m.group(1)!r}")
        return Ty("map", f"map[{key.text}]{value.text}", (key, value))
    raise Unsupported(f"the type {raw.strip()!r}")


def _go(source: _Source, name: str) -> Signature | None:
    text = source.text
    m = re.search(rf"\bfunc\s+{re.escape(name)}\s*([\[(])", text)
    if m is None:
        return None
    if m.group(1) == "[":
        raise Unsupported(f"a generic function {name}")
    opening = m.end() - 1
    closing = source.pairs.get(opening)
    body = text.find("{", closing, closing + _WINDOW) if closing is not None else -1
    if closing is None or body < 0:
        return None
    params = _go_params(text[opening + 1 : closing])
    out = text[closing + 1 : body].strip()
    if out.startswith("("):
        results = tuple(p.ty for p in _go_params(out[1:-1]))
    else:
        results = (_go_type(out),) if out else ()
    return Signature(name, tuple(params), results)


def _go_params(text: str) -> list[Param]:
    """Go's parameter list: all named (``a, b int, c []int``) or all types."""
    parts = _params(text)
    named = any(re.fullmatch(r"[A-Za-z_]\w*\s+\S.*", p, re.S) for p in parts)
    if not named:
        return [Param("", _go_type(p)) for p in parts]
    params: list[Param] = []
    pending: list[str] = []
    for part in parts:
        m = re.fullmatch(r"([A-Za-z_]\w*)\s+(\S.*)", part, re.S)
        if m is None:
            pending.append(part)
            continue
        if m.group(2).startswith("..."):
            raise Unsupported(f"the variadic parameter {part!r}")
        ty = _go_type(m.group(2))
        params += [Param(p, ty) for p in pending] + [Param(m.group(1), ty)]
        pending = []
    if pending:
        raise Unsupported(f"the parameters {', '.join(pending)!r}")
    return params


# --- Rust ----------------------------------------------------------------------------------

_RUST_SCALARS = {
    **{f"i{b}": _int(f"i{b}", b) for b in (8, 16, 32, 64, 128)},
    **{f"u{b}": _int(f"u{b}", b, False) for b in (8, 16, 32, 64, 128)},
    "isize": _int("isize", 64),
    "usize": _int("usize", 64, False),
    "f64": Ty("float", "f64"),
    "f32": Ty("float", "f32"),
    "bool": Ty("bool", "bool"),
    "char": Ty("char", "char", lo=0, hi=0x10FFFF),
    "String": Ty("str", "String", hi=1),
}
_RUST_MAPS = {"HashMap": "std::collections::HashMap", "BTreeMap": "std::collections::BTreeMap"}


def _rust_type(raw: str, result: bool = False) -> Ty:
    text = re.sub(r"'\w+\s*", "", raw)  # lifetimes
    text = re.sub(r"\b(?:std|alloc|core)\s*::\s*(?:collections|string|vec|option)\s*::\s*", "",
                  text)  # fmt: skip
    text = re.sub(r"\s+", " ", text).strip()
    ref: Passing = ""
    m = re.fullmatch(r"&\s*(mut\s+)?(.+)", text)
    if m:
        ref, text = ("mut" if m.group(1) else "ref"), m.group(2).strip()
    if text == "str":
        return Ty("str", "&str", hi=1, ref="str")
    if result and text in ("()", ""):
        return Ty("any", "()")
    if text in _RUST_SCALARS:
        return _with_ref(_RUST_SCALARS[text], ref)
    if text.startswith("[") and text.endswith("]") and ";" not in text:
        inner = _rust_type(text[1:-1], result)
        return Ty("list", f"Vec<{inner.text}>", (inner,), ref=ref)
    m = re.fullmatch(r"(\w+)\s*<(.*)>", text)
    if m:
        base, args = m.group(1), _split(m.group(2))
        if base in ("Vec", "VecDeque") and len(args) == 1:
            inner = _rust_type(args[0], result)
            return Ty("list", f"Vec<{inner.text}>", (inner,), ref=ref)
        if base == "Option" and len(args) == 1:
            inner = _rust_type(args[0], result)
            return Ty("option", f"Option<{inner.text}>", (inner,), ref=ref)
        if base in _RUST_MAPS and len(args) == 2:
            key, value = _rust_type(args[0]), _rust_type(args[1], result)
            if key.kind not in ("str", "int", "char") or key.ref:
                raise Unsupported(f"map keys of type {args[0]!r}")
            return Ty("map", f"{_RUST_MAPS[base]}<{key.text}, {value.text}>", (key, value),
                      ref=ref)  # fmt: skip
    if result and text.startswith("(") and text.endswith(")"):
        return Ty("any", text, tuple(_rust_type(a, True) for a in _split(text[1:-1])))
    raise Unsupported(f"the type {raw.strip()!r}")


def _with_ref(ty: Ty, ref: Passing) -> Ty:
    return ty if not ref else Ty(ty.kind, ty.text, ty.of, ty.lo, ty.hi, ref)


def _rust(source: _Source, name: str) -> Signature | None:
    text = source.text
    m = re.search(rf"\bfn\s+{re.escape(name)}\s*(<[^>{{]{{0,200}}>)?\s*\(", text)
    if m is None:
        return None
    if m.group(1) and re.sub(r"'\w+|[<>,\s]", "", m.group(1)):
        raise Unsupported(f"a generic function {name}")
    opening = m.end() - 1
    closing = source.pairs.get(opening)
    body = text.find("{", closing, closing + _WINDOW) if closing is not None else -1
    if closing is None or body < 0:
        return None
    params = []
    for part in _params(text[opening + 1 : closing]):
        if re.fullmatch(r"(?:&\s*(?:'\w+\s*)?)?(?:mut\s+)?self(?:\s*:.*)?", part, re.S):
            raise Unsupported(f"a method that takes self ({name}); write an associated fn")
        p = re.fullmatch(r"(?:mut\s+)?([A-Za-z_]\w*)\s*:(?!:)\s*(.+)", part, re.S)
        if p is None:
            raise Unsupported(f"the parameter {part!r}")
        params.append(Param(p.group(1), _rust_type(p.group(2))))
    out = re.match(r"\s*->\s*(.+?)\s*(?:\bwhere\b.*)?$", text[closing + 1 : body], re.S)
    results = (_rust_type(out.group(1), True),) if out else ()
    owners = source.owners("impl", m.start())
    return Signature(name, tuple(params), results, owners[-1] if owners else None)
