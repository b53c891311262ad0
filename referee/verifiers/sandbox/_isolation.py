"""How a local worker is isolated: the command lines that start it, and whether each works here.

Two paths give a worker the same isolation: bubblewrap (``bwrap``), or util-linux ``unshare``
with referee's own root builder (`_jail`) where bubblewrap is missing. Either way the worker
runs in new pid, mount, network, IPC, UTS (and cgroup) namespaces, with a user namespace when
not root, in a root of its own: ``/usr`` (and the ``/bin``-style links) read-only, an ``/etc``
of a few read-only entries (`etc_entries`), a fresh ``/proc`` and a minimal ``/dev``, and four
writable places, each a size-limited tmpfs: ``/work``, ``/tmp``, ``/var/tmp`` and
``/dev/shm``. The root and ``/dev`` are read-only. As root the worker keeps six capabilities
(to run each job as its own unprivileged uid, and to clean up after it); otherwise none.

Two hard limits come on top, on both paths (`Hardening`): a seccomp filter (`_seccomp`: no new
user namespaces, no io_uring, no keyrings, bpf, mounts and the like), loaded by bubblewrap
(``--seccomp FD``) or by `_jail`; and, where this machine lets us make one, a cgroup per worker
(`_cgroup`: memory and processes, counting every page, memfd and tmpfs included; made by
`worker_cgroup` and sized for each job by the pool). A small ``sh`` launcher on the host
joins the worker's cgroup and opens the filter before it execs bubblewrap or ``unshare``;
for a worker without a cgroup, the filter also refuses ``memfd_create`` and ``shmget``
(memory no rlimit counts).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from referee.verifiers.sandbox import _cgroup, _seccomp
from referee.verifiers.sandbox.base import Limits, SandboxError

__all__ = [
    "HARDENING",
    "NO_ISOLATION",
    "ZYGOTE_ENV",
    "Hardening",
    "bwrap_argv",
    "bwrap_problem",
    "etc_entries",
    "unshare_argv",
    "unshare_problem",
    "worker_cgroup",
]

HERE = Path(__file__).resolve().parent
ZYGOTE_ENV = {"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
"""The zygote's whole environment (a fixed hash seed: the same set order in every worker)."""

KEPT_CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID")
"""What a worker keeps as root: to hand a job its files, run it as its uid, kill and wipe."""

_ETC = ("ld.so.cache", "alternatives", "ssl")  # node reads its OpenSSL config at start


def etc_entries() -> list[str]:
    """The host's ``/etc`` entries a worker sees, read-only: `_ETC`, and each JDK's
    configuration (``/etc/java-17-openjdk``: the JVM reads ``jvm.cfg`` and its security
    properties there at start)."""
    try:
        java = sorted(name for name in os.listdir("/etc") if name.startswith("java-"))
    except OSError:
        java = []
    return [*_ETC, *java]


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


@dataclass
class Hardening:
    """The hard limits every worker starts with (see the module's docstring).

    Both are on. They are switched off only by the benchmark that measures what each costs
    per job, and by tests that show what each stops; never a user's option.

    Attributes:
        seccomp: Load the seccomp filter (`_seccomp`).
        cgroup: Give each worker a cgroup of its own (`_cgroup`), where one can be made.
    """

    seccomp: bool = True
    cgroup: bool = True


HARDENING = Hardening()
"""The process's `Hardening` (read when a worker starts)."""

# The host-side launcher: joins the worker's cgroups (one cgroup.procs file per hierarchy),
# then execs the tool, opening the filter on an fd that bubblewrap reads (--seccomp FD). The
# fd must not be the worker's channel, which ProcessWorker passes as the last argument
# ("fd:N"): 3, else 4. (dash takes single-digit fds only, and one in a variable through eval.)
_LAUNCH = (
    'filter=$1; shift; while [ "$1" != -- ]; do echo $$ >"$1" || exit 125; shift; done; shift; '
    '[ -z "$filter" ] && exec "$@"; '
    'fd=3; for last do :; done; [ "$last" = fd:3 ] && fd=4; '
    "tool=$1; shift; eval 'exec \"$tool\" --seccomp '$fd' \"$@\" '$fd'<\"$filter\"'"
)
_filters: dict[bytes, str] = {}  # program -> its file
_filter_lock = threading.Lock()
_filter_dir: list[str] = []


def _cgroups_here() -> bool:
    return HARDENING.cgroup and _cgroup.problem() is None


