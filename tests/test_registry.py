"""The registry names every built-in type without importing it, and imports a type's module
only when that type is asked for."""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

import referee.rewards
from referee import registry
from referee.registry import BUILTIN, lookup, register, registered_types
from referee.reward import CheckReward
from referee.rollout import Rollout

ROOT = Path(__file__).resolve().parent.parent


def _registered_in_source() -> dict[str, str]:
    """Every ``@register("name")`` on a class in referee's source: name -> module:Class."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "referee").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ClassDef):
                continue
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Call) and getattr(decorator.func, "id", "") == (
                    "register"
                ):
                    found[decorator.args[0].value] = f"{module}:{node.name}"  # type: ignore[attr-defined]
    return found


def test_the_table_is_what_the_modules_register() -> None:
    """Every module of `referee.rewards` imported, what registered is the table to the letter:
    the same names, each the class at the module the table names. So is what the source says."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # an old path's shim among them
        for module in pkgutil.walk_packages(referee.rewards.__path__, "referee.rewards."):
            importlib.import_module(module.name)
    registered = {
        name: f"{cls.__module__}:{cls.__qualname__}"
        for name, cls in registry._types.items()
        if cls.__module__.startswith("referee.")
    }
    assert registered == dict(BUILTIN)
    assert _registered_in_source() == dict(BUILTIN)
    for name, where in BUILTIN.items():
        module, _, qualname = where.partition(":")
        assert lookup(name) is getattr(importlib.import_module(module), qualname)


def _fresh(code: str) -> list[str]:
    """What a fresh interpreter running `code` has imported of referee and of its heavy
    dependencies, by the list `code` prints."""
    out = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", code],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    loaded: list[str] = json.loads(out.stdout)
    return loaded


_LOADED = (
    "import json, sys; print(json.dumps(sorted(m for m in sys.modules if m.startswith("
    "('referee', 'pydantic', 'jsonschema', 'rich', 'math_verify', 'yaml')))))"
)


def test_importing_referee_imports_no_reward_and_no_dependency() -> None:
    """``import referee`` (and its list of types) costs an interpreter's start and little more:
    no reward module, no pydantic, no spec loader."""
    loaded = _fresh(f"import referee, referee.rewards; referee.registered_types(); {_LOADED}")
    assert loaded == [
        "referee",
        "referee._lazy",
        "referee._moved",
        "referee.registry",
        "referee.rewards",
        "referee.score",  # the old module's path, answering from referee.scores on first use
    ]


def test_a_spec_imports_the_types_it_names_alone() -> None:
    loaded = _fresh(f"import referee; referee.load({{'type': 'regex', 'regex': 'a'}}); {_LOADED}")
    rewards = [m for m in loaded if m.startswith("referee.rewards.")]
    # the module of `regex` and its family's package (not the family's other modules), and the
    # helpers it imports (their names start with _)
    assert [m for m in rewards if not m.rpartition(".")[2].startswith("_")] == [
        "referee.rewards.text",
        BUILTIN["regex"].partition(":")[0],
    ]
    assert not [m for m in loaded if m.startswith(("referee.judges", "jsonschema", "rich"))]


def test_the_public_names_are_there_on_first_use() -> None:
    loaded = _fresh(
        "import referee; from referee.rewards import MathAnswer; assert referee.rewards.runs_where"
        f"(MathAnswer) == 'process'; assert referee.Rollout(completion='x').completion == 'x'; "
        f"{_LOADED}"
    )
    assert "referee.rewards.math.answer" in loaded and "pydantic" in loaded


@dataclass(kw_only=True)
class _Mine(CheckReward):
    """1.0 always."""

    name: str = "mine"

    def check(self, rollout: Rollout) -> float:
        return 1.0


@pytest.fixture
def own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry's classes as they are, and as they were after the test."""
    monkeypatch.setattr(registry, "_types", dict(registry._types))


@pytest.mark.usefixtures("own_registry")
def test_a_type_of_the_users_registers_as_the_built_ins_do() -> None:
    register("test_mine")(_Mine)
    assert lookup("test_mine") is _Mine and _Mine.kind == "test_mine"
    assert "test_mine" in registered_types() and "regex" in registered_types()
    reward = referee.load({"type": "test_mine"})
    assert isinstance(reward, _Mine)


def test_a_built_in_name_is_not_the_users_to_take_imported_or_not() -> None:
    """Before its module is imported too (in a fresh interpreter): a user's class under
    ``regex`` would be found first, and the built-in fail to register on its import."""
    code = (
        "import referee, sys\n"
        "class Mine(referee.CheckReward): pass\n"
        "try:\n"
        "    referee.register('regex')(Mine)\n"
        "except ValueError as exc:\n"
        "    print(exc)\n"
        "module = 'referee.rewards.text.matching'\n"
        "assert module not in sys.modules\n"
        "assert referee.registry.lookup('regex') is sys.modules[module].Regex\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "'regex' is built in (referee.rewards." in out.stdout, out.stdout
    with pytest.raises(ValueError, match=r"'regex' is built in \(referee\.rewards\."):
        register("regex")(_Mine)  # and here, where it is imported


@pytest.mark.usefixtures("own_registry")
def test_two_classes_under_one_name_are_refused() -> None:
    register("test_twice")(_Mine)
    register("test_twice")(_Mine)  # the same class again: nothing changes

    @dataclass(kw_only=True)
    class Other(_Mine):
        pass

    with pytest.raises(ValueError, match=r"already registered by tests\.test_registry\._Mine"):
        register("test_twice")(Other)


def test_an_unknown_name_is_none() -> None:
    assert lookup("no_such_type") is None
    assert "no_such_type" not in registered_types()


_RACE = """
import threading
from referee.registry import BUILTIN, lookup
names = sorted(BUILTIN)
barrier = threading.Barrier(len(names))
errors = []
def load(name):
    barrier.wait()
    try:
        if lookup(name) is None:
            errors.append(f"{name}: not found")
    except Exception as exc:
        errors.append(f"{name}: {type(exc).__name__}: {exc}")
threads = [threading.Thread(target=load, args=(n,)) for n in names]
for t in threads: t.start()
for t in threads: t.join()
print("\\n".join(errors))
"""


def test_types_looked_up_from_many_threads_at_once_all_import() -> None:
    """Every built-in type asked for at once, one thread each, in a fresh interpreter (the
    conformance matrix serves many specs from one process): before the import lock, some got
    a half-initialised module ("deadlock detected by _ModuleLock", "cannot import name ...
    from partially initialized module") on nearly every run."""
    for _ in range(3):
        done = subprocess.run([sys.executable, "-c", _RACE], capture_output=True, text=True,
                              timeout=300, check=True)  # fmt: skip
        assert done.stdout.strip() == "", done.stdout
