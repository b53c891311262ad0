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

import re

from referee.rewards.code import _readers
from referee.rewards.code._types import Param, Signature, Source, Ty, Unsupported, blank

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
    source = Source(blank(code, language))
    if language == "cpp":
        return _readers.cpp(source, name)
    if language == "java":
        return _readers.java(source, name)
    if language == "go":
        return _readers.go(source, name)
    if language == "rust":
        return _readers.rust(source, name)
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
