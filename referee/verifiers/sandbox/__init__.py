"""Running untrusted code: one interface, several backends, chosen by name.

``local`` (the default) isolates each job in namespaces (bubblewrap, or util-linux
``unshare`` where bubblewrap is missing; it refuses where neither works: `isolation_problem`
says why) and keeps a pool of pre-forked Python workers; ``docker`` keeps a warm pool of
locked-down containers. On both, every job starts clean. A backend
is a module implementing the `Sandbox` protocol, with its options as a `BackendOptions`
model, and one entry in `BACKENDS`. Options are given as one mapping, as in a spec::

    sandbox: {backend: docker, runtime: runsc, workers: 8}

`sandbox_options` reads that mapping (or a bare backend name) into the backend's model, and
`get_sandbox` shares one sandbox per distinct options across the rewards of a process.
"""

from __future__ import annotations

from referee.verifiers.sandbox._backends import (
    BACKENDS,
    Backend,
    get_sandbox,
    sandbox_options,
)

# Closes the process's sandboxes (at exit; the tests' dockerd fixture, before its engine stops).
from referee.verifiers.sandbox._backends import _close_shared as _close_shared
from referee.verifiers.sandbox.base import (
    BackendOptions,
    Job,
    Limits,
    Pipelining,
    ProgramError,
    RunResult,
    Sandbox,
    SandboxError,
    SandboxSession,
)
from referee.verifiers.sandbox.docker import DockerOptions
from referee.verifiers.sandbox.local import (
    Isolation,
    LocalOptions,
    LocalSandbox,
    isolation_problem,
)

__all__ = [
    "BACKENDS",
    "Backend",
    "BackendOptions",
    "DockerOptions",
    "Isolation",
    "Job",
    "Limits",
    "LocalOptions",
    "LocalSandbox",
    "Pipelining",
    "ProgramError",
    "RunResult",
    "Sandbox",
    "SandboxError",
    "SandboxSession",
    "get_sandbox",
    "isolation_problem",
    "sandbox_options",
]
