"""Unprivileged uids for sandbox jobs, claimed so that no two workers on a host share one.

Jobs run as a uid of their own (as root), so that resource limits counted per uid
(RLIMIT_NPROC) and the cleanup that kills "every process of this uid" only ever concern one
worker's jobs, even when several referee processes run on the same machine. A uid is claimed
with an exclusive lock on a file; the kernel drops the lock when the holder exits, however it
exits, so a crashed process never leaks its uids.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import threading

__all__ = ["UidClaim", "claim_uid", "claimed"]

_DIR = os.path.join(tempfile.gettempdir(), "referee-sandbox-uids")
_lock = threading.Lock()
_held: dict[int, UidClaim] = {}


class UidClaim:
    """A uid held by this process until `release` (or exit)."""

    def __init__(self, uid: int, fd: int) -> None:
        self.uid = uid
        self._fd: int | None = fd

    def release(self) -> None:
        with _lock:
            if self._fd is not None:
                os.close(self._fd)  # closing drops the lock
                self._fd = None
                _held.pop(self.uid, None)


def claim_uid(first: int, count: int = 1000) -> UidClaim:
    """Claim a free uid in ``[first, first + count)``.

    Raises:
        RuntimeError: Every uid in the range is held.
    """
    os.makedirs(_DIR, mode=0o700, exist_ok=True)
    with _lock:
        for uid in range(first, first + count):
            if uid in _held:
                continue
            fd = os.open(os.path.join(_DIR, f"{uid}.lock"), os.O_CREAT | os.O_RDWR, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            except BaseException:
                with contextlib.suppress(OSError):
                    os.close(fd)
                raise
            claim = _held[uid] = UidClaim(uid, fd)
            return claim
    raise RuntimeError(f"no free sandbox uid in [{first}, {first + count})")


def claimed() -> set[int]:
    """The uids this process holds now."""
    with _lock:
        return set(_held)
