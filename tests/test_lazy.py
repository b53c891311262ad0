"""A package whose names are imported on first use (`referee._lazy`) names each one three times
(its ``__all__``, its ``TYPE_CHECKING`` imports for type checkers and the docs, its table for
the interpreter): the three agree, and every name is the object its module defines."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _lazy_packages() -> list[str]:
    """Every module of referee that calls `referee._lazy.exports`."""
    found = []
    for path in sorted((ROOT / "referee").rglob("__init__.py")):
        if "exports(__name__" in path.read_text():
            parts = path.relative_to(ROOT).with_suffix("").parts
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


LAZY = _lazy_packages()


def test_the_packages_are_found() -> None:
    assert {"referee", "referee.rewards"} <= set(LAZY)


def _checked_imports(module: str) -> dict[str, str]:
    """name -> module, for the imports under ``if TYPE_CHECKING:`` at `module`'s top level
    (those of typing itself left out)."""
    path = ROOT / Path(*module.split("."))
    source = (path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).read_text()
    names: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for item in node.body:
                if isinstance(item, ast.ImportFrom) and item.module not in ("typing", None):
                    names.update({a.asname or a.name: item.module for a in item.names})
    return {n: m for n, m in names.items() if not n.startswith("_")}


@pytest.mark.parametrize("name", LAZY)
def test_the_table_the_imports_and_all_agree(name: str) -> None:
    package = importlib.import_module(name)
    table: dict[str, tuple[str, ...]] = package._EXPORTS
    lazy = {n: module for module, names in table.items() for n in names}
    assert lazy == _checked_imports(name)
    defined_here = {n for n in package.__all__ if n in vars(package) and n not in lazy}
    assert set(package.__all__) == set(lazy) | defined_here
    for n, module in lazy.items():
        assert getattr(package, n) is getattr(importlib.import_module(module), n), n
    assert set(package.__all__) <= set(dir(package))


def test_an_unknown_name_is_an_attribute_error_and_a_submodule_is_found() -> None:
    import referee

    with pytest.raises(AttributeError, match="'referee' has no attribute 'Rolout'"):
        referee.Rolout  # noqa: B018
    assert not hasattr(referee.rewards, "no_such_thing")
    assert referee.spec.load is referee.load  # a submodule, imported on first use


def test_a_name_that_is_also_a_submodules_stays_the_names() -> None:
    """`referee.reward` is the decorator (`referee.function.reward`), and `referee/reward.py`
    the module of the protocols: importing the module does not rebind the name, as it would
    a plain package's attribute. In a fresh interpreter, where nothing imported either."""
    code = (
        "import referee, referee.reward, referee.function\n"
        "from referee.reward import RewardBase\n"
        "assert referee.reward is referee.function.reward, referee.reward\n"
        "assert RewardBase is referee.RewardBase\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_lazy_package_pickles_by_reference_as_a_module_does() -> None:
    """cloudpickle sends a user's function with the modules it names; a package of ours must
    go as a plain module goes, by name (a worker process imports it again)."""
    import pickle

    import referee

    assert pickle.loads(pickle.dumps(referee)) is referee
    cloudpickle = pytest.importorskip("cloudpickle")
    assert cloudpickle.loads(cloudpickle.dumps(referee.rewards)) is referee.rewards
