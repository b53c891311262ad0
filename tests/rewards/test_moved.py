"""Modules of `referee.rewards` that moved into family sub-packages still import from their old
paths, for a release, with a DeprecationWarning naming the new one; referee never imports them."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

MOVED = [
    # old path, where its names live now
    ("referee.rewards.code_reference", "referee.rewards.code"),
    ("referee.rewards.patch_reference", "referee.rewards.patch"),
    ("referee.rewards.reward_model", "referee.rewards.learned"),
    ("referee.rewards.process_reward_model", "referee.rewards.learned"),
]


@pytest.mark.parametrize(("old", "new"), MOVED)
def test_an_old_path_warns_and_gives_the_same_names(old: str, new: str) -> None:
    sys.modules.pop(old, None)  # the warning comes once, at the module's first import
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated: import from {new}") as seen:
        __import__(old)  # an import statement's own call: no frame of importlib's between
    assert seen[0].filename == __file__  # at the line of the import, for the user to change
    shim = sys.modules[old]
    moved = importlib.import_module(new)
    assert shim.__all__ and all(getattr(shim, n) is getattr(moved, n) for n in shim.__all__)


def test_referee_imports_no_old_path() -> None:
    code = (
        "import sys, referee, referee.rewards, referee.spec, referee.cli, referee.report\n"
        f"print(sorted(set({[old for old, _ in MOVED]!r}) & set(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", code],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert out.stdout.strip() == "[]"
