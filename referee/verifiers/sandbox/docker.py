"""The docker sandbox: a warm pool of locked-down containers on a real Docker Engine.

Each worker is one container running referee's zygote (the same worker as the local backend)
as PID 1, reached through a unix socket in a folder bind-mounted read-only into it:

- ``--network none``, read-only root filesystem; the writable places (``/work``, ``/tmp``,
  ``/var/tmp``, ``/dev/shm``) are tmpfs, emptied by the zygote after every job, as locally;
- jobs run as a non-root uid claimed per container, with no capabilities; the zygote keeps
  six (to run them as that uid, and to kill and wipe after them); no-new-privileges;
- referee's seccomp filter (`_seccomp`: no user namespaces, io_uring, ptrace attach, ...) on
  top of the engine's own profile (filters stack: a call either refuses is refused), loaded
  by a launcher before the zygote starts;
- memory, swap and pids limits on the container: its cgroup counts every page its jobs make
  (tmpfs files, memfds, shared memory), plus the zygote's per-job rlimits; its memory limit
  is each job's own (plus the zygote's slack, `_cgroup.SLACK`), set again when a job's
  differs from the last one's, up to the pool's `memory_bytes`;
- output read by the zygote through a capped pipe;
- gVisor (``runtime: runsc``) where it is installed.

The image is built without a registry: ``docker import`` of a small root filesystem (the
zygote and the directory skeleton); the host's ``/usr`` is bind-mounted read-only for the
interpreters. A container is recycled after `recycle_after` jobs, or after any anomaly (a
timeout, an output flood, a job that took its worker down).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import socket
import tarfile
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from referee.errors import MissingDependency
from referee.verifiers.sandbox import _cgroup, _seccomp, _wire
from referee.verifiers.sandbox._isolation import HARDENING, KEPT_CAPS, ZYGOTE_ENV, etc_entries
from referee.verifiers.sandbox.base import BackendOptions, Limits, SandboxError
from referee.verifiers.sandbox.pool import Worker, WorkerPool
from referee.verifiers.sandbox.uids import claim_uid

__all__ = ["DockerOptions", "DockerSandbox"]

_HERE = Path(__file__).resolve().parent
_UID_BASE = 61000  # container users are claimed from here (the local backend's from 60000)
_SOCKET_DIR = "/run/referee"


def _image_tar() -> tuple[bytes, str]:
    """The image's root filesystem as a tar, and a tag that changes when the zygote does."""
    digest = hashlib.sha256()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:

        def add_dir(name: str, mode: int = 0o755) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)

        for name in (
            "work",
            "tmp",
            "var",
            "var/tmp",
            "etc",
            "run",
            "run/referee",
            "opt",
            "opt/referee",
            "proc",
            "dev",
        ):
            # A tmpfs takes the mode of the image's directory it covers.
            mode = {"work": 0o711, "tmp": 0o1777, "var/tmp": 0o1777}.get(name, 0o755)
            add_dir(name, mode)
        for name in ("bin", "lib", "lib64", "sbin"):
            path = Path("/") / name
            if path.is_symlink():
                info = tarfile.TarInfo(name)
                info.type, info.linkname = tarfile.SYMTYPE, os.readlink(path)
                tar.addfile(info)
        for source in ("_zygote.py", "_wire.py", "_scrub.py", "_seccomp.py"):
            data = (_HERE / source).read_bytes()
            digest.update(data)
            info = tarfile.TarInfo(f"opt/referee/{source}")
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue(), digest.hexdigest()[:12]


