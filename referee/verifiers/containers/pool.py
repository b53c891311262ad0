"""Warm pools of fresh, locked-down containers, per image, shared per process."""

from __future__ import annotations

import atexit
import collections
import contextlib
import os
import socket
import threading
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from referee.errors import SandboxError
from referee.verifiers.containers.container import Container
from referee.verifiers.containers.engine import LABEL, ContainerEngine, engine_url

__all__ = [
    "CAPS",
    "IDLE_COMMAND",
    "ContainerLimits",
    "ContainerPool",
    "close_shared",
    "job_pool",
    "shared_pool",
]

CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID")
"""The capabilities a job keeps (every other one is dropped): what a test script run as root
needs to write, own and chmod files whoever owns them (``CHOWN``, ``DAC_OVERRIDE``,
``FOWNER``, ``FSETID``), to stop its own processes (``KILL``) and to run a step as another
user (``SETUID``, ``SETGID``: ``su``, ``runuser``, a test that drops root). Docker's default
set less ``MKNOD``, ``NET_RAW``, ``NET_BIND_SERVICE``, ``SYS_CHROOT``, ``AUDIT_WRITE``,
``SETFCAP`` and ``SETPCAP``: no devices, no raw sockets, no chroot escapes, no file
capabilities. With no-new-privileges, a setuid binary gains nothing."""

IDLE_COMMAND = ("sleep", "infinity")
"""What a warm container runs until a job comes (its entry point is replaced)."""

_OWNER = "referee.owner"  # host:pid of the process whose pool started the container


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


@dataclass(frozen=True)
class ContainerLimits:
    """What one container may use.

    Attributes:
        memory_bytes: Memory limit (swap is not allowed past it).
        pids: Processes and threads at once.
        cpus: CPUs (``--cpus``); None: no limit.
        runtime: A container runtime, e.g. ``runsc`` for gVisor (it must be installed).
    """

    memory_bytes: int = 4 << 30
    pids: int = 1024
    cpus: float | None = None
    runtime: str | None = None


@dataclass
class _ImageState:
    idle: collections.deque[str] = field(default_factory=collections.deque)
    starting: int = 0
    slots: threading.BoundedSemaphore | None = None


class ContainerPool:
    """Fresh containers of any image, started ahead of need, at most so many at once.

    Each `lease` hands out a container that no job has used, and removes it afterwards; the
    pool keeps `warm` started containers per image it has seen, starting replacements in the
    background, so a job seldom waits for one to start.

    Args:
        engine: The engine (a `ContainerEngine`, or its address; default: ``DOCKER_HOST``).
        warm: Idle containers kept started per image (0: start each on demand).
        per_image: Jobs at once per image.
        total: Jobs at once over all images.
        limits: Each container's limits (memory, pids, CPUs, runtime).
        idle_command: What an idle container runs (its entry point is replaced).

    Raises:
        SandboxError: The engine does not answer, or `limits.runtime` is not installed there.
    """

    def __init__(
        self,
        engine: ContainerEngine | str | None = None,
        *,
        warm: int = 1,
        per_image: int = 4,
        total: int = 8,
        limits: ContainerLimits | None = None,
        idle_command: Sequence[str] = IDLE_COMMAND,
    ) -> None:
        if warm < 0 or per_image < 1 or total < 1:
            raise ValueError("warm must be >= 0, per_image and total >= 1")
        self.engine = engine if isinstance(engine, ContainerEngine) else ContainerEngine(engine)
        self.warm = warm
        self.per_image = per_image
        self.limits = limits or ContainerLimits()
        self.idle_command = list(idle_command)
        if self.limits.runtime is not None:
            runtimes = self.engine.client.info().get("Runtimes", {})
            if self.limits.runtime not in runtimes:
                raise SandboxError(
                    f"container runtime {self.limits.runtime!r} is not installed on the Docker "
                    f"Engine at {self.engine.url} (have: {sorted(runtimes)})"
                )
        self.pool_id = uuid.uuid4().hex[:12]
        self.started = 0  # containers this pool started, warm or on demand
        self._total = threading.BoundedSemaphore(total)
        self._images: dict[str, _ImageState] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._background = ThreadPoolExecutor(2, thread_name_prefix="referee-containers")
        self._reap_orphans()

    def _reap_orphans(self) -> None:
        """Remove the containers that pools of dead processes on this host left (a worker
        killed at its deadline, by the OOM killer or with its Ray actor never ran its exit
        hooks; its warm containers would idle forever). A process is known by its host name
        and pid, in the container's ``referee.owner`` label; a pid in use again is taken as
        alive, so nothing of a living pool is removed."""
        host = socket.gethostname()
        try:
            found = self.engine.api.containers(all=True, filters={"label": _OWNER})
        except Exception:  # the engine's trouble shows on the first lease, by name
            return
        for entry in found:
            owner = str((entry.get("Labels") or {}).get(_OWNER, ""))
            name, _, pid = owner.rpartition(":")
            if name == host and pid.isdigit() and not _alive(int(pid)):
                self._remove(str(entry["Id"]))

    def _state(self, image: str) -> _ImageState:
        with self._lock:
            state = self._images.get(image)
            if state is None:
                state = _ImageState(slots=threading.BoundedSemaphore(self.per_image))
                self._images[image] = state
            return state

    def start(self, image: str) -> str:
        """Create and start one hardened container of `image`, idle; its id."""
        limits = self.limits
        try:
            container = self.engine.client.containers.run(
                image,
                entrypoint=[self.idle_command[0]],
                command=self.idle_command[1:],
                detach=True,
                network_mode="none",
                cap_drop=["ALL"],
                cap_add=list(CAPS),
                security_opt=["no-new-privileges"],
                mem_limit=limits.memory_bytes,
                memswap_limit=limits.memory_bytes,
                pids_limit=limits.pids,
                nano_cpus=int(limits.cpus * 1e9) if limits.cpus else None,
                runtime=limits.runtime,
                labels={LABEL: self.pool_id, _OWNER: f"{socket.gethostname()}:{os.getpid()}"},
                log_config={"type": "none", "config": {}},
            )
        except Exception as exc:
            raise SandboxError(
                f"cannot start a container of {image} on the Docker Engine at "
                f"{self.engine.url}: {exc}"
            ) from None
        with self._lock:
            self.started += 1
        return str(container.id)

    def prewarm(self, image: str) -> None:
        """Start containers of `image` in the background until `warm` are idle."""
        state = self._state(image)
        with self._lock:
            want = self.warm - len(state.idle) - state.starting
            if self._closed or want <= 0:
                return
            state.starting += want
        for _ in range(want):
            self._background.submit(self._start_idle, image, state)

    def _start_idle(self, image: str, state: _ImageState) -> None:
        try:
            container_id = self.start(image)
        except Exception:
            with self._lock:
                state.starting -= 1
            return  # the next lease starts one itself, and reports why it cannot
        with self._lock:
            state.starting -= 1
            if not self._closed:
                state.idle.append(container_id)
                return
        self._remove(container_id)

    def idle(self, image: str) -> list[str]:
        """The ids of the started containers of `image` waiting for a job."""
        state = self._state(image)
        with self._lock:
            return list(state.idle)

    def _remove(self, container_id: str) -> None:
        with contextlib.suppress(Exception):
            self.engine.api.remove_container(container_id, force=True)

    @contextlib.contextmanager
    def lease(self, image: str) -> Iterator[Container]:
        """A fresh container of `image` for one job, removed when the block ends.

        Waits while `per_image` jobs of `image` (or `total` jobs) run.

        Raises:
            SandboxError: No container could be started.
        """
        if self._closed:
            raise SandboxError("the container pool is closed")
        state = self._state(image)
        assert state.slots is not None
        with self._total, state.slots:
            with self._lock:
                container_id = state.idle.popleft() if state.idle else None
            if container_id is None:
                container_id = self.start(image)
            self.prewarm(image)  # its replacement starts while this job runs
            box = Container(self.engine, container_id, image)
            try:
                yield box
            finally:
                try:
                    self._background.submit(self._remove, container_id)
                except RuntimeError:  # the pool was closed meanwhile
                    self._remove(container_id)

    def close(self) -> None:
        """Remove every container this pool started (idle ones included)."""
        with self._lock:
            self._closed = True
            idle = [cid for state in self._images.values() for cid in state.idle]
            for state in self._images.values():
                state.idle.clear()
        self._background.shutdown(wait=True)
        for container_id in idle:
            self._remove(container_id)
        with contextlib.suppress(Exception):
            for container in self.engine.client.containers.list(
                all=True, filters={"label": f"{LABEL}={self.pool_id}"}
            ):
                container.remove(force=True)


