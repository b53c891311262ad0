"""Hard limits inside jobs: the kernel doors a job finds shut (the seccomp filter), and memory
and processes counted per worker, every page included (the worker's cgroup).

Each attack runs in the real sandbox, on both namespace paths (bubblewrap, and util-linux
``unshare`` with referee's root builder), and asserts the honest outcome: the program's own
error or failure, the host's limits held.
"""

from __future__ import annotations

import contextlib
import os
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from referee.verifiers.sandbox import (
    Job,
    Limits,
    LocalSandbox,
    RunResult,
    _cgroup,
    _isolation,
    _seccomp,
)
from referee.verifiers.sandbox._isolation import unshare_problem
from referee.verifiers.sandbox.local import bwrap_problem
from referee.verifiers.sandbox.pool import WorkerPool

X86_64 = os.uname().machine == "x86_64"
EPERM, ENOSYS = 1, 38

# A job that makes one system call and prints "refused ERRNO", or "made" when it went through.
CALL = """
import ctypes, os, subprocess
libc = ctypes.CDLL(None, use_errno=True)
def call(*args):
    result = libc.syscall(*args)
    if result == 0 and os.getpid() != PID:  # a clone's child: it got through
        os._exit(0)
    print("refused", ctypes.get_errno()) if result < 0 else print("made")
PID = os.getpid()
"""


def _box(mode: str) -> LocalSandbox:
    if mode == "bwrap" and bwrap_problem() is not None:
        pytest.skip(f"bubblewrap unavailable: {bwrap_problem()}")
    if mode == "unshare" and unshare_problem() is not None:
        pytest.skip(f"the unshare path is unavailable: {unshare_problem()}")
    return LocalSandbox(workers=1, isolation=mode)  # type: ignore[arg-type]


@pytest.fixture(scope="module", params=["bwrap", "unshare"])
def box(request: pytest.FixtureRequest) -> Iterator[LocalSandbox]:
    sandbox = _box(request.param)
    yield sandbox
    sandbox.close()


def _call(box: LocalSandbox, code: str, limits: Limits | None = None) -> RunResult:
    job = Job(source=CALL + textwrap.dedent(code), limits=limits or Limits())
    return box.run(job)


def _said(result: RunResult) -> str:
    """What a job printed, once it ran to its end."""
    assert result.ok, result.stderr.decode(errors="replace")[-2000:]
    return result.stdout.decode().strip()


# --- user namespaces: a job never gets a full capability set back -----------------------------


def test_a_python_job_cannot_unshare_a_user_namespace(box: LocalSandbox) -> None:
    # unshare(CLONE_NEWUSER): the call os.unshare makes on Python 3.12 and later.
    code = f"call({272 if X86_64 else 97}, 0x10000000)"
    assert _said(_call(box, code)) == f"refused {EPERM}"


def test_a_python_job_cannot_clone_into_a_user_namespace(box: LocalSandbox) -> None:
    # clone(CLONE_NEWUSER | SIGCHLD) with no new stack: a fork into a new user namespace.
    code = f"call({56 if X86_64 else 220}, 0x10000000 | 17, 0, 0, 0, 0)"
    assert _said(_call(box, code)) == f"refused {EPERM}"


def test_clone3_is_refused_as_missing_so_the_c_library_falls_back_to_clone(
    box: LocalSandbox,
) -> None:
    # clone3's flags lie in memory the filter cannot read: ENOSYS, as on an older kernel (glibc
    # then uses clone, whose flags it can). Here with CLONE_NEWUSER, which would go through.
    code = """
    args = (ctypes.c_uint64 * 11)()
    args[0], args[4] = 0x10000000, 17  # flags: CLONE_NEWUSER; exit_signal: SIGCHLD
    call(435, args, 88)
    """
    assert _said(_call(box, code)) == f"refused {ENOSYS}"


