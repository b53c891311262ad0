from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from referee.verifiers.sandbox import LocalSandbox
from referee.verifiers.sandbox._isolation import unshare_problem
from referee.verifiers.sandbox.local import bwrap_problem
from referee.verifiers.sandbox.pool import WorkerPool
from referee.verifiers.sandbox.uids import claimed

MODES = ["bwrap", "unshare", "none", "docker"]


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


PLACES = ("/work", "/tmp", "/var/tmp", "/dev/shm")
"""Where a job can write in an isolated worker: each emptied after every job."""


def left_in_places(box: WorkerPool) -> dict[str, list[str]]:
    """What the idle workers' writable places hold, seen from the host through each zygote's
    root; {} when all are empty (or no worker is left: docker replaces one after an anomaly)."""
    left = {}
    for pid in box.zygote_pids():
        for place in PLACES:
            try:
                entries = os.listdir(f"/proc/{pid}/root{place}")
            except PermissionError:
                pytest.skip("looking into a worker from the host needs root")
            if entries:
                left[f"{pid}:{place}"] = entries
    return left


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
        if mode == "unshare" and unshare_problem() is not None:
            pytest.skip(f"the unshare path is unavailable: {unshare_problem()}")
        if mode == "none" and os.geteuid() != 0:
            pytest.skip("isolation none drops to a slot uid only as root")
        box = LocalSandbox(workers=2, isolation=mode)
    yield box
    uids = claimed()
    box.close()
    assert sandbox_processes(uids) == []
