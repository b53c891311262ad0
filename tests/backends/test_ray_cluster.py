"""`referee score --engine ray` on a real three-node cluster, losing nodes mid-run.

The cluster is a head and two worker nodes, each a `ray start` process group on this machine
(tests/support/ray_cluster.py); a node is lost by SIGKILL to all of its processes. The reward
calls a scripted judge that answers after a delay, so a run lasts long enough for a kill to land
mid-run without the test sleeping, and every answer is a pure function of the rollout: whichever
actor scores a row, and however often, its row is the same. The local engine's output is the
reference, byte for byte.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

pytest.importorskip("ray", reason="ray is not installed (pip install 'referee[ray]')")

from referee.cli import main
from referee.judges.testing import FakeJudgeServer, Reply
from tests.support.judges import letter_judge, spec_with_judge
from tests.support.ray_cluster import LoopbackCluster
from tests.support.rollouts import write_jsonl

pytestmark = pytest.mark.slow

ROWS = 144
# 12 batches: the run is still going when a node is lost. Every row has the same prompt (one
# group, as a rollout file groups rows by prompt), and the reward scores each alone, so each
# batch is cut over both actors: whichever node is lost has a chunk in flight, or the next.
BATCH = 12
DELAY = 0.15  # seconds per judge answer during the ray runs


@pytest.fixture(scope="module")
def cluster() -> Iterator[LoopbackCluster]:
    # The head scores nothing (0 CPUs, as on large clusters), so each worker node holds one
    # actor, and losing both leaves no actor to be had.
    with LoopbackCluster(workers=2, cpus=1, head_cpus=0) as c:
        yield c


@dataclass
class Judge:
    """`letter_judge`'s grades, answered after `delay` seconds (set by the tests)."""

    delay: float = 0.0
    server: FakeJudgeServer | None = None

    def __call__(self, request: dict[str, Any]) -> Reply:
        return Reply(letter_judge(request).content, delay=self.delay)


@pytest.fixture(scope="module")
def judge() -> Iterator[Judge]:
    judge = Judge()
    with FakeJudgeServer(judge) as server:
        judge.server = server
        yield judge


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, judge: Judge) -> dict[str, Path]:
    """The input, the spec and the local engine's output (the reference)."""
    root = tmp_path_factory.mktemp("ray_cluster")
    # JSON and not (the json_valid component), with 0-6 letters 'e' (the judge's grade).
    texts = [json.dumps({"e": "e" * (i % 7)}) if i % 3 else "see " * (i % 4) for i in range(ROWS)]
    rows = [{"id": f"r{i}", "prompt": "Describe it.", "completion": t} for i, t in enumerate(texts)]
    source = write_jsonl(root / "in.jsonl", rows)
    spec = root / "spec.json"
    assert judge.server is not None
    spec.write_text(json.dumps(spec_with_judge(judge.server, cache=None)))
    local = root / "local.jsonl"
    # In this process (the same command, less a process start): the reference.
    result = CliRunner().invoke(
        main, ["score", str(source), "--spec", str(spec), "-o", str(local), "-q"]
    )
    assert result.exit_code == 0, result.output
    return {"source": source, "spec": spec, "local": local}


def _score(cluster: LoopbackCluster, files: dict[str, Path], out: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "referee.cli", "score", str(files["source"]), "--spec",
         str(files["spec"]), "-o", str(out), "-q", "--engine", "ray", "--address",
         cluster.address, "--batch-size", str(BATCH)],
        env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _ready(cluster: LoopbackCluster, workers: int) -> None:
    """The cluster with a live head (a fresh cluster if an earlier test lost it) and at least
    `workers` live worker nodes."""
    if not cluster.nodes[0].alive:
        cluster.stop()
        cluster.start()
    cluster.add_workers(max(0, workers - len(cluster.live_workers)))


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _under_way(
    cluster: LoopbackCluster, judge: Judge, files: dict[str, Path], out: Path, workers: int
) -> subprocess.Popen[str]:
    """A ray run into `out` on at least `workers` live workers, the judge slowed, returned once
    its first batch is written (the run is under way, its actors busy)."""
    _ready(cluster, workers)
    judge.delay = DELAY
    run = _score(cluster, files, out)
    partial, deadline = out.with_name(out.name + ".partial"), time.monotonic() + 120
    while _lines(partial) < BATCH:
        assert run.poll() is None, run.communicate()
        assert time.monotonic() < deadline, "the run wrote nothing in 120 s"
        time.sleep(0.05)
    return run


def test_a_worker_node_lost_mid_run_changes_no_row(
    cluster: LoopbackCluster, judge: Judge, files: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "ray.jsonl"
    run = _under_way(cluster, judge, files, out, workers=2)
    cluster.live_workers[0].kill()
    _, stderr = run.communicate(timeout=300)
    assert run.returncode == 0, stderr
    # The lost node's chunk was sent again, to the actor left...
    assert "sent again (retry 1 of 3)" in stderr, stderr
    # ...and every row is the local engine's, in order.
    assert out.read_text() == files["local"].read_text()
    assert _lines(out) == ROWS


def test_losing_every_node_keeps_written_rows_and_resume_finishes(
    cluster: LoopbackCluster, judge: Judge, files: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "ray.jsonl"
    partial = out.with_name("ray.jsonl.partial")
    run = _under_way(cluster, judge, files, out, workers=1)
    for node in cluster.live_workers:
        node.kill()
    _, stderr = run.communicate(timeout=300)
    # A clear error: which cluster, what was lost, how to finish.
    assert run.returncode == 1, stderr
    assert f"the Ray cluster at {cluster.address} lost" in stderr, stderr
    assert "no live actor is left" in stderr, stderr
    assert "--resume finishes" in stderr, stderr
    assert not out.exists()
    # What was written before is kept: whole batches, each row the local engine's.
    kept = partial.read_text()
    local = files["local"].read_text()
    assert kept and _lines(partial) % BATCH == 0 and local.startswith(kept)

    # Resumed (here on the local engine, which the run's fingerprint leaves free): the kept
    # rows are not scored again, the others are, and the file is the local engine's.
    judge.delay = 0.0
    result = CliRunner().invoke(main, [
        "score", str(files["source"]), "--spec", str(files["spec"]), "-o", str(out), "--resume"
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"resumed: {len(kept.splitlines())} rows kept" in result.output
    assert out.read_text() == local


def test_the_head_and_a_worker_lost_mid_run_change_no_row(
    cluster: LoopbackCluster, judge: Judge, files: dict[str, Path], tmp_path: Path
) -> None:
    # The driver talks to its actors directly: without the head it goes on with the actors it
    # has (Ray ends it a minute later, gcs_rpc_server_reconnect_timeout_s), sending the lost
    # chunks to them, since no actor can be started without the head.
    out = tmp_path / "ray.jsonl"
    run = _under_way(cluster, judge, files, out, workers=2)
    cluster.nodes[0].kill()
    cluster.live_workers[0].kill()
    _, stderr = run.communicate(timeout=300)
    assert run.returncode == 0, stderr
    assert "sent again (retry 1 of 3)" in stderr, stderr
    assert out.read_text() == files["local"].read_text()
