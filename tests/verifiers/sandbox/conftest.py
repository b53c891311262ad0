from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from referee.verifiers.sandbox import LocalSandbox
from referee.verifiers.sandbox.local import bwrap_problem
from referee.verifiers.sandbox.pool import WorkerPool
from referee.verifiers.sandbox.uids import claimed

MODES = ["bwrap", "process", "docker"]


def sandbox_processes(uids: set[int] | None = None) -> list[int]:
    """Live host processes of the sandbox uids this process holds (or `uids`), the workers
    themselves aside; zombies run nothing."""
    uids = claimed() if uids is None else uids
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        uid = int(fields.get("Uid", "0").split()[0])
        zombie = fields.get("State", "").strip().startswith("Z")
        if uid in uids and not zombie and b"_zygote.py" not in cmdline:
            found.append(int(entry.name))
    return found


@pytest.fixture(scope="module", params=MODES)
def sandbox(request: pytest.FixtureRequest) -> Iterator[WorkerPool]:
    mode = request.param
    if mode == "docker":
        from referee.verifiers.sandbox.docker import DockerSandbox

        box: WorkerPool = DockerSandbox(
            workers=2, base_url=request.getfixturevalue("docker_engine")
        )
    else:
        if mode == "bwrap" and bwrap_problem() is not None:
            pytest.skip(f"bubblewrap unavailable: {bwrap_problem()}")
        if mode == "process" and os.geteuid() != 0:
            pytest.skip("the process fallback drops to a slot uid only as root")
        box = LocalSandbox(workers=2, isolation=mode)
    yield box
    uids = claimed()
    box.close()
    assert sandbox_processes(uids) == []
