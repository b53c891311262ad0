"""Running a script in a task's own image, on a real Docker Engine: images built once, and a
warm pool of fresh, locked-down containers.

What an environment reward (`referee.rewards.harbor`) and any grader that needs a task's own
image (a SWE-bench instance image) share. Generic on purpose: an image, files in, a command in
a working directory under a deadline, files out.

- **Images**, built once and cached by content (`ContainerEngine.image`): a build context (a
  folder with a ``Dockerfile``) is tagged ``referee-env/<name>:<sha256 of its files>``, so an
  unchanged context is never rebuilt (in this process or the next, while the engine keeps
  the tag); the legacy builder (``DOCKER_BUILDKIT=0``, through the ``docker`` SDK). Or an
  image the engine already has, by tag. A build that fails, or an image the engine lacks, is
  a `SandboxError` naming the task and the build log's tail.
- **A warm pool** (`ContainerPool`): per image, containers created and started ahead of need
  (idle ``sleep infinity``); each lease gets a *fresh* one, removed after the job, while the
  pool starts its replacement in the background. A concurrency limit per image and in total.
- **Per job** (`Container`): files copied in (``put_archive``), commands run (``exec``) under
  a deadline (on timeout the whole container is killed, not only the exec), files read out
  (``get_archive``), output capped.
- **Hardening**, since what runs there is the policy's code: no network (``--network
  none``), every capability dropped but `CAPS` (what a test script run as root needs to own,
  chmod and kill its own files and processes, and to drop to another user), no new
  privileges, memory (and swap) and pids limits, no host mounts, optionally a runtime such as
  gVisor (``runsc``). The container's root filesystem stays writable (a task's tests install
  and build in it); it is thrown away after one job.

An engine that does not answer is a `SandboxError` naming its address.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import hashlib
import io
import os
import re
import socket
import tarfile
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from referee.errors import MissingDependency, SandboxError
from referee.verifiers.sandbox.base import file_bytes

__all__ = [
    "CAPS",
    "Container",
    "ContainerEngine",
    "ContainerLimits",
    "ContainerPool",
    "ExecResult",
    "close_shared",
    "context_digest",
    "engine_url",
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

_DEFAULT_URL = "unix:///var/run/docker.sock"
_LABEL = "referee.containers"
_OWNER = "referee.owner"  # host:pid of the process whose pool started the container


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


_LOG_TAIL = 1500


def engine_url(base_url: str | None = None) -> str:
    """The engine's address: `base_url`, else ``DOCKER_HOST``, else the default socket."""
    return base_url or os.environ.get("DOCKER_HOST") or _DEFAULT_URL


def _docker() -> Any:
    try:
        import docker
    except ImportError:
        raise MissingDependency("docker", "docker", "Running tasks in containers") from None
    return docker


