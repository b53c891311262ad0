"""The local sandbox: namespaces on this machine, and a pool of pre-forked Python workers.

Each worker is one sandbox, made by bubblewrap or, where bubblewrap is missing, by util-linux
``unshare`` and referee's root builder, with the same isolation (`_isolation`): new pid, mount,
network, IPC and UTS namespaces, a read-only system, and four writable size-limited tmpfs
places (``/work``, ``/tmp``, ``/var/tmp``, ``/dev/shm``). Inside, a warm Python interpreter
(the zygote) forks one child per job. As root, a job runs as an unprivileged uid claimed for
its worker (from 60000 up, never shared with another worker on the host) with no capabilities.

Every job starts clean: after each, every process it left is killed and every place it could
write is emptied, before its result comes back (`_scrub`).

The sandbox fails closed: where no namespace can be had it refuses to start (`SandboxError`,
which a code reward reports as ``Failure("sandbox")``) and says how to fix that. Running code
without isolation takes an explicit ``isolation="none"``.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from referee.verifiers.sandbox._cgroup import WorkerCgroup
from referee.verifiers.sandbox._isolation import (
    NO_ISOLATION,
    ZYGOTE_ENV,
    bwrap_argv,
    unshare_argv,
    unshare_problem,
    worker_cgroup,
)
from referee.verifiers.sandbox._isolation import bwrap_problem as _bwrap_problem
from referee.verifiers.sandbox.base import BackendOptions, Limits, SandboxError
from referee.verifiers.sandbox.pool import ProcessWorker, Worker, WorkerPool
from referee.verifiers.sandbox.uids import claim_uid

__all__ = ["Isolation", "LocalOptions", "LocalSandbox", "isolation_problem"]

logger = logging.getLogger("referee.sandbox")

Isolation = Literal["auto", "bwrap", "unshare", "none", "process"]
"""How a local worker is isolated (README: "Isolation levels").

``auto`` (the default): namespaces through bubblewrap, else through util-linux ``unshare``;
where neither works, the sandbox refuses to run code. ``bwrap``, ``unshare``: that path only
(an error if it does not work here). ``none``: no namespaces, only resource limits, a session
of its own and, as root, an unprivileged uid: the code can reach the network and read what
that uid can. ``process`` is the former name of ``none``."""

Mode = Literal["bwrap", "unshare", "none"]

_HERE = Path(__file__).resolve().parent
_UID_BASE = 60000


def _default_python() -> str:
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate
    return os.path.realpath(sys.executable)


def bwrap_problem(bwrap: str = "bwrap") -> str | None:
    """None when bubblewrap can isolate a worker here, else why not."""
    return _bwrap_problem(_default_python(), bwrap)


def isolation_problem(python: str | None = None) -> str | None:
    """None when a local worker can be isolated here (by either path), else why not, with
    what to do about it."""
    python = python or _default_python()
    bwrap, unshare = _bwrap_problem(python), unshare_problem(python)
    if bwrap is None or unshare is None:
        return None
    return (
        f"no namespace isolation for the sandbox here: bubblewrap: {bwrap}; unshare: "
        f"{unshare}. {NO_ISOLATION}"
    )


class LocalSandbox(WorkerPool):
    """Runs untrusted code on this machine in namespaces, or refuses to.

    Args:
        workers: Jobs run at once (one pre-forked worker each); default: CPU count.
        isolation: See `Isolation`.
        python: The interpreter inside the sandbox; default /usr/bin/python3.

    Raises:
        SandboxError: The isolation asked for cannot be had here (the message says how to
            get it).
    """

    def __init__(
        self, workers: int | None = None, isolation: Isolation = "auto", python: str | None = None
    ) -> None:
        super().__init__(workers or os.cpu_count() or 1)
        self.python = python or _default_python()
        self.root = os.geteuid() == 0
        self.mode: Mode = self._choose(isolation)
        self._unshare = shutil.which("unshare") or "unshare"
        self._tmp: str | None = None
        if self.mode == "none":
            logger.warning(
                "referee sandbox: isolation none: code runs with resource limits%s but no "
                "namespaces (it can reach the network and read files)",
                " as an unprivileged uid" if self.root else "",
            )

    def _choose(self, isolation: Isolation) -> Mode:
        if isolation in ("none", "process"):
            return "none"
        if isolation in ("bwrap", "unshare"):
            probe = _bwrap_problem if isolation == "bwrap" else unshare_problem
            problem = probe(self.python)
            if problem is not None:
                raise SandboxError(
                    f"isolation {isolation!r} is not available here: {problem}. {NO_ISOLATION}"
                )
            return isolation
        if _bwrap_problem(self.python) is None:
            return "bwrap"
        if unshare_problem(self.python) is None:
            return "unshare"
        raise SandboxError(isolation_problem(self.python) or "no namespace isolation here")

    # -- workers ----------------------------------------------------------------------------

    def _argv(self, slot: int, limits: Limits, uid: int, cgroup: WorkerCgroup | None) -> list[str]:
        if self.mode == "bwrap":
            return bwrap_argv(self.python, uid, self.root, limits.disk_bytes, cgroup)
        if self.mode == "unshare":
            return unshare_argv(
                self.python, uid, self.root, limits.disk_bytes, self._unshare, cgroup
            )
        if self._tmp is None:
            self._tmp = tempfile.mkdtemp(prefix="referee-sandbox-")
            os.chmod(self._tmp, 0o711)
        work = os.path.join(self._tmp, f"slot{slot}")
        os.makedirs(work, mode=0o711, exist_ok=True)
        return [self.python, "-s", "-S", str(_HERE / "_zygote.py"), str(uid), work, "0"]

    def _spawn(self, slot: int, limits: Limits) -> Worker:
        # As root each worker's jobs get a uid of their own, claimed host-wide; otherwise the
        # jobs run as our own uid inside the worker's user namespace (-1: no switch).
        claim = claim_uid(_UID_BASE) if self.root else None
        return self._with_uid(claim, lambda uid: self._start(slot, limits, uid))

    def _start(self, slot: int, limits: Limits, uid: int) -> Worker:
        # Namespaced workers get a cgroup, sized for each job by the pool (`Worker.fit`).
        cgroup = worker_cgroup(limits) if self.mode != "none" else None
        worker = ProcessWorker(self._argv(slot, limits, uid, cgroup), slot, env=ZYGOTE_ENV)
        worker.cgroup = cgroup
        return worker

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
        isolation: See `Isolation` (``process`` is read as ``none``).
        python: The interpreter inside the sandbox; default /usr/bin/python3.
    """

    backend: Literal["local"] = "local"
    workers: int | None = Field(default=None, ge=1)
    isolation: Isolation = "auto"
    python: str | None = None

    @field_validator("isolation")
    @classmethod
    def _former_name(cls, value: Isolation) -> Isolation:
        return "none" if value == "process" else value

    def create(self) -> LocalSandbox:
        return LocalSandbox(workers=self.workers, isolation=self.isolation, python=self.python)
