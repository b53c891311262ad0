"""Worker processes: where checks that may spin in C run, so that their deadline holds.

A deadline enforced inside the process (`referee.deadline`) interrupts a check between two
bytecodes. A check that spins inside C with the interpreter lock held (a backtracking stdlib
regex, ``9**9**9**9``, a C extension's loop) never reaches one, and no other thread of the
process runs until it returns: the training step, or `referee serve`, stalls with it. So a
reward that runs code referee did not write (your ``@referee.reward`` functions and
`CheckReward` classes, reasoning-gym's scorers) runs in a worker process here, and at its
deadline the worker is killed: that rollout gets ``Failure("timeout")`` with the time it took,
the rest of the batch is scored, and nothing keeps burning CPU. Where a reward runs is its
``run_in`` (`RunIn`); `referee types` lists each built-in's.

The pool (`WorkerPool`, one per process, `pool()`):

- **Warm, reused workers.** A worker is a fresh interpreter (``python -c``, not ``fork``: a
  trainer's threads and CUDA state must not be copied), started on first use and kept. It gets
  the parent's ``sys.path``, so it imports your modules as the parent does; it never runs your
  ``__main__`` again (no ``if __name__ == "__main__"`` guard needed), and a reward defined in
  ``__main__``, a notebook or a closure travels by value (cloudpickle). Its size is
  ``REFEREE_WORKERS`` (default: the CPUs this process may use, at most 8).
- **Chunks, not calls.** A batch is cut into one chunk per worker (at most `CHUNK` rollouts);
  a worker scores its chunk in order and answers rollout by rollout, so the parent knows which
  rollout is running and since when. The reward is sent once per worker, not per chunk.
- **Deadlines.** Inside the worker each rollout also runs under the in-process deadline, which
  stops a Python loop and keeps the worker. Past a rollout's deadline plus `GRACE` with no
  answer, the parent kills the worker's process group: that rollout gets
  ``Failure("timeout")``, and the rest of its chunk goes on in another worker.
- **A worker that dies** (a segfault, the OOM killer, ``os._exit``) while scoring a rollout:
  that rollout is scored again alone in a fresh worker, once; if that worker dies too, it gets
  ``Failure("error")`` naming the signal or exit status. One bad rollout costs only itself.
- **Answers are data.** A worker answers in JSON (`Score.to_dict`), never pickle: the code it
  runs sees the policy's text (a reward that ``eval``s it), and what it sends cannot run code
  in the parent. Answers are capped (`MAX_REPLY_BYTES`). A worker is a deadline boundary, not
  a security boundary: code that must not reach the host runs in the sandbox
  (docs/threat-model.md).
- A worker dies with its parent (``PR_SET_PDEATHSIG``), and at the parent's exit.

The cost per rollout on this path is a pickle of the rollout and a JSON answer
(``benchmarks/bench_process.py`` prints it against the inline path).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import io
import json
import logging
import math
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, Literal, Protocol, TypeAlias

from referee.rollout import Rollout
from referee.scores import Score

__all__ = [
    "CHUNK",
    "GRACE",
    "MAX_REPLY_BYTES",
    "RUN_IN",
    "RunIn",
    "WorkerPool",
    "in_worker",
    "pool",
]

logger = logging.getLogger("referee")

RunIn: TypeAlias = Literal["inline", "thread", "process"]
"""Where a reward's check runs:

- ``inline``: in the caller's thread; its deadline interrupts Python code between bytecodes
  (`referee.deadline`), not C code. For checks whose cost is bounded: referee's built-ins.
- ``thread``: in a thread of its own; at the deadline the caller stops waiting and the rollout
  fails, whatever the thread does. For a check that blocks without holding the interpreter
  lock (``time.sleep``, I/O); a C spin that holds the lock still stalls the process.
- ``process``: in a worker process (`WorkerPool`), killed at the deadline. The default for
  code referee did not write.
