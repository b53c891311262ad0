"""An ORS environment's sessions: one per episode, at most ``max_sessions`` open, each closed
by its client or by the reaper once it has been idle ``timeout`` seconds."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from referee.backends._guard import BadRequest
from referee.backends.ors.tasks import Task

__all__ = ["DEFAULT_MAX_SESSIONS", "DEFAULT_SESSION_TIMEOUT", "Session", "Sessions"]

DEFAULT_SESSION_TIMEOUT = 900.0
"""Seconds a session may go without a request (the SDK pings every 10) before it is closed:
the reference server's."""
DEFAULT_MAX_SESSIONS = 4096
"""Sessions open at once. A trainer holds one per rollout of a generation batch, until its next
batch (TRL's OpenReward integration closes one when it resets it): more than a batch."""
MAX_SID = 256
"""Characters of a session id; the SDK's are UUIDs."""


@dataclass
class Session:
    """One episode: its task, whether it has finished, and its latest tool call.

    Attributes:
        sid: The client's session id (``X-Session-ID``).
        task: What the episode is about.
        seen: When a request last named it (`Sessions.clock`).
        finished: Set once an answer was scored: later calls are refused.
        call_id: The latest call's SSE task id, which a client may resume it by.
        call: That call, running or done: its result, as JSON.
    """

    sid: str
    task: Task
    seen: float
    finished: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    call_id: str | None = None
    call: asyncio.Future[str] | None = None

    @property
    def busy(self) -> bool:
        """Whether a call is running (the reaper leaves the session until it is done)."""
        return self.call is not None and not self.call.done()


def session_id(header: str | None) -> str:
    """The session id a request names in ``X-Session-ID``; else a 400 that says why."""
    sid = (header or "").strip()
    if not sid:
        raise BadRequest(400, "missing_session", "the X-Session-ID header is required")
    if len(sid) > MAX_SID:
        raise BadRequest(
            400, "invalid_session", f"X-Session-ID has {len(sid)} characters, over {MAX_SID}"
        )
    return sid


class Sessions:
    """The open sessions, bounded in number and in idle time.

    Args:
        timeout: Seconds without a request after which `reap` closes a session (one with a
            call running excepted).
        cap: The most sessions open at once; `open` refuses more (503, which the SDK
            retries).
        clock: Seconds, monotonic.
    """

    def __init__(
        self, timeout: float, cap: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.timeout = timeout
        self.cap = cap
        self.clock = clock
        self._open: dict[str, Session] = {}

    def __len__(self) -> int:
        return len(self._open)

    def open(self, sid: str, task: Task) -> Session:
        """A new session for `task`; 400 if `sid` is open, 503 past the cap."""
        if sid in self._open:
            raise BadRequest(400, "session_exists", f"session {sid!r} already exists")
        if len(self._open) >= self.cap:
            raise BadRequest(
                503, "too_many_sessions",
                f"{len(self._open)} sessions are open, the server's max_sessions; close "
                f"finished ones (the SDK's session context manager does), or start the server "
                f"with a higher --max-sessions",
                headers={"Retry-After": "1"},
            )  # fmt: skip
        session = Session(sid, task, self.clock())
        self._open[sid] = session
        return session

    def get(self, sid: str) -> Session:
        """The open session `sid`, marked as seen now; 404 if there is none (never opened,
        closed, or reaped)."""
        session = self._open.get(sid)
        if session is None:
            raise BadRequest(
                404, "unknown_session",
                f"no active session {sid[:64]!r}: never created (POST /create), deleted, or "
                f"closed after {self.timeout:g}s without a request",
            )  # fmt: skip
        session.seen = self.clock()
        return session

    def close(self, sid: str) -> bool:
        """Close `sid`; whether it was open. A call it has running finishes for its stream."""
        return self._open.pop(sid, None) is not None

    def reap(self) -> list[str]:
        """Close the sessions idle past `timeout` (none with a call running); their ids."""
        stale = self.clock() - self.timeout
        gone = [s.sid for s in self._open.values() if s.seen < stale and not s.busy]
        for sid in gone:
            del self._open[sid]
        return gone

    def clear(self) -> None:
        self._open.clear()
