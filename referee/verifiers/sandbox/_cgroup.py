"""A cgroup per sandbox worker: memory and process limits that count every page and every task.

Rlimits count per process and only some pages: ``RLIMIT_AS`` is address space, so the pages of
a memfd written with ``write()`` and never mapped, of a System V shared-memory segment once
detached, or of a tmpfs file, are counted by none of them, and a job can hold gigabytes of
them under a limit of 256 MB. A memory cgroup charges every page to the cgroup of the process
that made it, whatever holds it. So each worker (its zygote, its jobs, the tmpfs pages they
write) runs in a cgroup of its own, made by the host before the worker starts:

- ``memory``: the job's memory limit, plus `SLACK` for the zygote; no swap (v2
  ``memory.swap.max`` 0; v1 ``memsw`` where the kernel accounts swap). Every page the job
  holds counts there: its processes', its memfds and shared memory, and its files, which live
  in the worker's tmpfs places (memory too: what a job writes there counts against its
  memory limit, as in a container). Not its disk size as well: the kernel charges a memfd's
  pages and a tmpfs file's alike, so room left for files would be room for memfds, and a
  job of 128 MB could hold 128 MB plus its disk size. A worker over it is stopped by the
  kernel's OOM killer (v2: the whole worker, ``memory.oom.group``): the job ends killed, a
  program at fault.
- ``pids``: the job's process limit plus `PIDS_SLACK` for the worker's own processes; a fork
  bomb stops there, whatever uid it runs as (``RLIMIT_NPROC`` counts per user, host-wide).

Both are the *job's*: a worker serves jobs of any limits, so its cgroup is sized again before
each job whose limits differ from the last one's (`WorkerCgroup.fit`), not left at the size
of the job it was started for.

Both cgroup versions are used: v2 where the unified hierarchy offers the memory and pids
controllers to our cgroup's children, else v1's memory and pids hierarchies. The worker's
cgroup is a child of the cgroup referee runs in; making one takes write access there (root,
or a delegated subtree such as a systemd user scope with ``Delegate=yes``). Where none can be
made, `problem` says why, and the seccomp filter refuses ``memfd_create`` and ``shmget``
instead (`_seccomp`); the tmpfs places are size-limited either way.

Cgroups are named ``referee-PID-N``; an empty one is removed once its worker is gone (when
later ones are made, and at exit), and any whose process has died is removed then too.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["PIDS_SLACK", "SLACK", "WorkerCgroup", "create", "problem"]

SLACK = 64 << 20
"""Memory a worker's cgroup allows beyond its job's limits: the zygote and the sandbox's own."""
PIDS_SLACK = 8
"""Tasks a worker's cgroup allows beyond its job's processes: bubblewrap's, the zygote's."""

_PREFIX = "referee-"
_STALE_AFTER = 60.0  # seconds: a worker joins its cgroup within its start-up, or never
_counter = itertools.count()
_lock = threading.Lock()
_made: dict[str, float] = {}  # our cgroup dirs -> when made
_checked: list[str | None] = []  # the cached answer of `problem`


@dataclass(frozen=True, slots=True)
class _Tree:
    """Where our workers' cgroups go: one parent per hierarchy (v2: one for both)."""

    version: Literal[1, 2]
    memory: str
    pids: str | None


@dataclass(slots=True)
class WorkerCgroup:
    """One worker's cgroup, sized for one job at a time.

    Attributes:
        version: The cgroup version of its hierarchies.
        dirs: Its directories (v1: one per hierarchy; the memory one first).
        procs: The ``cgroup.procs`` files a process writes its pid into to join it.
        memory: Its memory limit now (bytes).
        pids: Its task limit now.
    """

    version: Literal[1, 2]
    dirs: tuple[str, ...]
    procs: tuple[str, ...]
    memory: int
    pids: int
    _pids_dir: str | None = field(default=None, repr=False)

    def fit(self, memory_bytes: int, processes: int) -> None:
        """Size the cgroup for a job with these limits (nothing to write when it already is).

        Raises:
            OSError: The kernel refused (a lower limit than what the worker holds now, which
                it could not reclaim): the worker is then replaced.
        """
        memory, pids = sized(memory_bytes, processes)
        if memory != self.memory:
            _limit_memory(self.version, self.dirs[0], memory, lower=memory < self.memory)
            self.memory = memory
        if pids != self.pids:
            if self._pids_dir is not None:
                _write(os.path.join(self._pids_dir, "pids.max"), str(pids))
            self.pids = pids


