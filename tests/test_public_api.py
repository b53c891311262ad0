from __future__ import annotations

import importlib

import pytest

import referee

PACKAGES = [
    "referee",
    "referee.rewards",
    "referee.rollouts",
    "referee.report",
    "referee.verifiers.sandbox",
    "referee.judges",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_and_complete(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == sorted(exported, key=lambda s: (s.startswith("_"), s)) or exported == sorted(
        exported
    )
    for item in exported:
        assert hasattr(module, item), f"{name}.__all__ names {item!r}, which is missing"
    public = {
        k
        for k, v in vars(module).items()
        if not k.startswith("_") and not isinstance(v, type(importlib))
    }
    assert public <= set(exported) | {"annotations"}, public - set(exported)


def test_version() -> None:
    assert referee.__version__
