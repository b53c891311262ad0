"""The drivers of `function_tests`: code placed after a program that calls its entry function.

A driver holds the arguments of every case to run (never an expected value), reads a case's
index from stdin, calls the function once with that case's arguments, and prints the result
as JSON on the line after a marker line. It is generated here, on the host, from the
dataset's arguments and the function's signature; the program comes first, unchanged but for
the imports a LeetCode-style judge provides (below), so nothing the program says can reach
into the driver's code.

- ``cpp``: ``#include <bits/stdc++.h>`` first (and ``using namespace std;`` when the
  program never writes ``std::``), as LeetCode's judge does; a ``#line 1`` keeps the
  compiler's line numbers the program's. Arguments are brace-initialisers declared with
  the parameter types the compiler deduces from the function itself, results printed by
  overloaded ``emit`` functions. ``main`` is ``signed main``, so ``#define int long long``
  cannot break it.
- ``java``: ``import java.util.*;`` (and ``java.util.stream``, ``java.util.function``)
  after the program's package clause, or on a line before it; the driver is a class
  ``RefereeDriver`` in the same file, which finds the method by reflection, reads each
  case's arguments from JSON into the method's own generic parameter types and prints the
  result reflectively. (A literal per argument would meet Java's 64 KiB limit on a
  method's code at a few thousand numbers.)
- ``go``: the program's package clause becomes ``package main`` with the driver's imports
  (aliased ``referee_*``) on the same line; arguments are composite literals of the
  parameter types; the result is printed through ``reflect`` (a nil slice is ``[]``).
- ``rust``: arguments are bound as owned values (``Vec<T>`` for ``&[T]``) and passed as
  the parameter asks (``&``, ``&mut``); results are printed by a trait ``RefereeEmit``.
  ``use std::collections::*;`` is in scope and a unit ``struct Solution;`` is declared
  when the program implements ``Solution`` without declaring it (as on LeetCode).
- ``python``: LeetCode's usual imports first (``typing``, ``collections``, ``heapq``,
  ``bisect``, ``itertools``, ``functools``, and ``math``, ``re``, ``string`` as modules);
  ``Solution().name`` when a class ``Solution`` has it, else the function ``name``;
  ``json.dumps`` of the result (a tuple is a list).
- ``javascript``, ``typescript``: ``JSON.parse`` of the arguments, ``JSON.stringify`` of
  the result (``undefined`` is ``null``; a promise is awaited); a ``Solution`` class's
  method (or static method) or the function ``name``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources

from referee.rewards.code._signatures import Signature, Ty, blank, map_key

__all__ = ["DRIVER_CLASS", "FLAGS", "program"]

DRIVER_CLASS = "RefereeDriver"
"""The Java driver's class: the one run."""

FLAGS = {"cpp": ("-std=gnu++17", "-O2", "-pipe", "-fno-diagnostics-show-caret")}
"""Compiler flags where they are not the language's defaults: g++ would quote the line a
``#line`` number names from the file as built (the includes before it), not the program's."""

Cases = Mapping[int, Sequence[object]]


def program(language: str, code: str, sig: Signature | None, name: str, cases: Cases,
            marker: str) -> str:  # fmt: skip
    """The program with its driver: the source that is built (or run) for every case.

    Args:
        language: The program's language.
        code: The program.
        sig: The function's signature (the typed languages), else None.
        name: The function's name.
        cases: The arguments of each case to run, by its index (what stdin will say).
        marker: The line printed before the result.
    """
    code = code if code.endswith("\n") else code + "\n"
    if language == "python":
        return _python(code, name, cases, marker)
    if language in ("javascript", "typescript"):
        return _javascript(code, name, cases, marker)
    assert sig is not None
    if language == "cpp":
        return _cpp(code, sig, cases, marker)
    if language == "java":
        return _java(code, sig, cases, marker)
    if language == "go":
        return _go(code, sig, cases, marker)
    if language == "rust":
        return _rust(code, sig, cases, marker)
    raise ValueError(f"function_tests has no driver for {language}")


@cache
def _template(name: str) -> str:
    """A driver's source, in `driver_templates` (C++, Java, Go and Rust, in files of their own
    language): ``@CASES@``, ``@MARKER@`` and the like are filled in."""
    return (resources.files("referee.rewards.code") / "driver_templates" / name).read_text()


def _fill(template: str, **values: str) -> str:
    """`template` with each ``@NAME@`` replaced by ``values[NAME]``, in one pass: a value (an
    argument's text) that holds ``@MARKER@`` is never read as a placeholder itself."""
    return re.sub(r"@([A-Z]+)@", lambda m: values[m.group(1)], template)


def _json(args: Sequence[object]) -> str:
    """The arguments as JSON text, ASCII only (every other character escaped)."""
    return json.dumps(list(args), ensure_ascii=True, separators=(",", ":"))


