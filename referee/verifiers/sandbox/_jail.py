"""The unshare path's root builder: bubblewrap's isolation from the syscalls, where it is missing.

Started by the host as ``unshare --pid --fork --mount --net --ipc --uts ... -- python3 -I -S
_jail.py CONFIG [ARGS]`` (util-linux makes the namespaces; as a user, a user namespace too,
mapping us to its root). Here, as that namespace's PID 1, it builds the worker's root the way
bubblewrap does, drops capabilities and execs ``CONFIG["command"] + ARGS`` (the zygote):

1. a tmpfs over ``/tmp`` becomes the root for a moment, with the host's root under
   ``/oldroot`` (so no source path is hidden by the mounts made to build the new one);
2. the new root is a tmpfs of its own: ``/usr`` (and the ``/bin``-style links, the
   interpreter's prefix, referee's sandbox files at ``/opt/referee``, the ``/etc`` entries
   `_isolation` lists) bound read-only, a fresh ``/proc`` with ``/proc/sys`` read-only, a
   minimal ``/dev``, and size-limited tmpfs at ``/work``, ``/tmp``, ``/var/tmp`` and ``/dev/shm``;
3. the host's root is detached, the new root pivoted in and made read-only, as is ``/dev``;
4. the capability bounding set keeps, as root, only what the zygote needs (none otherwise),
   no inheritable or ambient capabilities are left, and no_new_privs is set;
5. the seccomp filter the host built (``CONFIG["seccomp"]``, `_seccomp`) is loaded, last,
   so nothing above is refused by it.

Standard library only (ctypes for mount, pivot_root, prctl and capset).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import sys
from typing import Any

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
# statvfs flag -> mount flag: a remount must keep them (in a user namespace they are locked).
_KEPT_FLAGS = {2: MS_NOSUID, 4: MS_NODEV, 8: MS_NOEXEC, 1024: 1024, 2048: 2048, 4096: 1 << 21}
_CAPS = {"CHOWN": 0, "DAC_OVERRIDE": 1, "FOWNER": 3, "KILL": 5, "SETGID": 6, "SETUID": 7}
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}
_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")

libc = ctypes.CDLL(None, use_errno=True)
proc = "/proc"  # where a proc filesystem is to be read (the host's, under /oldroot, at first)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _c(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    """mount(2); raises OSError with the target."""
    result = libc.mount(_c(source), _c(target), _c(fstype), ctypes.c_ulong(flags), _c(data or None))
    _check(result, f"mount {target}")


def tmpfs(target: str, mode: int, size: int = 0) -> None:
    """A fresh tmpfs at `target` (made if missing), `size` bytes at most (0: no limit)."""
    os.makedirs(target, exist_ok=True)
    data = f"mode={mode:o}" + (f",size={size}" if size else "")
    mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, data)


def bind(source: str, target: str, read_only: bool = True, devices: bool = False) -> None:
    """Bind `source` at `target` (made to match: a directory or an empty file), with every
    mount below it, read-only unless said otherwise; never set-uid, devices only if asked."""
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    elif not os.path.exists(target):
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
    mount(source, target, None, MS_BIND | MS_REC)
    extra = MS_NOSUID | (0 if devices else MS_NODEV) | (MS_RDONLY if read_only else 0)
    for point in _mounts_under(target):
        flags = os.statvfs(point).f_flag
        kept = sum(bit for flag, bit in _KEPT_FLAGS.items() if flags & flag)
        mount(None, point, None, MS_BIND | MS_REMOUNT | kept | extra)


def _mounts_under(target: str) -> list[str]:
    """`target` and the mount points below it, parents first."""
    with open(f"{proc}/self/mountinfo") as fh:
        points = [line.split()[4] for line in fh]
    below = {p for p in points if p == target or p.startswith(target.rstrip("/") + "/")}
    return sorted(below, key=len)


def pivot_root(new_root: str, put_old: str) -> None:
    number = _PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise OSError(f"pivot_root: unknown syscall number on {os.uname().machine}")
    _check(libc.syscall(number, _c(new_root), _c(put_old)), "pivot_root")


def build_root(config: dict[str, Any]) -> None:
    """Build the worker's root (see the module's docstring) and enter it."""
    global proc
    disk = int(config["disk"])
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    tmpfs("/tmp", 0o755)
    os.mkdir("/tmp/oldroot")
    pivot_root("/tmp", "/tmp/oldroot")
    os.chdir("/")
    new, old = "/newroot", "/oldroot"
    proc = f"{old}/proc"
    tmpfs(new, 0o755)
    bind(f"{old}/usr", f"{new}/usr")
    for name in ("bin", "lib", "lib64", "sbin"):
        path = f"{old}/{name}"
        if os.path.islink(path):
            os.symlink(os.readlink(path), f"{new}/{name}")
        elif os.path.isdir(path):
            bind(path, f"{new}/{name}")
    if config["prefix"]:
        bind(old + config["prefix"], new + config["prefix"])
    os.mkdir(f"{new}/etc", 0o755)
    for name in config["etc"]:
        if os.path.exists(f"{old}/etc/{name}"):
            bind(f"{old}/etc/{name}", f"{new}/etc/{name}")
    bind(f"{old}{config['here']}", f"{new}/opt/referee")
    os.chmod(f"{new}/opt", 0o755)
    os.makedirs(f"{new}/proc")
    mount("proc", f"{new}/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name in ("sys", "sysrq-trigger", "irq", "bus"):
        if os.path.exists(f"{new}/proc/{name}"):
            bind(f"{new}/proc/{name}", f"{new}/proc/{name}")
    _build_dev(f"{new}/dev", old, disk)
    tmpfs(f"{new}/tmp", 0o1777, disk)
    os.mkdir(f"{new}/var", 0o755)
    tmpfs(f"{new}/var/tmp", 0o1777, disk)
    tmpfs(f"{new}/work", 0o711, disk)
    _check(libc.umount2(_c(old), MNT_DETACH), "umount the host's root")
    proc = f"{new}/proc"
    os.chdir(new)
    pivot_root(".", ".")  # the new root on top of the old; then the old one goes
    _check(libc.umount2(b".", MNT_DETACH), "umount the build root")
    os.chdir("/")
    proc = "/proc"
    mount(None, "/dev", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID)
    mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _build_dev(dev: str, old: str, disk: int) -> None:
    """bubblewrap's /dev: a few device nodes, the usual links, and /dev/shm and /dev/pts."""
    tmpfs(dev, 0o755)
    for name in _DEVICES:
        if os.path.exists(f"{old}/dev/{name}"):
            bind(f"{old}/dev/{name}", f"{dev}/{name}", read_only=False, devices=True)
    for name, target in (("stdin", 0), ("stdout", 1), ("stderr", 2)):
        os.symlink(f"/proc/self/fd/{target}", f"{dev}/{name}")
    os.symlink("/proc/self/fd", f"{dev}/fd")
    os.symlink("pts/ptmx", f"{dev}/ptmx")
    tmpfs(f"{dev}/shm", 0o1777, disk)
    os.mkdir(f"{dev}/pts")
    with contextlib.suppress(OSError):  # else no pseudo-terminals, as in some containers
        mount("devpts", f"{dev}/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666")