def sized(memory_bytes: int, processes: int) -> tuple[int, int]:
    """The memory and task limits of a worker's cgroup for a job with these limits."""
    return memory_bytes + SLACK, processes + PIDS_SLACK


def _mounts() -> dict[str, tuple[str, str]]:
    """Controller ("" for the v2 hierarchy) -> (mount point, the hierarchy's path there)."""
    found: dict[str, tuple[str, str]] = {}
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            left, _, right = line.partition(" - ")
            fields, info = left.split(), right.split()
            if len(fields) < 5 or len(info) < 3:
                continue
            root, point = fields[3], fields[4]
            if info[0] == "cgroup2":
                found.setdefault("", (point, root))
            elif info[0] == "cgroup":
                for option in info[2].split(","):
                    found.setdefault(option, (point, root))
    return found


def _own() -> dict[str, str]:
    """Controller ("" for v2) -> the path of the cgroup this process is in."""
    own: dict[str, str] = {}
    with open("/proc/self/cgroup") as fh:
        for line in fh:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                own[controller] = path
    return own


def _dir(controller: str, mounts: dict[str, tuple[str, str]], own: dict[str, str]) -> str | None:
    if controller not in mounts or controller not in own:
        return None
    point, root = mounts[controller]
    path = own[controller]
    if root != "/" and not path.startswith(root):
        return None  # our cgroup is outside what is mounted here (another namespace's view)
    relative = path[len(root) :] if root != "/" else path
    where = point + relative.rstrip("/")
    return where if os.path.isdir(where) else None


def _tree() -> tuple[_Tree | None, str]:
    """Where worker cgroups can go, or None and why not."""
    mounts, own = _mounts(), _own()
    unified = _dir("", mounts, own)
    if unified is not None:
        try:
            with open(os.path.join(unified, "cgroup.controllers")) as fh:
                offered = fh.read().split()
        except OSError:
            offered = []
        if {"memory", "pids"} <= set(offered):
            try:
                with open(os.path.join(unified, "cgroup.subtree_control"), "w") as fh:
                    fh.write("+memory +pids")
                return _Tree(2, unified, None), ""
            except OSError as exc:
                # v2's rule: a cgroup with processes (ours) cannot hand controllers to children
                v2 = f"cgroup v2 at {unified} cannot delegate memory and pids: {exc.strerror}"
        else:
            v2 = f"cgroup v2 at {unified} offers no memory and pids controllers"
    else:
        v2 = "no cgroup v2 hierarchy of ours is mounted"
    memory, pids = _dir("memory", mounts, own), _dir("pids", mounts, own)
    if memory is None:
        return None, f"{v2}; no cgroup v1 memory hierarchy of ours is mounted"
    return _Tree(1, memory, pids), ""