"""
RUN_IN: Final[tuple[RunIn, ...]] = ("inline", "thread", "process")

CHUNK: Final = 64
"""Most rollouts sent to a worker at once."""

GRACE: Final = 0.05
"""Seconds past a rollout's deadline the parent waits for its answer before it kills the
worker (inside the worker the in-process deadline has fired by then, for Python code, a few
milliseconds after the deadline: a worker kept is a start-up saved)."""

MAX_REPLY_BYTES: Final = 16 << 20
"""Largest answer a worker may send for one rollout."""

SLOW_AFTER: Final = 0.25
"""Seconds on one rollout after which a worker counts as stuck (see `WorkerPool._limit`)."""

EXTRA: Final = 8
"""Most workers the pool starts beyond its size while others are stuck."""

START_TIMEOUT: Final = 120.0
"""Seconds a new worker may take to start (import referee and its dependencies)."""

_HEADER = struct.Struct("<I")
_REST_OF_ANSWER = 10.0  # seconds the rest of an answer may take once its first bytes came
_CALLERS = 64  # coroutines waiting on the pool at once (`WorkerPool.score_async`)
_REWARDS_HELD = 256  # rewards whose pickled form the pool keeps
_IN_WORKER = False


def in_worker() -> bool:
    """Whether this process is a referee worker (where every reward runs inline)."""
    return _IN_WORKER


class Scorable(Protocol):
    """What the pool needs of a reward (`referee.reward.CheckReward` has it; this layer is
    below the reward layer, so it names the shape, not the class)."""

    @property
    def name(self) -> str: ...

    @property
    def deadline_seconds(self) -> float | None: ...

    def check_within(self, rollout: Rollout, seconds: float | None) -> Score: ...


def check_run_in(value: object, where: str) -> RunIn | None:
    """`value` as a `RunIn` (None stays None).

    Raises:
        ValueError: It is not one of ``inline``, ``thread``, ``process``.
    """
    if value is None or value in RUN_IN:
        return value
    raise ValueError(f"{where}: run_in must be one of {' | '.join(RUN_IN)}, got {value!r}")


# --- what travels to a worker ---------------------------------------------------------------


def _dumps_reward(reward: Scorable) -> bytes:
    """The reward, pickled for a fresh interpreter: by reference where its module can be
    imported there, by value (cloudpickle) where it lives in ``__main__`` or a closure."""
    import cloudpickle  # type: ignore[import-untyped]

    class _Pickler(cloudpickle.Pickler):  # type: ignore[misc]
        def reducer_override(self, obj: Any) -> Any:
            # A `@referee.reward` function of __main__ pickles by reference to __main__,
            # which in a worker is not yours: it says how to rebuild it from its function.
            by_value = getattr(obj, "by_value", None)
            fn = getattr(obj, "fn", None)
            if callable(by_value) and getattr(fn, "__module__", None) == "__main__":
                return by_value()
            return super().reducer_override(obj)

    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(reward)
    return buffer.getvalue()


def _send(fh: Any, payload: bytes) -> None:
    fh.write(_HEADER.pack(len(payload)))
    fh.write(payload)
    fh.flush()


# --- the parent's side ----------------------------------------------------------------------

_BOOT = """
import ctypes, os, pickle, struct, sys
try:
    ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL: die with the parent
except Exception:
    pass
if os.getppid() != int(sys.argv[1]):
    os._exit(0)