def drop_privileges(root: bool) -> None:
    """Keep, as root, only the zygote's capabilities (none otherwise), for this process and
    whatever it execs; and nothing an exec could add (no_new_privs)."""
    keep = set(_CAPS.values()) if root else set()
    with open(f"{proc}/sys/kernel/cap_last_cap") as fh:
        last = int(fh.read())
    for cap in range(last + 1):
        if cap not in keep:
            _check(libc.prctl(24, cap, 0, 0, 0), f"drop capability {cap}")  # PR_CAPBSET_DROP
    libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL (an older kernel has none to clear)
    # Inheritable capabilities would pass an exec as root whatever the bounding set: none.
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()
    _check(libc.capget(header, data), "capget")
    data[2] = data[5] = 0
    _check(libc.capset(header, data), "capset")
    _check(libc.prctl(38, 1, 0, 0, 0), "no_new_privs")  # PR_SET_NO_NEW_PRIVS


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def load_filter(program: bytes) -> None:
    """Load a seccomp filter (struct sock_filter instructions) for us and all we exec."""
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    _check(libc.prctl(22, 2, ctypes.byref(fprog), 0, 0), "seccomp filter")  # SECCOMP_MODE_FILTER


def main() -> None:
    config = json.loads(sys.argv[1])
    try:
        if not config["root"]:
            _limit_user_namespaces()
        build_root(config)
        drop_privileges(config["root"])
        if config.get("seccomp"):
            load_filter(bytes.fromhex(config["seccomp"]))
        os.chdir("/work")
        command = [*config["command"], *sys.argv[2:]]
        os.execve(command[0], command, config["env"])
    except OSError as exc:
        sys.stderr.write(f"referee sandbox (unshare): {exc}\n")
        sys.exit(1)


def _limit_user_namespaces() -> None:
    """As bwrap's --disable-userns: no user namespace below ours (a limit of our namespace,
    set while we hold its capabilities; where the kernel refuses, it stays as it was)."""
    with contextlib.suppress(OSError), open("/proc/sys/user/max_user_namespaces", "w") as fh:
        fh.write("0")


if __name__ == "__main__":
    main()