def test_threads_processes_and_programs_still_start(box: LocalSandbox) -> None:
    # What a job does every day goes through the same calls (clone, clone3's fallback, exec).
    code = """
    import threading
    out = []
    worker = threading.Thread(target=lambda: out.append("thread"))
    worker.start()
    worker.join()
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    out.append(str(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])))
    out.append(subprocess.run(["echo", "exec"], capture_output=True, text=True).stdout.strip())
    print(" ".join(out))
    """
    assert _said(_call(box, code)) == "thread 7 exec"


def test_a_command_job_cannot_become_root_in_a_user_namespace(box: LocalSandbox) -> None:
    result = box.run(Job(command=("unshare", "--user", "--map-root-user", "id", "-u")))
    assert result.exit_code not in (0, None)  # unshare's own failure
    assert b"Operation not permitted" in result.stderr
    assert result.stdout == b""


# --- io_uring and the other doors ------------------------------------------------------------


def test_a_job_cannot_set_up_io_uring(box: LocalSandbox) -> None:
    # io_uring_setup(8 entries, params): a ring whose calls seccomp would never see.
    code = "call(425, 8, (ctypes.c_char * 120)())"
    assert _said(_call(box, code)) == f"refused {ENOSYS}"


# Each call with arguments that, without the filter, get another answer here than EPERM (a
# key, an fd, EFAULT from a bad pointer, EINVAL, EBADF): EPERM is the filter's.
DOORS = {
    "keyctl: the session keyring's id": "call(250, 0, -3, 0)",
    "add_key: a key in the process keyring": 'call(248, b"user", b"k", b"v", 1, -2)',
    "request_key": 'call(249, b"user", b"nothing", None, 0)',
    "bpf: an unknown command": "call(321, 9999, None, 0)",
    "userfaultfd, user mode only": "call(323, 1)",
    "perf_event_open: task clock": """
        attr = (ctypes.c_uint32 * 32)()
        attr[0], attr[1], attr[2], attr[10] = 1, 128, 1, (1 << 5) | (1 << 6)
        call(298, attr, 0, -1, -1, 0)
    """,
    "mount, bad pointers": "call(165, 1, 1, 1, 0, 0)",
    "umount2, a bad pointer": "call(166, 1, 0)",
    "setns, a bad fd": "call(308, -1, 0)",
    "name_to_handle_at": 'call(303, -100, b".", None, None, 0)',
    "open_by_handle_at": "call(304, -1, None, 0)",
    "chroot, a bad pointer": "call(161, 1)",
    "personality: ASLR off": "call(135, 0x0040000)",
    "process_vm_readv": "call(310, os.getppid(), None, 0, None, 0, 0)",
    "kexec_load": "call(246, 0, 0, None, 0)",
    "ptrace: attach to a program it started": """
        child = subprocess.Popen(["sleep", "10"])
        call(101, 16, child.pid, 0, 0)
        child.kill()
    """,
}


@pytest.mark.skipif(not X86_64, reason="the calls are made by their x86-64 numbers")
@pytest.mark.parametrize("code", DOORS.values(), ids=DOORS.keys())
def test_the_kernels_other_doors_are_shut(box: LocalSandbox, code: str) -> None:
    assert _said(_call(box, code)) == f"refused {EPERM}"


def test_personality_queries_and_harmless_changes_still_work(box: LocalSandbox) -> None:
    code = f"call({135 if X86_64 else 92}, 0xFFFFFFFF)\ncall({135 if X86_64 else 92}, 0)"
    assert _said(_call(box, code)).split() == ["made", "made"]


# --- memory: every page counted --------------------------------------------------------------

# Fills memfds (each under the file-size limit, never mapped: no address space) until it holds
# `total` bytes, then says so. Without a cgroup nothing counts these pages.
MEMFD = """
total, chunk, held, files = TOTAL, 32 << 20, 0, []
block = b"x" * (1 << 20)
while held < total:
    fd = os.memfd_create("hoard")
    files.append(fd)
    for _ in range(chunk >> 20):
        os.write(fd, block)
    held += chunk
print("held", held)
"""