channel_in, channel_out = os.fdopen(os.dup(0), "rb"), os.fdopen(os.dup(1), "wb")
null = os.open(os.devnull, os.O_RDONLY)
os.dup2(null, 0)
os.dup2(2, 1)  # what a reward prints goes to stderr, never into the channel
(size,) = struct.unpack("<I", channel_in.read(4))
sys.path[:] = pickle.loads(channel_in.read(size))
from referee.workers import _serve
_serve(channel_in, channel_out)
"""


class _WorkerDied(Exception):
    """A worker ended (or stopped answering sense) while it scored a rollout."""


class _NotStarted(_WorkerDied):
    """A worker ended before it began scoring (while idle, or loading the reward)."""


_UNSTARTED_TRIES = 3  # workers tried in a row that die before a rollout begins


def _start() -> _Worker:
    """A new worker, started from the pool's one long-lived thread: the kernel sends a child
    its parent-death signal when the *thread* that forked it ends, so a worker started from a
    caller's thread (``asyncio.to_thread``'s, gone after ``asyncio.run``) would die with it."""
    return _starter().submit(_Worker).result()


_starter_pool: ThreadPoolExecutor | None = None


def _starter() -> ThreadPoolExecutor:
    global _starter_pool
    with _pool_lock:
        if _starter_pool is None:
            _starter_pool = ThreadPoolExecutor(1, "referee-worker-start")
        return _starter_pool


class _Worker:
    """One worker process and its channel."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT, str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,  # its own process group: killed with what it started
        )
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.to_worker = self.proc.stdin
        self.from_worker = self.proc.stdout
        self.fd = self.from_worker.fileno()
        self.poll = select.poll()  # not select(): a busy trainer's fds are past FD_SETSIZE
        self.poll.register(self.fd, select.POLLIN)
        self.rewards: dict[int, None] = {}  # ids of the reward entries it holds
        self.ready = False
        self.niced = False
        _send(self.to_worker, pickle.dumps(sys.path))

    def wait_ready(self) -> None:
        if not self.ready:
            if self.read(time.monotonic() + START_TIMEOUT) != {"ready": True}:
                raise _WorkerDied("the worker did not start")
            self.ready = True

    def read(self, until: float) -> Any:
        """The next answer (parsed JSON), None at `until` (math.inf: no limit).

        Raises:
            _WorkerDied: It ended, or sent what is not an answer.
        """
        header = self._exactly(_HEADER.size, until)
        if header is None:
            return None
        (size,) = _HEADER.unpack(header)
        if size > MAX_REPLY_BYTES:
            raise _WorkerDied(f"its answer of {size} bytes is over {MAX_REPLY_BYTES}")
        body = self._exactly(size, math.inf)
        try:
            return json.loads(body) if body is not None else None
        except ValueError:
            raise _WorkerDied("it sent an answer that is not JSON") from None

    def _exactly(self, size: int, until: float) -> bytes | None:
        parts: list[bytes] = []
        left = size
        while left:
            if parts:  # the rest of an answer begun: it comes at once, or never
                until = max(until, time.monotonic() + _REST_OF_ANSWER)
            wait = None if until == math.inf else max(0.0, until - time.monotonic())
            if wait is not None and not self.poll.poll(wait * 1000):
                if parts:  # half an answer: it is stuck mid-write, or dead
                    raise _WorkerDied("it stopped mid-answer")
                return None
            chunk = os.read(self.fd, min(left, 1 << 20))
            if not chunk:
                raise _WorkerDied(self.how_it_ended())
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
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            self.proc.wait(timeout=5.0)
        for fh in (self.to_worker, self.from_worker):
            with contextlib.suppress(OSError):
                fh.close()


class _RewardEntry:
    """A reward as the pool sends it: pickled once, numbered."""

    __slots__ = ("key", "payload")

    def __init__(self, key: int, payload: bytes) -> None:
        self.key = key
        self.payload = payload


