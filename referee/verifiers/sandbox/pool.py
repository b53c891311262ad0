"""A pool of sandbox workers (zygotes) behind the `Sandbox` interface, whatever starts them."""

from __future__ import annotations

import base64
import binascii
import collections
import contextlib
import errno
import logging
import os
import select
import socket
import subprocess
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from referee.verifiers.sandbox import _wire
from referee.verifiers.sandbox._cgroup import WorkerCgroup
from referee.verifiers.sandbox.base import (
    Job,
    Limits,
    ProgramError,
    RunResult,
    SandboxError,
    file_bytes,
)
from referee.verifiers.sandbox.uids import UidClaim

__all__ = ["ProcessWorker", "Worker", "WorkerPool"]

logger = logging.getLogger("referee.sandbox")

GRACE = 10.0  # seconds the host waits beyond a job's own limit before giving up on a worker
_PIPELINE_BYTES = 32 << 10  # pipelined requests stay well inside a pipe's 64 KiB buffer
# What the host runs out of, not the job: under these a job's result would be a lie.
_HOST_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})


def _host_fault(exc: OSError) -> SandboxError | None:
    """The SandboxError for an error of the host's own resources (None: another error)."""
    if exc.errno not in _HOST_ERRNOS:
        return None
    return SandboxError(
        f"the host process ran out of resources while running a sandbox job ({exc}); raise "
        "its limit on open files (ulimit -n) or run fewer sandbox workers"
    )


