"""What only the docker backend promises: its container settings and its pool's recycling."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from referee.verifiers.sandbox import Job, Limits, SandboxError

FAST = Limits(wall_seconds=2, cpu_seconds=2)


@pytest.fixture(scope="module")
def docker_sandbox(docker_engine: str) -> Iterator[object]:
    from referee.verifiers.sandbox.docker import DockerSandbox

    box = DockerSandbox(workers=1, recycle_after=3, base_url=docker_engine)
    yield box
    box.close()


def containers(box: object) -> set[str]:
    client, pool = box.client, box.pool_id  # type: ignore[attr-defined]
    return {c.id for c in client.containers.list(filters={"label": f"referee.sandbox={pool}"})}


def test_container_is_locked_down(docker_sandbox: object) -> None:
    r = docker_sandbox.run(Job(source=(  # type: ignore[attr-defined]
        "import os\n"
        "status = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines())\n"
        "print(os.getuid(), status['CapEff'].strip(), status['NoNewPrivs'].strip())\n"
        "try:\n    open('/usr/evil', 'w')\nexcept OSError as e:\n    print('ro', e.errno)\n"
        "try:\n    open('/opt/evil', 'w')\nexcept OSError as e:\n    print('ro', e.errno)\n"
    )))  # fmt: skip
    uid, cap, nnp, *rest = r.stdout.decode().split()
    assert int(uid) != 0  # a non-root user
    assert int(cap, 16) == 0  # no capabilities
    assert nnp == "1"  # no-new-privileges
    assert rest == ["ro", "30", "ro", "30"]  # EROFS: read-only root and /usr


def test_recycled_after_n_jobs(docker_sandbox: object) -> None:
    seen = set()
    for _ in range(7):
        docker_sandbox.run(Job(source="pass", limits=FAST))  # type: ignore[attr-defined]
        seen |= containers(docker_sandbox)
    assert len(seen) >= 3  # recycle_after=3: a fresh container every three jobs


def test_recycled_after_an_anomaly(docker_sandbox: object) -> None:
    docker_sandbox.run(Job(source="pass", limits=FAST))  # type: ignore[attr-defined]
    before = containers(docker_sandbox)
    r = docker_sandbox.run(Job(source="while True: pass", limits=Limits(wall_seconds=0.5)))  # type: ignore[attr-defined]
    assert r.timed_out
    docker_sandbox.run(Job(source="pass", limits=FAST))  # type: ignore[attr-defined]
    assert containers(docker_sandbox).isdisjoint(before)


def test_missing_runtime_is_a_clear_error(docker_engine: str) -> None:
    from referee.verifiers.sandbox.docker import DockerSandbox

    with pytest.raises(SandboxError, match="runtime 'no-such-runtime' is not installed"):
        DockerSandbox(runtime="no-such-runtime", base_url=docker_engine)


def test_gvisor_where_installed(docker_engine: str) -> None:
    import docker

    from referee.verifiers.sandbox.docker import DockerSandbox

    if "runsc" not in docker.DockerClient(base_url=docker_engine).info().get("Runtimes", {}):
        pytest.skip("gVisor (runsc) is not installed in this engine")
    box = DockerSandbox(workers=1, runtime="runsc", base_url=docker_engine)
    try:
        assert box.run(Job(source="print(6 * 7)")).stdout == b"42\n"
    finally:
        box.close()


def test_unreachable_engine_is_a_sandbox_error(tmp_path: object) -> None:
    from referee.verifiers.sandbox.docker import DockerSandbox

    with pytest.raises(SandboxError, match="cannot reach a Docker Engine"):
        DockerSandbox(base_url=f"unix://{tmp_path}/nothing.sock")