def _write(path: str, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _limit_memory(version: Literal[1, 2], where: str, memory_bytes: int, lower: bool) -> None:
    if version == 2:
        _write(os.path.join(where, "memory.max"), str(memory_bytes))
        return
    # v1 keeps memory no higher than memory + swap: lower the first first, raise it last.
    knobs = ["memory.limit_in_bytes"]
    if os.path.exists(os.path.join(where, "memory.memsw.limit_in_bytes")):
        # Swap accounted: memory + swap no more than memory alone.
        knobs.insert(len(knobs) if lower else 0, "memory.memsw.limit_in_bytes")
    for knob in knobs:
        _write(os.path.join(where, knob), str(memory_bytes))


def _make(tree: _Tree, name: str, memory_bytes: int, pids: int) -> WorkerCgroup:
    made: list[str] = []
    try:
        if tree.version == 2:
            where = os.path.join(tree.memory, name)
            os.mkdir(where)
            made.append(where)
            _write(os.path.join(where, "memory.max"), str(memory_bytes))
            _write(os.path.join(where, "pids.max"), str(pids))
            for knob, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                if os.path.exists(os.path.join(where, knob)):
                    _write(os.path.join(where, knob), value)
            joins = (os.path.join(where, "cgroup.procs"),)
            return WorkerCgroup(2, (where,), joins, memory_bytes, pids, where)
        memory = os.path.join(tree.memory, name)
        os.mkdir(memory)
        made.append(memory)
        _limit_memory(1, memory, memory_bytes, lower=True)  # (from no limit)
        dirs, task = [memory], None
        if tree.pids is not None:
            task = os.path.join(tree.pids, name)
            os.mkdir(task)
            made.append(task)
            _write(os.path.join(task, "pids.max"), str(pids))
            dirs.append(task)
        procs = tuple(os.path.join(d, "cgroup.procs") for d in dirs)
        return WorkerCgroup(1, tuple(dirs), procs, memory_bytes, pids, task)
    except OSError:
        for where in reversed(made):
            with contextlib.suppress(OSError):
                os.rmdir(where)
        raise


def problem() -> str | None:
    """None when each worker can get a cgroup of its own here, else why not (once per
    process: making and removing a probe cgroup)."""
    if not _checked:
        why: str | None
        tree, why = _tree()
        if tree is not None:
            try:
                probe = _make(tree, f"{_PREFIX}{os.getpid()}-probe", 1 << 30, 64)
                why = None
                for where in probe.dirs:
                    os.rmdir(where)
            except OSError as exc:
                why = f"cannot make a cgroup under {tree.memory}: {exc}"
        _checked.append(why)
    return _checked[0]


def create(memory_bytes: int, processes: int) -> WorkerCgroup:
    """Make the cgroup of one worker, sized for its first job (`WorkerCgroup.fit` then sizes
    it for each job after).

    Args:
        memory_bytes: The job's memory limit (its files in the worker's tmpfs places count).
        processes: The job's process limit.

    Raises:
        OSError: It cannot be made (see `problem`).
    """
    tree, why = _tree()
    if tree is None:
        raise OSError(why)
    _sweep(tree)
    name = f"{_PREFIX}{os.getpid()}-{next(_counter)}"
    # Ours from before it is made: another thread's sweep must not take it for a dead worker's
    # between its mkdir and its first limit (that write then fails with ENODEV).
    dirs = [os.path.join(parent, name) for parent in (tree.memory, tree.pids) if parent]
    with _lock:
        if not _made:
            atexit.register(_remove_ours)
        for where in dirs:
            _made[where] = time.monotonic()
    try:
        return _make(tree, name, *sized(memory_bytes, processes))
    except OSError:
        with _lock:
            for where in dirs:
                _made.pop(where, None)
        raise


def _sweep(tree: _Tree) -> None:
    """Remove the empty cgroups of workers that are gone: ours made a while ago, and any of a
    process that has died (a cgroup that still holds a process cannot be removed)."""
    now = time.monotonic()
    for parent in (tree.memory, tree.pids):
        if parent is None:
            continue
        with contextlib.suppress(OSError):
            for name in os.listdir(parent):
                if not name.startswith(_PREFIX):
                    continue
                where = os.path.join(parent, name)
                owner = name[len(_PREFIX) :].split("-")[0]
                if owner == str(os.getpid()):
                    with _lock:  # not in _made: the probe, being made and removed
                        made = _made.get(where)
                    if made is None or now - made < _STALE_AFTER:
                        continue
                elif not owner.isdigit() or os.path.exists(f"/proc/{owner}"):
                    continue
                with contextlib.suppress(OSError):
                    os.rmdir(where)
                    with _lock:
                        _made.pop(where, None)


def _remove_ours() -> None:
    """At exit: stop what is left in our cgroups and remove them (a cgroup is busy until its
    last process is gone). What is left there are our own workers, which would end anyway
    once their channel closes with us: a sandbox that was never closed. One that cannot be
    removed now is removed by a later run, once this process is gone."""
    with _lock:
        left = list(_made)
    for _ in range(50):
        for where in list(left):
            try:
                os.rmdir(where)
                left.remove(where)
            except FileNotFoundError:
                left.remove(where)
            except OSError:
                _kill_members(where)
        if not left:
            return
        time.sleep(0.02)


def _kill_members(where: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        with open(os.path.join(where, "cgroup.procs")) as fh:
            pids = [int(line) for line in fh if line.strip()]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