# --- Python --------------------------------------------------------------------------------

_PY_PRELUDE = (
    "from typing import *; from collections import *; from heapq import *; "
    "from bisect import *; from itertools import *; from functools import *; "
    "import bisect, collections, functools, heapq, itertools, math, re, string, sys"
)
_PY_DRIVER = """

def __referee_main():
    import json as _json, sys as _sys
    _cases = {
@CASES@
    }
    _index = int(_sys.stdin.readline())
    _globals = globals()
    _owner = _globals.get("Solution")
    if isinstance(_owner, type) and hasattr(_owner, @NAME@):
        _function = getattr(_owner(), @NAME@)
    else:
        _function = _globals.get(@NAME@)
    if not callable(_function):
        _sys.stderr.write("no function " + @NAME@ + "\\n")
        _sys.exit(3)
    _out = _json.dumps(_function(*_json.loads(_cases[_index])))
    _sys.stdout.write("\\n@MARKER@\\n" + _out + "\\n")
    _sys.stdout.flush()


__referee_main()
"""


def _python(code: str, name: str, cases: Cases, marker: str) -> str:
    future = list(re.finditer(r"^from[ \t]+__future__[ \t]+import[^\n]*\n", code, re.M))
    at = future[-1].end() if future else 0  # a __future__ import must stay first
    code = code[:at] + _PY_PRELUDE + "\n" + code[at:]
    rows = "\n".join(f"        {i}: {_json(args)!a}," for i, args in cases.items())
    return code + _fill(_PY_DRIVER, CASES=rows, NAME=repr(name), MARKER=marker)


# --- JavaScript and TypeScript -------------------------------------------------------------

_JS_DRIVER = """
;(function () {
  const referee_cases = {
@CASES@
  };
  const referee_index = parseInt(require("fs").readFileSync(0, "utf8"), 10);
  let referee_function = null;
  if (typeof Solution === "function" && Solution.prototype &&
      typeof Solution.prototype.@NAME@ === "function") {
    const referee_self = new Solution();
    referee_function = referee_self.@NAME@.bind(referee_self);
  } else if (typeof Solution === "function" && typeof Solution.@NAME@ === "function") {
    referee_function = Solution.@NAME@.bind(Solution);
  } else if (typeof @NAME@ === "function") {
    referee_function = @NAME@;
  }
  if (referee_function === null) {
    process.stderr.write("no function @NAME@\\n");
    process.exit(3);
  }
  Promise.resolve()
    .then(() => referee_function(...JSON.parse(referee_cases[referee_index])))
    .then(
      (referee_result) => {
        const referee_out = JSON.stringify(referee_result === undefined ? null : referee_result);
        process.stdout.write("\\n@MARKER@\\n" + referee_out + "\\n");
      },
      (referee_error) => {
        const said = String((referee_error && referee_error.stack) || referee_error);
        process.stderr.write(said + "\\n" + String(referee_error) + "\\n");
        process.exit(1);
      },
    );
})();
"""


def _javascript(code: str, name: str, cases: Cases, marker: str) -> str:
    rows = "\n".join(f"    {i}: {json.dumps(_json(args))}," for i, args in cases.items())
    return code + _fill(_JS_DRIVER, CASES=rows, NAME=name, MARKER=marker)


# --- C++ -----------------------------------------------------------------------------------


def _c_string(text: str) -> str:
    """A C/C++ string literal of `text`'s UTF-8 bytes: printable ASCII as it is (but ``"``,
    ``\\`` and ``?``, escaped), every other byte as a three-digit octal escape."""
    out = []
    for byte in text.encode():
        char = chr(byte)
        if char in '"\\?':
            out.append("\\" + char)
        elif 0x20 <= byte < 0x7F:
            out.append(char)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def _cpp_float(x: float) -> str:
    if math.isnan(x):
        return "std::numeric_limits<double>::quiet_NaN()"
    if math.isinf(x):
        return ("-" if x < 0 else "") + "std::numeric_limits<double>::infinity()"
    return repr(x)


