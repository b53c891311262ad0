"""A program served by one sandbox worker: loaded once, its functions called until `close`."""

from __future__ import annotations

import collections
import contextlib
import os
import select
import time
from collections.abc import Callable
from typing import Any

from referee.verifiers.sandbox import _wire
from referee.verifiers.sandbox._worker import (
    GRACE,
    PIPELINE_BYTES,
    Worker,
    decode_result,
    dirty,
    frame_limit,
    host_fault,
    job_wire,
    worker_died,
)
from referee.verifiers.sandbox.base import Job, ProgramError, RunResult, SandboxError

__all__ = ["Session"]


class Session:
    """A program served by one worker until `close` (`WorkerPool.session`)."""

    def __init__(
        self,
        checkin: Callable[[Worker, bool], None],
        worker: Worker,
        job: Job,
        call_timeout: float | None,
    ) -> None:
        self._checkin = checkin  # gives the worker back to its pool (broken: replaced)
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
        worker.out.limit = frame_limit(job.limits)
        # Sent now, answered when first needed: the caller can prepare while the program loads.
        self._send({"op": "start", "job": job_wire(job, "python"), "direct": self._direct})

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
            fault = host_fault(exc) if isinstance(exc, OSError) else None
            if fault is not None:
                raise fault from None
            self._result = worker_died(self._started, str(exc))
            return {"error": f"the program took its worker down: {exc}", "dead": True}, []
        except _wire.WireError as exc:  # (see `run`: the program's failure, never ours)
            self._release(broken=True)
            self._result = worker_died(self._started, f"its reply broke the protocol: {exc}")
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
        if not frames or len(data) > PIPELINE_BYTES:
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
            self._checkin(self._worker, broken)
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
                    decode_result(reply)
                    if "exit_code" in reply
                    else worker_died(self._started, str(reply.get("error")))
                )
            except _wire.WireError as exc:
                self._broken = True
                result = worker_died(self._started, f"its reply broke the protocol: {exc}")
            if self._worker is not None:
                self._release(broken=dirty(reply) or self._broken)
            self._result = result
        return self._result

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
