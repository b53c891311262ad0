"""How a local worker is isolated: the command lines that start it, and whether each works here.

Two paths give a worker the same isolation: bubblewrap (``bwrap``), or util-linux ``unshare``
with referee's own root builder (`_jail`) where bubblewrap is missing. Either way the worker
runs in new pid, mount, network, IPC, UTS (and cgroup) namespaces, with a user namespace when
not root, in a root of its own: ``/usr`` (and the ``/bin``-style links) read-only, an ``/etc``
of three read-only entries, a fresh ``/proc`` and a minimal ``/dev``, and four writable
places, each a size-limited tmpfs: ``/work``, ``/tmp``, ``/var/tmp`` and ``/dev/shm``. The
root and ``/dev`` are read-only. As root the worker keeps six capabilities (to run each job as
its own unprivileged uid, and to clean up after it); otherwise none.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

__all__ = [
    "NO_ISOLATION",
    "ZYGOTE_ENV",
    "bwrap_argv",
    "bwrap_problem",
    "unshare_argv",
    "unshare_problem",
]

HERE = Path(__file__).resolve().parent
ZYGOTE_ENV = {"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
"""The zygote's whole environment (a fixed hash seed: the same set order in every worker)."""

KEPT_CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID")
"""What a worker keeps as root: to hand a job its files, run it as its uid, kill and wipe."""

_ETC = ("ld.so.cache", "alternatives", "ssl")  # node reads its OpenSSL config at start
NO_ISOLATION = (
    "To fix it: install bubblewrap (apt-get install bubblewrap) and, where it cannot create "
    "namespaces as a user, allow unprivileged user namespaces (sysctl "
    "kernel.unprivileged_userns_clone=1; on Ubuntu also "
    "kernel.apparmor_restrict_unprivileged_userns=0), or run as root; or use the docker "
    "backend (sandbox: docker). To run untrusted code without isolation anyway (no network or "
    "filesystem isolation), say so: sandbox: {isolation: none}."
)
"""What to do where no namespace can be had, said in every refusal."""

_problems: dict[tuple[str, ...], str | None] = {}  # probe command -> None when it ran, else why


def _zygote(python: str, uid: int) -> list[str]:
    return [python, "-s", "-S", "/opt/referee/_zygote.py", str(uid), "/work", "1"]


def _prefix(python: str) -> str | None:
    """The interpreter's install prefix, when it lies outside /usr (and must be mounted too)."""
    prefix = Path(python).resolve().parents[1]
    return None if str(prefix).startswith("/usr") else str(prefix)


def _bwrap_options(python: str, root: bool, disk: int) -> list[str]:
    # No --die-with-parent: its PR_SET_PDEATHSIG fires when the *thread* that started bwrap
    # ends (a reward's grading thread), not the process. A zygote exits when its channel
    # closes instead, so a worker outlives a dead host by at most one job's wall time.
    args = [
        "--new-session",
        "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
        "--ro-bind", "/usr", "/usr",
    ]  # fmt: skip
    if not root:
        args += ["--unshare-user", "--disable-userns"]
    for name in ("bin", "lib", "lib64", "sbin"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), f"/{name}"]
        elif path.is_dir():
            args += ["--ro-bind", str(path), f"/{name}"]
    prefix = _prefix(python)
    if prefix is not None:
        args += ["--ro-bind", prefix, prefix]
    args += ["--perms", "0755", "--dir", "/etc"]  # else not traversable by the job
    for name in _ETC:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    size = str(disk)
    args += [
        "--proc", "/proc", "--dev", "/dev",
        "--perms", "1777", "--size", size, "--tmpfs", "/dev/shm",
        "--perms", "1777", "--size", size, "--tmpfs", "/tmp",
        "--perms", "0755", "--dir", "/var",
        "--perms", "1777", "--size", size, "--tmpfs", "/var/tmp",
        "--perms", "0711", "--size", size, "--tmpfs", "/work",
        "--ro-bind", str(HERE), "/opt/referee",
        "--remount-ro", "/dev", "--remount-ro", "/",  # writable: the four tmpfs places only
        "--chdir", "/work", "--clearenv",
    ]  # fmt: skip
    for key, value in ZYGOTE_ENV.items():
        args += ["--setenv", key, value]
    args += ["--cap-drop", "ALL"]
    if root:
        for cap in KEPT_CAPS:
            args += ["--cap-add", f"CAP_{cap}"]
    return args