class _ContainerWorker(Worker):
    """A zygote running as PID 1 of a container, on a unix socket."""

    def __init__(self, sandbox: DockerSandbox, slot: int, limits: Limits, uid: int) -> None:
        self.slot = slot
        self.sandbox = sandbox
        self.memory = sandbox.memory_for(limits)  # the container's limit now
        self.container: Any = None
        self.dir = tempfile.mkdtemp(prefix="referee-docker-")
        os.chmod(self.dir, 0o755)
        path = os.path.join(self.dir, "zygote.sock")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock: socket.socket | None = None
        try:
            server.bind(path)
            os.chmod(path, 0o777)
            server.listen(1)
            server.settimeout(60)
            self.container = sandbox.start_container(uid, limits, self.dir)
            try:
                self.sock, _ = server.accept()
            except TimeoutError:
                raise SandboxError(
                    f"the container did not connect within 60s: {self.stderr()}"
                ) from None
        except BaseException:
            self.close()
            raise
        finally:
            server.close()
        self.sock.setblocking(True)
        self.in_fd = self.sock.fileno()
        self.out = _wire.Channel(self.in_fd)
        self.ping()

    def fit(self, limits: Limits) -> None:
        """Set the container's memory (and swap) limit to its next job's."""
        memory = self.sandbox.memory_for(limits)
        if memory == self.memory or self.container is None:
            return
        try:
            self.container.update(mem_limit=memory, memswap_limit=memory)
        except Exception as exc:
            raise SandboxError(f"cannot set the container's memory limit: {exc}") from None
        self.memory = memory

    def pid(self) -> int | None:
        """The zygote's pid on the host (the container's init), as the engine reports it."""
        if self.container is None:
            return None
        try:
            self.container.reload()
            return int(self.container.attrs["State"]["Pid"]) or None
        except Exception:
            return None

    def stderr(self) -> str:
        if self.container is None:
            return "(no container)"
        try:
            logs: bytes = self.container.logs(stdout=True, stderr=True, tail=20)
        except Exception as exc:
            return f"(logs unavailable: {exc})"
        return logs.decode(errors="replace").strip() or "(no output)"

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.container is not None:
            with contextlib.suppress(Exception):
                self.container.remove(force=True)
            self.container = None
        shutil.rmtree(self.dir, ignore_errors=True)


