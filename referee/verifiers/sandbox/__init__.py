"""Running untrusted code: one interface, several backends.

``local`` (the default) isolates each job with bubblewrap namespaces and keeps a pool of
pre-forked Python workers. Use `get_sandbox` to share one pool per configuration across the
rewards of a process.
"""

from __future__ import annotations

import atexit
import threading
from typing import Literal

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

Backend = Literal["local"]

_lock = threading.Lock()
_shared: dict[tuple[object, ...], Sandbox] = {}


def get_sandbox(
    backend: Backend = "local", *, workers: int | None = None, isolation: Isolation = "auto"
) -> Sandbox:
    """The process-wide sandbox for this configuration, started on first use."""
    key = (backend, workers, isolation)
    with _lock:
        sandbox = _shared.get(key)
        if sandbox is None:
            sandbox = _shared[key] = LocalSandbox(workers=workers, isolation=isolation)
        return sandbox


@atexit.register
def _close_shared() -> None:
    with _lock:
        for sandbox in _shared.values():
            sandbox.close()
        _shared.clear()
