from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from referee.verifiers.sandbox import LocalSandbox
from referee.verifiers.sandbox.local import bwrap_problem

MODES = ["bwrap", "process"]


def sandbox_processes() -> list[int]:
    """Live host processes of a sandbox slot uid (60000 and up); zombies run nothing."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        uid = int(fields.get("Uid", "0").split()[0])
        if 60000 <= uid < 61000 and not fields.get("State", "").strip().startswith("Z"):
            found.append(int(entry.name))
    return found


@pytest.fixture(scope="module", params=MODES)
def sandbox(request: pytest.FixtureRequest) -> Iterator[LocalSandbox]:
    mode = request.param
    if mode == "bwrap" and bwrap_problem() is not None:
        pytest.skip(f"bubblewrap unavailable: {bwrap_problem()}")
    if mode == "process" and os.geteuid() != 0:
        pytest.skip("the process fallback drops to a slot uid only as root")
    box = LocalSandbox(workers=2, isolation=mode)
    yield box
    box.close()
    assert sandbox_processes() == []
