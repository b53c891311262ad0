"""Output files, written only where a regular file is or where nothing is yet.

A command's output path may name anything: a symbolic link to a file elsewhere, a device
(``/dev/sda``), a FIFO another process reads. Writing there follows the link or feeds the
device, and renaming a finished file over it replaces the device node itself. So every output
is checked first (`check_output`) and opened without following a last-component link
(`open_output`: ``O_NOFOLLOW``, and a check of what was opened before anything is truncated or
written), and anything but a regular file is refused with the path and the fix. Folders
along the path are the user's, and are followed.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import IO

__all__ = ["check_output", "open_output", "write_output"]

_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _refusal(path: str | os.PathLike[str], mode: int) -> OSError:
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    if stat.S_ISLNK(mode):
        kind += f" (to {os.readlink(path)!r})"
    return OSError(
        f"refusing to write output to {str(path)!r}: it is {kind}, and referee writes only "
        "to a regular file or a new path; give such a path (to write to standard output, "
        "leave the output option out)",
    )


def check_output(path: str | os.PathLike[str]) -> None:
    """Refuse `path` as an output unless it is a regular file or does not exist.

    Raises:
        OSError: It is a symbolic link, a directory, a FIFO, a device or a socket; the message
            names the path and the fix.
    """
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise _refusal(path, mode)


def open_output(path: str | os.PathLike[str], *, append: bool = False) -> IO[str]:
    """Open `path` for writing text (UTF-8), only if it is a regular file or new.

    Nothing is truncated until the opened file is known to be a regular one, and a symbolic
    link put there after a check is not followed (``O_NOFOLLOW``).

    Args:
        path: The output file.
        append: Write at its end rather than over it.

    Raises:
        OSError: `path` is not a regular file (see `check_output`), or cannot be opened.
    """
    check_output(path)
    # O_NONBLOCK: opening a FIFO for writing would otherwise wait for a reader.
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    if append:
        flags |= os.O_APPEND
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO):  # a link or a FIFO, put there since
            raise _refusal(path, os.lstat(path).st_mode) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _refusal(path, mode)
        os.set_blocking(fd, True)
        if not append:
            os.ftruncate(fd, 0)
        return open(fd, "a" if append else "w", encoding="utf-8", closefd=True)
    except BaseException:
        os.close(fd)
        raise


def write_output(path: str | os.PathLike[str], text: str) -> Path:
    """Write `text` to `path` as `open_output` opens it; returns the path.

    Raises:
        OSError: As `open_output`, or the write failed.
    """
    with open_output(path) as stream:
        stream.write(text)
    return Path(path)