# The same with System V shared memory: attached a piece at a time (under RLIMIT_AS), touched,
# detached; the segments keep the pages.
SYSV = """
total, chunk, held = TOTAL, 64 << 20, 0
libc.shmat.restype = ctypes.c_void_p
while held < total:
    ident = libc.shmget(0, chunk, 0o600)
    if ident < 0:
        raise SystemExit(f"shm: errno {ctypes.get_errno()}")
    address = libc.shmat(ident, None, 0)
    ctypes.memset(address, 1, chunk)
    libc.shmdt(ctypes.c_void_p(address))
    held += chunk
print("held", held)
"""

SMALL = Limits(memory_bytes=256 << 20, wall_seconds=30, cpu_seconds=30)


def _hoard(box: LocalSandbox, code: str) -> RunResult:
    if _cgroup.problem() is not None:
        pytest.skip(f"no cgroup per worker here: {_cgroup.problem()}")
    return _call(box, code.replace("TOTAL", str(2 << 30)), SMALL)


def test_memfd_pages_count_against_the_memory_limit(box: LocalSandbox) -> None:
    result = _hoard(box, MEMFD)
    # Stopped short of 2 GiB: killed (the worker's memory cgroup is full), a program at fault.
    assert not result.ok
    assert b"held" not in result.stdout
    assert box.run(Job(source="print('next')")).stdout == b"next\n"  # and the next job runs


def test_shared_memory_pages_count_against_the_memory_limit(box: LocalSandbox) -> None:
    result = _hoard(box, SYSV)
    assert not result.ok
    assert b"held" not in result.stdout
    assert box.run(Job(source="print('next')")).stdout == b"next\n"


@pytest.mark.parametrize("mode", ["bwrap", "unshare"])
def test_each_worker_runs_in_a_cgroup_sized_for_its_job(mode: str) -> None:
    if _cgroup.problem() is not None:
        pytest.skip(f"no cgroup per worker here: {_cgroup.problem()}")
    box = _box(mode)
    limits = Limits(memory_bytes=300 << 20, processes=20, disk_bytes=32 << 20)
    try:
        box.run(Job(source="pass", limits=limits))  # the worker is started for these
        (pid,) = box.zygote_pids()
        _assert_cgroup(pid, limits)
        # The same worker, for jobs of other limits: each job's own, lower or higher (before,
        # every job had the limits of the job its worker was started for).
        for other in (Limits(memory_bytes=100 << 20, processes=10), Limits()):
            box.run(Job(source="pass", limits=other))
            assert box.zygote_pids() == [pid]
            _assert_cgroup(pid, other)
    finally:
        box.close()


def _assert_cgroup(pid: int, limits: Limits) -> None:
    paths = dict(
        line.split(":", 2)[1:] for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    )
    memory = limits.memory_bytes + _cgroup.SLACK  # (its files count: no room for disk besides)
    if "" in paths and "memory" not in paths:  # v2
        where = Path("/sys/fs/cgroup") / paths[""].lstrip("/")
        assert where.name.startswith("referee-")
        assert (where / "memory.max").read_text().strip() == str(memory)
        assert (where / "pids.max").read_text().strip() == str(
            limits.processes + _cgroup.PIDS_SLACK
        )
        return
    assert paths["memory"].rsplit("/", 1)[1].startswith("referee-")
    where = Path("/sys/fs/cgroup/memory") / paths["memory"].lstrip("/")
    assert int((where / "memory.limit_in_bytes").read_text()) == memory
    pids = Path("/sys/fs/cgroup/pids") / paths["pids"].lstrip("/")
    assert int((pids / "pids.max").read_text()) == limits.processes + _cgroup.PIDS_SLACK