_SHARED: dict[tuple[Any, ...], ContainerPool] = {}
_SHARED_LOCK = threading.Lock()


def shared_pool(
    base_url: str | None = None,
    *,
    warm: int = 1,
    per_image: int = 4,
    total: int = 8,
    limits: ContainerLimits | None = None,
    build_network: str | None = None,
) -> ContainerPool:
    """This process's pool for these settings, started on first use and closed at exit (a
    reward's rollouts share it; a forked child starts its own)."""
    limits = limits or ContainerLimits()
    key = (os.getpid(), engine_url(base_url), warm, per_image, total, limits, build_network)
    with _SHARED_LOCK:
        pool = _SHARED.get(key)
        if pool is None:
            engine = ContainerEngine(base_url, build_network=build_network)
            pool = ContainerPool(engine, warm=warm, per_image=per_image, total=total, limits=limits)
            if not _SHARED:
                atexit.register(close_shared)
            _SHARED[key] = pool
        return pool


def close_shared() -> None:
    """Close this process's shared pools (their containers are removed)."""
    with _SHARED_LOCK:
        pools = [p for k, p in _SHARED.items() if k[0] == os.getpid()]
        _SHARED.clear()
    for pool in pools:
        with contextlib.suppress(Exception):
            pool.close()
            pool.engine.close()


def job_pool(
    base_url: str | None = None,
    *,
    concurrency: int,
    per_image: int | None = None,
    warm: int = 1,
    memory_mb: int = 4096,
    pids: int = 1024,
    cpus: float | None = None,
    runtime: str | None = None,
    build_network: str | None = None,
) -> ContainerPool:
    """The shared pool (`shared_pool`) for a reward's jobs in their tasks' images: at most
    `concurrency` jobs at once, `per_image` of them (default: all) in one image, each in a
    fresh container of `memory_mb` MiB, `pids` processes and `cpus` CPUs, on `runtime`."""
    limits = ContainerLimits(memory_bytes=memory_mb << 20, pids=pids, cpus=cpus, runtime=runtime)
    return shared_pool(
        base_url,
        warm=warm,
        per_image=min(per_image or concurrency, concurrency),
        total=concurrency,
        limits=limits,
        build_network=build_network,
    )
