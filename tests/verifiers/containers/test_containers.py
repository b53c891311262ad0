"""The container runner on a real Docker Engine: images built once by content, a warm pool
handing out a fresh container per job, deadlines that kill, capped output, hardening."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from referee.errors import SandboxError
from referee.verifiers.containers import (
    ContainerEngine,
    ContainerLimits,
    ContainerPool,
    context_digest,
)
from tests.support.images import base_image


@pytest.fixture(scope="module")
def engine(docker_engine: str) -> Iterator[ContainerEngine]:
    engine = ContainerEngine(docker_engine, build_network="none")
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def base(docker_engine: str) -> str:
    return base_image(docker_engine)


@pytest.fixture(scope="module")
def pool(engine: ContainerEngine) -> Iterator[ContainerPool]:
    pool = ContainerPool(
        engine,
        warm=1,
        per_image=2,
        total=2,
        limits=ContainerLimits(memory_bytes=256 << 20, pids=64),
    )
    yield pool
    pool.close()


def _context(tmp: Path, base: str, body: str = "") -> Path:
    (tmp / "Dockerfile").write_text(f"FROM {base}\nWORKDIR /app\n{body}")
    return tmp


def test_the_digest_changes_with_any_file(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM x\n")
    first = context_digest(tmp_path)
    assert context_digest(tmp_path) == first
    (tmp_path / "data.txt").write_text("1")
    second = context_digest(tmp_path)
    assert second != first
    (tmp_path / "data.txt").chmod(0o755)
    assert context_digest(tmp_path) != second


def test_an_image_is_built_once_per_content(
    engine: ContainerEngine, base: str, tmp_path: Path
) -> None:
    context = _context(tmp_path, base, "COPY hello.txt /app/hello.txt\n")
    (context / "hello.txt").write_text("one")
    before = engine.builds
    tag = engine.image(name="Hello Task", context=context)
    assert engine.builds == before + 1
    image_id = engine.client.images.get(tag).id
    # a second engine (a new process would be the same): the tag is found, not rebuilt
    again = ContainerEngine(engine.url)
    assert again.image(name="Hello Task", context=context) == tag
    assert again.builds == 0
    assert again.client.images.get(tag).id == image_id
    assert engine.workdir(tag) == "/app"
    (context / "hello.txt").write_text("two")  # a change is a new image
    assert engine.image(name="Hello Task", context=context) != tag
    assert engine.builds == before + 2


def test_a_build_failure_names_the_task_and_the_log(
    engine: ContainerEngine, base: str, tmp_path: Path
) -> None:
    context = _context(tmp_path, base, "RUN echo about to fail && exit 3\n")
    with pytest.raises(SandboxError) as caught:
        engine.image(name="broken-task", context=context)
    message = str(caught.value)
    assert "broken-task" in message and "about to fail" in message


def test_a_missing_image_is_named(engine: ContainerEngine) -> None:
    with pytest.raises(SandboxError, match=r"no-such-image:1.*referee does not pull"):
        engine.image(name="t", tag="no-such-image:1")


def test_an_unreachable_engine_names_its_address(tmp_path: Path) -> None:
    url = f"unix://{tmp_path}/nothing.sock"
    with pytest.raises(SandboxError, match=f"cannot reach the Docker Engine at {url}"):
        ContainerEngine(url)


def test_a_job_copies_in_runs_and_reads_out(pool: ContainerPool, base: str) -> None:
    with pool.lease(base) as box:
        box.put({"/work/in.txt": "21\n"}, mode=0o644)
        result = box.exec(
            ["sh", "-c", "echo out; echo err >&2; expr $(cat in.txt) \\* 2 > /work/out.txt"],
            timeout=30,
            workdir="/work",
        )
        assert result.exit_code == 0 and not result.timed_out
        assert b"out" in result.output and b"err" in result.output
        assert box.read("/work/out.txt") == b"42\n"
        assert box.read("/work/nothing") is None
        with pytest.raises(SandboxError, match="not a regular file"):
            box.read("/work")
        with pytest.raises(SandboxError, match="over the 2 read"):
            box.read("/work/out.txt", max_bytes=2)


def test_each_job_gets_a_fresh_container_and_the_pool_stays_warm(
    pool: ContainerPool, base: str
) -> None:
    with pool.lease(base) as first:
        first.exec(["sh", "-c", "echo secret > /tmp/left"], timeout=30)
        first_id = first.id
    with pool.lease(base) as second:
        assert second.id != first_id
        assert second.read("/tmp/left") is None
        result = second.exec(["cat", "/tmp/left"], timeout=30)
        assert result.exit_code != 0
    # the control: within one lease the file is there
    with pool.lease(base) as box:
        box.exec(["sh", "-c", "echo secret > /tmp/left"], timeout=30)
        assert box.read("/tmp/left") == b"secret\n"
    idle = _wait_for_idle(pool, base)
    with pool.lease(base) as box:
        assert box.id in idle  # a warm one was taken
        assert box.exec(["true"], timeout=30).exit_code == 0
    assert _wait_for_idle(pool, base) != idle  # and its replacement started


def _wait_for_idle(pool: ContainerPool, image: str) -> list[str]:
    for _ in range(600):
        idle = pool.idle(image)
        if idle:
            return idle
        time.sleep(0.05)
    raise AssertionError("the pool started no warm container")


def test_a_command_past_its_deadline_kills_the_container(pool: ContainerPool, base: str) -> None:
    with pool.lease(base) as box:
        result = box.exec(["sh", "-c", "sleep 1000 & sleep 1000"], timeout=1)
        assert result.timed_out and result.exit_code is None
        state = pool.engine.api.inspect_container(box.id)["State"]
        assert not state["Running"]  # every process, not only the exec
        with pytest.raises(SandboxError, match="killed"):
            box.exec(["true"], timeout=5)


def test_output_is_capped(pool: ContainerPool, base: str) -> None:
    with pool.lease(base) as box:
        result = box.exec(["sh", "-c", "head -c 300000 /dev/zero"], timeout=30, output_bytes=1000)
        assert len(result.output) == 1000 and result.truncated
        small = box.exec(["echo", "hi"], timeout=30)
        assert small.output == b"hi\n" and not small.truncated


def test_the_container_is_locked_down(pool: ContainerPool, base: str) -> None:
    with pool.lease(base) as box:
        attrs = pool.engine.api.inspect_container(box.id)["HostConfig"]
        assert attrs["NetworkMode"] == "none"
        assert attrs["CapDrop"] == ["ALL"]
        assert "no-new-privileges" in attrs["SecurityOpt"]
        assert attrs["Memory"] == 256 << 20 and attrs["PidsLimit"] == 64
        assert not attrs.get("Binds") and not attrs.get("Mounts")
        caps = box.exec(["grep", "CapEff", "/proc/self/status"], timeout=30).output
        effective = int(caps.split()[-1], 16)
        assert effective != 0 and effective & (1 << 12) == 0  # no CAP_NET_ADMIN
        assert effective & (1 << 21) == 0  # no CAP_SYS_ADMIN
        net = box.exec(["cat", "/proc/net/dev"], timeout=30).output.decode()
        assert "eth0" not in net  # only the loopback device


def test_a_marker_starts_the_jobs_own_deadline(pool: ContainerPool, base: str) -> None:
    with pool.lease(base) as box:
        done = box.exec(
            ["sh", "-c", "sleep 1; echo ready; echo ok"], timeout=60, then=(b"ready", 30)
        )
        assert done.exit_code == 0 and not done.timed_out
        late = box.exec(["sh", "-c", "echo ready; sleep 100"], timeout=100, then=(b"ready", 1))
        assert late.timed_out and late.exit_code is None


_ORPHAN = """
import os, sys, time
from referee.verifiers.containers import ContainerPool
pool = ContainerPool(sys.argv[1], warm=1)
pool.prewarm(sys.argv[2])
for _ in range(600):
    if pool.idle(sys.argv[2]):
        break
    time.sleep(0.05)
print(pool.idle(sys.argv[2])[0], flush=True)
os._exit(0)  # as a worker killed at its deadline: no exit hooks, the warm container left
"""


def test_a_dead_processs_containers_are_reaped_by_the_next_pool(
    docker_engine: str, engine: ContainerEngine, base: str
) -> None:
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", _ORPHAN, docker_engine, base],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    orphan = run.stdout.strip()
    assert engine.api.inspect_container(orphan)["State"]["Running"]  # left running: the case
    living = ContainerPool(engine, warm=0)  # a living pool's containers are never reaped
    try:
        with living.lease(base) as box:
            ContainerPool(engine, warm=0).close()  # a new pool reaps at its start
            assert engine.api.inspect_container(box.id)["State"]["Running"]
        import docker

        with pytest.raises(docker.errors.NotFound):
            engine.api.inspect_container(orphan)
    finally:
        living.close()
