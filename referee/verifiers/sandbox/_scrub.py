"""Between two jobs, inside the sandbox: nothing of the first is left for the second.

Standard library only (imported by the zygote, beside it). After a job, `kill_all_others`
stops every process it left, `clear_uid_state` removes what the kernel keeps for its uid
(System V IPC objects, keys), and `wipe` empties every place it could write. The zygote checks
the places are empty again; when they are not, the host replaces the worker.

A job can write only in the places the zygote wipes: the sandbox's root and system are
read-only, and each writable place is a tmpfs of its own. POSIX message queues are refused
(RLIMIT_MSGQUEUE 0, set per job), so they need no cleaning.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import time
from collections.abc import Callable

PLACES = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue")
"""The shared writable places of an isolated worker, wiped after every job (with the work dir)."""

_IPC = ("shm", "sem", "msg")  # the files of /proc/sysvipc
_KEY_SPEC_USER_KEYRING, _KEY_SPEC_USER_SESSION_KEYRING, _KEYCTL_CLEAR = -4, -5, 7
_KEYCTL = {"x86_64": 250, "aarch64": 219, "riscv64": 219, "ppc64le": 271, "s390x": 280}


def kill_all_others(uid: int, isolated: bool) -> str | None:
    """SIGKILL every process the jobs could have left behind, then reap; None when none is
    left, else which are.

    In a pid namespace of our own: every process but pid 1 and this one. As a plain host
    process: every process of the job's uid (a helper drops to that uid and signals -1), or,
    with no uid of its own, nothing beyond the job's process group, which the caller killed.
    """
    if not isolated:
        if uid >= 0:
            _as_uid(uid, _kill_own_processes)
        reap()
        return None
    alive: list[str] = []
    for _ in range(20):
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
        reap()
        alive = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())]
        if not alive:
            return None
        time.sleep(0.005)
    return f"processes {alive[:5]} survived SIGKILL"


def _kill_own_processes(uid: int) -> None:
    # Repeat until none is left: a fork in flight can outlive one kill(-1).
    for _ in range(400):
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
        if not processes_of(uid, besides=os.getpid()):
            return
        time.sleep(0.005)


def processes_of(uid: int, besides: int) -> list[int]:
    """Live (not zombie) pids of `uid`, other than `besides`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == besides:
            continue
        try:
            with open(f"/proc/{entry}/status") as fh:
                status = fh.read()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("State", "").strip().startswith("Z"):
            continue
        if int(fields.get("Uid", "-1 ").split()[0]) == uid:
            found.append(int(entry))
    return found