def _cpp_value(value: object, ty: Ty) -> str:
    kind = ty.kind
    if kind == "int":
        assert isinstance(value, int)
        if value == -(1 << 63):
            return "(-9223372036854775807LL - 1)"
        if value >= 1 << 63:
            return f"{value}ULL"
        return f"{value}LL" if not -(1 << 31) <= value < 1 << 31 else str(value)
    if kind == "float":
        return _cpp_float(float(value))  # type: ignore[arg-type]
    if kind == "bool":
        return "true" if value else "false"
    if kind == "char":
        assert isinstance(value, str)
        return "'" + _c_string(value)[1:-1].replace("'", "\\'") + "'"
    if kind == "str":
        assert isinstance(value, str)
        return f"std::string({_c_string(value)}, {len(value.encode())})"
    if kind in ("list", "pair"):
        assert isinstance(value, list)
        types = ty.of if kind == "pair" else (ty.of[0],) * len(value)
        return "{" + ", ".join(_cpp_value(v, t) for v, t in zip(value, types, strict=True)) + "}"
    assert kind == "map"
    assert isinstance(value, dict)
    key, item = ty.of
    pairs = (f"{{{_cpp_value(map_key(k, key), key)}, {_cpp_value(v, item)}}}"
             for k, v in value.items())  # fmt: skip
    return "{" + ", ".join(pairs) + "}"


def _cpp(code: str, sig: Signature, cases: Cases, marker: str) -> str:
    prelude = "#include <bits/stdc++.h>\n"
    if "std::" not in blank(code, "cpp"):
        prelude += "using namespace std;\n"  # LeetCode's C++ is written without it
    function = f"{sig.owner}::{sig.name}" if sig.owner else sig.name
    if sig.owner:
        target = f"{sig.owner}::{sig.name}" if sig.static else f"{sig.owner}().{sig.name}"
    else:
        target = sig.name
    rows = []
    for i, args in cases.items():
        rows.append(f"    case {i}: {{")
        passed = []
        for j, (value, param) in enumerate(zip(args, sig.params, strict=True)):
            slot = f"std::tuple_element_t<{j}, referee_args>"
            rows.append(f"      std::decay_t<{slot}> referee_a{j} = {_cpp_value(value, param.ty)};")
            passed.append(f"static_cast<{slot}&&>(referee_a{j})")
        call = f"{target}({', '.join(passed)})"
        rows.append(f"      referee_driver::referee_result(referee_out, [&]() -> decltype(auto) "
                    f"{{ return {call}; }});")  # fmt: skip
        rows.append("      break;")
        rows.append("    }")
    driver = _fill(_template("driver.cpp"), FUNCTION=function, CASES="\n".join(rows),
                   MARKER=marker)  # fmt: skip
    return prelude + "#line 1\n" + code + driver


# --- Java ----------------------------------------------------------------------------------

_JAVA_IMPORTS = "import java.util.*; import java.util.function.*; import java.util.stream.*; "


def _java_string(text: str) -> str:
    """A Java string literal: ``\\``, ``"`` and non-printable or non-ASCII characters escaped
    (``\\uXXXX`` for the latter: the literal's own characters never form one)."""
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif " " <= char <= "~":
            out.append(char)
        else:
            units = char.encode("utf-16-be", "surrogatepass")
            out += [f"\\u{units[k]:02x}{units[k + 1]:02x}" for k in range(0, len(units), 2)]
    return '"' + "".join(out) + '"'


def _java_text(text: str, chunk: int = 20000) -> str:
    """`text` as a Java expression: literals of at most `chunk` characters joined at run
    time (one constant may hold 65535 bytes)."""
    if len(text) <= chunk:
        return _java_string(text)
    parts = ", ".join(_java_string(text[k : k + chunk]) for k in range(0, len(text), chunk))
    return f'String.join("", {parts})'


def _java(code: str, sig: Signature, cases: Cases, marker: str) -> str:
    package = re.search(r"^[ \t]*package[ \t]+[\w.]+[ \t]*;", blank(code, "java"), re.M)
    if package:  # on the package clause's line
        code = code[: package.end()] + " " + _JAVA_IMPORTS + code[package.end() :]
    else:  # a line of its own: a public class must start its line (`languages.java_class`)
        code = _JAVA_IMPORTS + "\n" + code
    rows = "\n".join(f"      case {i}: return {_java_text(_json(args))};"
                     for i, args in cases.items())  # fmt: skip
    assert sig.owner is not None
    driver = _fill(_template("Driver.java"), OWNER=sig.owner, NAME=sig.name, MARKER=marker,
                   ARITY=str(len(sig.params)), CASES=rows)  # fmt: skip
    return code + driver


# --- Go ------------------------------------------------------------------------------------

_GO_IMPORTS = (
    'package main; import (referee_bufio "bufio"; referee_json "encoding/json"; '
    'referee_math "math"; referee_os "os"; referee_reflect "reflect"; '
    'referee_strconv "strconv"; referee_strings "strings");'
)


