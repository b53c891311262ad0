"""The local sandbox: bubblewrap namespaces and a pool of pre-forked Python workers.

Each worker is one bubblewrap sandbox (new pid, net, ipc, uts and mount namespaces; /usr
read-only; a size-limited tmpfs work dir and /tmp; nothing of the host's home, /etc or /root)
running a warm Python interpreter that forks one child per job. As root, a job runs as an
unprivileged uid of its worker slot (60000 + slot) with no capabilities; after each job every
process left in the worker's pid namespace is killed, so nothing outlives its job.

Where bubblewrap is missing or cannot create namespaces, `isolation="auto"` says so (a warning)
and falls back to ``"process"``: resource limits, a session of its own, and, as root, the
slot's unprivileged uid (so the job cannot read root's files or signal other users'
processes). There is then no network or filesystem namespace.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import queue
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Literal

from referee.verifiers.sandbox import _wire
from referee.verifiers.sandbox.base import Job, Limits, ProgramError, RunResult, SandboxError

__all__ = ["Isolation", "LocalSandbox"]

logger = logging.getLogger("referee.sandbox")

Isolation = Literal["auto", "bwrap", "process"]
"""``bwrap``: namespaces (required; error if unavailable). ``process``: limits and uid only.
``auto``: bwrap where it works, else process, with a warning."""

_HERE = Path(__file__).resolve().parent
_UID_BASE = 60000
_GRACE = 10.0  # seconds the host waits beyond a job's own limit before giving up on a worker
_bwrap_ok: dict[str, str | None] = {}  # bwrap path -> None when usable, else why not


def _default_python() -> str:
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate
    return os.path.realpath(sys.executable)


def _system_args(root: bool) -> list[str]:
    """Namespaces and the read-only system: what every sandbox (and the probe) needs."""
    # No --die-with-parent: its PR_SET_PDEATHSIG fires when the *thread* that started bwrap
    # ends (an asyncio.to_thread worker), not the process. A zygote exits when its channel
    # closes instead, so a worker outlives a dead host by at most one job's wall time.
    args = [
        "bwrap", "--new-session",
        "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
        "--ro-bind", "/usr", "/usr",
    ]  # fmt: skip
    if not root:
        args += ["--unshare-user", "--disable-userns"]
    for name in ("bin", "lib", "lib64", "sbin"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), f"/{name}"]
        elif path.is_dir():
            args += ["--ro-bind", str(path), f"/{name}"]
    return args


def _bwrap_args(python: str, slot: int, root: bool, disk: int) -> list[str]:
    args = _system_args(root)
    prefix = Path(python).resolve().parents[1]
    if not str(prefix).startswith("/usr"):
        args += ["--ro-bind", str(prefix), str(prefix)]
    args += [
        "--perms", "0755", "--dir", "/etc",  # made by bwrap otherwise, not traversable by the job
        "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
        "--ro-bind-try", "/etc/alternatives", "/etc/alternatives",
        "--ro-bind-try", "/etc/ssl", "/etc/ssl",  # node reads its OpenSSL config at start
        "--proc", "/proc", "--dev", "/dev",
        "--perms", "1777", "--size", str(disk), "--tmpfs", "/tmp",
        "--perms", "0711", "--size", str(disk), "--tmpfs", "/work",
        "--ro-bind", str(_HERE), "/opt/referee",
        "--chdir", "/work", "--clearenv", "--setenv", "PATH", "/usr/bin:/bin",
    ]  # fmt: skip
    if root:
        args += ["--cap-drop", "ALL"]
        for cap in ("SETUID", "SETGID", "KILL", "CHOWN", "DAC_OVERRIDE", "FOWNER"):
            args += ["--cap-add", f"CAP_{cap}"]
        uid = _UID_BASE + slot
    else:
        args += ["--cap-drop", "ALL"]
        uid = -1
    return [*args, "--", python, "-I", "-S", "/opt/referee/_zygote.py", str(uid), "/work", "1"]


def bwrap_problem(bwrap: str = "bwrap") -> str | None:
    """None when bubblewrap can create the namespaces referee needs here, else why not."""
    if bwrap in _bwrap_ok:
        return _bwrap_ok[bwrap]
    path = shutil.which(bwrap)
    if path is None:
        problem: str | None = "bubblewrap (bwrap) is not installed; apt-get install bubblewrap"
    else:
        args = [path, *_system_args(os.geteuid() == 0)[1:], "--proc", "/proc", "--", "true"]
        try:
            done = subprocess.run(args, capture_output=True, timeout=30, check=False)
            problem = None if done.returncode == 0 else done.stderr.decode(errors="replace").strip()
        except (OSError, subprocess.TimeoutExpired) as exc:
            problem = str(exc)
    _bwrap_ok[bwrap] = problem
    return problem


class _Worker:
    """One sandboxed zygote process and its framed channel."""

    def __init__(self, argv: list[str], slot: int) -> None:
        self.slot = slot
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the worker
        try:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, close_fds=True
            )
        except OSError as exc:
            raise SandboxError(f"cannot start the sandbox worker: {exc}") from None
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.out = _wire.Channel(self.proc.stdout.fileno())
        self.in_fd = self.proc.stdin.fileno()
        try:
            self.request({"op": "ping"}, timeout=30.0)
        except (EOFError, OSError, TimeoutError, _wire.WireError) as exc:
            why = self.stderr()
            self.close()
            raise SandboxError(f"the sandbox worker did not start: {exc}; {why}") from None

    def stderr(self) -> str:
        self.log.seek(0)
        text = self.log.read()[-2000:].decode(errors="replace").strip()
        return text or "(no output)"

    def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send one frame, wait for the reply. Raises EOFError, TimeoutError, WireError."""
        _wire.write_frame(self.in_fd, message)
        return self.receive(timeout)

    def receive(self, timeout: float) -> dict[str, Any]:
        """Wait for the next frame. Raises EOFError, TimeoutError, WireError."""
        deadline = time.monotonic() + timeout
        while True:
            frame = self.out.pop()
            if frame is not None:
                return frame  # type: ignore[no-any-return]
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no reply from the sandbox worker within {timeout:.0f}s")
            ready, _, _ = select.select([self.out.fd], [], [], left)
            if ready and not self.out.feed():
                raise EOFError("the sandbox worker exited")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            logger.warning("sandbox worker %s did not exit after SIGKILL", self.proc.pid)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self.log.close()