class WorkerPool:
    """Warm worker processes that score chunks of rollouts (see the module docstring).

    Args:
        size: Most workers (default: ``REFEREE_WORKERS``, else the CPUs this process may
            use, at most 8).
    """

    def __init__(self, size: int | None = None) -> None:
        self.size = size or _default_size()
        self._idle: list[_Worker] = []
        self._started = 0
        # id(worker) -> when the rollout it is scoring now began: a worker on one rollout for
        # longer than SLOW_AFTER is taken for stuck, and lets the pool start one more.
        self._running: dict[int, float] = {}
        self._lock = threading.Condition()
        # id(reward) -> (reward, its entry), the most recent last: a reward need not be hashable
        # (a dataclass) nor weakly referable (slots); holding it keeps its id its own.
        self._entries: OrderedDict[int, tuple[Any, _RewardEntry]] = OrderedDict()
        self._next_key = 0
        self._threads: ThreadPoolExecutor | None = None
        self._callers: ThreadPoolExecutor | None = None
        self._closed = False

    # -- the public call

    def score(self, reward: Scorable, rollouts: Sequence[Rollout]) -> list[Score]:
        """One Score per rollout, scored by `reward` in the workers; blocks.

        A rollout past ``reward.deadline_seconds`` gets ``Failure("timeout")``; a reward that
        cannot be sent to a worker gives every rollout ``Failure("error")`` saying why.
        """
        if not rollouts:
            return []
        try:
            entry = self._entry(reward)
        except Exception as exc:
            message = (
                f"{reward.name} cannot be sent to a worker process ({type(exc).__name__}: "
                f"{exc}); make it picklable, or set run_in: inline"
            )
            return [Score.failed("error", message, reward.name)] * len(rollouts)
        deadline = reward.deadline_seconds
        count = len(rollouts)
        per = min(CHUNK, max(1, math.ceil(count / self.size)))
        chunks = [list(rollouts[i : i + per]) for i in range(0, count, per)]
        if len(chunks) == 1:
            return self._chunk(reward, entry, deadline, chunks[0])
        threads = self._executor()
        futures = [threads.submit(self._chunk, reward, entry, deadline, c) for c in chunks]
        return [s for f in futures for s in f.result()]

    async def score_async(self, reward: Scorable, rollouts: Sequence[Rollout]) -> list[Score]:
        """`score` from a coroutine: the wait is on one of the pool's own threads, never on
        the event loop's default executor, whose few threads stuck calls would all hold
        (`referee serve` with requests spinning until their deadline)."""
        with self._lock:
            if self._callers is None:
                self._callers = ThreadPoolExecutor(_CALLERS, "referee-workers-wait")
            callers = self._callers
        return await asyncio.wrap_future(callers.submit(self.score, reward, rollouts))

    def close(self) -> None:
        """Stop every worker (idle ones now; busy ones as they come back)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.kill()
        for threads in (self._threads, self._callers):
            if threads is not None:
                threads.shutdown(wait=False)

    # -- inside

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._threads is None:
                self._threads = ThreadPoolExecutor((self.size + EXTRA) * 2, "referee-workers")
            return self._threads

    def _entry(self, reward: Scorable) -> _RewardEntry:
        with self._lock:
            held = self._entries.get(id(reward))
            if held is not None and held[0] is reward:
                self._entries.move_to_end(id(reward))
                return held[1]
        payload = _dumps_reward(reward)
        with self._lock:
            self._next_key += 1
            entry = _RewardEntry(self._next_key, payload)
            self._entries[id(reward)] = (reward, entry)
            while len(self._entries) > _REWARDS_HELD:
                self._entries.popitem(last=False)
        return entry

    def _take(self) -> _Worker:
        with self._lock:
            while True:
                while self._idle:
                    worker = self._idle.pop()
                    if worker.proc.poll() is None:
                        return worker
                    self._started -= 1  # it died idle (killed from outside): forget it
                    worker.kill()
                if self._started < self._limit():
                    self._started += 1
                    break
                # Someone may become stuck meanwhile, and make room: look again soon.
                self._lock.wait(SLOW_AFTER / 2 if self._running else None)
        try:
            worker = _start()
            worker.wait_ready()
        except BaseException:
            self._lost(None)
            raise
        return worker

    def _limit(self) -> int:
        """Workers the pool may have now: its size, plus one per worker stuck on a rollout
        (at most `EXTRA`), so that checks spinning until their deadline cannot make every
        other batch wait behind them (`referee serve` with stuck requests)."""
        now = time.monotonic()
        stuck = sum(1 for began in list(self._running.values()) if now - began > SLOW_AFTER)
        return self.size + min(stuck, EXTRA)

    def _warm_one(self) -> None:
        """Start a worker in the background, for the next chunk (after one was killed, or
        while one is stuck), where the pool may have one more (`_limit`)."""
        with self._lock:
            if self._closed or self._idle or self._started >= self._limit():
                return
            self._started += 1

        def warm() -> None:
            try:
                worker = _start()
                worker.wait_ready()
            except Exception:
                self._lost(None)
                return
            self._give_back(worker)

        # Its own short thread waits for it; the start itself is on the starting thread.
        threading.Thread(target=warm, name="referee-worker-warm", daemon=True).start()

    def _give_back(self, worker: _Worker) -> None:
        if not worker.restore_priority():
            self._lost(worker)
            return
        with self._lock:
            if not self._closed:
                self._idle.append(worker)
                self._lock.notify()
                return
        worker.kill()
        self._lost(None)

    def _lost(self, worker: _Worker | None) -> None:
        with self._lock:
            self._started -= 1
            self._lock.notify()
        if worker is not None:
            worker.kill()
            self._warm_one()  # the next chunk finds a warm one, not a start-up

    def _chunk(
        self, reward: Scorable, entry: _RewardEntry, deadline: float | None, chunk: list[Rollout]
    ) -> list[Score]:
        """Score `chunk` in order in one worker, and what a killed or dead one left in others."""
        out: list[Score] = []
        retried = False  # the rollout at out[len(out)] has been scored alone once already
        unstarted = 0  # workers that died before they began a rollout
        while len(out) < len(chunk):
            try:
                worker = self._take()
            except Exception as exc:
                message = f"{reward.name}: cannot start a worker process ({exc})"
                return out + [Score.failed("error", message, reward.name)] * (len(chunk) - len(out))
            alone = retried
            todo = chunk[len(out) : len(out) + 1] if alone else chunk[len(out) :]
            try:
                ended = self._run(worker, reward, entry, deadline, todo, out)
            except _NotStarted as exc:  # it died before the rollout began: not the rollout's
                self._lost(worker)
                unstarted += 1
                if unstarted <= _UNSTARTED_TRIES:
                    continue
                message = f"{reward.name}: no worker process would take the rollouts ({exc})"
                return out + [Score.failed("error", message, reward.name)] * (len(chunk) - len(out))
            except _WorkerDied as exc:
                self._lost(worker)
                if not alone:
                    retried = True  # the rollout it died on: once more, alone
                    continue
                out.append(
                    Score.failed(
                        "error",
                        f"{reward.name}: the worker process died scoring this rollout "
                        f"({exc}), twice",
                        reward.name,
                    )
                )
                retried = False
                continue
            retried = False
            if ended:
                self._lost(worker)  # killed at a deadline: the rest goes to another worker
            else:
                self._give_back(worker)
        return out

    def _run(
        self,
        worker: _Worker,
        reward: Scorable,
        entry: _RewardEntry,
        deadline: float | None,
        todo: list[Rollout],
        out: list[Score],
    ) -> bool:
        """Score `todo` in `worker`, appending to `out`; True when it was killed at a deadline
        (the timed-out rollout's Failure appended), False when it answered every rollout.

        Raises:
            _WorkerDied: It died, or answered nonsense, on the rollout at ``out[len(out)]``.
        """
        if entry.key not in worker.rewards:
            # Loaded first, outside the deadline: unpickling imports the reward's module.
            # With this process's sys.path as it is now: a module added since the worker
            # started (a plugin's folder) must import there too.
            self._send(worker, {"key": entry.key, "reward": entry.payload, "path": sys.path})
            try:
                loaded = worker.read(time.monotonic() + START_TIMEOUT)
            except _WorkerDied as exc:
                raise _NotStarted(str(exc)) from None
            if loaded != {"loaded": entry.key}:
                raise _NotStarted("it did not load the reward")
            worker.rewards[entry.key] = None
        self._send(worker, {"key": entry.key, "deadline": deadline, "rollouts": todo})
        start = time.monotonic()
        try:
            return self._answers(worker, reward, deadline, todo, out, start)
        finally:
            self._running.pop(id(worker), None)

    def _answers(
        self,
        worker: _Worker,
        reward: Scorable,
        deadline: float | None,
        todo: list[Rollout],
        out: list[Score],
        start: float,
    ) -> bool:
        """`_run`'s second half: read `worker`'s answers to `todo`, one per rollout."""
        for _ in todo:
            self._running[id(worker)] = start
            until = math.inf if deadline is None else start + deadline + GRACE
            answer = worker.read(min(until, start + SLOW_AFTER))
            if answer is None and until > start + SLOW_AFTER:
                worker.lower_priority()  # stuck, maybe spinning: the others' checks come first
                self._warm_one()  # and a worker for them, started now rather than on demand
                answer = worker.read(until)
            now = time.monotonic()
            if answer is None:
                worker.kill()
                out.append(
                    Score.failed(
                        "timeout",
                        f"{reward.name} ran past its deadline: its worker process was killed "
                        f"after {now - start:.2f}s (limit {deadline:g}s)",
                        reward.name,
                    )
                )
                return True
            if not isinstance(answer, dict) or "reward" not in answer:
                raise _WorkerDied(f"it sent {str(answer)[:100]!r}, not a score")
            out.append(_score_from(answer, reward.name))
            start = now
        return False

    @staticmethod
    def _send(worker: _Worker, message: dict[str, Any]) -> None:
        try:
            _send(worker.to_worker, pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))
        except OSError:
            raise _NotStarted(worker.how_it_ended()) from None


def _score_from(answer: dict[str, Any], name: str) -> Score:
    try:
        return Score.from_dict(answer)
    except Exception as exc:  # a field of the wrong type
        return Score.failed("error", f"{name}: the worker's answer is not a score ({exc})", name)


def _default_size() -> int:
    env = os.environ.get("REFEREE_WORKERS")
    if env:
        try:
            size = int(env)
        except ValueError:
            raise ValueError(f"REFEREE_WORKERS must be a whole number, got {env!r}") from None
        if size < 1:
            raise ValueError(f"REFEREE_WORKERS must be at least 1, got {size}")
        return size
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(8, cpus))


_pool: WorkerPool | None = None
_pool_lock = threading.Lock()


def pool() -> WorkerPool:
    """This process's worker pool, made on first use."""
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = WorkerPool()
                atexit.register(_pool.close)
    return _pool


def _after_fork() -> None:
    """A forked child shares none of its parent's workers (nor its starting thread)."""
    global _pool, _pool_lock, _starter_pool
    _pool, _pool_lock, _starter_pool = None, threading.Lock(), None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


# --- the worker's side ----------------------------------------------------------------------


def _serve(channel_in: Any, channel_out: Any) -> None:
    """A worker's loop: load rewards, score chunks inline, answer each rollout in JSON."""
    global _IN_WORKER
    _IN_WORKER = True
    rewards: dict[int, Any] = {}
    answer(channel_out, {"ready": True})
    while True:
        header = channel_in.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return  # the parent is gone
        (size,) = _HEADER.unpack(header)
        message = pickle.loads(channel_in.read(size))  # from the parent: trusted
        key = message["key"]
        if "reward" in message:
            sys.path[:] = message["path"]
            try:
                rewards[key] = pickle.loads(message["reward"])
            except Exception as exc:
                rewards[key] = exc
            answer(channel_out, {"loaded": key})
            continue
        reward = rewards[key]
        for rollout in message["rollouts"]:
            if isinstance(reward, Exception):
                name = "reward"
                score = Score.failed(
                    "error",
                    f"the worker process cannot load the reward ({type(reward).__name__}: "
                    f"{reward}); is its module importable from sys.path?",
                )
            else:
                name = reward.name
                score = reward.check_within(rollout, message["deadline"])
            try:
                body = json.dumps(score.to_dict(), allow_nan=False)
            except (TypeError, ValueError) as exc:
                body = json.dumps(
                    Score.failed("error", f"its score cannot be sent: {exc}", name).to_dict()
                )
            answer(channel_out, body)


def answer(channel_out: Any, body: Any) -> None:
    payload = (body if isinstance(body, str) else json.dumps(body)).encode()
    _send(channel_out, payload)
