from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from referee.verifiers.sandbox import LocalSandbox
from referee.verifiers.sandbox._isolation import unshare_problem
from referee.verifiers.sandbox.local import bwrap_problem
from referee.verifiers.sandbox.pool import WorkerPool
from referee.verifiers.sandbox.uids import claimed
from tests.support.sandboxes import sandbox_processes

MODES = ["bwrap", "unshare", "none", "docker"]


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