def _job_wire(job: Job, kind: str) -> dict[str, Any]:
    files = {
        name: base64.b64encode(data.encode() if isinstance(data, str) else data).decode("ascii")
        for name, data in job.files.items()
    }
    spec: dict[str, Any] = {
        "kind": kind,
        "files": files,
        "stdin": base64.b64encode(job.stdin).decode("ascii"),
        "limits": job.limits.to_wire(),
        "filename": job.filename,
    }
    if job.source is not None:
        spec["source"] = job.source
    else:
        spec["command"] = list(job.command or ())
    return spec


def _result(reply: dict[str, Any]) -> RunResult:
    return RunResult(
        exit_code=reply["exit_code"],
        signal=reply["signal"],
        timed_out=reply["timed_out"],
        output_limited=reply["output_limited"],
        stdout=base64.b64decode(reply["stdout"]),
        stderr=base64.b64decode(reply["stderr"]),
        stdout_truncated=reply["stdout_truncated"],
        stderr_truncated=reply["stderr_truncated"],
        wall_time=reply["wall_time"],
    )


def _worker_died(started: float, why: str) -> RunResult:
    # The job took its own worker down (killed it, or the kernel did for its sake). That is
    # what the code did, so it is a result (it failed), not a sandbox breakdown.
    return RunResult(
        exit_code=None,
        signal=9,
        timed_out=False,
        output_limited=False,
        stdout=b"",
        stderr=f"the sandbox worker died during the job: {why}".encode(),
        stdout_truncated=False,
        stderr_truncated=False,
        wall_time=time.monotonic() - started,
    )