def _frame_limit(limits: Limits) -> int:
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
                return _a_reply(frame)
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
                    return _a_reply(frame), fds
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
            raise _host_fault(exc) or SandboxError(
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


def _job_wire(job: Job, kind: str) -> dict[str, Any]:
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


def _a_reply(frame: Any) -> dict[str, Any]:
    if type(frame) is not dict:
        raise _wire.WireError(f"a reply that is not an object: {type(frame).__name__}")
    return frame


def _result(reply: dict[str, Any]) -> RunResult:
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


def _dirty(reply: dict[str, Any]) -> bool:
    """The job left something its worker could not wipe: the worker must not serve another."""
    left = reply.get("dirty")
    if left:
        logger.warning("replacing a sandbox worker a job left unclean: %s", left)
    return bool(left)


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


class WorkerPool(ABC):
    """Runs jobs on a pool of workers; subclasses start the workers.

    Args:
        size: Workers (jobs at once).
        recycle_after: Replace a worker after this many jobs (None: never).
        recycle_on_anomaly: Replace a worker after a job that timed out, flooded its output,
            or took the worker down.
    """

    def __init__(
        self, size: int, recycle_after: int | None = None, recycle_on_anomaly: bool = False
    ) -> None:
        self.size = size
        self.recycle_after = recycle_after
        self.recycle_on_anomaly = recycle_on_anomaly
        # A caller waits for either an idle worker or a free slot to start one in; both are
        # handed over under this one condition, so a slot freed by a retiring worker (or by a
        # worker that failed to start) wakes a waiter as an idle worker does.
        self._free = threading.Condition(threading.Lock())
        self._idle: list[Worker] = []  # last in, first out: a warm worker is reused first
        self._slots = list(range(size))

    @abstractmethod
    def _spawn(self, slot: int, limits: Limits) -> Worker:
        """Start a worker for `slot` (raises SandboxError when it cannot)."""

    @staticmethod
    def _with_uid(claim: UidClaim | None, start: Callable[[int], Worker]) -> Worker:
        """Start a worker whose jobs run as the claimed uid (-1: none); a worker that does not
        start gives its uid back."""
        try:
            worker = start(claim.uid if claim is not None else -1)
        except BaseException:
            if claim is not None:
                claim.release()
            raise
        worker.claim = claim
        return worker

    def _checkout(self, limits: Limits) -> Worker:
        """An idle worker, or a new one in a free slot, held to `limits`; waits while there
        is neither.

        Raises SandboxError when a worker cannot be started (its slot is free again).
        """
        with self._free:
            while not self._idle and not self._slots:
                self._free.wait()
            idle = self._idle.pop() if self._idle else None
            slot = idle.slot if idle is not None else self._slots.pop()
        if idle is not None:
            try:
                idle.fit(limits)
                return idle
            except (OSError, SandboxError) as exc:
                # (A lower limit than what the worker holds now: a new one starts at it.)
                logger.warning(
                    "replacing a sandbox worker that cannot take its job's limits: %s", exc
                )
                try:
                    idle.retire()
                except BaseException:
                    self._give_slot(slot)
                    raise
        try:
            return self._spawn(slot, limits)
        except BaseException as exc:
            self._give_slot(slot)
            if isinstance(exc, OSError):
                raise _host_fault(exc) or SandboxError(
                    f"cannot start a sandbox worker: {exc}"
                ) from None
            if isinstance(exc, RuntimeError):  # (`claim_uid`: every sandbox uid is held)
                raise SandboxError(f"cannot start a sandbox worker: {exc}") from None
            raise

    def _give_slot(self, slot: int) -> None:
        with self._free:
            self._slots.append(slot)
            self._free.notify()

    def _checkin(self, worker: Worker, broken: bool) -> None:
        worker.jobs += 1
        worn = self.recycle_after is not None and worker.jobs >= self.recycle_after
        if broken or worn:
            try:
                worker.retire()
            finally:
                self._give_slot(worker.slot)
        else:
            with self._free:
                self._idle.append(worker)
                self._free.notify()

    def zygote_pids(self) -> list[int]:
        """Host pids of the idle workers' zygotes, for diagnostics: a worker's CPU time and
        memory (``/proc/PID/stat``), and, as root, its files (``/proc/PID/root``)."""
        with self._free:
            idle = list(self._idle)
        return [pid for pid in (worker.pid() for worker in idle) if pid is not None]

    def _anomalous(self, result: RunResult) -> bool:
        return self.recycle_on_anomaly and (
            result.timed_out or result.output_limited or result.exit_code is None
        )

    # -- jobs -------------------------------------------------------------------------------

    def run(self, job: Job) -> RunResult:
        """Run `job` to completion. Raises SandboxError when the sandbox cannot run it."""
        worker = self._checkout(job.limits)
        started = time.monotonic()
        kind = "python" if job.source is not None else "exec"
        broken = True
        try:
            worker.out.limit = _frame_limit(job.limits)
            reply = worker.request(
                {"op": "run", "job": _job_wire(job, kind)},
                timeout=job.limits.wall_seconds + GRACE,
            )
            if reply.get("worker_error"):
                raise SandboxError(str(reply.get("error")))
            result = _result(reply)
            broken = self._anomalous(result) or _dirty(reply)
            return result
        except OSError as exc:
            fault = _host_fault(exc)
            if fault is not None:
                raise fault from None
            return _worker_died(started, str(exc))
        except EOFError as exc:
            return _worker_died(started, str(exc))
        except _wire.WireError as exc:
            # Only what ran there could make its worker say too much or something else: the
            # job's failure (its worker is replaced), never a sandbox failure it could forge.
            return _worker_died(started, f"its reply broke the protocol: {exc}")
        except TimeoutError as exc:
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
            with self._free:
                if not self._idle:
                    break
                worker = self._idle.pop()
            try:
                worker.retire()
            finally:
                self._give_slot(worker.slot)


class _Session:
    """A program served by one worker until `close`."""

    def __init__(
        self, sandbox: WorkerPool, worker: Worker, job: Job, call_timeout: float | None
    ) -> None:
        self._sandbox = sandbox
        self._worker: Worker | None = worker
        self._started = time.monotonic()
        self._limits = job.limits
        self._call_timeout = call_timeout
        self._dead: str | None = None
        self._broken = False  # the program broke the protocol: its worker is replaced
        self._result: RunResult | None = None
        self._names: list[str] | None = None
        # Direct: the zygote hands us the program's call pipes (over a socket channel).
        self._direct = worker.sock is not None
        self._req_fd = -1
        self._resp: _wire.Channel | None = None
        self._queue: collections.deque[bytes] = collections.deque()  # pipelined, unanswered
        worker.out.limit = _frame_limit(job.limits)
        # Sent now, answered when first needed: the caller can prepare while the program loads.
        self._send({"op": "start", "job": _job_wire(job, "python"), "direct": self._direct})

    @property
    def names(self) -> list[str]:
        """The functions (callables) the program defines, once it has loaded."""
        if self._names is None:
            self._names = []
            reply = self._receive_loaded()
            if "loaded" in reply:
                self._names = [str(n) for n in reply["loaded"]]
            else:
                self._dead = str(reply.get("error", "the program did not load"))
        return self._names

    def _request(self, message: dict[str, Any]) -> dict[str, Any]:
        self.names  # noqa: B018 - the load reply comes first
        self._send(message)
        return self._receive()[0]

    def _send(self, message: dict[str, Any]) -> None:
        if self._worker is not None:
            with contextlib.suppress(OSError):  # the worker is gone; _receive reports it
                _wire.write_frame(self._worker.in_fd, message)

    def _receive(self, with_fds: bool = False) -> tuple[dict[str, Any], list[int]]:
        """The worker's next reply (and descriptors sent with it), its failures mapped: a
        worker the program took down is the program's failure; one that stops answering is
        the sandbox's."""
        worker = self._worker
        if worker is None:
            return {"error": "the session is closed", "dead": True}, []
        timeout = self._limits.wall_seconds + GRACE
        try:
            if with_fds:
                reply, fds = worker.receive_with_fds(timeout)
            else:
                reply, fds = worker.receive(timeout), []
        except (EOFError, OSError) as exc:
            self._release(broken=True)
            fault = _host_fault(exc) if isinstance(exc, OSError) else None
            if fault is not None:
                raise fault from None
            self._result = _worker_died(self._started, str(exc))
            return {"error": f"the program took its worker down: {exc}", "dead": True}, []
        except _wire.WireError as exc:  # (see `run`: the program's failure, never ours)
            self._release(broken=True)
            self._result = _worker_died(self._started, f"its reply broke the protocol: {exc}")
            return {"error": f"protocol violation: {exc}", "dead": True}, []
        except TimeoutError as exc:
            self._release(broken=True)
            raise SandboxError(f"the sandbox worker stopped answering: {exc}") from None
        if reply.get("worker_error"):
            self._release(broken=True)
            raise SandboxError(str(reply.get("error")))
        return reply, fds

    def _receive_loaded(self) -> dict[str, Any]:
        reply, fds = self._receive(with_fds=self._direct)
        if len(fds) == 2:
            # The program's own pipe: what comes on it is capped and read as the program's.
            self._req_fd, self._resp = fds[0], _wire.Channel(fds[1], self._limits.reply_bytes)
            return reply
        for fd in fds:
            os.close(fd)
        if self._direct and "loaded" in reply:
            # The zygote sends "loaded" with the pipes attached and lets go of them: without
            # them no call can reach the program (not its fault).
            self._release(broken=True)
            raise SandboxError(
                f"the sandbox worker sent {len(fds)} of the program's 2 pipes; is this process "
                "out of file descriptors (ulimit -n)?"
            )
        return reply

    def pipeline(self, fn: str, calls: list[tuple[list[Any], dict[str, Any]]]) -> int:
        """Send these calls of `fn` now, in order; `call` then answers them (`Pipelining`).

        The program runs them one by one as it would live calls; a caller whose calls then
        differ from the plan gets live calls after the planned replies are drained. Returns
        how many were sent: 0 when the session cannot pipeline (relayed, dead, busy) or the
        requests would not fit in a pipe's buffer (so the write can never block).
        """
        self.names  # noqa: B018 - the load reply (and the call pipes) come first
        if self._resp is None or self._dead is not None or self._queue:
            return 0
        try:
            frames = [
                _wire.frame_bytes(
                    {"fn": fn, "args": _wire.encode(list(args)), "kwargs": _wire.encode(kw)}
                )
                for args, kw in calls
            ]
        except _wire.WireError:
            return 0
        data = b"".join(frames)
        if not frames or len(data) > _PIPELINE_BYTES:
            return 0
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._req_fd, view) :]
        except OSError:
            return 0
        self._queue.extend(frames)
        return len(frames)

    def _call_direct(self, payload: dict[str, Any]) -> dict[str, Any]:
        """One call over the program's own pipes, with the call's time limit."""
        frame = _wire.frame_bytes(payload)
        if self._queue:
            if self._queue[0] == frame:  # the plan's next call: its request is already sent
                self._queue.popleft()
                return self._await_reply()
            self._drain_queue()  # the test left the plan: finish it, then call live
            if self._dead is not None:
                return {"error": self._dead, "dead": True}
        try:
            view = memoryview(frame)
            while view:
                view = view[os.write(self._req_fd, view) :]
        except OSError:
            return {"error": "the program exited", "dead": True}
        return self._await_reply()

    def _drain_queue(self) -> None:
        while self._queue:
            self._queue.popleft()
            reply = self._await_reply()
            if reply.get("dead"):
                self._dead = str(reply.get("error"))
                self._queue.clear()

    def _await_reply(self) -> dict[str, Any]:
        """The program's next reply, within the call's time limit."""
        assert self._resp is not None  # direct sessions have the response pipe
        timeout = self._call_timeout or self._limits.wall_seconds
        deadline = time.monotonic() + timeout
        while True:
            try:
                frame = self._resp.pop()
                if frame is not None:
                    return _wire.call_reply(frame)  # rebuilt: only "ok" or "error" survive
                left = deadline - time.monotonic()
                if left <= 0:
                    return {"error": "timed out", "dead": True}
                ready, _, _ = select.select([self._resp.fd], [], [], left)
                if ready and not self._resp.feed():
                    return {"error": "the program exited", "dead": True}
            except _wire.WireError as exc:
                self._broken = True  # its pipe may hold the rest of a frame: never reuse
                return {"error": f"protocol violation: {exc}", "dead": True}

    def _close_direct(self) -> None:
        if self._req_fd >= 0:
            os.close(self._req_fd)
            self._req_fd = -1
        if self._resp is not None:
            os.close(self._resp.fd)
            self._resp = None

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
        self.names  # noqa: B018 - the load reply (and, direct, the call pipes) come first
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
        if self._resp is not None:
            reply = self._call_direct(payload)
        else:
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
        self.names  # noqa: B018 - the load reply (and the pipes) come first
        self._close_direct()  # the program sees its input close and exits
        if self._result is None:
            reply = self._request({"op": "finish"})
            try:
                result = (
                    _result(reply)
                    if "exit_code" in reply
                    else _worker_died(self._started, str(reply.get("error")))
                )
            except _wire.WireError as exc:
                self._broken = True
                result = _worker_died(self._started, f"its reply broke the protocol: {exc}")
            if self._worker is not None:
                self._release(broken=_dirty(reply) or self._broken)
            self._result = result
        return self._result

    def __enter__(self) -> _Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
