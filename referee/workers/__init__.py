"""Worker processes: where checks that may spin in C run, so that their deadline holds.

A deadline enforced inside the process (`referee.deadline`) interrupts a check between two
bytecodes. A check that spins inside C with the interpreter lock held (a backtracking stdlib
regex, ``9**9**9**9``, a C extension's loop) never reaches one, and no other thread of the
process runs until it returns: the training step, or `referee serve`, stalls with it. So a
reward that runs code referee did not write (your ``@referee.reward`` functions and
`CheckReward` classes, reasoning-gym's scorers) runs in a worker process here, and at its
deadline the worker is killed: that rollout scores 0 with the reason (the time it took;
`Score.fault` ``timeout``: the policy's verdict, never a masked Failure, docs/threat-model.md,
"Blame"), the rest of the batch is scored, and nothing keeps burning CPU. Where a reward runs
is its ``run_in`` (`RunIn`); `referee types` lists each built-in's.

The pool (`WorkerPool`, one per process, `pool()`):

- **Warm, reused workers, forked by a zygote.** A worker is never a ``fork`` of your process
  (a trainer's threads and CUDA state must not be copied): it is forked by the zygote
  (`referee.workers._zygote`), one fresh interpreter per process that has imported referee and
  loaded each reward the pool sends before it forks, so a worker starts in milliseconds
  instead of an interpreter start and its imports (a worker killed at a deadline is replaced
  at once, even on a machine whose cores are busy). Where the zygote cannot be had
  (``REFEREE_ZYGOTE=0``, a reward whose import starts a thread), a worker is a fresh
  interpreter (``python -c``). Workers are started on first use and kept. A worker gets the
  parent's ``sys.path``, so it imports your modules as the parent does; it never runs your
  ``__main__`` again (no ``if __name__ == "__main__"`` guard needed: a ``multiprocessing``
  pool's forkserver would import your script again, and run its top-level code), and a reward
  defined in ``__main__``, a notebook or a closure travels by value (cloudpickle). Its size is
  ``REFEREE_WORKERS`` (default: the CPUs this process may use, at most 8).
- **Chunks, not calls.** A batch is cut into one chunk per worker (at most `CHUNK` rollouts);
  a worker scores its chunk in order and answers rollout by rollout, so the parent knows which
  rollout is running and since when. The reward is sent once per worker, not per chunk.
- **Deadlines.** Inside the worker each rollout also runs under the in-process deadline, which
  stops a Python loop and keeps the worker. Past a rollout's deadline plus `GRACE` with no
  answer, the parent kills the worker's process group: that rollout scores 0 with the reason
  (``fault: timeout``; ``Failure("timeout")`` where the reward's ``overrun_blame`` is
  ``infrastructure``), and the rest of its chunk goes on in another worker.
- **A worker that dies** (a segfault, the OOM killer, ``os._exit``) while scoring a rollout:
  that rollout is scored again alone in a fresh worker, once; if that worker dies too, it
  scores 0 with a reason naming the signal or exit status (``fault: crash``: the rollout did
  it). A worker that cannot start is ``Failure("error")``, the infrastructure's. One bad
  rollout costs only itself.
- **Answers are data.** A worker answers in JSON (`Score.to_dict`), never pickle: the code it
  runs sees the policy's text (a reward that ``eval``s it), and what it sends cannot run code
  in the parent. Answers are capped (`MAX_REPLY_BYTES`). A worker is a deadline boundary, not
  a security boundary: code that must not reach the host runs in the sandbox
  (docs/threat-model.md).
- A worker dies with its parent (``PR_SET_PDEATHSIG``, through the zygote), and at the
  parent's exit.
- **A worker that retires** (`retire`, from a check that left a thread it cannot stop:
  SQLite spinning in C past a query's own limit) answers its rollout, then exits; the rest
  of its chunk goes on in another worker, as after a kill.
- **Calls.** `WorkerPool.call` runs one function (``fn(*args)``, answered as JSON) in a
  worker under a deadline: how ``verify_math`` keeps its deadline off the main thread. There
  is one mechanism for "a check that may spin in C", this one.

The cost per rollout on this path is a pickle of the rollout and a JSON answer
(``benchmarks/bench_process.py`` prints it against the inline path).
"""

from __future__ import annotations

import atexit
import os
import threading

from referee.workers._common import (
    CHUNK,
    GRACE,
    MAX_REPLY_BYTES,
    RUN_IN,
    RunIn,
    Scorable,
    check_run_in,
    in_worker,
    retire,
)
from referee.workers._pool import WorkerPool
from referee.workers._process import after_fork as _process_after_fork
from referee.workers._process import close_zygote as _close_zygote

__all__ = [
    "CHUNK",
    "GRACE",
    "MAX_REPLY_BYTES",
    "RUN_IN",
    "RunIn",
    "Scorable",
    "WorkerPool",
    "check_run_in",
    "in_worker",
    "pool",
    "retire",
]

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


atexit.register(_close_zygote)


def _after_fork() -> None:
    """A forked child shares none of its parent's workers (nor its starting thread)."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()
    _process_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