def bwrap_argv(python: str, uid: int, root: bool, disk: int) -> list[str]:
    """The command that starts a worker in bubblewrap (its jobs run as `uid`; -1: as it)."""
    return ["bwrap", *_bwrap_options(python, root, disk), "--", *_zygote(python, uid)]


def bwrap_problem(python: str = "/usr/bin/python3", bwrap: str = "bwrap") -> str | None:
    """None when bubblewrap can isolate a worker here, else why not."""
    path = shutil.which(bwrap)
    if path is None:
        return "bubblewrap (bwrap) is not installed"
    root = os.geteuid() == 0
    return _probe([path, *_bwrap_options(python, root, 1 << 20), "--", python, "-S", "-c", ""])


def _unshare_options(user: list[str]) -> list[str]:
    args = ["--pid", "--fork", "--kill-child", "--mount", "--net", "--ipc", "--uts"]
    if os.path.exists("/proc/self/ns/cgroup"):
        args.append("--cgroup")
    return [*args, "--propagation", "private", *user]


def _user_options(root: bool) -> list[list[str]]:
    """The user namespace, best first: none as root; else our own uid inside, as bubblewrap
    does, with the namespace's capabilities kept for `_jail` (util-linux 2.36 and later), or
    mapped to the namespace's root (older ones)."""
    if root:
        return [[]]
    mine = [f"--map-user={os.getuid()}", f"--map-group={os.getgid()}", "--keep-caps"]
    return [["--user", *mine], ["--user", "--map-root-user"]]


def _jail(python: str, root: bool, disk: int, command: list[str]) -> list[str]:
    config = {"root": root, "disk": disk, "here": str(HERE), "prefix": _prefix(python)}
    config |= {"etc": list(_ETC), "env": ZYGOTE_ENV, "command": command}
    return [python, "-I", "-S", str(HERE / "_jail.py"), json.dumps(config)]


def unshare_argv(python: str, uid: int, root: bool, disk: int, unshare: str) -> list[str]:
    """The command that starts a worker through util-linux `unshare` and `_jail`."""
    user = _working_user_options(python, unshare)
    command = _jail(python, root, disk, _zygote(python, uid))
    return [unshare, *_unshare_options(user), "--", *command]


def unshare_problem(python: str = "/usr/bin/python3", unshare: str = "unshare") -> str | None:
    """None when `unshare` and `_jail` can isolate a worker here, else why not."""
    path = shutil.which(unshare)
    if path is None:
        return "util-linux unshare is not installed"
    problem = None
    for user in _user_options(os.geteuid() == 0):
        problem = _probe(_unshare_probe(python, path, user))
        if problem is None:
            return None
    return problem


def _unshare_probe(python: str, unshare: str, user: list[str]) -> list[str]:
    probe = _jail(python, os.geteuid() == 0, 1 << 20, [python, "-S", "-c", ""])
    return [unshare, *_unshare_options(user), "--", *probe]


def _working_user_options(python: str, unshare: str) -> list[str]:
    options = _user_options(os.geteuid() == 0)
    for user in options:
        if _probe(_unshare_probe(python, unshare, user)) is None:
            return user
    return options[0]  # the worker then fails to start, and says why


def _probe(argv: list[str]) -> str | None:
    """Run a probe once per process; None when it exits 0, else what it said."""
    key = tuple(argv)
    if key not in _problems:
        try:
            done = subprocess.run(argv, capture_output=True, timeout=30, check=False)
            text = done.stderr.decode(errors="replace").strip()[-500:]
            _problems[key] = None if done.returncode == 0 else text or f"exit {done.returncode}"
        except (OSError, subprocess.TimeoutExpired) as exc:
            _problems[key] = str(exc)
    return _problems[key]
