"""One worker process and its channel; how workers start (forked by the zygote, else fresh)."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import pickle
import select
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from referee.workers import _common
from referee.workers._common import BOOT_PREFIX, HEADER, START_TIMEOUT, send
from referee.workers._zygote import ForkedProcess, Zygote, ZygoteError

logger = logging.getLogger("referee")

_REST_OF_ANSWER = 10.0  # seconds the rest of an answer may take once its first bytes came

_BOOT = (
    BOOT_PREFIX
    + """
channel_in, channel_out = os.fdopen(os.dup(0), "rb"), os.fdopen(os.dup(1), "wb")
null = os.open(os.devnull, os.O_RDONLY)
os.dup2(null, 0)
os.dup2(2, 1)  # what a reward prints goes to stderr, never into the channel
(size,) = struct.unpack("<I", channel_in.read(4))
sys.path[:] = pickle.loads(channel_in.read(size))
from referee.workers._serve import serve
serve(channel_in, channel_out)
"""
)


class WorkerDied(Exception):
    """A worker ended (or stopped answering sense) while it scored a rollout."""


class NotStarted(WorkerDied):
    """A worker ended before it began scoring (while idle, or loading the reward)."""


class Worker:
    """One worker process and its channel: forked by `zygote` where one is given, else a
    fresh interpreter."""

    def __init__(self, zygote: Zygote | None = None) -> None:
        self.proc: subprocess.Popen[bytes] | ForkedProcess
        if zygote is None:
            proc = subprocess.Popen(
                [sys.executable, "-c", _BOOT, str(os.getpid())],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                start_new_session=True,  # its own process group: killed with what it started
            )
            assert proc.stdin is not None
            assert proc.stdout is not None
            self.proc, self.to_worker, self.from_worker = proc, proc.stdin, proc.stdout
        else:
            theirs_in, ours_out = os.pipe()
            ours_in, theirs_out = os.pipe()
            try:
                self.proc = zygote.fork(theirs_in, theirs_out)
            except BaseException:
                for fd in (ours_in, ours_out):
                    os.close(fd)
                raise
            finally:
                os.close(theirs_in)
                os.close(theirs_out)
            self.to_worker = os.fdopen(ours_out, "wb")
            self.from_worker = os.fdopen(ours_in, "rb")
        self.fd = self.from_worker.fileno()
        self.poll = select.poll()  # not select(): a busy trainer's fds are past FD_SETSIZE
        self.poll.register(self.fd, select.POLLIN)
        self.rewards: dict[int, None] = {}  # ids of the reward entries it holds
        self.ready = False
        self.niced = False
        send(self.to_worker, pickle.dumps(sys.path))

    def wait_ready(self) -> None:
        if not self.ready:
            if self.read(time.monotonic() + START_TIMEOUT) != {"ready": True}:
                raise WorkerDied("the worker did not start")
            self.ready = True

    def read(self, until: float) -> Any:
        """The next answer (parsed JSON), None at `until` (math.inf: no limit).

        Raises:
            WorkerDied: It ended, or sent what is not an answer.
        """
        header = self._exactly(HEADER.size, until)
        if header is None:
            return None
        (size,) = HEADER.unpack(header)
        if size > _common.MAX_REPLY_BYTES:
            raise WorkerDied(f"its answer of {size} bytes is over {_common.MAX_REPLY_BYTES}")
        body = self._exactly(size, math.inf)
        try:
            return json.loads(body) if body is not None else None
        except ValueError:
            raise WorkerDied("it sent an answer that is not JSON") from None

    def _exactly(self, size: int, until: float) -> bytes | None:
        parts: list[bytes] = []
        left = size
        while left:
            if parts:  # the rest of an answer begun: it comes at once, or never
                until = max(until, time.monotonic() + _REST_OF_ANSWER)
            wait = None if until == math.inf else max(0.0, until - time.monotonic())
            if wait is not None and not self.poll.poll(wait * 1000):
                if parts:  # half an answer: it is stuck mid-write, or dead
                    raise WorkerDied("it stopped mid-answer")
                return None
            chunk = os.read(self.fd, min(left, 1 << 20))
            if not chunk:
                raise WorkerDied(self.how_it_ended())
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)

    def how_it_ended(self) -> str:
        try:
            code = self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return "its channel closed"
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"killed by {signal.Signals(-code).name}"
        return f"exit status {code}"

    def lower_priority(self) -> None:
        """Nice its process group to 19: a check stuck until its deadline (spinning in C)
        takes CPU only where nothing else wants it, so the other workers' checks (and
        `referee serve`) are not starved by it."""
        if not self.niced:
            self.niced = True
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PGRP, self.proc.pid, 19)

    def restore_priority(self) -> bool:
        """Back to the normal priority after a slow rollout it finished; False where this
        process may not raise a priority (not root): the worker is then replaced."""
        if not self.niced:
            return True
        try:
            os.setpriority(os.PRIO_PGRP, self.proc.pid, os.getpriority(os.PRIO_PROCESS, 0))
        except OSError:
            return False
        self.niced = False
        return True

    def kill(self) -> None:
        if self.proc.returncode is None:  # not reaped yet: its process group is its own
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                self.proc.kill()
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            self.proc.wait(timeout=5.0)
        for fh in (self.to_worker, self.from_worker):
            with contextlib.suppress(OSError):
                fh.close()


# --- starting workers -----------------------------------------------------------------------

_lock = threading.Lock()
_starter_pool: ThreadPoolExecutor | None = None
_zygote: Zygote | None = None
_zygote_starts = 0
_ZYGOTE_STARTS = 3  # zygotes started per process before the pool gives up on them


def start() -> Worker:
    """A new worker, started from the pool's one long-lived thread: the kernel sends a child
    its parent-death signal when the *thread* that forked it ends, so a worker (or zygote)
    started from a caller's thread (``asyncio.to_thread``'s, gone after ``asyncio.run``)
    would die with it."""
    return _starter().submit(_new_worker).result()


def preload(payload: bytes) -> None:
    """Have the zygote load a reward before it forks workers for it (no zygote: nothing)."""
    try:
        zygote = _starter().submit(_current_zygote).result()
        if zygote is not None:
            zygote.preload(payload)
    except ZygoteError as exc:
        logger.debug("worker zygote: %s", exc)


def zygote_enabled() -> bool:
    """``REFEREE_ZYGOTE=0`` turns the zygote off (every worker a fresh interpreter)."""
    return os.environ.get("REFEREE_ZYGOTE", "1").strip().lower() not in ("0", "false", "no")


def _starter() -> ThreadPoolExecutor:
    global _starter_pool
    with _lock:
        if _starter_pool is None:
            _starter_pool = ThreadPoolExecutor(1, "referee-worker-start")
        return _starter_pool


def _current_zygote() -> Zygote | None:
    """The zygote, started (on the starting thread) where there is none or it died; None
    where it is off, unsafe, or would not start."""
    global _zygote, _zygote_starts
    if not zygote_enabled():
        return None
    if _zygote is not None and _zygote.alive():
        # One that may not fork is kept for its workers' exits; another would be unsafe too.
        return None if _zygote.unsafe else _zygote
    if _zygote is not None:
        _zygote.close()  # it died, or stopped answering: its workers die with it
        _zygote = None
    if _zygote_starts >= _ZYGOTE_STARTS:
        return None
    _zygote_starts += 1
    try:
        _zygote = Zygote()
    except (OSError, ZygoteError) as exc:
        logger.warning("worker zygote did not start (%s); workers start as fresh interpreters", exc)
        return None
    return _zygote


def _new_worker() -> Worker:
    zygote = _current_zygote()
    if zygote is not None:
        try:
            return Worker(zygote)
        except (OSError, ZygoteError) as exc:
            logger.debug("worker zygote: %s; starting a fresh interpreter", exc)
    return Worker()


def close_zygote() -> None:
    """Stop the zygote (at exit; its workers die with it)."""
    global _zygote
    zygote, _zygote = _zygote, None
    if zygote is not None:
        zygote.close()


def after_fork() -> None:
    """A forked child shares neither its parent's starting thread nor its zygote."""
    global _lock, _starter_pool, _zygote, _zygote_starts
    _lock, _starter_pool, _zygote, _zygote_starts = threading.Lock(), None, None, 0
