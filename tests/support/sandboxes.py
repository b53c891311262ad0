"""Looking into sandbox workers from the host (their processes, what their writable places
hold), and jobs that plant traces in a worker or probe one for traces left by earlier jobs."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from referee.verifiers.sandbox import Job, Limits, RunResult
from referee.verifiers.sandbox.pool import WorkerPool
from referee.verifiers.sandbox.uids import claimed


def sandbox_processes(uids: set[int] | None = None) -> list[int]:
    """Live host processes of the sandbox uids this process holds (or `uids`), the workers
    themselves aside; zombies run nothing."""
    uids = claimed() if uids is None else uids
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        uid = int(fields.get("Uid", "0").split()[0])
        zombie = fields.get("State", "").strip().startswith("Z")
        if uid in uids and not zombie and b"_zygote.py" not in cmdline:
            found.append(int(entry.name))
    return found


PLACES = ("/work", "/tmp", "/var/tmp", "/dev/shm")
"""Where a job can write in an isolated worker: each emptied after every job."""


def left_in_places(box: WorkerPool) -> dict[str, list[str]]:
    """What the idle workers' writable places hold, seen from the host through each zygote's
    root; {} when all are empty (or no worker is left: docker replaces one after an anomaly)."""
    left = {}
    for pid in box.zygote_pids():
        for place in PLACES:
            try:
                entries = os.listdir(f"/proc/{pid}/root{place}")
            except PermissionError:
                pytest.skip("looking into a worker from the host needs root")
            if entries:
                left[f"{pid}:{place}"] = entries
    return left


LIMITS = Limits(wall_seconds=20, cpu_seconds=20)

# Walks every directory it could write in: the directories of writable mounts (a read-only
# mount with no mount below it is skipped: nothing there can be written).
WALK = """
import os
MOUNTS = [line.split()[4] for line in open("/proc/self/mountinfo")]

def writable_dirs():
    for base, dirs, files in os.walk("/"):
        dirs[:] = [d for d in dirs if os.path.join(base, d) not in ("/proc", "/sys")]
        read_only = os.statvfs(base).f_flag & os.ST_RDONLY
        if read_only and not any(m.startswith(base.rstrip("/") + "/") for m in MOUNTS):
            dirs[:] = []
            continue
        yield base, files
"""

PLANT = (
    WALK
    + """
import ctypes, json, sys, time
MARK = "referee-planted"
planted = []

def plant(d):
    try:
        for name in ("sitecustomize.py", "usercustomize.py", MARK + ".py"):
            with open(os.path.join(d, name), "w") as fh:
                fh.write(f"print({MARK!r}, __file__)\\n")
        with open(os.path.join(d, MARK + ".pth"), "w") as fh:
            fh.write(f"import sys; print({MARK!r})\\n")
        planted.append(d)
    except OSError:
        pass

home = os.path.expanduser("~")
version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
user_site = os.path.join(home, ".local", "lib", version, "site-packages")
os.makedirs(user_site)
for d in [os.getcwd(), home, user_site] + [base for base, _ in writable_dirs()]:
    if d not in planted:
        plant(d)
os.environ["REFEREE_PLANTED"] = "1"
os.putenv("PYTHONSTARTUP", os.path.join(os.getcwd(), MARK + ".py"))
libc = ctypes.CDLL(None, use_errno=True)
shm = libc.shmget(0x5EED, 4096, 0o1666)
key = 0
if os.uname().machine == "x86_64":  # add_key(2) to the user keyring
    key = libc.syscall(248, b"user", MARK.encode(), b"x", 1, -4)
if os.fork() == 0:  # a daemon, to be there for the next job
    os.setsid()
    if os.fork() == 0:
        time.sleep(60)
        os._exit(0)
    os._exit(0)
time.sleep(HOLD)  # jobs in one batch overlap, so each worker gets one
print(json.dumps({"planted": sorted(planted), "shm": shm, "key": key}))
"""
)

PROBE = (
    WALK
    + """
import ctypes, importlib.util, json, subprocess, sys
MARK = "referee-planted"
found = []
for base, files in writable_dirs():
    found += [os.path.join(base, f) for f in files if MARK in f or f.endswith("customize.py")]
found += [f"env {k}" for k, v in os.environ.items() if "PLANTED" in k or MARK in v]
for module in ("sitecustomize", "usercustomize", MARK):
    spec = importlib.util.find_spec(module)
    if spec is not None and spec.origin and MARK in open(spec.origin).read():
        found.append(f"import {module} from {spec.origin}")
fresh = subprocess.run([sys.executable, "-c", "pass"], capture_output=True, text=True)
if MARK in fresh.stdout + fresh.stderr:
    found.append("a fresh interpreter ran planted code")
ours = {1, os.getpid(), os.getppid()}
for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in ours]:
    try:
        found.append("process " + open(f"/proc/{pid}/cmdline").read().replace("\\0", " "))
    except OSError:
        pass
found += ["shm " + line for line in open("/proc/sysvipc/shm").read().splitlines()[1:]]
if os.uname().machine == "x86_64":
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(250, 10, -4, b"user", MARK.encode(), 0) > 0:  # KEYCTL_SEARCH
        found.append("key " + MARK)
print(json.dumps({"found": found, "cwd": os.getcwd(), "home": os.environ["HOME"]}))
"""
)


def _run(box: WorkerPool, source: str) -> dict[str, Any]:
    result: RunResult = box.run(Job(source=textwrap.dedent(source), limits=LIMITS))
    assert result.ok, result.stderr.decode(errors="replace")[-2000:]
    return json.loads(result.stdout.decode().splitlines()[-1])  # type: ignore[no-any-return]


def plant(box: WorkerPool, hold: float = 0.0) -> dict[str, Any]:
    return _run(box, f"HOLD = {hold}\n" + PLANT)


def probe(box: WorkerPool) -> dict[str, Any]:
    return _run(box, PROBE)
