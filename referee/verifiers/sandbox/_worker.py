"""One sandbox worker (a zygote the host talks to over a channel), and what its frames say."""

from __future__ import annotations

import base64
import binascii
import errno
import logging
import os
import select
import socket
import subprocess
import tempfile
import time
from abc import ABC, abstractmethod
from typing import Any

from referee.verifiers.sandbox import _wire
from referee.verifiers.sandbox._cgroup import WorkerCgroup
from referee.verifiers.sandbox.base import Job, Limits, RunResult, SandboxError, file_bytes
from referee.verifiers.sandbox.uids import UidClaim

__all__ = [
    "GRACE",
    "PIPELINE_BYTES",
    "ProcessWorker",
    "Worker",
    "a_reply",
    "decode_result",
    "dirty",
    "frame_limit",
    "host_fault",
    "job_wire",
    "worker_died",
]

logger = logging.getLogger("referee.sandbox")

GRACE = 10.0  # seconds the host waits beyond a job's own limit before giving up on a worker
PIPELINE_BYTES = 32 << 10  # pipelined requests stay well inside a pipe's 64 KiB buffer
# What the host runs out of, not the job: under these a job's result would be a lie.
_HOST_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})


def host_fault(exc: OSError) -> SandboxError | None:
    """The SandboxError for an error of the host's own resources (None: another error)."""
    if exc.errno not in _HOST_ERRNOS:
        return None
    return SandboxError(
        f"the host process ran out of resources while running a sandbox job ({exc}); raise "
        "its limit on open files (ulimit -n) or run fewer sandbox workers"
    )


