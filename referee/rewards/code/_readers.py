"""Each typed language's reader of a function's signature (C++, Java, Go, Rust): where the
definition is, which class holds it, and its types as `Ty` (`referee.rewards.code._signatures`
lists what each supports)."""

from __future__ import annotations

import re

from referee.rewards.code._types import (
    WINDOW,
    Param,
    Passing,
    Signature,
    Source,
    Ty,
    Unsupported,
    int_ty,
    param_list,
    split,
)

__all__ = ["cpp", "go", "java", "rust"]


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
        _CPP_INTS[_name] = int_ty(_name, _bits, _signed)
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
        base, args = m.group(1), split(m.group(2))
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


def cpp(source: Source, name: str) -> Signature | None:
    text = source.text
    aliases = _cpp_aliases(text)
    trailer = re.compile(
        r"\s*(?:const\b\s*)?(?:&{1,2}\s*)?(?:noexcept\b\s*(?:\([^)]{0,100}\)\s*)?)?"
        r"(?:(?:override|final)\b\s*){0,2}(?:->\s*([^{;]{1,300}?)\s*)?([{;])"
    )
    for m in source.candidates(rf"(?<![\w.:>]){re.escape(name)}\s*\("):
        if re.search(r"(?:->|::)\s*$", text[max(0, m.start() - WINDOW) : m.start()]):
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
        params = [_cpp_param(p, aliases) for p in param_list(inside) if p != "void"]
        results = (_cpp_type(returned, aliases, result=True),)
        return Signature(name, tuple(params), results, owners[-1] if owners else None, static)
    return None


def _cpp_param(text: str, aliases: dict[str, str]) -> Param:
    text = split(text, "=")[0] if "=" in text else text
    if text.endswith("]") or "*" in text or "(" in text:
        raise Unsupported(f"the parameter {text!r}")
    m = re.fullmatch(r"(.*?[\w>&\s])\s*\b([A-Za-z_]\w*)", text)
    if m and m.group(2) not in _TYPE_WORDS and m.group(1).strip():
        return Param(m.group(2), _cpp_type(m.group(1), aliases))
    return Param("", _cpp_type(text, aliases))


# --- Java ----------------------------------------------------------------------------------

_JAVA_SCALARS = {
    "int": int_ty("int", 32),
    "Integer": int_ty("Integer", 32),
    "long": int_ty("long", 64),
    "Long": int_ty("Long", 64),
    "short": int_ty("short", 16),
    "Short": int_ty("Short", 16),
    "byte": int_ty("byte", 8),
    "Byte": int_ty("Byte", 8),
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
        base, args = m.group(1), split(m.group(2))
        if base in _JAVA_LISTS and len(args) == 1:
            return Ty("list", text, (_java_type(args[0], result),))
        if base in _JAVA_MAPS and len(args) == 2:
            key = _java_type(args[0])
            if key.text not in ("String", "Integer", "Long", "Character"):
                raise Unsupported(f"map keys of type {args[0]!r}")
            return Ty("map", text, (key, _java_type(args[1], result)))
    raise Unsupported(f"the type {raw.strip()!r}")


def java(source: Source, name: str) -> Signature | None:
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
        params = [_java_param(p) for p in param_list(text[opening + 1 : closing])]
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
    "int": int_ty("int", 64),
    "int8": int_ty("int8", 8),
    "int16": int_ty("int16", 16),
    "int32": int_ty("int32", 32),
    "int64": int_ty("int64", 64),
    "uint": int_ty("uint", 64, False),
    "uint8": int_ty("uint8", 8, False),
    "uint16": int_ty("uint16", 16, False),
    "uint32": int_ty("uint32", 32, False),
    "uint64": int_ty("uint64", 64, False),
    "uintptr": int_ty("uintptr", 64, False),
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


def go(source: Source, name: str) -> Signature | None:
    text = source.text
    m = re.search(rf"\bfunc\s+{re.escape(name)}\s*([\[(])", text)
    if m is None:
        return None
    if m.group(1) == "[":
        raise Unsupported(f"a generic function {name}")
    opening = m.end() - 1
    closing = source.pairs.get(opening)
    body = text.find("{", closing, closing + WINDOW) if closing is not None else -1
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
    parts = param_list(text)
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
    **{f"i{b}": int_ty(f"i{b}", b) for b in (8, 16, 32, 64, 128)},
    **{f"u{b}": int_ty(f"u{b}", b, False) for b in (8, 16, 32, 64, 128)},
    "isize": int_ty("isize", 64),
    "usize": int_ty("usize", 64, False),
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
        base, args = m.group(1), split(m.group(2))
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
        return Ty("any", text, tuple(_rust_type(a, True) for a in split(text[1:-1])))
    raise Unsupported(f"the type {raw.strip()!r}")


def _with_ref(ty: Ty, ref: Passing) -> Ty:
    return ty if not ref else Ty(ty.kind, ty.text, ty.of, ty.lo, ty.hi, ref)


def rust(source: Source, name: str) -> Signature | None:
    text = source.text
    m = re.search(rf"\bfn\s+{re.escape(name)}\s*(<[^>{{]{{0,200}}>)?\s*\(", text)
    if m is None:
        return None
    if m.group(1) and re.sub(r"'\w+|[<>,\s]", "", m.group(1)):
        raise Unsupported(f"a generic function {name}")
    opening = m.end() - 1
    closing = source.pairs.get(opening)
    body = text.find("{", closing, closing + WINDOW) if closing is not None else -1
    if closing is None or body < 0:
        return None
    params = []
    for part in param_list(text[opening + 1 : closing]):
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
