"""Unprivileged uids for sandbox jobs, claimed so that no two workers on a host share one.

Jobs run as a uid of their own (as root), so that resource limits counted per uid
(RLIMIT_NPROC) and the cleanup that kills "every process of this uid" only ever concern one
worker's jobs, even when several referee processes run on the same machine. A uid is claimed
with an exclusive lock on a file; the kernel drops the lock when the holder exits, however it
exits, so a crashed process never leaks its uids.

The lock files live in a directory only this user can write: ``/run/referee-sandbox-uids``
as root, else ``referee-sandbox-uids-UID`` in the temporary directory. It is checked before
use (a real directory, ours, writable by no one else), and a lock file is never opened
through a symlink, so no one else can make a claim create or truncate a file elsewhere.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import stat
import tempfile
import threading

from referee.errors import SandboxError

__all__ = ["UidClaim", "claim_uid", "claimed"]

logger = logging.getLogger("referee.sandbox")


def _default_dir() -> str:
    if os.geteuid() == 0 and os.path.isdir("/run") and os.access("/run", os.W_OK):
        return "/run/referee-sandbox-uids"
    return os.path.join(tempfile.gettempdir(), f"referee-sandbox-uids-{os.geteuid()}")


_DIR = _default_dir()
_lock = threading.Lock()
_held: dict[int, UidClaim] = {}
_OPEN_FLAGS = os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK


def _private_dir(path: str) -> None:
    """Make `path` (ours, mode 0700), or check that it is a directory only we can write.

    Raises:
        SandboxError: It is a symlink, not a directory, someone else's, or writable by others.
    """
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    info = os.lstat(path)
    problem = None
    if stat.S_ISLNK(info.st_mode):
        problem = "is a symlink"
    elif not stat.S_ISDIR(info.st_mode):
        problem = "is not a directory"
    elif info.st_uid != os.geteuid():
        problem = f"belongs to uid {info.st_uid}, not to {os.geteuid()}"
    elif info.st_mode & 0o022:
        problem = f"is writable by others (mode {stat.S_IMODE(info.st_mode):o})"
    if problem is not None:
        raise SandboxError(
            f"the sandbox's uid-lock directory {path} {problem}: someone else may have made it; "
            "remove it (referee makes it again, private) and look at who made it"
        )


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
        SandboxError: The lock directory is not private (`_private_dir`).
    """
    _private_dir(_DIR)
    with _lock:
        for uid in range(first, first + count):
            if uid in _held:
                continue
            fd = _open_lock(os.path.join(_DIR, f"{uid}.lock"))
            if fd is None:
                continue
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


def _open_lock(path: str) -> int | None:
    """The lock file at `path`, opened (made if missing); None when it is not a regular file
    of ours (a symlink is never followed), and that uid is passed over."""
    try:
        fd = os.open(path, _OPEN_FLAGS, 0o600)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
            raise  # (out of descriptors, say: the host's trouble, not this uid's)
        logger.warning("passing over the sandbox uid lock %s: %s", path, exc)
        return None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
        os.close(fd)
        logger.warning("passing over the sandbox uid lock %s: not a regular file of ours", path)
        return None
    return fd


def claimed() -> set[int]:
    """The uids this process holds now."""
    with _lock:
        return set(_held)
