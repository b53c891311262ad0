"""What a ``python`` reward's ``function`` names: a file imported as a module, or a module.

A file is imported once per process, as a module whose name is its absolute path escaped under
this module's (``referee.rewards._imports._2fhome_2fme_2frewards_2epy``): it can neither shadow
nor be shadowed by an installed package, and anything defined in it pickles by reference, since
any process that unpickles it (a worker, a Ray actor, a trainer's reward worker) imports it
again from the same path through `_FileFinder`, installed wherever referee's rewards are.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

__all__ = ["FORMS", "ProblemError", "Target", "load_file", "raised", "resolve"]

# This module is also the package the files load under (`_FileFinder`): a module with a
# `__path__` is a package to the import system. Nothing is ever found on the path itself.
__path__: list[str] = []

_PREFIX = f"{__name__}."
_ESCAPED = re.compile(r"(?:[A-Za-z0-9]|_[0-9a-f]{2})+")
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
FORMS = "function: <file>.py:<name> (relative to the spec's folder) or <package.module>:<name>"
_MAX_MESSAGE = 500


class ProblemError(ValueError):
    """What is wrong with a ``python`` reward's ``function`` or ``options``: the message, the
    fix (`expected`) and the key (`at`, under the reward's own key path)."""

    def __init__(self, message: str, expected: str | None = None, at: Sequence[str] = ()) -> None:
        self.message = message
        self.expected = expected
        self.at = tuple(at)
        super().__init__(message if expected is None else f"{message} ({expected})")


# --- files as modules -------------------------------------------------------------------------


def _module_name(path: Path) -> str:
    """The module a file loads as: its absolute path, escaped (letters and digits kept, every
    other byte ``_xx``), under this module: reversible, so any process can import it."""
    escaped = "".join(
        chr(b) if chr(b).isascii() and chr(b).isalnum() else f"_{b:02x}" for b in os.fsencode(path)
    )
    return _PREFIX + escaped


def _path_of(module: str) -> Path | None:
    """The file a module name of `_module_name` stands for; None for any other name."""
    escaped = module.removeprefix(_PREFIX)
    if escaped == module or not _ESCAPED.fullmatch(escaped):
        return None
    raw = re.sub(rb"_([0-9a-f]{2})", lambda m: bytes([int(m.group(1), 16)]), escaped.encode())
    path = Path(os.fsdecode(raw))
    return path if path.is_absolute() else None


class _FileFinder(importlib.abc.MetaPathFinder):
    """Finds the modules `_module_name` names: the file at the path the name spells."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        file = _path_of(fullname)
        if file is None or not file.is_file():
            return None
        return importlib.util.spec_from_file_location(fullname, file)


if not any(type(f).__name__ == "_FileFinder" for f in sys.meta_path):
    sys.meta_path.append(_FileFinder())


def load_file(path: str | os.PathLike[str]) -> ModuleType:
    """The module of a Python file, loaded once per process (by its resolved path).

    Raises:
        ProblemError: No such file, or it raised while it was imported (the message names the
            exception and the line).
    """
    file = Path(path).resolve()
    if not file.is_file():
        raise ProblemError(f"no file {str(file)!r}", FORMS, ("function",))
    name = _module_name(file)
    try:
        return importlib.import_module(name)
    except (Exception, SystemExit) as exc:
        raise ProblemError(
            f"importing {file.name} raised {raised(exc, file)}",
            "a file that imports without error (python " + str(file) + " shows the traceback)",
            ("function",),
        ) from exc


# --- what `function` names --------------------------------------------------------------------


class Target(NamedTuple):
    """What a ``function`` text names: the object, the text with an absolute path, a label."""

    obj: Any
    text: str
    label: str  # "rewards.py:my_check" or "package.module:name", for messages
    file: str | None


def _split(function: str) -> tuple[str, str]:
    where, sep, attr = function.rpartition(":")
    if not sep or not where.strip() or not _DOTTED.fullmatch(attr):
        raise ProblemError(
            f"cannot read {function!r} as <where>:<name>", FORMS, ("function",)
        )  # fmt: skip
    return where, attr


def _is_file(where: str) -> bool:
    return where.endswith(".py") or "/" in where or os.sep in where


def resolve(function: str, folder: Path | None = None) -> Target:
    """Load what `function` names; a relative file path resolves against `folder` (default: the
    current directory).

    Raises:
        ProblemError: It cannot be read, found, imported, or named in its module.
    """
    where, attr = _split(function)
    if _is_file(where):
        file = Path(where)
        if not file.is_absolute():
            file = (folder if folder is not None else Path.cwd()) / file
        file = file.resolve()
        module = load_file(file)
        text, label = f"{file}:{attr}", f"{file.name}:{attr}"
    elif _DOTTED.fullmatch(where):
        try:
            module = importlib.import_module(where)
        except ModuleNotFoundError as exc:
            if exc.name is None or not where.startswith(exc.name):
                raise ProblemError(
                    f"importing {where} raised {raised(exc)}", None, ("function",)
                ) from exc
            raise ProblemError(
                f"no module {where!r} (not on sys.path)",
                f"{FORMS}; a file of yours is named by its path, ending in .py",
                ("function",),
            ) from None
        except (Exception, SystemExit) as exc:
            raise ProblemError(
                f"importing {where} raised {raised(exc)}", None, ("function",)
            ) from exc
        text = label = function
    else:
        raise ProblemError(f"{where!r} is neither a .py file nor a module name", FORMS,
                           ("function",))  # fmt: skip
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = [
                n for n, v in vars(module).items()
                if not n.startswith("_") and callable(v) and not isinstance(v, ModuleType)
            ]  # fmt: skip
            close = difflib.get_close_matches(part, names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ProblemError(
                f"{label.rsplit(':', 1)[0]} has no {attr!r}{hint}",
                f"one of its names: {', '.join(sorted(names)[:20]) or '(none)'}",
                ("function",),
            )
        obj = getattr(obj, part)
    return Target(obj, text, label, getattr(module, "__file__", None))


def raised(exc: BaseException, file: Path | str | None = None) -> str:
    """``Type: message (file.py, line n)``: the line is the deepest one in `file` (or in the
    traceback, where no frame is in it)."""
    frames = traceback.extract_tb(exc.__traceback__)
    message: object = exc
    if isinstance(exc, SyntaxError) and exc.filename:
        message, where = exc.msg, f" ({Path(exc.filename).name}, line {exc.lineno})"
    else:
        mine = [f for f in frames if file is not None and f.filename == str(file)]
        last = mine or frames
        where = f" ({Path(last[-1].filename).name}, line {last[-1].lineno})" if last else ""
    text = f"{type(exc).__name__}: {message}{where}"
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + "..."