class LocalSandbox:
    """Runs untrusted code on this machine, isolated as well as the machine allows.

    Args:
        workers: Jobs run at once (one pre-forked worker each); default: CPU count.
        isolation: See `Isolation`.
        python: The interpreter inside the sandbox; default /usr/bin/python3.
    """

    def __init__(
        self, workers: int | None = None, isolation: Isolation = "auto", python: str | None = None
    ) -> None:
        self.size = workers or os.cpu_count() or 1
        self.python = python or _default_python()
        self.root = os.geteuid() == 0
        self.mode = self._choose(isolation)
        self._idle: queue.LifoQueue[_Worker] = queue.LifoQueue()
        self._lock = threading.Lock()
        self._created = 0
        self._slots = list(range(self.size))
        self._tmp: str | None = None

    def _choose(self, isolation: Isolation) -> Literal["bwrap", "process"]:
        if isolation == "process":
            return "process"
        problem = bwrap_problem()
        if problem is None:
            return "bwrap"
        if isolation == "bwrap":
            raise SandboxError(f"bubblewrap isolation is not available: {problem}")
        warnings.warn(
            f"referee sandbox: bubblewrap is not usable ({problem}); running code with resource "
            "limits" + (" as an unprivileged uid" if self.root else "") + " but no namespaces",
            RuntimeWarning,
            stacklevel=3,
        )
        return "process"

    # -- workers ----------------------------------------------------------------------------

    def _argv(self, slot: int, limits: Limits) -> list[str]:
        if self.mode == "bwrap":
            return _bwrap_args(self.python, slot, self.root, limits.disk_bytes)
        if self._tmp is None:
            self._tmp = tempfile.mkdtemp(prefix="referee-sandbox-")
            os.chmod(self._tmp, 0o711)
        work = os.path.join(self._tmp, f"slot{slot}")
        os.makedirs(work, mode=0o711, exist_ok=True)
        uid = _UID_BASE + slot if self.root else -1
        return [self.python, "-I", "-S", str(_HERE / "_zygote.py"), str(uid), work, "0"]

    def _checkout(self, limits: Limits) -> _Worker:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            slot = self._slots.pop() if self._slots else None
        if slot is None:
            return self._idle.get()
        try:
            return _Worker(self._argv(slot, limits), slot)
        except SandboxError:
            with self._lock:
                self._slots.append(slot)
            raise

    def _checkin(self, worker: _Worker, broken: bool) -> None:
        if broken:
            worker.close()
            with self._lock:
                self._slots.append(worker.slot)
        else:
            self._idle.put(worker)

    # -- jobs -------------------------------------------------------------------------------

    def run(self, job: Job) -> RunResult:
        """Run `job` to completion. Raises SandboxError when the sandbox cannot run it."""
        worker = self._checkout(job.limits)
        started = time.monotonic()
        kind = "python" if job.source is not None else "exec"
        broken = True
        try:
            reply = worker.request(
                {"op": "run", "job": _job_wire(job, kind)},
                timeout=job.limits.wall_seconds + _GRACE,
            )
            if reply.get("worker_error"):
                raise SandboxError(str(reply.get("error")))
            broken = False
            return _result(reply)
        except (EOFError, OSError) as exc:
            return _worker_died(started, str(exc))
        except (TimeoutError, _wire.WireError) as exc:
            raise SandboxError(f"the sandbox worker stopped answering: {exc}") from None
        finally:
            self._checkin(worker, broken)

    def session(self, job: Job, call_timeout: float | None = None) -> _Session:
        """Load `job.source` in the sandbox and serve calls to its functions."""
        if job.source is None:
            raise ValueError("a session runs Python source")
        worker = self._checkout(job.limits)
        return _Session(self, worker, job, call_timeout)

    def close(self) -> None:
        """Stop every idle worker (busy ones stop when their job ends)."""
        while True:
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                break
            self._checkin(worker, broken=True)
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