def frame_limit(limits: Limits) -> int:
    """The largest frame a worker honestly sends the host for a job under `limits`: a result
    with both streams at their limit (base64), or a served program's reply, and room for the
    fields around them. A larger one is refused unread."""
    streams = 2 * 4 * ((limits.output_bytes + 2) // 3)
    return streams + limits.reply_bytes + (64 << 10)


class Worker(ABC):
    """One sandboxed zygote and its framed channel; subclasses say how it is started."""

    slot: int
    in_fd: int
    out: _wire.Channel
    jobs: int = 0
    claim: UidClaim | None = None  # the uid its jobs run as, released when it retires
    sock: socket.socket | None = None  # the channel, when it can carry file descriptors
    cgroup: WorkerCgroup | None = None  # its memory and task limits, where it has one

    def fit(self, limits: Limits) -> None:
        """Hold the whole worker to the limits of its next job (its cgroup's, where it has
        one), before that job starts: the limits of an earlier job never carry over.

        Raises:
            OSError, SandboxError: They cannot be set (the pool then replaces the worker).
        """
        if self.cgroup is not None:
            self.cgroup.fit(limits.memory_bytes, limits.processes)

    def retire(self) -> None:
        """Close the worker and give back its uid."""
        self.close()
        if self.claim is not None:
            self.claim.release()
            self.claim = None

    def ping(self) -> None:
        """Wait for the zygote to answer. Raises SandboxError with what went wrong."""
        try:
            self.request({"op": "ping"}, timeout=30.0)
        except (EOFError, OSError, TimeoutError, _wire.WireError) as exc:
            why = self.stderr()
            self.close()
            raise SandboxError(f"the sandbox worker did not start: {exc}; {why}") from None

    def stderr(self) -> str:
        """What the worker said on its error stream (for startup failures)."""
        return "(no output)"

    def pid(self) -> int | None:
        """The zygote's pid on the host (None: not known)."""
        return None

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
                return a_reply(frame)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no reply from the sandbox worker within {timeout:.0f}s")
            ready, _, _ = select.select([self.out.fd], [], [], left)
            if ready and not self.out.feed():
                raise EOFError("the sandbox worker exited")

    def receive_with_fds(self, timeout: float) -> tuple[dict[str, Any], list[int]]:
        """Like `receive`, keeping file descriptors that come with the frame.

        Raises SandboxError when descriptors were sent but this process could not take them
        (it is out of file descriptors: the kernel drops them).
        """
        if self.sock is None:
            return self.receive(timeout), []
        fds: list[int] = []
        try:
            deadline = time.monotonic() + timeout
            while True:
                frame = self.out.pop()
                if frame is not None:
                    return a_reply(frame), fds
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no reply from the sandbox worker within {timeout:.0f}s")
                ready, _, _ = select.select([self.sock], [], [], left)
                if ready:
                    data, more, flags, _ = socket.recv_fds(self.sock, 1 << 20, 4)
                    fds += more
                    if flags & socket.MSG_CTRUNC:
                        raise OSError(errno.EMFILE, "descriptors from the sandbox were dropped")
                    if not data:
                        raise EOFError("the sandbox worker exited")
                    self.out.absorb(data)
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise

    @abstractmethod
    def close(self) -> None:
        """Stop the worker and free what it holds."""


class ProcessWorker(Worker):
    """A zygote started as a child process (bubblewrap, unshare, or no isolation), with `env`
    as its whole environment."""

    def __init__(self, argv: list[str], slot: int, env: dict[str, str] | None = None) -> None:
        self.slot = slot
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the worker
        # A socketpair rather than stdin/stdout pipes: a socket can hand the host the pipes of
        # a served program, so calls skip the relay through the zygote.
        try:
            ours, theirs = socket.socketpair()
        except OSError:
            self.log.close()
            raise
        try:
            self.proc = subprocess.Popen(
                [*argv, f"fd:{theirs.fileno()}"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self.log,
                pass_fds=[theirs.fileno()],
                env=env,
            )
        except OSError as exc:
            ours.close()
            self.log.close()
            raise host_fault(exc) or SandboxError(
                f"cannot start the sandbox worker: {exc}"
            ) from None
        finally:
            theirs.close()
        self.sock = ours
        self.in_fd = ours.fileno()
        self.out = _wire.Channel(self.in_fd)
        self._pid: int | None = None
        self.ping()

    def pid(self) -> int | None:
        """The zygote's pid on the host: the process we started, or (bubblewrap, unshare) the
        Python below it."""
        if self._pid is None:
            self._pid = _zygote_below(self.proc.pid)
        return self._pid

    def stderr(self) -> str:
        self.log.seek(0)
        text = self.log.read()[-2000:].decode(errors="replace").strip()
        return text or "(no output)"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            logger.warning("sandbox worker %s did not exit after SIGKILL", self.proc.pid)
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        self.log.close()


def _zygote_below(root: int) -> int | None:
    """The pid of the zygote among `root` and its descendants (a Python running _zygote.py)."""
    parents: dict[int, int] = {}
    zygotes = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                parents[int(entry)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if os.path.basename(argv[0]).startswith(b"python") and b"_zygote.py" in b" ".join(argv):
            zygotes.append(int(entry))
    for pid in zygotes:
        ancestor = pid
        while ancestor > 1 and ancestor != root:
            ancestor = parents.get(ancestor, 0)
        if ancestor == root:
            return pid
    return None


def job_wire(job: Job, kind: str) -> dict[str, Any]:
    files = {
        name: base64.b64encode(file_bytes(data)).decode("ascii") for name, data in job.files.items()
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


def a_reply(frame: Any) -> dict[str, Any]:
    if type(frame) is not dict:
        raise _wire.WireError(f"a reply that is not an object: {type(frame).__name__}")
    return frame


def decode_result(reply: dict[str, Any]) -> RunResult:
    """The result in a worker's reply. Raises WireError when it is not one."""
    try:
        return RunResult(
            exit_code=_maybe(int, reply["exit_code"]),
            signal=_maybe(int, reply["signal"]),
            timed_out=bool(reply["timed_out"]),
            output_limited=bool(reply["output_limited"]),
            stdout=base64.b64decode(reply["stdout"], validate=True),
            stderr=base64.b64decode(reply["stderr"], validate=True),
            stdout_truncated=bool(reply["stdout_truncated"]),
            stderr_truncated=bool(reply["stderr_truncated"]),
            wall_time=float(reply["wall_time"]),
        )
    except (KeyError, TypeError, ValueError, binascii.Error) as exc:
        raise _wire.WireError(f"a malformed result ({type(exc).__name__}: {exc})") from None


def _maybe(kind: type[int], value: Any) -> int | None:
    if value is None:
        return None
    if type(value) is not kind:
        raise TypeError(f"{value!r} is not an {kind.__name__}")
    return value


def dirty(reply: dict[str, Any]) -> bool:
    """The job left something its worker could not wipe: the worker must not serve another."""
    left = reply.get("dirty")
    if left:
        logger.warning("replacing a sandbox worker a job left unclean: %s", left)
    return bool(left)


def worker_died(started: float, why: str) -> RunResult:
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
