"""The zygote: one warm interpreter that forks new workers in milliseconds.

A worker started as a fresh interpreter costs an interpreter start plus ``import referee`` and
its reward's dependencies (sympy and math-verify for ``math_answer``): most of a second idle,
several seconds on a machine whose cores are busy, which is exactly when workers are replaced
(a check spinning in C killed at its deadline, while others spin). So the pool starts one
zygote per process, a fresh interpreter like a worker (never a ``fork`` of the trainer, whose
threads and CUDA state must not be copied), which imports referee, loads each reward the pool
will send (`Zygote.preload`: its modules imported, its `prepare` run) and then only forks. A
forked worker starts with all of that in memory (``gc.freeze``: its pages stay shared).

Safety, checked rather than assumed:

- the zygote stays single-threaded: a fork copies only the forking thread, so a lock held by
  another would be held forever in the child. After each preload it counts its threads
  (``/proc/self/task``); a reward whose import started one makes the zygote refuse to fork,
  and the pool starts fresh interpreters instead, as it did before there was a zygote;
- a forked worker is its own session (``setsid``: killed with its process group, as a fresh
  worker is) and dies with the zygote, which dies with its parent (``PR_SET_PDEATHSIG``);
- a worker's exit status stays with the zygote until the pool asks for it (`ForkedProcess.poll`),
  so its pid (and process group id) is not reused while the pool may still signal it;
- anything wrong with the zygote (it died, it would not start, it answered nonsense) makes the
  pool fall back to fresh interpreters: the zygote is a speed-up, never a new way to fail.

Protocol: one ``SOCK_SEQPACKET`` socket pair (a message is a datagram, so no framing), requests
pickled (from the parent: trusted), answers pickled (from the zygote, which runs no rollout: the
policy's text never reaches it), one request at a time under a lock.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

from referee.workers._common import BOOT_PREFIX, HEADER, START_TIMEOUT

_BOOT = (
    BOOT_PREFIX
    + """
null = os.open(os.devnull, os.O_RDONLY)
os.dup2(null, 0)
os.dup2(2, 1)
from referee.workers._zygote import zygote_main
zygote_main(int(sys.argv[2]))
"""
)

_MESSAGE = 1 << 20  # largest answer the zygote sends (a pickled dict of a few entries)
_REQUEST_TIMEOUT = 10.0  # seconds a fork or a status may take


class ZygoteError(Exception):
    """The zygote cannot fork a worker now (gone, unsafe, or not answering)."""


class ForkedProcess:
    """A worker forked by the zygote, with what the pool uses of `subprocess.Popen`."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self.zygote = zygote
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """Its exit code (negative: the signal), None while it runs; reaps it."""
        if self.returncode is None:
            self.returncode = self.zygote.status(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        until = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if until is not None and time.monotonic() > until:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0.0)
            time.sleep(0.002)
        return code

    def kill(self) -> None:
        if self.returncode is None:  # not reaped: its pid is still its own
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)