# Files in the job's writable places (tmpfs: memory), each under the file-size limit.
FILES = """
total, chunk, held, n = TOTAL, 32 << 20, 0, 0
block = b"x" * (1 << 20)
while held < total:
    place = ("/dev/shm", "/tmp", "/var/tmp", ".")[n % 4]
    with open(f"{place}/hoard{n}", "wb") as fh:
        for _ in range(chunk >> 20):
            fh.write(block)
    held, n = held + chunk, n + 1
print("held", held)
"""

HOARDS = {"memfds": MEMFD, "shared memory": SYSV.replace("64 << 20", "32 << 20"), "files": FILES}
TIGHT = Limits(memory_bytes=128 << 20, wall_seconds=30, cpu_seconds=30)


def _memory_dir(pid: int) -> Path:
    """The directory of the memory cgroup of a process (v1's memory hierarchy, or v2's)."""
    paths = dict(
        line.split(":", 2)[1:] for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    )
    if "memory" in paths:
        return Path("/sys/fs/cgroup/memory") / paths["memory"].lstrip("/")
    return Path("/sys/fs/cgroup") / paths[""].lstrip("/")


def _peak(where: Path, reset: bool = False) -> int:
    """The most memory the cgroup at `where` has held (since the last reset): what the host
    paid at most."""
    name = "memory.max_usage_in_bytes" if (where / "memory.max_usage_in_bytes").exists() else ""
    path = where / (name or "memory.peak")
    if not path.exists():
        pytest.skip("this kernel keeps no peak of a cgroup's memory")
    if reset:
        try:
            path.write_text("0" if name else "reset")
        except OSError:
            pytest.skip("this kernel cannot reset a cgroup's peak (v2 before Linux 6.12)")
    return int(path.read_text().split()[0])


@pytest.mark.parametrize("hoard", HOARDS.values(), ids=HOARDS.keys())
def test_a_job_holds_no_more_memory_than_its_own_limit(box: LocalSandbox, hoard: str) -> None:
    # 400 MB under a limit of 128 MB: the worker's cgroup was sized for the job it started
    # with and left room for its disk besides (the kernel charges a memfd's pages as a tmpfs
    # file's), so the job held 416 MiB of memfds (its cgroup peaked at 426 MiB), and with a
    # first job of 1 GiB, all 400. Now it is stopped at its own limit, before the host pays more.
    if _cgroup.problem() is not None:
        pytest.skip(f"no cgroup per worker here: {_cgroup.problem()}")
    assert box.run(Job(source="pass", limits=Limits())).ok  # a job of 1 GiB first
    (pid,) = box.zygote_pids()
    where = _memory_dir(pid)
    _peak(where, reset=True)
    result = _call(box, hoard.replace("TOTAL", str(400 << 20)), TIGHT)
    assert not result.ok  # killed: a program at fault
    assert b"held" not in result.stdout
    assert _peak(where) <= TIGHT.memory_bytes + _cgroup.SLACK
    assert box.run(Job(source="print('next')")).stdout == b"next\n"


def test_the_job_is_killed_not_its_worker(box: LocalSandbox) -> None:
    # A job whose pages are in memfds maps few of them; the OOM killer, which weighs what a
    # process maps, took the zygote instead (the worker lost with the job's output).
    if _cgroup.problem() is not None:
        pytest.skip(f"no cgroup per worker here: {_cgroup.problem()}")
    box.run(Job(source="pass", limits=TIGHT))
    before = box.zygote_pids()
    code = "print('started', flush=True)\n" + MEMFD.replace("TOTAL", str(400 << 20))
    result = _call(box, code, TIGHT)
    assert result.signal == 9 and result.stdout == b"started\n"
    assert box.zygote_pids() == before


def test_a_job_of_a_higher_limit_after_a_lower_one_gets_all_of_it(box: LocalSandbox) -> None:
    if _cgroup.problem() is not None:
        pytest.skip(f"no cgroup per worker here: {_cgroup.problem()}")
    box.run(Job(source="pass", limits=TIGHT))
    roomy = Limits(memory_bytes=640 << 20, wall_seconds=30, cpu_seconds=30)
    held = _call(box, MEMFD.replace("TOTAL", str(320 << 20)), roomy)
    assert _said(held) == f"held {320 << 20}"
    assert not _call(box, MEMFD.replace("TOTAL", str(320 << 20)), TIGHT).ok  # and back down