class _Session:
    """A program served by one worker until `close`."""

    def __init__(
        self, sandbox: LocalSandbox, worker: _Worker, job: Job, call_timeout: float | None
    ) -> None:
        self._sandbox = sandbox
        self._worker: _Worker | None = worker
        self._started = time.monotonic()
        self._limits = job.limits
        self._call_timeout = call_timeout
        self._dead: str | None = None
        self._result: RunResult | None = None
        self._names: list[str] | None = None
        # Sent now, answered when first needed: the caller can prepare while the program loads.
        self._send({"op": "start", "job": _job_wire(job, "python")})

    @property
    def names(self) -> list[str]:
        """The functions (callables) the program defines, once it has loaded."""
        if self._names is None:
            self._names = []
            reply = self._receive()
            if "loaded" in reply:
                self._names = [str(n) for n in reply["loaded"]]
            else:
                self._dead = str(reply.get("error", "the program did not load"))
        return self._names

    def _request(self, message: dict[str, Any]) -> dict[str, Any]:
        self.names  # noqa: B018 - the load reply comes first
        self._send(message)
        return self._receive()

    def _send(self, message: dict[str, Any]) -> None:
        if self._worker is not None:
            with contextlib.suppress(OSError):  # the worker is gone; _receive reports it
                _wire.write_frame(self._worker.in_fd, message)

    def _receive(self) -> dict[str, Any]:
        worker = self._worker
        if worker is None:
            return {"error": "the session is closed", "dead": True}
        try:
            reply = worker.receive(timeout=self._limits.wall_seconds + _GRACE)
        except (EOFError, OSError) as exc:
            self._release(broken=True)
            self._result = _worker_died(self._started, str(exc))
            return {"error": f"the program took its worker down: {exc}", "dead": True}
        except (TimeoutError, _wire.WireError) as exc:
            self._release(broken=True)
            raise SandboxError(f"the sandbox worker stopped answering: {exc}") from None
        if reply.get("worker_error"):
            self._release(broken=True)
            raise SandboxError(str(reply.get("error")))
        return reply

    def _release(self, broken: bool) -> None:
        if self._worker is not None:
            self._sandbox._checkin(self._worker, broken)
            self._worker = None

    @property
    def dead(self) -> str | None:
        """Why the program is no longer running, or None while it is."""
        self.names  # noqa: B018 - loading may have failed
        return self._dead

    def call(self, fn: str, args: list[Any], kwargs: dict[str, Any] | None = None) -> Any:
        if self._dead is not None:
            raise ProgramError(self._dead, dead=True)
        try:
            payload = {
                "fn": fn,
                "args": _wire.encode(list(args)),
                "kwargs": _wire.encode(kwargs or {}),
            }
        except _wire.WireError as exc:
            raise ProgramError(f"cannot send the arguments: {exc}") from None
        reply = self._request({"op": "call", **payload, "timeout": self._call_timeout})
        if "ok" in reply:
            try:
                return _wire.decode(reply["ok"])
            except _wire.WireError as exc:
                raise ProgramError(f"the program returned malformed data: {exc}") from None
        if reply.get("dead"):
            self._dead = str(reply.get("error"))
        raise ProgramError(str(reply.get("error")), dead=bool(reply.get("dead")))

    def close(self) -> RunResult:
        if self._result is None:
            reply = self._request({"op": "finish"})
            if self._worker is not None:
                self._release(broken=False)
            self._result = (
                _result(reply)
                if "exit_code" in reply
                else _worker_died(self._started, str(reply.get("error")))
            )
        return self._result

    def __enter__(self) -> _Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
