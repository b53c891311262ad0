from __future__ import annotations

import os

# Before anything imports litellm: its cost map comes from the package, not the internet.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# Ray starts its workers at niceness 15 (a training node's driver comes first). Here the
# other pytest workers run at 0 on two cores, and a Ray actor importing verl and torch got
# about 5% of a core: verl's reward loop took over 180 s to start and its matrix cells failed
# as hung. The tests' Ray (every local one this process starts) runs its workers at 0.
os.environ.setdefault("RAY_worker_niceness", "0")
# One intra-op thread for torch (and numpy's BLAS) in every process of the suite: three
# workers share two cores, so a second thread buys no wall time and its spin-waits burn CPU.
# The learn example's two GRPO steps, alone: 82 s of CPU with two threads, 58 s with one, in
# the same 58 s of wall time.
os.environ.setdefault("OMP_NUM_THREADS", "1")
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# Helpers' own asserts explain themselves as a test module's do.
pytest.register_assert_rewrite("tests.support")

from tests.support.rollouts import make  # noqa: E402

# No wall-clock deadlines on property tests: a loaded CI machine (or a first call that imports
# and compiles) is slow, not wrong. Tests never assert times.
settings.register_profile("referee", deadline=None)
settings.load_profile("referee")


@pytest.fixture
def rollout_factory():  # type: ignore[no-untyped-def]
    return make


# Under pytest-xdist (`make test` runs the suite on several workers): a module's tests stay on
# one worker, so its module-scoped servers and engines start once, and the modules that start
# Ray go together to one worker, which starts one local Ray (each takes every core it is
# given). Each worker that needs Docker starts its own engine (the session's `docker_engine`).
# Modules go to whichever worker is free. (xdist's own `loadgroup` reads a node id that
# pytest 9 no longer lets it change, so the grouping is this scheduler's.)
_RAY_MODULES = frozenset({
    "tests/backends/test_distributed.py", "tests/backends/test_examples.py",
    "tests/backends/test_matrix.py", "tests/backends/test_ray_cluster.py",
    "tests/backends/test_same_number.py", "tests/backends/test_verl.py",
    "tests/rewards/test_python_backends.py",
})  # fmt: skip


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "ray" if module in _RAY_MODULES else module

    return ByModule(config, log)


def _module(item: pytest.Item | None) -> str | None:
    return None if item is None else item.nodeid.split("::", 1)[0]


@pytest.hookimpl(trylast=True)  # after the module's own fixtures are torn down
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After the last test of the Ray modules' run (the next test is in another module, or
    none is), end the local Ray `local_ray` started: left up, its GCS, raylet and agents take
    about 5% of a core for the rest of the suite. A Ray module run again starts it again."""
    if _module(item) in _RAY_MODULES and _module(nextitem) not in _RAY_MODULES:
        import sys

        ray = sys.modules.get("ray")
        if ray is not None and ray.is_initialized():
            ray.shutdown()


def pytest_sessionfinish(session: pytest.Session) -> None:
    import sys

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


def pytest_sessionstart(session: pytest.Session) -> None:
    # tests.support.options.OPTIONS names tiny reward models at fixed paths: build them once
    from tests.support.models import ensure

    ensure()


def _engine_answers(url: str) -> bool:
    try:
        import docker

        docker.DockerClient(base_url=url).ping()
        return True
    except Exception:
        return False


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[str]:
    """A Docker Engine: the environment's, or a dockerd of our own with the safe flags."""
    pytest.importorskip("docker", reason="the docker SDK is not installed (pip install docker)")
    for url in (os.environ.get("DOCKER_HOST"), "unix:///var/run/docker.sock"):
        if url and _engine_answers(url):
            yield url
            return
    if shutil.which("dockerd") is None:
        pytest.skip("no Docker Engine: dockerd is not installed (apt-get install docker.io)")
    if os.geteuid() != 0:
        pytest.skip("no Docker Engine reachable, and starting dockerd needs root")
    tmp = tempfile.mkdtemp(prefix="referee-dockerd-")
    url = f"unix://{tmp}/docker.sock"
    log = open(f"{tmp}/dockerd.log", "wb")  # noqa: SIM115 - kept open while dockerd runs
    # Never without these flags: the defaults rewrite the host's firewall and bridges.
    proc = subprocess.Popen(
        [
            "dockerd", "--data-root", f"{tmp}/data", "--exec-root", f"{tmp}/exec",
            "--pidfile", f"{tmp}/docker.pid", "-H", url,
            "--bridge=none", "--iptables=false", "--ip6tables=false",
            "--ip-forward=false", "--ip-masq=false",
        ],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        from referee.verifiers.sandbox.docker import wait_for_engine

        try:
            wait_for_engine(url, 60)
        except Exception:
            log.flush()
            tail = Path(f"{tmp}/dockerd.log").read_text(errors="replace")[-800:]
            pytest.skip(f"dockerd did not start here: {tail}")
        yield url
    finally:
        from referee.verifiers.sandbox import _close_shared

        _close_shared()  # remove the shared sandboxes' containers while the engine still runs
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)
