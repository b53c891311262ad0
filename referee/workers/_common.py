"""What every part of the worker pool shares: where a check runs, the limits, the framing."""

from __future__ import annotations

import struct
from typing import Any, Final, Literal, Protocol, TypeAlias

from referee.rollout import Rollout
from referee.scores import Score

RunIn: TypeAlias = Literal["inline", "thread", "process"]
"""Where a reward's check runs:

- ``inline``: in the caller's thread; its deadline interrupts Python code between bytecodes
  (`referee.deadline`), not C code. For checks whose cost is bounded: referee's built-ins.
- ``thread``: in a thread of its own; at the deadline the caller stops waiting and the rollout
  fails, whatever the thread does. For a check that blocks without holding the interpreter
  lock (``time.sleep``, I/O); a C spin that holds the lock still stalls the process.
- ``process``: in a worker process (`WorkerPool`), killed at the deadline. The default for
  code referee did not write, and for built-ins whose check may spin in C (``math_answer``:
  sympy).
"""
RUN_IN: Final[tuple[RunIn, ...]] = ("inline", "thread", "process")

CHUNK: Final = 64
"""Most rollouts sent to a worker at once."""

GRACE: Final = 0.05
"""Seconds past a rollout's deadline the parent waits for its answer before it kills the
worker (inside the worker the in-process deadline has fired by then, for Python code, a few
milliseconds after the deadline: a worker kept is a start-up saved)."""

MAX_REPLY_BYTES = 16 << 20
"""Largest answer a worker may send for one rollout."""

SLOW_AFTER: Final = 0.25
"""Seconds on one rollout after which a worker counts as stuck (see `WorkerPool._limit`)."""

EXTRA: Final = 8
"""Most workers the pool starts beyond its size while others are stuck."""

START_TIMEOUT: Final = 120.0
"""Seconds a new worker may take to start (import referee and its dependencies)."""

HEADER = struct.Struct("<I")

BOOT_PREFIX: Final = """
import ctypes, os, pickle, struct, sys
try:
    ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL: die with the parent
except Exception:
    pass
if os.getppid() != int(sys.argv[1]):
    os._exit(0)
"""
"""How a worker's or the zygote's ``python -c`` begins: it dies with the thread that started
it, and ends at once where that was gone before it could say so."""

_state = {"in_worker": False, "retire": False}


def in_worker() -> bool:
    """Whether this process is a referee worker (where every reward runs inline)."""
    return _state["in_worker"]


def mark_worker() -> None:
    """This process is a worker from now on (its loop calls it first)."""
    _state["in_worker"] = True


def retire() -> None:
    """This worker answers the rollout (or call) it is on, then exits, and the parent gives
    what is left of its chunk to another: for a check that leaves behind a thread it cannot
    stop (SQLite spinning in C past a query's limit), so that nothing burns CPU after its
    verdict. Outside a worker it does nothing."""
    if _state["in_worker"]:
        _state["retire"] = True


def retiring() -> bool:
    """Whether this worker exits after its current answer (`retire`)."""
    return _state["retire"]


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


def send(fh: Any, payload: bytes) -> None:
    """One frame: its length, then its bytes."""
    fh.write(HEADER.pack(len(payload)))
    fh.write(payload)
    fh.flush()