def reap() -> None:
    """Collect every child that has exited."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def wipe(path: str, mode: int, deadline: float | None = None) -> str | None:
    """Empty the directory `path` and give it `mode` back; None when it is empty, else why not.

    Called once no process of the job is left, so nothing can write while it runs. The walk
    holds one directory open at a time and names entries relative to it (`_empty`): no
    recursion and no path grows with the tree, so a job's 100,000 nested directories, or
    names that add up past PATH_MAX, are removed like any other. Past `deadline` (a
    `time.monotonic` value) it stops and reports what is left: a job that made millions of
    files cannot hold its result back until the host gives up on the worker.
    """
    with contextlib.suppress(OSError):
        if stat.S_IMODE(os.lstat(path).st_mode) != mode:
            os.chmod(path, mode)  # a job that owned the place may have locked it
    try:
        if not os.listdir(path):
            return None  # (most jobs leave nothing: one call, not a walk)
        top = os.open(path, _DIR_FLAGS)
    except OSError as exc:
        return f"cannot list {path}: {exc}"
    try:
        _empty(top, deadline)
        left = os.listdir(top)
    except OSError as exc:
        return f"cannot empty {path}: {exc}"
    finally:
        os.close(top)
    return f"{path} still holds {sorted(left)[:5]}" if left else None


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _empty(top: int, deadline: float | None) -> None:
    """Remove what the directory open at `top` holds, depth first, one level open at a time.

    Going down opens a child (never through a symlink: O_NOFOLLOW); going up opens ``..``
    and checks it is the directory we came from (a process the kill missed could move the
    tree under us: then we stop, and the caller reports what is left). A directory that
    cannot be opened or removed is passed over, so the walk always ends.
    """
    fd = os.dup(top)
    st = os.fstat(fd)
    path: list[tuple[str, int, int]] = []  # (name, inode) walked into, and each parent's inode
    stuck: set[int] = set()  # inodes of directories passed over
    try:
        while True:
            child = _next_directory(fd, stuck, deadline)
            if child is not None:
                name, inode = child
                try:
                    sub = _open_child(fd, name)
                except OSError:
                    stuck.add(inode)
                    continue
                path.append((name, inode, st.st_ino))
                os.close(fd)
                fd = sub
                st = os.fstat(fd)
                continue
            if not path:
                return
            name, inode, parent_inode = path.pop()
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            st = os.fstat(fd)
            if st.st_ino != parent_inode:
                raise OSError(f"the tree moved during the clean-up (at {name!r})")
            try:
                os.rmdir(name, dir_fd=fd)
            except OSError:
                stuck.add(inode)
    finally:
        os.close(fd)


def _next_directory(fd: int, stuck: set[int], deadline: float | None) -> tuple[str, int] | None:
    """Unlink the entries of the directory `fd` that are not directories, up to the first one
    that is (its name and inode, to be walked into), passing over those in `stuck`."""
    with os.scandir(fd) as entries:
        for entry in entries:
            if deadline is not None and time.monotonic() > deadline:
                raise OSError("out of time: the job left too many files")
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.inode() not in stuck:
                        return entry.name, entry.inode()
                    continue
                os.unlink(entry.name, dir_fd=fd)
            except OSError:
                pass  # wipe() reports what is left
    return None


def _open_child(fd: int, name: str) -> int:
    """Open the directory `name` in `fd`, made ours to empty (a job may have locked it: we
    own it, or are root)."""
    try:
        sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
    except PermissionError:  # made unreadable
        os.chmod(name, 0o700, dir_fd=fd)
        sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
    with contextlib.suppress(OSError):
        os.chmod(sub, 0o700)  # made unwritable: its entries could not be unlinked
    return sub


def uid_state(uid: int) -> str:
    """A fingerprint of what the kernel holds for the job's uid: System V IPC objects (in this
    IPC namespace) and keys. It changes when a job leaves something there."""
    owner = str(uid if uid >= 0 else os.getuid())
    parts = [str(len(_ipc_objects(name, owner))) for name in _IPC]
    with contextlib.suppress(OSError):
        for line in _read("/proc/key-users").splitlines():
            fields = line.split()
            if fields and fields[0] == owner + ":":
                parts.append(" ".join(fields[2:]))  # keys and bytes, not the reference count
    return "|".join(parts)


def _read(path: str) -> str:
    """A small /proc file, read raw (after every job: open() and its text layer cost more)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = [os.read(fd, 1 << 16)]
        while chunks[-1]:
            chunks.append(os.read(fd, 1 << 16))
        return b"".join(chunks).decode()
    finally:
        os.close(fd)


def _ipc_objects(name: str, owner: str) -> list[int]:
    """The ids of the System V IPC objects of one kind that `owner` (a uid) owns."""
    try:
        header, *rows = (line.split() for line in _read(f"/proc/sysvipc/{name}").splitlines())
    except (OSError, ValueError):
        return []
    at = header.index("uid") if "uid" in header else -1
    return [int(row[1]) for row in rows if at >= 0 and len(row) > at and row[at] == owner]


def clear_uid_state(uid: int) -> None:
    """Remove the job uid's System V IPC objects and empty its keyrings (a helper process
    drops to the uid: only an owner may remove them without CAP_SYS_ADMIN)."""
    _as_uid(uid, _clear_as_owner)


def _clear_as_owner(uid: int) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    owner = str(os.getuid())
    for ident in _ipc_objects("shm", owner):
        libc.shmctl(ident, 0, None)  # IPC_RMID
    for ident in _ipc_objects("sem", owner):
        libc.semctl(ident, 0, 0)
    for ident in _ipc_objects("msg", owner):
        libc.msgctl(ident, 0, None)
    if uid < 0 and _kernel() < (5, 3):
        return  # a user namespace had no keyrings of its own then: they were the user's
    keyctl = _KEYCTL.get(os.uname().machine)
    for keyring in (_KEY_SPEC_USER_KEYRING, _KEY_SPEC_USER_SESSION_KEYRING):
        if keyctl is not None:
            libc.syscall(keyctl, _KEYCTL_CLEAR, keyring)


def _kernel() -> tuple[int, int]:
    major, minor = os.uname().release.split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


def _as_uid(uid: int, work: Callable[[int], None]) -> None:
    """Run ``work(uid)`` in a child process that has dropped to `uid` (-1: stays as we are)."""
    helper = os.fork()
    if helper == 0:
        try:
            if uid >= 0:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            work(uid)
        except BaseException:
            pass
        finally:
            os._exit(0)
    os.waitpid(helper, 0)
