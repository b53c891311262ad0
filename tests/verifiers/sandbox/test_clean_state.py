"""Every job starts clean: what one job writes (files, environment, importable modules,
processes, kernel objects) is not there for any later job, on the same worker or another,
in the same batch or a later one. Checked from inside by the later jobs, and from the host
by looking into every worker's writable places."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from referee.verifiers.sandbox import Job, _scrub
from referee.verifiers.sandbox.pool import WorkerPool
from tests.support.sandboxes import LIMITS, left_in_places, plant, probe, sandbox_processes


@pytest.fixture
def isolated(sandbox: WorkerPool) -> WorkerPool:
    if sandbox.mode == "none":  # type: ignore[attr-defined]
        pytest.skip("isolation none shares the host's /tmp: the documented opt-out")
    return sandbox


def test_the_writable_places_are_the_fresh_ones(isolated: WorkerPool) -> None:
    report = plant(isolated)
    expected = {"/work/job", "/tmp", "/var/tmp", "/dev/shm"}
    # Where the job could write: its work dir (also its HOME), and the three shared places.
    assert {d for d in report["planted"] if "/.local" not in d} == expected
    from referee.verifiers.sandbox import _cgroup

    if _cgroup.problem() is None:  # without a cgroup the seccomp filter refuses shmget
        assert report["shm"] >= 0  # the kernel objects were made (x86-64: a key too)
    pids = isolated.zygote_pids()  # the idle workers, found from the host
    assert pids and all(b"_zygote.py" in Path(f"/proc/{p}/cmdline").read_bytes() for p in pids)
    assert left_in_places(isolated) == {}  # seen from the host: all empty again
    assert sandbox_processes() == []


def test_a_later_job_on_the_same_worker_finds_nothing(isolated: WorkerPool) -> None:
    plant(isolated)
    for _ in range(3):  # one by one: the pool hands back the worker that just ran
        report = probe(isolated)
        assert report["found"] == []
        assert report["cwd"] == report["home"] == "/work/job"  # the same path for every job
    assert left_in_places(isolated) == {}


def test_no_later_batch_finds_anything(isolated: WorkerPool) -> None:
    size = isolated.size
    with ThreadPoolExecutor(size) as pool:
        # Overlapping jobs: every worker runs one plant.
        reports = list(pool.map(lambda _: plant(isolated, hold=1.0), range(size)))
        assert all(r["planted"] for r in reports)
        assert left_in_places(isolated) == {}
        for _ in range(2):
            probes = list(pool.map(lambda _: probe(isolated), range(2 * size)))
            assert [p["found"] for p in probes] == [[]] * (2 * size)


def test_a_session_starts_clean_and_leaves_nothing(isolated: WorkerPool) -> None:
    source = "import os\nopen('/tmp/answer', 'w').write('42')\ndef f():\n    return 1\n"
    with isolated.session(Job(source=source, limits=LIMITS)) as session:
        assert session.call("f", []) == 1
    check = "import os\ndef f():\n    return os.path.exists('/tmp/answer')\n"
    with isolated.session(Job(source=check, limits=LIMITS)) as session:
        assert session.call("f", []) is False
    assert left_in_places(isolated) == {}


def test_every_worker_hashes_alike(sandbox: WorkerPool) -> None:
    # A fixed hash seed: the same set order (and so the same output) on every worker.
    source = "import time\ntime.sleep(0.5)\nprint(hash('referee'), list({'a', 'b', 'c', 'd'}))\n"
    with ThreadPoolExecutor(sandbox.size) as pool:
        outputs = set(pool.map(lambda _: sandbox.run(Job(source=source)).stdout, range(4)))
    assert len(outputs) == 1


# --- the wipe itself, on the host ---------------------------------------------------------


def test_wipe_empties_a_place_whatever_a_job_left(tmp_path: Path) -> None:
    place = tmp_path / "place"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("not the job's")
    place.mkdir()
    (place / "deep" / "er").mkdir(parents=True)
    (place / "deep" / "er" / "f").write_text("x")
    (place / "link").symlink_to(outside)  # removed, never followed
    (place / ".hidden").write_text("x")
    locked = place / "locked"
    locked.mkdir()
    (locked / "f").write_text("x")
    locked.chmod(0)
    place.chmod(0o700)
    assert _scrub.wipe(str(place), 0o1777) is None
    assert os.listdir(place) == [] and (place.stat().st_mode & 0o7777) == 0o1777
    assert (outside / "keep").read_text() == "not the job's"


def test_a_worker_a_job_left_unclean_is_replaced(isolated: WorkerPool) -> None:
    retired: list[object] = []

    class Recorder:
        def __init__(self, worker: Any) -> None:
            self.worker = worker

        def __getattr__(self, name: str) -> Any:
            return getattr(self.worker, name)

        def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
            reply = self.worker.request(message, timeout)
            return {**reply, "dirty": "/tmp still holds ['x']"}  # as if the wipe had failed

        def retire(self) -> None:
            retired.append(self)
            self.worker.retire()

    worker = isolated._checkout(LIMITS)
    isolated._idle.append(Recorder(worker))  # type: ignore[arg-type]
    assert isolated.run(Job(source="print(1)")).stdout == b"1\n"  # the result stands
    assert len(retired) == 1  # and the worker is gone
