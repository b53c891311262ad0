"""Running untrusted code: one interface, several backends.

``local`` (the default) isolates each job with bubblewrap namespaces and keeps a pool of
pre-forked Python workers. Use `get_sandbox` to share one pool per configuration across the
rewards of a process.
"""

from __future__ import annotations

import atexit
import threading
import typing

from referee.verifiers.sandbox.base import (
    Job,
    Limits,
    ProgramError,
    RunResult,
    Sandbox,
    SandboxError,
    SandboxSession,
)
from referee.verifiers.sandbox.local import Isolation, LocalSandbox

__all__ = [
    "Backend",
    "Isolation",
    "Job",
    "Limits",
    "LocalSandbox",
    "ProgramError",
    "RunResult",
    "Sandbox",
    "SandboxError",
    "SandboxSession",
    "get_sandbox",
]

Backend = typing.Literal["local", "docker"]
"""``local``: bubblewrap namespaces on this machine (`LocalSandbox`). ``docker``: containers on
a Docker Engine (`referee.verifiers.sandbox.docker.DockerSandbox`; ``pip install
"referee[docker]"``)."""

_lock = threading.Lock()
_shared: dict[tuple[object, ...], Sandbox] = {}


def get_sandbox(
    backend: Backend = "local",
    *,
    workers: int | None = None,
    isolation: Isolation = "auto",
    runtime: str | None = None,
) -> Sandbox:
    """The process-wide sandbox for this configuration, started on first use.

    Args:
        backend: Which sandbox (`Backend`).
        workers: Jobs at once; default: CPU count.
        isolation: The local backend's isolation.
        runtime: The docker backend's container runtime (``runsc`` for gVisor).

    Raises:
        SandboxError: The sandbox cannot be started here (the message says why).
    """
    key = (backend, workers, isolation, runtime)
    with _lock:
        sandbox = _shared.get(key)
        if sandbox is None:
            if backend == "docker":
                from referee.verifiers.sandbox.docker import DockerSandbox

                sandbox = DockerSandbox(workers=workers, runtime=runtime)
            else:
                sandbox = LocalSandbox(workers=workers, isolation=isolation)
            _shared[key] = sandbox
        return sandbox


@atexit.register
def _close_shared() -> None:
    with _lock:
        for sandbox in _shared.values():
            sandbox.close()
        _shared.clear()
