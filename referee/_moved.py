"""Names that moved: their old paths stay importable for a release, with a warning.

A module that moved leaves a shim at its old path that calls `warn_moved` from its body. A
module whose old name is taken by something else in its package (``referee.score``, the
function, once also the module that held `Score`) cannot leave a file there: importing it
would rebind the package's attribute to the module. It is registered instead as a
`MovedModule` in ``sys.modules``, which answers each name it is asked for with a warning.
"""

from __future__ import annotations

import importlib
import types
import warnings

TYPE_CHECKING = False  # `typing.TYPE_CHECKING` without importing typing (type checkers know it)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["MovedModule", "renamed", "warn_moved"]


def warn_moved(old: str, new: str) -> None:
    """Warn, at the line of the user's import, that module `old` is deprecated for `new`.

    Called from the old module's body. `warnings` skips the import machinery's frames, so
    level 3 (past this function and that body) is the import statement.
    """
    warnings.warn(
        f"{old} is deprecated: import from {new} (the same names); {old} will be removed",
        DeprecationWarning,
        stacklevel=3,
    )


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
