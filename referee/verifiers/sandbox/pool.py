"""A pool of sandbox workers (zygotes) behind the `Sandbox` interface, whatever starts them."""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable

from referee.verifiers.sandbox import _wire
from referee.verifiers.sandbox._session import Session
from referee.verifiers.sandbox._worker import (
    GRACE,
    ProcessWorker,
    Worker,
    decode_result,
    dirty,
    frame_limit,
    host_fault,
    job_wire,
    worker_died,
)
from referee.verifiers.sandbox.base import Job, Limits, RunResult, SandboxError
from referee.verifiers.sandbox.uids import UidClaim

__all__ = ["ProcessWorker", "Worker", "WorkerPool"]

logger = logging.getLogger("referee.sandbox")


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
                raise host_fault(exc) or SandboxError(
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
            worker.out.limit = frame_limit(job.limits)
            reply = worker.request(
                {"op": "run", "job": job_wire(job, kind)},
                timeout=job.limits.wall_seconds + GRACE,
            )
            if reply.get("worker_error"):
                raise SandboxError(str(reply.get("error")))
            result = decode_result(reply)
            broken = self._anomalous(result) or dirty(reply)
            return result
        except OSError as exc:
            fault = host_fault(exc)
            if fault is not None:
                raise fault from None
            return worker_died(started, str(exc))
        except EOFError as exc:
            return worker_died(started, str(exc))
        except _wire.WireError as exc:
            # Only what ran there could make its worker say too much or something else: the
            # job's failure (its worker is replaced), never a sandbox failure it could forge.
            return worker_died(started, f"its reply broke the protocol: {exc}")
        except TimeoutError as exc:
            raise SandboxError(f"the sandbox worker stopped answering: {exc}") from None
        finally:
            self._checkin(worker, broken)

    def session(self, job: Job, call_timeout: float | None = None) -> Session:
        """Load `job.source` in the sandbox and serve calls to its functions."""
        if job.source is None:
            raise ValueError("a session runs Python source")
        worker = self._checkout(job.limits)
        return Session(self._checkin, worker, job, call_timeout)

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