class Zygote:
    """The parent's end of a zygote process. Made (and so started) on the pool's starting
    thread, whose end sends the zygote its parent-death signal."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _BOOT, str(os.getpid()), str(theirs.fileno())],
                stdin=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )
        finally:
            theirs.close()
        self.sock = ours
        self.lock = threading.Lock()
        self.broken: str | None = None
        self.unsafe: str | None = None  # it may not fork: its workers still run, and end
        self.preloaded: set[bytes] = set()  # digests of the rewards it has loaded
        ready = self._request({"op": "path", "path": list(sys.path)}, timeout=START_TIMEOUT)
        if ready.get("ready") != self.proc.pid:
            self.close()
            raise ZygoteError(f"the zygote did not start ({ready})")

    def _request(
        self, message: dict[str, Any], fds: tuple[int, ...] = (), timeout: float = _REQUEST_TIMEOUT
    ) -> dict[str, Any]:
        with self.lock:
            if self.broken:
                raise ZygoteError(self.broken)
            try:
                self.sock.settimeout(timeout)
                socket.send_fds(self.sock, [pickle.dumps(message)], list(fds))
                data = self.sock.recv(_MESSAGE)
                if not data:
                    raise ZygoteError("the zygote ended")
                answer: dict[str, Any] = pickle.loads(data)  # from the zygote: trusted
            except (OSError, pickle.UnpicklingError, EOFError) as exc:
                self.broken = f"the zygote stopped answering ({type(exc).__name__}: {exc})"
                raise ZygoteError(self.broken) from None
            except ZygoteError as exc:
                self.broken = str(exc)
                raise
            if answer.get("unsafe"):
                self.unsafe = str(answer["unsafe"])
            return answer

    def preload(self, payload: bytes) -> None:
        """Load a pickled reward in the zygote (its modules, its `prepare`), once each."""
        digest = hashlib.blake2b(payload, digest_size=16).digest()
        if digest in self.preloaded:
            return
        self.preloaded.add(digest)
        self._request({"op": "preload", "reward": payload, "path": list(sys.path)},
                      timeout=START_TIMEOUT)  # fmt: skip

    def fork(self, to_worker: int, from_worker: int) -> ForkedProcess:
        """A new worker reading `to_worker` and writing `from_worker` (its ends of two pipes:
        the caller closes its copies)."""
        answer = self._request({"op": "fork"}, fds=(to_worker, from_worker))
        if "pid" not in answer:
            raise ZygoteError(self.unsafe or f"the zygote did not fork ({answer})")
        return ForkedProcess(self, int(answer["pid"]))

    def status(self, pid: int) -> int | None:
        """`pid`'s exit code once it has ended (it is reaped then), None while it runs. With
        the zygote gone its workers are gone too (they die with it)."""
        try:
            code = self._request({"op": "status", "pid": pid})["code"]
        except ZygoteError:
            return -signal.SIGKILL
        return None if code is None else int(code)

    def alive(self) -> bool:
        return self.broken is None and self.proc.poll() is None

    def close(self) -> None:
        self.broken = self.broken or "closed"
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            self.proc.wait(timeout=5.0)
        with contextlib.suppress(OSError):
            self.sock.close()


# --- the zygote's side ----------------------------------------------------------------------


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def zygote_main(fd: int) -> None:
    """The zygote's loop: preload rewards, fork workers, report their exits."""
    sock = socket.socket(fileno=fd)
    me = os.getpid()
    unsafe: str | None = None
    import referee.workers._serve  # noqa: F401  (what every worker runs: warm in the zygote)

    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, _MESSAGE, 2)
        except OSError:
            os._exit(0)
        if not data:
            os._exit(0)  # the parent is gone
        message = pickle.loads(data)  # from the parent: trusted
        op = message["op"]
        reply: dict[str, Any]
        if op == "path":
            sys.path[:] = message["path"]
            reply = {"ready": me}
        elif op == "preload":
            sys.path[:] = message["path"]
            _preload(message["reward"])
            if _threads() > 1:
                unsafe = (
                    "a reward's import started a thread in the zygote, which cannot fork "
                    "safely now; workers start as fresh interpreters"
                )
            reply = {"ok": True}
        elif op == "fork":
            if unsafe:
                for each in fds:
                    os.close(each)
                reply = {"unsafe": unsafe}
            else:
                reply = {"pid": _fork(sock, me, fds)}
        else:  # status
            reply = {"code": _status(message["pid"])}
        if unsafe and op != "fork":
            reply.setdefault("unsafe", unsafe)
        sock.send(pickle.dumps(reply))


def _preload(payload: bytes) -> None:
    from referee.workers._serve import prepare

    try:
        reward = pickle.loads(payload)
    except Exception:
        return  # the worker will say why it cannot load it
    prepare(reward)
    del reward
    gc.collect()
    gc.freeze()  # what is loaded now stays shared with every worker forked from here


def _status(pid: int) -> int | None:
    try:
        got, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return -signal.SIGKILL  # not ours (any more)
    return os.waitstatus_to_exitcode(status) if got else None


def _fork(sock: socket.socket, me: int, fds: list[int]) -> int:
    to_worker, from_worker = fds
    pid = os.fork()
    if pid:
        os.close(to_worker)
        os.close(from_worker)
        return pid
    try:  # the new worker: never returns into the zygote's loop
        os.setsid()
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL: die with the zygote
        if os.getppid() != me:
            os._exit(0)
        sock.close()
        from referee.workers._serve import serve

        channel_in = os.fdopen(to_worker, "rb")
        channel_out = os.fdopen(from_worker, "wb")
        (size,) = HEADER.unpack(channel_in.read(HEADER.size))
        sys.path[:] = pickle.loads(channel_in.read(size))
        serve(channel_in, channel_out)
    except BaseException:
        pass
    os._exit(0)
