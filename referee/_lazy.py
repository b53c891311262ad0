"""A package's public names, imported from their modules when first asked for (PEP 562).

``import referee`` should cost little (docs/architecture.md): a package whose names come from
heavy modules (pydantic models, every reward type) names them in a table instead, and the
module holding a name is imported on its first use. A package uses it as::

    from referee._lazy import exports

    TYPE_CHECKING = False  # typing's, without importing typing: type checkers know the name
    if TYPE_CHECKING:  # what type checkers and readers see; the table below is what runs
        from referee.rollout import Rollout

    __all__ = ["Rollout"]

    if not TYPE_CHECKING:  # left undefined for mypy, so a misspelt name stays an error
        __getattr__, __dir__ = exports(__name__, {"referee.rollout": ("Rollout",)}, globals())

`tests/test_lazy.py` checks that every such table, its ``TYPE_CHECKING`` imports and its
``__all__`` name the same things.
"""

from __future__ import annotations

import copyreg
import importlib
import sys
import threading
import types

TYPE_CHECKING = False  # `typing.TYPE_CHECKING` without importing typing (type checkers know it)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

__all__ = ["exports", "import_module"]

_IMPORTS = threading.RLock()


def import_module(name: str) -> types.ModuleType:
    """`importlib.import_module`, one lazy import at a time in the process.

    Two threads that each import a module on first use (two servers of one process loading
    their specs) can otherwise meet inside an import cycle of referee's package ``__init__``
    modules, and one gets the other's half-initialised module ("cannot import name ... from
    partially initialized module"). A module already imported is returned without the lock.
    """
    module = sys.modules.get(name)
    if module is not None and not getattr(module.__spec__, "_initializing", False):
        return module
    with _IMPORTS:
        return importlib.import_module(name)


def exports(
    package: str, table: Mapping[str, tuple[str, ...]], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of `package`, whose names `table` gives
    (module -> the names it defines).

    A name is imported on first use and kept in `namespace` (the package's globals), so the
    next use is a plain attribute. Any other name is tried as a submodule (``referee.spec``
    after a bare ``import referee``, as when the package imported everything), else it is an
    `AttributeError`. A name that is also a submodule's (``referee.reward``: the decorator, and
    the module of the protocols) stays the name's: the import system, which sets a package's
    attribute to each submodule it imports, is not let rebind it.
    """
    where = {name: module for module, names in table.items() for name in names}
    namespace["_lazy_names"] = frozenset(where)
    sys.modules[package].__class__ = _Package

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is not None:
            value = getattr(import_module(module), name)
            namespace[name] = value
            return value
        if not name.startswith("__"):
            submodule = f"{package}.{name}"
            try:
                return import_module(submodule)
            except ModuleNotFoundError as exc:
                if exc.name != submodule:
                    raise  # the submodule is there and needs something missing: say so
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    return __getattr__, __dir__


class _Package(types.ModuleType):
    """A package whose exported names win over its submodules' names.

    Pickled as a plain module is by cloudpickle (a user's function that names ``referee`` sent
    to a worker process): by reference, imported again where it is loaded (`copyreg`, since a
    pickler's table of module reducers is keyed by the exact type).
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if (
            isinstance(value, types.ModuleType)
            and value.__name__ == f"{self.__name__}.{name}"
            and name in self.__dict__.get("_lazy_names", ())
        ):
            return  # the import system naming a submodule: the export keeps the name
        super().__setattr__(name, value)


def _imported(name: str) -> _Package:
    """The package `name`, imported (where a pickle of it is loaded)."""
    return importlib.import_module(name)  # type: ignore[return-value]


def _reduce(package: _Package) -> tuple[Callable[[str], _Package], tuple[str]]:
    return _imported, (package.__name__,)


copyreg.pickle(_Package, _reduce)
