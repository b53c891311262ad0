"""The local sandbox: bubblewrap namespaces and a pool of pre-forked Python workers.

Each worker is one bubblewrap sandbox (new pid, net, ipc, uts and mount namespaces; /usr
read-only; a size-limited tmpfs work dir and /tmp; nothing of the host's home, /etc or /root)
running a warm Python interpreter that forks one child per job. As root, a job runs as an
unprivileged uid claimed for its worker (from 60000 up, never shared with another worker on
the host) with no capabilities; after each job every
process left in the worker's pid namespace is killed, so nothing outlives its job.

Where bubblewrap is missing or cannot create namespaces, `isolation="auto"` says so (a warning)
and falls back to ``"process"``: resource limits, a session of its own, and, as root, the
worker's unprivileged uid (so the job cannot read root's files or signal other users'
processes). There is then no network or filesystem namespace.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Literal

from pydantic import Field

from referee.verifiers.sandbox.base import BackendOptions, Limits, SandboxError
from referee.verifiers.sandbox.pool import ProcessWorker, Worker, WorkerPool
from referee.verifiers.sandbox.uids import claim_uid

__all__ = ["Isolation", "LocalOptions", "LocalSandbox"]

logger = logging.getLogger("referee.sandbox")

Isolation = Literal["auto", "bwrap", "process"]
"""``bwrap``: namespaces (required; error if unavailable). ``process``: limits and uid only.
``auto``: bwrap where it works, else process, with a warning."""

_HERE = Path(__file__).resolve().parent
_UID_BASE = 60000
_bwrap_ok: dict[str, str | None] = {}  # bwrap path -> None when usable, else why not


def _default_python() -> str:
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate
    return os.path.realpath(sys.executable)


def _system_args(root: bool) -> list[str]:
    """Namespaces and the read-only system: what every sandbox (and the probe) needs."""
    # No --die-with-parent: its PR_SET_PDEATHSIG fires when the *thread* that started bwrap
    # ends (a reward's grading thread), not the process. A zygote exits when its channel
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


def _bwrap_args(python: str, uid: int, root: bool, disk: int) -> list[str]:
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
    else:
        args += ["--cap-drop", "ALL"]
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


class LocalSandbox(WorkerPool):
    """Runs untrusted code on this machine, isolated as well as the machine allows.

    Args:
        workers: Jobs run at once (one pre-forked worker each); default: CPU count.
        isolation: See `Isolation`.
        python: The interpreter inside the sandbox; default /usr/bin/python3.
    """

    def __init__(
        self, workers: int | None = None, isolation: Isolation = "auto", python: str | None = None
    ) -> None:
        super().__init__(workers or os.cpu_count() or 1)
        self.python = python or _default_python()
        self.root = os.geteuid() == 0
        self.mode = self._choose(isolation)
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

    def _argv(self, slot: int, limits: Limits, uid: int) -> list[str]:
        if self.mode == "bwrap":
            return _bwrap_args(self.python, uid, self.root, limits.disk_bytes)
        if self._tmp is None:
            self._tmp = tempfile.mkdtemp(prefix="referee-sandbox-")
            os.chmod(self._tmp, 0o711)
        work = os.path.join(self._tmp, f"slot{slot}")
        os.makedirs(work, mode=0o711, exist_ok=True)
        return [self.python, "-I", "-S", str(_HERE / "_zygote.py"), str(uid), work, "0"]

    def _spawn(self, slot: int, limits: Limits) -> Worker:
        # As root each worker's jobs get a uid of their own, claimed host-wide; otherwise the
        # jobs run as our own uid inside bubblewrap's user namespace (-1: no switch).
        claim = claim_uid(_UID_BASE) if self.root else None
        return self._with_uid(claim, lambda uid: ProcessWorker(self._argv(slot, limits, uid), slot))

    def close(self) -> None:
        """Stop every idle worker (busy ones stop when their job ends)."""
        super().close()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


class LocalOptions(BackendOptions):
    """The ``local`` backend's options (a spec's ``sandbox: {backend: local, ...}``).

    Attributes:
        workers: Jobs run at once (one pre-forked worker each); default: CPU count.
        isolation: See `Isolation`.
        python: The interpreter inside the sandbox; default /usr/bin/python3.
    """

    backend: Literal["local"] = "local"
    workers: int | None = Field(default=None, ge=1)
    isolation: Isolation = "auto"
    python: str | None = None

    def create(self) -> LocalSandbox:
        return LocalSandbox(workers=self.workers, isolation=self.isolation, python=self.python)
