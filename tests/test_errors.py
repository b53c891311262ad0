"""The exception tree: every referee exception derives from the root, drawn in errors.py."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
from pathlib import Path

import referee
from referee import errors


def _public_modules() -> list[str]:
    names = ["referee"]
    for info in pkgutil.walk_packages(referee.__path__, "referee."):
        parts = info.name.split(".")
        if any(p.startswith("_") for p in parts) or parts[1] == "backends":
            continue  # private modules; backends import optional trainers
        spec = importlib.util.find_spec(info.name)
        if spec and spec.origin and "warn_moved(" in Path(spec.origin).read_text():
            continue  # an old path: it re-exports the module it moved to, checked there
        names.append(info.name)
    return names


def test_every_public_exception_derives_from_the_root() -> None:
    strays = []
    for name in _public_modules():
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if attr.startswith("_") or not inspect.isclass(value):
                continue
            if value.__module__ != name and not name.startswith(value.__module__):
                continue  # imported here: judged where it is defined
            if value.__module__.rsplit(".", 1)[-1].startswith("_"):
                continue  # a private module's exception is control flow that never escapes
            # Control-flow signals that must get past `except Exception` (a deadline's
            # interrupt) are BaseExceptions on purpose; every error is a RefereeError.
            if issubclass(value, Exception) and not issubclass(value, errors.RefereeError):
                strays.append(f"{name}.{attr}")
    assert not strays, f"exceptions outside RefereeError: {sorted(set(strays))}"


def test_every_exception_is_defined_in_errors_and_drawn_in_its_docstring() -> None:
    doc = errors.__doc__ or ""
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert cls.__module__ == "referee.errors"
        assert f" {name} " in doc or f"── {name}" in doc or name in doc.split(), name


def test_modules_that_raise_them_re_export_the_same_classes() -> None:
    from referee.judges import client
    from referee.verifiers import sandbox

    assert client.JudgeError is errors.JudgeError
    assert client.JudgeTimeout is errors.JudgeTimeout
    assert client.BudgetExceeded is errors.BudgetExceeded
    assert sandbox.SandboxError is errors.SandboxError
    assert sandbox.ProgramError is errors.ProgramError
