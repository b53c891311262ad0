"""The pool of warm worker processes (see `referee.workers`)."""

from __future__ import annotations

import asyncio
import math
import os
import pickle
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from referee.errors import RewardError, VerifierTimeout
from referee.rollout import Rollout
from referee.scores import Score
from referee.workers._common import CHUNK, EXTRA, GRACE, SLOW_AFTER, START_TIMEOUT, Scorable
from referee.workers._common import send as _send_frame
from referee.workers._process import NotStarted as _NotStarted
from referee.workers._process import Worker as _Worker
from referee.workers._process import WorkerDied as _WorkerDied
from referee.workers._process import preload as _preload
from referee.workers._process import start as _start

_CALLERS = 64  # coroutines waiting on the pool at once (`WorkerPool.score_async`)
_REWARDS_HELD = 256  # rewards whose pickled form the pool keeps
_UNSTARTED_TRIES = 3  # workers tried in a row that die before a rollout begins


def _dumps_reward(reward: Scorable) -> bytes:
    """The reward, pickled for a fresh interpreter: by reference where its module can be
    imported there, by value (cloudpickle) where it lives in ``__main__`` or a closure."""
    import io

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

        A rollout past ``reward.deadline_seconds`` scores 0 with the reason (``fault:
        timeout``, the policy's verdict; ``Failure("timeout")`` where the reward's
        ``overrun_blame`` is ``infrastructure``); a reward that cannot be sent to a worker
        gives every rollout ``Failure("error")`` saying why.
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

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...], seconds: float) -> Any:
        """``fn(*args)`` in a worker, killed past `seconds`; blocks. Its value travels back
        as JSON (a worker's answer is data, never pickle), so it must be plain data.

        `fn` must pickle by reference (a module-level function); its arguments are pickled.

        Raises:
            VerifierTimeout: It ran past `seconds` (the worker was killed, or stopped it).
            ValueError, TypeError: What `fn` raised, with its message.
            RewardError: `fn` raised anything else, or the worker died twice.
        """
        # Pickled once: a second worker (the first died) is sent the same bytes.
        payload = pickle.dumps({"call": (fn, args), "deadline": seconds}, pickle.HIGHEST_PROTOCOL)
        for attempt in (1, 2):
            worker = self._take()
            start = time.monotonic()
            until = start + seconds + GRACE
            try:
                self._send_bytes(worker, payload)
                self._running[id(worker)] = start
                answer = worker.read(min(until, start + SLOW_AFTER))
                if answer is None and until > start + SLOW_AFTER:
                    worker.lower_priority()
                    self._warm_one()
                    answer = worker.read(until)
            except _WorkerDied as exc:
                self._lost(worker)
                if attempt == 2:
                    message = f"the worker process died in {fn.__name__} ({exc}), twice"
                    raise RewardError(message) from None
                continue
            finally:
                self._running.pop(id(worker), None)
            if answer is None:
                self._lost(worker)  # killed: it ignored its deadline (a spin in C)
                raise VerifierTimeout(f"check did not finish within {seconds:g}s")
            if isinstance(answer, dict) and answer.pop("retired", False) is True:
                self._lost(worker)  # it answered, and exits (`retire`)
            else:
                self._give_back(worker)
            if not isinstance(answer, dict) or not ("value" in answer or "raised" in answer):
                sent = str(answer)[:100]
                raise RewardError(f"the worker process sent {sent!r} from {fn.__name__}")
            if "raised" in answer:
                raise _raised(str(answer["raised"]), str(answer.get("message", "")))
            return answer["value"]
        raise AssertionError("unreachable")  # pragma: no cover

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
        _preload(payload)  # workers forked from now on start with it loaded
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
                failed = Score.failed("error", message, reward.name, "infrastructure")
                return out + [failed] * (len(chunk) - len(out))
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
                failed = Score.failed("error", message, reward.name, "infrastructure")
                return out + [failed] * (len(chunk) - len(out))
            except _WorkerDied as exc:
                self._lost(worker)
                if not alone:
                    retried = True  # the rollout it died on: once more, alone
                    continue
                # Alone, in a fresh worker, twice: what killed it was this rollout.
                message = (
                    f"{reward.name}: the worker process died scoring this rollout ({exc}), twice"
                )
                if _blame(reward) == "policy":
                    out.append(Score.policy_fault("crash", message))
                else:
                    out.append(Score.failed("error", message, reward.name))
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
        (the timed-out rollout's Failure appended) or retired after an answer (`retire`),
        False when it answered every rollout and may be kept.

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
                message = (
                    f"{reward.name} ran past its deadline: its worker process was killed "
                    f"after {now - start:.2f}s (limit {deadline:g}s)"
                )
                if _blame(reward) == "policy":  # its check spun on the policy's output
                    out.append(Score.policy_fault("timeout", message))
                else:
                    out.append(Score.failed("timeout", message, reward.name))
                return True
            if not isinstance(answer, dict) or "reward" not in answer:
                raise _WorkerDied(f"it sent {str(answer)[:100]!r}, not a score")
            retired = answer.pop("retired", False) is True
            out.append(_score_from(answer, reward.name))
            if retired:
                return True  # its last answer (`retire`): the rest goes to another worker
            start = now
        return False

    @staticmethod
    def _send(worker: _Worker, message: dict[str, Any]) -> None:
        WorkerPool._send_bytes(worker, pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))

    @staticmethod
    def _send_bytes(worker: _Worker, payload: bytes) -> None:
        try:
            _send_frame(worker.to_worker, payload)
        except OSError:
            raise _NotStarted(worker.how_it_ended()) from None


def _blame(reward: Scorable) -> str:
    """Whose fault a check past its deadline (or a worker it killed) is: the policy's unless
    the reward says otherwise (`CheckReward.overrun_blame`)."""
    return str(getattr(reward, "overrun_blame", "policy"))


def _raised(kind: str, message: str) -> Exception:
    """What a call raised in a worker, raised again here: the few kinds its callers tell
    apart keep their type; the rest say what they were."""
    if kind == "VerifierTimeout":
        return VerifierTimeout(message)
    if kind == "ValueError":
        return ValueError(message)
    if kind == "TypeError":
        return TypeError(message)
    return RewardError(f"{kind}: {message}")


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