def context_digest(context: str | Path) -> str:
    """The sha256 of a build context: every file's path, type, executable bit and content
    (a link's target), in sorted order. Any change to what the build can see changes it."""
    root = Path(context)
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            digest.update(f"L {rel} -> {os.readlink(path)}\0".encode())
        elif path.is_dir():
            digest.update(f"D {rel}\0".encode())
        elif path.is_file():
            executable = os.access(path, os.X_OK)
            digest.update(f"F {rel} {int(executable)} {path.stat().st_size}\0".encode())
            with path.open("rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
    return digest.hexdigest()


def _slug(name: str) -> str:
    """A name as a repository name may spell it (lowercase letters, digits, ``._-``)."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("._-")
    return slug[:64] or "task"


def _build_log(lines: Any) -> str:
    """The tail of a build log (the SDK's list of JSON messages)."""
    text: list[str] = []
    with contextlib.suppress(Exception):
        for line in lines or ():
            if isinstance(line, dict):
                text.append(str(line.get("stream") or line.get("error") or line.get("status", "")))
    joined = "".join(text).strip()
    return joined[-_LOG_TAIL:] or "(no build output)"


class ContainerEngine:
    """A Docker Engine, and the images on it that referee built or was given.

    Args:
        base_url: The engine's address (``unix://...``, ``tcp://...``); default:
            ``DOCKER_HOST``, else ``unix:///var/run/docker.sock``.
        build_network: The network a build's ``RUN`` steps get (``none``, ``host``, or the
            engine's default when None). The build is the task's own, trusted.
        build_timeout: Seconds a build may take.

    Raises:
        MissingDependency: The ``docker`` package is not installed.
        SandboxError: The engine does not answer (the message names its address).

    Attributes:
        url: The engine's address.
        builds: Images this object built (a cached image is not counted).
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        build_network: str | None = None,
        build_timeout: float = 1800.0,
    ) -> None:
        docker = _docker()
        self.url = engine_url(base_url)
        self.build_network = build_network
        self.build_timeout = build_timeout
        self.builds = 0
        self._built: dict[str, str] = {}  # tag -> image id, what this object knows exists
        self._configs: dict[str, dict[str, Any]] = {}  # image -> its Config, asked once
        self._locks: dict[str, threading.Lock] = collections.defaultdict(threading.Lock)
        self._lock = threading.Lock()
        try:
            self.client = docker.DockerClient(base_url=self.url, timeout=120)
            self.client.ping()
        except Exception as exc:
            raise SandboxError(
                f"cannot reach the Docker Engine at {self.url}: {exc}; start it, or point "
                "DOCKER_HOST (or the reward's docker_host) at one"
            ) from None
        self.api = self.client.api

    def image(
        self,
        *,
        name: str,
        context: str | Path | None = None,
        tag: str | None = None,
        build_timeout: float | None = None,
    ) -> str:
        """The tag of `name`'s image: built from `context` (once per content, within
        `build_timeout` seconds, default the engine's), or `tag` as the engine has it.
        Exactly one of `context` and `tag`.

        Raises:
            SandboxError: The build failed (with the log's tail), or the engine lacks `tag`.
        """
        if (context is None) == (tag is None):
            raise ValueError("give exactly one of context and tag")
        if tag is not None:
            return self._existing(name, tag)
        assert context is not None
        root = Path(context)
        if not (root / "Dockerfile").is_file():
            raise SandboxError(f"{name}: no Dockerfile in {root}")
        wanted = f"referee-env/{_slug(name)}:{context_digest(root)[:20]}"
        with self._lock:
            lock = self._locks[wanted]
        with lock:
            if wanted in self._built:
                return wanted
            try:
                found = self.client.images.get(wanted)
                self._built[wanted] = found.id
                return wanted
            except Exception:
                pass
            self._build(name, root, wanted, build_timeout or self.build_timeout)
        return wanted

    def _existing(self, name: str, tag: str) -> str:
        if tag in self._built:
            return tag
        try:
            found = self.client.images.get(tag)
        except Exception as exc:
            raise SandboxError(
                f"{name}: the image {tag!r} is not on the Docker Engine at {self.url} ({exc}); "
                "pull or load it there first (referee does not pull)"
            ) from None
        self._built[tag] = found.id
        return tag

    def _build(self, name: str, root: Path, tag: str, timeout: float) -> None:
        docker = _docker()
        started = time.monotonic()
        try:
            image, _ = self.client.images.build(
                path=str(root),
                tag=tag,
                rm=True,
                forcerm=True,
                network_mode=self.build_network,
                timeout=int(timeout),
                labels={_LABEL: "image", "referee.task": name[:200]},
            )
        except docker.errors.BuildError as exc:
            raise SandboxError(
                f"{name}: the image does not build from {root / 'Dockerfile'}: {exc.msg}\n"
                f"build log (tail):\n{_build_log(exc.build_log)}"
            ) from None
        except Exception as exc:
            seconds = time.monotonic() - started
            raise SandboxError(
                f"{name}: the image could not be built from {root / 'Dockerfile'} on the "
                f"Docker Engine at {self.url} (after {seconds:.0f}s): {exc}"
            ) from None
        self.builds += 1
        self._built[tag] = image.id

    def _config(self, image: str) -> dict[str, Any]:
        """The image's ``Config`` (asked of the engine once per image)."""
        config = self._configs.get(image)
        if config is None:
            attrs = self.client.images.get(image).attrs
            config = self._configs[image] = dict(attrs.get("Config") or {})
        return config

    def workdir(self, image: str) -> str:
        """The image's working directory (its ``WORKDIR``), ``/`` where it sets none."""
        return str(self._config(image).get("WorkingDir") or "/")

    def user(self, image: str) -> str:
        """The image's user (its ``USER``), ``""`` where it sets none (root)."""
        return str(self._config(image).get("User") or "")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()


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


@dataclass(frozen=True)
class ExecResult:
    """What a command did.

    Attributes:
        exit_code: Its exit status; None when it was killed at its deadline.
        output: Its stdout and stderr, interleaved, cut at the cap.
        truncated: The output was longer than the cap (the rest was read and dropped).
        timed_out: It ran past its deadline and the container was killed.
        seconds: How long it ran.
    """

    exit_code: int | None
    output: bytes
    truncated: bool = False
    timed_out: bool = False
    seconds: float = 0.0

    def text(self, tail: int = 2000) -> str:
        """The output's tail, as text, for a person."""
        return self.output.decode("utf-8", "replace")[-tail:]


FileContent = bytes | str | Path
"""A file to copy in: its bytes, text (UTF-8), or a host path (a folder is copied whole)."""


def _tar(files: Mapping[str, FileContent], mode: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for dest, content in files.items():
            if not dest.startswith("/") or ".." in dest.split("/"):
                raise ValueError(f"a destination must be an absolute path without '..': {dest!r}")
            name = dest.strip("/")
            if isinstance(content, Path):
                _add_path(tar, content, name)
                continue
            data = file_bytes(content)
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _add_path(tar: tarfile.TarFile, source: Path, name: str) -> None:
    """A host file or folder (its files' executable bits kept, owned by root)."""

    def reset(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    tar.add(str(source), arcname=name, recursive=True, filter=reset)


class Container:
    """One fresh container leased from a `ContainerPool` for one job (see `ContainerPool.lease`).

    Attributes:
        id: The container's id.
        image: Its image.
        killed: It was killed (a command ran past its deadline); nothing more runs in it.
    """

    def __init__(self, pool: ContainerPool, container_id: str, image: str) -> None:
        self.pool = pool
        self.id = container_id
        self.image = image
        self.killed = False

    @property
    def _api(self) -> Any:
        return self.pool.engine.api

    def put(self, files: Mapping[str, FileContent], *, mode: int = 0o644) -> None:
        """Copy files in, by absolute path (parents are created; a host folder whole).

        Raises:
            SandboxError: The engine refused the copy.
        """
        if not files:
            return
        data = _tar(files, mode)
        try:
            self._api.put_archive(self.id, "/", data)
        except Exception as exc:
            raise SandboxError(
                f"cannot copy files into a container of {self.image}: {exc}"
            ) from None

    def exec(
        self,
        command: Sequence[str],
        *,
        timeout: float,
        workdir: str | None = None,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
        output_bytes: int = 1 << 20,
        then: tuple[bytes, float] | None = None,
    ) -> ExecResult:
        """Run `command` and wait at most `timeout` seconds; past it, the container is killed
        (every process in it) and the result says ``timed_out``.

        `then`: ``(marker, seconds)``: once the output first holds `marker`, the deadline
        becomes `seconds` from then (a set-up step with its own allowance, then the job's
        own limit, in one exec).

        Raises:
            SandboxError: The engine could not start the command.
        """
        docker = _docker()
        if self.killed:
            raise SandboxError("the container was killed; lease a fresh one")
        try:
            created = self._api.exec_create(
                self.id,
                list(command),
                stdout=True,
                stderr=True,
                workdir=workdir,
                environment=dict(env or {}),
                user=user or "",
            )
            sock = self._api.exec_start(created["Id"], socket=True)
        except Exception as exc:
            raise SandboxError(f"cannot run {list(command)!r} in {self.image}: {exc}") from None
        raw = getattr(sock, "_sock", sock)
        with contextlib.suppress(Exception):
            raw.settimeout(None)  # the deadline is ours, not the HTTP client's
        chunks: list[bytes] = []
        state = {"kept": 0, "seen": 0}
        marked: list[float] = []  # when `then`'s marker was seen
        marker = then[0] if then else b""

        def read() -> None:
            tail = b""
            with contextlib.suppress(Exception):
                for _, data in docker.utils.socket.frames_iter(sock, tty=False):
                    state["seen"] += len(data)
                    room = output_bytes - state["kept"]
                    if room > 0:
                        chunks.append(data[:room])
                        state["kept"] += min(room, len(data))
                    if marker and not marked:
                        window = tail + data
                        if marker in window:
                            marked.append(time.monotonic())
                        tail = window[-len(marker) :]

        started = time.monotonic()
        reader = threading.Thread(target=read, daemon=True, name="referee-exec")
        reader.start()
        deadline = started + timeout
        while reader.is_alive():
            if then is not None and marked:
                deadline = min(started + timeout, marked[0] + then[1])
            left = deadline - time.monotonic()
            if left <= 0:
                break
            reader.join(min(left, 0.1) if then is not None else left)
        timed_out = reader.is_alive()
        if timed_out:
            self.kill()
            reader.join(10)
        seconds = time.monotonic() - started
        with contextlib.suppress(Exception):
            sock.close()
        exit_code: int | None = None
        if not timed_out:
            with contextlib.suppress(Exception):
                code = self._api.exec_inspect(created["Id"]).get("ExitCode")
                exit_code = None if code is None else int(code)
        return ExecResult(
            exit_code=exit_code,
            output=b"".join(chunks),
            truncated=state["seen"] > state["kept"],
            timed_out=timed_out,
            seconds=seconds,
        )

    def read(self, path: str, *, max_bytes: int = 1 << 20) -> bytes | None:
        """The content of the regular file at `path`; None when nothing is there.

        Raises:
            SandboxError: Something is there but it is not a regular file, or it is larger
                than `max_bytes` (read no further), or the engine failed.
        """
        docker = _docker()
        try:
            stream, stat = self._api.get_archive(self.id, path, chunk_size=64 << 10)
        except docker.errors.NotFound:
            return None
        except Exception as exc:
            raise SandboxError(
                f"cannot read {path} from a container of {self.image}: {exc}"
            ) from None
        try:
            mode = int(stat.get("mode", 0))
            if mode & ~0o7777 & 0xFFFFFFFF:  # Go's os.FileMode type bits: a dir, link, device
                raise SandboxError(f"{path} is not a regular file (mode {mode:#o})")
            if int(stat.get("size", 0)) > max_bytes:
                raise SandboxError(f"{path} is {stat.get('size')} bytes, over the {max_bytes} read")
            data = bytearray()
            for chunk in stream:
                data += chunk
                if len(data) > max_bytes + (64 << 10):
                    raise SandboxError(f"{path} is larger than the {max_bytes} bytes read")
        finally:
            with contextlib.suppress(Exception):
                stream.close()
        with tarfile.open(fileobj=io.BytesIO(bytes(data))) as tar:
            for member in tar:
                if not member.isfile():
                    raise SandboxError(f"{path} is not a regular file")
                handle = tar.extractfile(member)
                return handle.read(max_bytes + 1)[:max_bytes] if handle else b""
        return None

    def kill(self) -> None:
        """Kill every process in the container (it is removed when the lease ends)."""
        self.killed = True
        with contextlib.suppress(Exception):
            self._api.kill(self.id)


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
                labels={_LABEL: self.pool_id, _OWNER: f"{socket.gethostname()}:{os.getpid()}"},
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
            box = Container(self, container_id, image)
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
                all=True, filters={"label": f"{_LABEL}={self.pool_id}"}
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