def _program(counted: bool) -> bytes | None:
    """The seccomp filter a worker gets now, `counted` when its memory cgroup counts every
    page (None: switched off, or none for this machine)."""
    if not HARDENING.seccomp or _seccomp.filter_problem() is not None:
        return None
    # Without a memory cgroup nothing would count the pages of a memfd or a System V segment.
    return _seccomp.build(os.uname().machine, without_cgroup=not counted)


def _filter_file(program: bytes) -> str:
    """A file holding `program`, in a directory of our own (made again if something removed
    it: a long run may outlive a /tmp cleaner)."""
    with _filter_lock:
        path = _filters.get(program)
        if path is not None and os.path.exists(path):
            return path
        if not _filter_dir or not os.path.isdir(_filter_dir[0]):
            _filter_dir[:] = [tempfile.mkdtemp(prefix="referee-seccomp-")]
            atexit.register(shutil.rmtree, _filter_dir[0], True)
        path = os.path.join(_filter_dir[0], f"filter-{len(_filters)}.bpf")
        with open(path + ".new", "wb") as fh:
            fh.write(program)
        os.replace(path + ".new", path)
        _filters[program] = path
        return path


def worker_cgroup(limits: Limits) -> _cgroup.WorkerCgroup | None:
    """A new worker's cgroup, sized for a job with `limits` (None where cgroups are off here).

    Raises:
        SandboxError: This machine has them, but this one cannot be made.
    """
    if not _cgroups_here():
        return None
    try:
        return _cgroup.create(limits.memory_bytes, limits.processes)
    except OSError as exc:
        raise SandboxError(f"cannot make the sandbox worker's cgroup: {exc}") from None


def _launch(filter_path: str, procs: list[str], argv: list[str]) -> list[str]:
    """`argv` started through the launcher (as it is where there is nothing to do)."""
    if not filter_path and not procs:
        return argv
    return ["sh", "-c", _LAUNCH, "referee-sandbox", filter_path, *procs, "--", *argv]


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
    for name in etc_entries():
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


def bwrap_argv(
    python: str, uid: int, root: bool, disk: int, cgroup: _cgroup.WorkerCgroup | None = None
) -> list[str]:
    """The command that starts a worker in bubblewrap (its jobs run as `uid`; -1: as it),
    in `cgroup` (`worker_cgroup`; None: none, and memfds and shared memory are refused)."""
    program = _program(counted=cgroup is not None)
    argv = ["bwrap", *_bwrap_options(python, root, disk), "--", *_zygote(python, uid)]
    procs = list(cgroup.procs) if cgroup is not None else []
    return _launch(_filter_file(program) if program else "", procs, argv)


def bwrap_problem(python: str = "/usr/bin/python3", bwrap: str = "bwrap") -> str | None:
    """None when bubblewrap can isolate a worker here (its seccomp filter loaded), else why
    not."""
    path = shutil.which(bwrap)
    if path is None:
        return "bubblewrap (bwrap) is not installed"
    root = os.geteuid() == 0
    program = _program(counted=_cgroups_here())  # the filter workers get
    argv = [path, *_bwrap_options(python, root, 1 << 20), "--", python, "-S", "-c", ""]
    return _probe(_launch(_filter_file(program) if program else "", [], argv))


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


def _jail(python: str, root: bool, disk: int, command: list[str], counted: bool) -> list[str]:
    config = {"root": root, "disk": disk, "here": str(HERE), "prefix": _prefix(python)}
    config |= {"etc": etc_entries(), "env": ZYGOTE_ENV, "command": command}
    program = _program(counted)
    config["seccomp"] = program.hex() if program else None  # _jail loads it last
    return [python, "-I", "-S", str(HERE / "_jail.py"), json.dumps(config)]


def unshare_argv(
    python: str,
    uid: int,
    root: bool,
    disk: int,
    unshare: str,
    cgroup: _cgroup.WorkerCgroup | None = None,
) -> list[str]:
    """The command that starts a worker through util-linux `unshare` and `_jail`, in
    `cgroup` (as `bwrap_argv`)."""
    user = _working_user_options(python, unshare)
    command = _jail(python, root, disk, _zygote(python, uid), counted=cgroup is not None)
    procs = list(cgroup.procs) if cgroup is not None else []
    return _launch("", procs, [unshare, *_unshare_options(user), "--", *command])


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
    probe = _jail(python, os.geteuid() == 0, 1 << 20, [python, "-S", "-c", ""], _cgroups_here())
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
