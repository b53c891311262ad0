"""The sandbox interface: what a sandbox runs (`Job`, `Limits`), what it returns
(`RunResult`), the protocols a backend implements (`Sandbox`, `SandboxSession`, optionally
`Pipelining`), and the base of a backend's options (`BackendOptions`)."""

from __future__ import annotations

import signal
from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from referee.errors import ProgramError, SandboxError

_SIGXCPU = int(signal.SIGXCPU)


__all__ = [
    "BackendOptions",
    "Job",
    "Limits",
    "Pipelining",
    "ProgramError",
    "RunResult",
    "Sandbox",
    "SandboxError",
    "SandboxSession",
    "file_bytes",
]


def file_bytes(data: str | bytes) -> bytes:
    """A job's file as bytes: text as UTF-8, a lone surrogate (which the policy's text can
    hold) as the bytes it stands for, so the file is what was written, not a host error."""
    return data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource limits of one job.

    Attributes:
        cpu_seconds: CPU time of each process (RLIMIT_CPU).
        wall_seconds: Wall-clock time of the whole job; then it is killed, children included.
        memory_bytes: Address space of each process (RLIMIT_AS); with 64 MiB for the worker,
            also the memory of the whole job where it has a cgroup (or a container), every
            page counted: its processes', its memfds and shared memory, and its files.
        file_size_bytes: Largest file a process may write (RLIMIT_FSIZE).
        disk_bytes: Size of each of the job's writable places (its work dir, /tmp, /var/tmp,
            /dev/shm). They are memory (tmpfs): what the job writes there counts against
            `memory_bytes` too.
        processes: Processes the job's user may have at once (RLIMIT_NPROC); plus 8, the
            tasks of the whole worker, where it has a cgroup.
        output_bytes: stdout and stderr kept, each; more output kills the job.
        reply_bytes: Largest reply of a served program the host reads (its list of
            functions, one call's encoded return value); a larger one is refused unread and
            is the program's failure ("reply over N bytes").
    """

    cpu_seconds: float = 10.0
    wall_seconds: float = 10.0
    memory_bytes: int = 1 << 30
    file_size_bytes: int = 64 << 20
    disk_bytes: int = 256 << 20
    processes: int = 64
    output_bytes: int = 1 << 20
    reply_bytes: int = 4 << 20

    def to_wire(self) -> dict[str, Any]:
        return {
            "cpu_seconds": self.cpu_seconds,
            "wall_seconds": self.wall_seconds,
            "memory_bytes": self.memory_bytes,
            "file_size_bytes": self.file_size_bytes,
            "processes": self.processes,
            "output_bytes": self.output_bytes,
            "reply_bytes": self.reply_bytes,
        }


@dataclass(frozen=True, slots=True)
class Job:
    """One program to run.

    Give `source` to run Python source as ``__main__`` in a pre-forked interpreter (fast), or
    `command` to execute a program (``["node", "main.js"]``). `files` are written to the work
    dir first (relative paths only).
    """

    source: str | None = None
    command: tuple[str, ...] | None = None
    files: dict[str, str | bytes] = field(default_factory=dict)
    stdin: bytes = b""
    limits: Limits = field(default_factory=Limits)
    filename: str = "main.py"

    def __post_init__(self) -> None:
        if (self.source is None) == (self.command is None):
            raise ValueError("a Job needs exactly one of source (Python) or command")


@dataclass(frozen=True, slots=True)
class RunResult:
    """What a job did.

    Attributes:
        exit_code: Its exit status, or None when it was killed by a signal.
        signal: The signal that ended it (9 for a kill at the time limit), or None.
        timed_out: It ran past `Limits.wall_seconds` and was killed.
        output_limited: It wrote more than `Limits.output_bytes` and was killed.
        stdout: Captured standard output, at most `Limits.output_bytes`.
        stderr: Captured standard error, at most `Limits.output_bytes`.
        stdout_truncated: stdout was cut.
        stderr_truncated: stderr was cut.
        wall_time: Seconds from start to end.
    """

    exit_code: int | None
    signal: int | None
    timed_out: bool
    output_limited: bool
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    wall_time: float

    @property
    def ok(self) -> bool:
        """It exited with status 0 on its own."""
        return self.exit_code == 0 and not self.timed_out and not self.output_limited

    @property
    def over_time(self) -> bool:
        """It ran past its wall clock, or past its CPU time (SIGXCPU at the soft limit).

        On a loaded machine a spinning job can reach `Limits.cpu_seconds` before the host's
        wall-clock check fires; both are the same verdict: it took too long.
        """
        return self.timed_out or self.signal == _SIGXCPU

    def describe(self) -> str:
        """A short account of how the job ended, for reasons."""
        if self.timed_out:
            return "timed out"
        if self.output_limited:
            return "wrote too much output"
        if self.signal == _SIGXCPU:
            return "ran past its CPU time (SIGXCPU)"
        if self.signal is not None:
            return f"killed by signal {self.signal}"
        return f"exited with status {self.exit_code}"


@runtime_checkable
class SandboxSession(Protocol):
    """A Python program loaded in the sandbox whose functions the host calls."""

    @property
    def names(self) -> list[str]:
        """The functions the program defines (waits for it to load)."""
        ...

    @property
    def dead(self) -> str | None:
        """Why the program is no longer running, or None while it is."""
        ...

    def call(self, fn: str, args: list[Any], kwargs: dict[str, Any] | None = None) -> Any:
        """Call `fn(*args, **kwargs)` in the sandbox; returns plain data.

        Raises:
            ProgramError: The call raised, timed out, or the program died.
        """
        ...

    def close(self) -> RunResult:
        """Stop the program; its output and how it ended."""
        ...


@runtime_checkable
class Pipelining(Protocol):
    """A session that can send calls known in advance at once (optional, a speed-up only).

    A `SandboxSession` need not implement it: callers check with ``isinstance(session,
    Pipelining)`` and otherwise make their calls one by one.
    """

    def pipeline(self, fn: str, calls: list[tuple[list[Any], dict[str, Any]]]) -> int:
        """Send these calls of `fn` now, in order; `call` then answers them from the replies.

        The program must run them one by one, as it would live calls, each within the call
        timeout, so the results are those of live calls. A caller whose calls then differ
        from the plan gets live calls once the planned replies are drained.

        Returns:
            How many calls were sent; 0 means none: make every call live, as usual.
        """
        ...


@runtime_checkable
class Sandbox(Protocol):
    """Runs untrusted code."""

    def run(self, job: Job) -> RunResult:
        """Run a job to completion (blocking). Raises SandboxError if it cannot be run."""
        ...

    def session(self, job: Job, call_timeout: float | None = None) -> SandboxSession:
        """Load a Python program (`job.source`) and keep it running to serve calls."""
        ...

    def close(self) -> None:
        """Stop every worker."""
        ...


class BackendOptions(BaseModel):
    """A sandbox backend's options, checked by the backend's own model: a spec's ``sandbox:``.

    A backend subclasses this with its options as fields and its name as the only value of
    `backend` (``backend: Literal["mine"] = "mine"``), starts its sandbox in `create`, and is
    chosen by name once it has an entry in `referee.verifiers.sandbox.BACKENDS`. Options are
    frozen and hashable: equal options share one sandbox per process (`get_sandbox`).

    Attributes:
        backend: The backend's name in `BACKENDS`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: str

    @abstractmethod
    def create(self) -> Sandbox:
        """Start the sandbox these options describe.

        Raises:
            SandboxError: It cannot be started here (the message says why).
        """
