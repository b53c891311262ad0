from __future__ import annotations

import importlib

import pytest

import referee

PACKAGES = [
    "referee",
    "referee.compose",
    "referee.errors",
    "referee.function",
    "referee.reward",
    "referee.rewards",
    "referee.rewards.agent",
    "referee.rewards.judged",
    "referee.rewards.math",
    "referee.rewards.structured",
    "referee.rewards.text",
    "referee.rollouts",
    "referee.report",
    "referee.verifiers.sandbox",
    "referee.judges",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_and_complete(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    # Sorted plainly, or isort-style (CONSTANTS, then Classes, then functions: ruff's RUF022).
    isort_style = sorted(exported, key=lambda s: (not s.isupper(), not s[:1].isupper(), s))
    assert exported in (sorted(exported), isort_style)
    for item in exported:
        assert hasattr(module, item), f"{name}.__all__ names {item!r}, which is missing"
    public = {
        k
        for k, v in vars(module).items()
        if not k.startswith("_")
        and not isinstance(v, type(importlib))
        # a plain module's public names are what it defines, not what it imports
        and (hasattr(module, "__path__") or getattr(v, "__module__", name) == name)
    }
    # `from __future__ import annotations`, and `TYPE_CHECKING = False` where a package imports
    # its names lazily (`referee._lazy`) and keeps typing unimported
    assert public <= set(exported) | {"annotations", "TYPE_CHECKING"}, public - set(exported)


def test_version() -> None:
    assert referee.__version__
