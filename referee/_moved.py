"""Names that moved: their old paths stay importable for a release, with a warning.

Every module path that moved is one entry of `MOVED` (old dotted path -> the module whose names
it answers with now). `install` (run by ``import referee``) puts a finder at the end of
``sys.meta_path`` that answers those paths, and only those, once nothing else has found them:
the first import of an old path warns, at the line of the user's import statement, and gives a
module whose every name is the new module's. Nothing is imported until an old path is.

A path whose last part is also a name of its package (``referee.score``: the function, once
also the module that held `Score`) cannot wait for its import: the import system would rebind
the package's attribute to the module it loads. It is put in ``sys.modules`` from the start
instead, as a `MovedModule`, which answers each name it is asked for with a warning.

`renamed` is for a name that moved inside its module (a module's ``__getattr__`` calls it).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import types
import warnings
from types import MappingProxyType

TYPE_CHECKING = False  # `typing.TYPE_CHECKING` without importing typing (type checkers know it)
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any, Final

__all__ = ["MOVED", "MovedModule", "install", "renamed", "warn_moved"]

_GRADERS = "referee.rewards.judged.openai_graders"

MOVED: Final[Mapping[str, str]] = MappingProxyType({
    "referee.score": "referee.scores",
    # issue 39: families with helpers of their own became sub-packages
    "referee.rewards.code_reference": "referee.rewards.code",
    "referee.rewards.patch_reference": "referee.rewards.patch",
    "referee.rewards.process_reward_model": "referee.rewards.learned",
    "referee.rewards.reward_model": "referee.rewards.learned",
    # issue 45: every reward type in a family (docs/architecture.md says which and why)
    "referee.rewards.fields": "referee.rewards.structured.fields",
    "referee.rewards.instruction_following": "referee.rewards.text.instruction_following",
    "referee.rewards.json": "referee.rewards.structured.json",
    "referee.rewards.judge": "referee.rewards.judged",
    "referee.rewards.length": "referee.rewards.text.length",
    "referee.rewards.openai_graders": _GRADERS,
    "referee.rewards.openai_graders.expressions": f"{_GRADERS}.expressions",
    "referee.rewards.openai_graders.graders": f"{_GRADERS}.graders",
    "referee.rewards.openai_graders.model_graders": f"{_GRADERS}.model_graders",
    "referee.rewards.openai_graders.python_grader": f"{_GRADERS}.python_grader",
    "referee.rewards.openai_graders.similarity": f"{_GRADERS}.similarity",
    "referee.rewards.openai_graders.templating": f"{_GRADERS}.templating",
    "referee.rewards.ranking": "referee.rewards.judged.group_rank",
    "referee.rewards.reasoning": "referee.rewards.math.reasoning_gym",
    "referee.rewards.retrieval": "referee.rewards.agent.retrieval",
    "referee.rewards.similarity": "referee.rewards.text.similarity",
    "referee.rewards.tools": "referee.rewards.structured.tool_calls",
    "referee.rewards.tournament": "referee.rewards.judged.tournament",
})  # fmt: skip
"""Every module path that moved -> the module that answers its names now."""

SHADOWED: Final = frozenset({"referee.score"})
"""The old paths that are also a name of their package: in ``sys.modules`` from the start."""


def warn_moved(old: str, new: str) -> None:
    """Warn, at the line of the user's import, that module `old` is deprecated for `new`.

    Called from the loader of the old path (`_Loader.exec_module`). `warnings` skips the import
    machinery's frames, so level 3 (past this function and that method) is the import
    statement.
    """
    warnings.warn(
        f"{old} is deprecated: import from {new} (the same names); {old} will be removed",
        DeprecationWarning,
        stacklevel=3,
    )


class _Forward(types.ModuleType):
    """An old path, imported: each name is its new module's (the import has warned)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(importlib.import_module(MOVED[self.__name__]), name)


class _Loader:
    """Loads an old path of `MOVED`: imports its new module, then warns."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _Forward(spec.name, f"Deprecated: moved to {MOVED[spec.name]}.")

    def exec_module(self, module: types.ModuleType) -> None:
        new = importlib.import_module(MOVED[module.__name__])
        module.__dict__["__all__"] = list(getattr(new, "__all__", ()))
        warn_moved(module.__name__, new.__name__)


class _Finder:
    """The meta-path finder of the old paths (last on ``sys.meta_path``: only a path nothing
    else finds reaches it, so a module that still exists is never shadowed)."""

    @staticmethod
    def find_spec(
        fullname: str, path: Sequence[str] | None = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED or fullname in SHADOWED:
            return None
        # an old package (openai_graders) is one, so its old submodules can be found below it
        package = any(old.startswith(f"{fullname}.") for old in MOVED)
        return importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=package)  # type: ignore[arg-type]


def install() -> None:
    """Answer the old paths: the finder on ``sys.meta_path``, the shadowed ones in
    ``sys.modules``. Idempotent; imports nothing."""
    if not any(finder is _Finder for finder in sys.meta_path):
        sys.meta_path.append(_Finder)
    for old in SHADOWED:
        sys.modules.setdefault(old, MovedModule(old, MOVED[old]))


class MovedModule(types.ModuleType):
    """A module's old path, answering every name from its new module with a warning."""

    def __init__(self, old: str, new: str) -> None:
        super().__init__(old, f"Deprecated: moved to {new}.")
        self.__dict__["_referee_new"] = new  # imported on the first name asked for

    def __getattr__(self, name: str) -> Any:
        new: str = self.__dict__["_referee_new"]
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(importlib.import_module(new), name)
        warnings.warn(
            f"{self.__name__} is deprecated: import {name} from {new}; "
            f"{self.__name__} will be removed",
            DeprecationWarning,
            stacklevel=2,
        )
        return value


def renamed(module: str, old: str, new: str, value: Any) -> Any:
    """`value`, asked for by its old name in `module` (from the module's ``__getattr__``),
    with a warning at the user's line."""
    warnings.warn(
        f"{module}.{old} is deprecated: it is {module}.{new}; {old} will be removed",
        DeprecationWarning,
        stacklevel=3,
    )
    return value