def _go_char(char: str) -> str:
    code = ord(char)
    if char in "'\\":
        return "\\" + char
    if 0x20 <= code < 0x7F:
        return char
    if code < 0x80:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _go_value(value: object, ty: Ty) -> str:
    kind = ty.kind
    if kind == "int":
        return str(value)
    if kind == "float":
        x = float(value)  # type: ignore[arg-type]
        if math.isnan(x):
            return "referee_math.NaN()"
        if math.isinf(x):
            return f"referee_math.Inf({-1 if x < 0 else 1})"
        return repr(x)
    if kind == "bool":
        return "true" if value else "false"
    if kind == "char":
        assert isinstance(value, str)
        return f"'{_go_char(value)}'"
    if kind == "str":
        assert isinstance(value, str)
        return '"' + "".join({'"': '\\"', "'": "'"}.get(c) or _go_char(c) for c in value) + '"'
    if kind == "list":
        assert isinstance(value, list)
        return ty.text + "{" + ", ".join(_go_value(v, ty.of[0]) for v in value) + "}"
    assert kind == "map"
    assert isinstance(value, dict)
    key, item = ty.of
    pairs = (f"{_go_value(map_key(k, key), key)}: {_go_value(v, item)}" for k, v in value.items())
    return ty.text + "{" + ", ".join(pairs) + "}"


def _go(code: str, sig: Signature, cases: Cases, marker: str) -> str:
    package = re.search(r"^[ \t]*package[ \t]+\w+[ \t]*;?", blank(code, "go"), re.M)
    if package:
        code = code[: package.start()] + _GO_IMPORTS + code[package.end() :]
    else:
        code = _GO_IMPORTS + " " + code  # on the program's first line: its line numbers hold
    rows = []
    for i, args in cases.items():
        passed = ", ".join(_go_value(v, p.ty) for v, p in zip(args, sig.params, strict=True))
        call = f"{sig.name}({passed})"
        rows.append(f"\tcase {i}:")
        if not sig.results:
            rows.append(f"\t\t{call}")
            continue
        names = [f"referee_r{k}" for k in range(len(sig.results))]
        rows.append(f"\t\t{', '.join(names)} := {call}")
        rows.append(f"\t\treferee_results = []interface{{}}{{{', '.join(names)}}}")
    return code + _fill(_template("driver.go"), CASES="\n".join(rows), MARKER=marker)


# --- Rust ----------------------------------------------------------------------------------


def _rust_char(char: str) -> str:
    if char in "'\"\\":
        return "\\" + char
    return char if " " <= char <= "~" else f"\\u{{{ord(char):x}}}"


def _rust_value(value: object, ty: Ty) -> str:
    kind = ty.kind
    if kind == "int":
        return str(value)
    if kind == "float":
        x = float(value)  # type: ignore[arg-type]
        if math.isnan(x):
            return f"{ty.text}::NAN"
        if math.isinf(x):
            return ("-" if x < 0 else "") + f"{ty.text}::INFINITY"
        return repr(x)
    if kind == "bool":
        return "true" if value else "false"
    if kind == "char":
        assert isinstance(value, str)
        return f"'{_rust_char(value)}'"
    if kind == "str":
        assert isinstance(value, str)
        literal = '"' + "".join(_rust_char(c) for c in value) + '"'
        return literal if ty.ref == "str" else f"String::from({literal})"
    if kind == "list":
        assert isinstance(value, list)
        return "vec![" + ", ".join(_rust_value(v, ty.of[0]) for v in value) + "]"
    if kind == "option":
        return "None" if value is None else f"Some({_rust_value(value, ty.of[0])})"
    assert kind == "map"
    assert isinstance(value, dict)
    key, item = ty.of
    pairs = (f"({_rust_value(map_key(k, key), key)}, {_rust_value(v, item)})"
             for k, v in value.items())  # fmt: skip
    return ty.text.split("<")[0] + "::from([" + ", ".join(pairs) + "])"


def _rust(code: str, sig: Signature, cases: Cases, marker: str) -> str:
    declared = sig.owner and re.search(
        rf"\b(?:struct|enum|type|union)\s+{re.escape(sig.owner)}\b", blank(code, "rust")
    )
    unit = f"struct {sig.owner};" if sig.owner and not declared else ""
    function = f"{sig.owner}::{sig.name}" if sig.owner else sig.name
    rows = []
    for i, args in cases.items():
        rows.append(f"        {i} => {{")
        passed = []
        for j, (value, param) in enumerate(zip(args, sig.params, strict=True)):
            ty = param.ty
            rows.append(f"            let mut referee_a{j}: {ty.text} = {_rust_value(value, ty)};")
            prefix = {"ref": "&", "mut": "&mut "}.get(ty.ref, "")
            passed.append(f"{prefix}referee_a{j}")
        rows.append(f"            let referee_r = {function}({', '.join(passed)});")
        rows.append("            RefereeEmit::referee_emit(&referee_r, &mut referee_out);")
        rows.append("        }")
    driver = _fill(_template("driver.rs"), STRUCT=unit, CASES="\n".join(rows), MARKER=marker)
    return code + driver