def test_a_program_hoarding_memfds_scores_as_failing_tests_within_its_limit() -> None:
    # Through a real reward: python_tests at memory_mb 128, a program that holds 400 MB of
    # memfds when it loads. Its verdict: its tests fail (0, with the reason); the host paid
    # no more than its limit.
    if _cgroup.problem() is not None or bwrap_problem() is not None:
        pytest.skip(f"no cgroup per worker here: {_cgroup.problem() or bwrap_problem()}")
    from referee.rewards import PythonTests
    from referee.rollout import Rollout

    options = {"backend": "local", "isolation": "bwrap", "workers": 1}
    reward = PythonTests(sandbox=options, memory_mb=128, timeout=30)
    test = {
        "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n",
        "entry_point": "add",
    }

    def score(code: str) -> Any:
        completion = f"```python\n{code}```"
        return reward.score_sync(Rollout(prompt="p", completion=completion, reference=test))

    assert score("def add(a, b):\n    return a + b\n").value == 1.0  # (starts the worker)
    (pid,) = reward.open_sandbox().zygote_pids()  # type: ignore[attr-defined]
    where = _memory_dir(pid)
    _peak(where, reset=True)
    hoard = "import os\n" + MEMFD.replace("TOTAL", str(400 << 20))
    result = score(hoard + "def add(a, b):\n    return a + b\n")
    assert result.failure is None, result.failure
    assert result.value == 0.0 and result.reason
    assert _peak(where) <= (128 << 20) + _cgroup.SLACK


LEFT_OPEN = """
import json
from referee.verifiers.sandbox import Job, LocalSandbox, _cgroup
box = LocalSandbox(workers=2, isolation="bwrap")
box.run(Job(source="pass"))
print(json.dumps(sorted(_cgroup._made)))  # and exit with the sandbox never closed
"""


def test_worker_cgroups_are_removed_at_exit_even_when_a_sandbox_is_left_open() -> None:
    if _cgroup.problem() is not None or bwrap_problem() is not None:
        pytest.skip(f"no cgroup per worker here: {_cgroup.problem() or bwrap_problem()}")
    import json
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [sys.executable, "-c", LEFT_OPEN], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    made = json.loads(done.stdout.splitlines()[-1])
    assert made and all(Path(where).name.startswith("referee-") for where in made)
    assert [where for where in made if os.path.exists(where)] == []