class DockerSandbox(WorkerPool):
    """Runs untrusted code in containers on a Docker Engine (``DOCKER_HOST`` or the default).

    Args:
        workers: Containers kept warm (jobs at once); default: CPU count.
        runtime: A container runtime, e.g. ``"runsc"`` for gVisor (must be installed).
        recycle_after: Replace a container after this many jobs.
        python: The interpreter inside (from the host's /usr, bind-mounted read-only).
        memory_bytes: The most memory (and swap) a container may have. Each job gets its own
            limit (`Limits.memory_bytes`, every page counted, its files included) plus 64 MiB
            for the zygote, up to this.
        pids: Process limit of a container.
        base_url: The engine's address; default: from the environment.
    """

    def __init__(
        self,
        workers: int | None = None,
        runtime: str | None = None,
        recycle_after: int = 200,
        python: str = "/usr/bin/python3",
        memory_bytes: int = 2 << 30,
        pids: int = 256,
        base_url: str | None = None,
    ) -> None:
        super().__init__(
            workers or os.cpu_count() or 1, recycle_after=recycle_after, recycle_on_anomaly=True
        )
        try:
            import docker
        except ImportError:
            raise MissingDependency("docker", "docker", "The docker sandbox") from None
        try:
            self.client = docker.DockerClient(base_url=base_url) if base_url else docker.from_env()
            self.client.ping()
        except Exception as exc:
            raise SandboxError(f"cannot reach a Docker Engine: {exc}") from None
        if runtime is not None:
            runtimes = self.client.info().get("Runtimes", {})
            if runtime not in runtimes:
                raise SandboxError(
                    f"container runtime {runtime!r} is not installed (have: {sorted(runtimes)})"
                )
        self.runtime = runtime
        self.mode = "docker"
        self.pool_id = uuid.uuid4().hex[:12]  # labels this pool's containers
        self.python = python
        self.memory_bytes = memory_bytes
        self.pids = pids
        self.image = self._ensure_image()

    def _ensure_image(self) -> str:
        data, tag = _image_tar()
        name = f"referee-sandbox:{tag}"
        try:
            self.client.images.get(name)
        except Exception:
            try:
                self.client.api.import_image_from_data(data, repository="referee-sandbox", tag=tag)
            except Exception as exc:
                raise SandboxError(f"cannot build the sandbox image: {exc}") from None
        return name

    def memory_for(self, limits: Limits) -> int:
        """A container's memory (and swap) limit while it runs a job with `limits`."""
        return min(self.memory_bytes, _cgroup.sized(limits.memory_bytes, limits.processes)[0])

    def start_container(self, uid: int, limits: Limits, socket_dir: str) -> Any:
        """Start one locked-down container running the zygote, its jobs as `uid`."""
        volumes = {
            "/usr": {"bind": "/usr", "mode": "ro"},
            socket_dir: {"bind": _SOCKET_DIR, "mode": "ro"},
        }
        for extra in (f"/etc/{name}" for name in etc_entries()):
            if os.path.isdir(extra):  # (ssl, alternatives, each JDK's configuration)
                volumes[extra] = {"bind": extra, "mode": "ro"}
        disk = limits.disk_bytes
        zygote = [self.python, "-s", "-S", "/opt/referee/_zygote.py", str(uid), "/work", "1"]
        command = [*zygote, f"{_SOCKET_DIR}/zygote.sock"]
        if HARDENING.seccomp and _seccomp.filter_problem() is None:
            # The container's cgroup counts memfd pages: memfd_create stays allowed.
            program = _seccomp.build(os.uname().machine).hex()
            launcher = [self.python, "-I", "-S", "/opt/referee/_seccomp.py", program, "--"]
            command = [*launcher, *command]
        try:
            return self.client.containers.run(
                self.image,
                command=command,
                detach=True,
                user="0:0",  # the zygote; each job drops to `uid` and loses every capability
                network_mode="none",
                read_only=True,
                tmpfs={
                    # exec: a compiled program's build runs from the work dir, as locally.
                    "/work": f"size={disk},mode=0711,exec",
                    "/tmp": f"size={disk},mode=1777",
                    "/var/tmp": f"size={disk},mode=1777",
                },
                shm_size=disk,
                volumes=volumes,
                working_dir="/work",
                mem_limit=self.memory_for(limits),
                memswap_limit=self.memory_for(limits),
                pids_limit=self.pids,
                cap_drop=["ALL"],
                cap_add=list(KEPT_CAPS),
                security_opt=["no-new-privileges"],
                runtime=self.runtime,
                environment=ZYGOTE_ENV,
                labels={"referee.sandbox": self.pool_id},
            )
        except Exception as exc:
            raise SandboxError(f"cannot start a sandbox container: {exc}") from None

    def _spawn(self, slot: int, limits: Limits) -> Worker:
        return self._with_uid(
            claim_uid(_UID_BASE), lambda uid: _ContainerWorker(self, slot, limits, uid)
        )

    def close(self) -> None:
        super().close()
        self.client.close()


class DockerOptions(BackendOptions):
    """The ``docker`` backend's options (a spec's ``sandbox: {backend: docker, ...}``): the
    arguments of `DockerSandbox`, with the same defaults."""

    backend: Literal["docker"] = "docker"
    workers: int | None = Field(default=None, ge=1)
    runtime: str | None = None
    recycle_after: int = Field(default=200, ge=1)
    python: str = "/usr/bin/python3"
    memory_bytes: int = Field(default=2 << 30, gt=0)
    pids: int = Field(default=256, ge=1)
    base_url: str | None = None

    def create(self) -> DockerSandbox:
        return DockerSandbox(**self.model_dump(exclude={"backend"}))


def wait_for_engine(base_url: str, seconds: float = 30.0) -> None:
    """Block until the engine at `base_url` answers (after starting dockerd)."""
    import docker

    deadline = time.monotonic() + seconds
    while True:
        try:
            docker.DockerClient(base_url=base_url).ping()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