@pytest.fixture(scope="module")
def without_cgroup() -> Iterator[LocalSandbox]:
    """A sandbox started as where no cgroup can be made (the fallback)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_isolation.HARDENING, "cgroup", False)  # read when a worker starts
        sandbox = _box("bwrap")
        yield sandbox
        sandbox.close()


def test_without_a_cgroup_memfd_is_refused(without_cgroup: LocalSandbox) -> None:
    result = _call(without_cgroup, MEMFD.replace("TOTAL", str(2 << 30)), SMALL)
    assert result.exit_code == 1  # the program's own error, at its first memfd
    assert result.stderr.strip().endswith(b"PermissionError: [Errno 1] Operation not permitted")
    assert result.stdout == b""


def test_without_a_cgroup_shared_memory_is_refused(without_cgroup: LocalSandbox) -> None:
    result = _call(without_cgroup, SYSV.replace("TOTAL", str(2 << 30)), SMALL)
    assert result.exit_code == 1
    assert result.stderr.strip().endswith(f"shm: errno {EPERM}".encode())


# --- the filter program itself ---------------------------------------------------------------


def _run_filter(program: bytes, arch: int, nr: int, arg0: int = 0) -> int:
    """What `program` answers for one system call: a classic BPF interpreter for the
    instructions the filter uses."""
    import struct

    data = struct.pack("<iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    ops: list[tuple[int, int, int, int]] = [
        struct.unpack_from("<HBBI", program, at) for at in range(0, len(program), 8)
    ]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = ops[pc]
        if code == 0x20:
            (acc,) = struct.unpack_from("<I", data, k)
            pc += 1
        elif code == 0x06:
            return k
        elif code == 0x05:
            pc += 1 + k
        else:
            taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += 1 + (jt if taken else jf)


@pytest.mark.parametrize("machine", sorted(_seccomp.ARCHES))
def test_the_filter_refuses_what_it_says_and_allows_the_rest(machine: str) -> None:
    program = _seccomp.build(machine)
    arch = _seccomp.ARCHES[machine]
    column = 0 if machine == "x86_64" else 1
    calls = _seccomp._CALLS
    allow, kill = 0x7FFF0000, 0x80000000
    for name in _seccomp.refused_calls(without_cgroup=False):
        nr = calls[name][column]
        if nr is None or name in ("clone", "unshare", "ptrace", "personality"):
            continue
        assert _run_filter(program, arch, nr) & 0xFFFF0000 == 0x00050000, name
    clone, unshare = calls["clone"][column], calls["unshare"][column]
    assert clone is not None and unshare is not None
    assert _run_filter(program, arch, clone, 0x10000000 | 17) == 0x00050000 | EPERM
    assert _run_filter(program, arch, clone, 0x00010000 | 17) == allow  # a thread's flags
    assert _run_filter(program, arch, unshare, 0x10000000) == 0x00050000 | EPERM
    assert _run_filter(program, arch, unshare, 0x400) == allow  # CLONE_FILES
    memfd = calls["memfd_create"][column] or 0
    assert _run_filter(program, arch, memfd) == allow  # counted by the worker's cgroup
    fallback = _seccomp.build(machine, without_cgroup=True)
    assert _run_filter(fallback, arch, memfd) == 0x00050000 | EPERM
    assert _run_filter(program, arch, 0) == allow  # read (x86-64) / io_setup (aarch64)
    assert _run_filter(program, 0x40000003, 1) == kill  # i386 on x86-64: not judged, killed
    if machine == "x86_64":
        assert _run_filter(program, arch, 0x40000000 | 272) == kill  # x32


# --- the docker backend: the same refusals, on top of the engine's own profile -------------


@pytest.fixture(scope="module")
def docker_box(docker_engine: str) -> Iterator[WorkerPool]:
    from referee.verifiers.sandbox.docker import DockerSandbox

    sandbox = DockerSandbox(workers=1, base_url=docker_engine, memory_bytes=512 << 20)
    yield sandbox
    sandbox.close()


DOCKER_ATTACKS = {
    # The engine's profile refuses these only from 25.0 (io_uring) or not at all (ptrace).
    "io_uring": ("call(425, 8, (ctypes.c_char * 120)())", ENOSYS),
    "ptrace attach": (DOORS["ptrace: attach to a program it started"], EPERM),
    "a user namespace": ("call(272, 0x10000000)", EPERM),
    "a user namespace through clone3": (
        "args = (ctypes.c_uint64 * 11)()\nargs[0], args[4] = 0x10000000, 17\ncall(435, args, 88)",
        ENOSYS,
    ),
}


@pytest.mark.skipif(not X86_64, reason="the calls are made by their x86-64 numbers")
@pytest.mark.parametrize("attack", DOCKER_ATTACKS.values(), ids=DOCKER_ATTACKS.keys())
def test_a_docker_job_meets_the_same_refusals(
    docker_box: WorkerPool, attack: tuple[str, int]
) -> None:
    code, errno = attack
    result = docker_box.run(Job(source=CALL + textwrap.dedent(code)))
    assert _said(result) == f"refused {errno}"


def test_a_docker_command_job_cannot_become_root_in_a_user_namespace(
    docker_box: WorkerPool,
) -> None:
    result = docker_box.run(Job(command=("unshare", "--user", "--map-root-user", "id", "-u")))
    assert result.exit_code not in (0, None)
    assert result.stdout == b""


def test_docker_memfd_pages_count_against_the_containers_memory(docker_box: WorkerPool) -> None:
    job = Job(source=CALL + MEMFD.replace("TOTAL", str(2 << 30)), limits=SMALL)
    result = docker_box.run(job)
    assert not result.ok
    assert b"held" not in result.stdout


def test_a_docker_job_holds_no_more_memory_than_its_own_limit(docker_box: WorkerPool) -> None:
    # The container's memory was the pool's (512 MB here, 2 GiB by default) whatever the
    # job's: a job of 128 MB held 400 MB of memfds.
    docker_box.run(Job(source="pass", limits=Limits()))  # a job of 1 GiB: the pool's 512 MB
    assert docker_box.run(Job(source="pass", limits=TIGHT)).ok  # the same container, resized
    (worker,) = docker_box._idle  # type: ignore[attr-defined]
    worker.container.reload()
    assert worker.container.attrs["HostConfig"]["Memory"] == TIGHT.memory_bytes + _cgroup.SLACK
    result = docker_box.run(Job(source=CALL + MEMFD.replace("TOTAL", str(400 << 20)), limits=TIGHT))
    assert not result.ok
    assert b"held" not in result.stdout
    roomy = Limits(memory_bytes=448 << 20, wall_seconds=30, cpu_seconds=30)
    held = docker_box.run(Job(source=CALL + MEMFD.replace("TOTAL", str(320 << 20)), limits=roomy))
    assert _said(held) == f"held {320 << 20}"


def test_a_sweep_leaves_a_cgroup_another_thread_is_making(monkeypatch: pytest.MonkeyPatch) -> None:
    # Workers start on several threads: one thread's sweep ran between another's mkdir and its
    # first limit, took the empty cgroup for a dead worker's and removed it; the limit's write
    # then failed with ENODEV and a correct patch got Failure("sandbox").
    if _cgroup.problem() is not None:
        pytest.skip(f"no cgroup per worker here: {_cgroup.problem()}")
    make, seen = _cgroup._make, []

    def make_then_sweep(tree: Any, name: str, memory_bytes: int, pids: int) -> Any:
        made = make(tree, name, memory_bytes, pids)
        _cgroup._sweep(tree)  # another thread's create, now
        seen.extend(os.path.isdir(where) for where in made.dirs)
        return made

    monkeypatch.setattr(_cgroup, "_make", make_then_sweep)
    cgroup = _cgroup.create(64 << 20, 8)
    try:
        assert seen and all(seen)
    finally:
        for where in cgroup.dirs:
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(where)


def test_a_job_stopped_at_its_cpu_time_ran_over_time(box: LocalSandbox) -> None:
    # On a loaded machine the CPU limit can fire before the wall clock: the same verdict.
    spin = Limits(wall_seconds=30, cpu_seconds=1)
    result = box.run(Job(source="while True:\n    pass\n", limits=spin))
    assert not result.timed_out and result.signal == 24
    assert result.over_time
    assert "CPU time" in result.describe()
    assert not box.run(Job(source="print('next')")).over_time


def test_a_file_holding_a_lone_surrogate_is_written_as_its_bytes(box: LocalSandbox) -> None:
    # The policy's text can hold one (JSON's "\ud800"); it raised UnicodeEncodeError in the
    # host, a Failure, where the program it wrote is simply not valid UTF-8.
    files = {"prog.py": "x = '\ud800'\nprint('ran')\n"}
    result = box.run(Job(command=("python3", "prog.py"), files=files))
    assert not result.ok and b"ran" not in result.stdout
    assert b"utf-8" in result.stderr.lower() or b"utf8" in result.stderr.lower(), result.stderr
    shown = box.run(Job(command=("sh", "-c", "od -An -tx1 prog.py | head -1"), files=files))
    assert b"ed a0 80" in shown.stdout  # the surrogate's own three bytes
