"""The seccomp filter every sandbox worker (and so every job) runs under: the kernel's riskiest
doors, shut.

Namespaces and a dropped capability set already keep a job from most of the kernel; what is left
are system calls that an unprivileged process may still make and that have been the way out of
sandboxes again and again. The filter refuses them, in the worker's zygote and in every process
below it (a filter cannot be removed, and no_new_privs keeps set-uid programs from escaping it):

- **New user namespaces** (``unshare`` and ``clone`` with ``CLONE_NEWUSER``): inside one a job
  holds every capability again (``unshare -U -r``: a root that can mount, make network
  devices, reach kernel code no unprivileged process reaches). ``clone3`` carries its flags in
  memory a filter cannot read, so it gets ``ENOSYS``: the C library then falls back to
  ``clone``, whose flags the filter reads. Other namespace flags need capabilities a job lacks.
- **io_uring** (``io_uring_setup``, ``_enter``, ``_register``): a second system-call interface
  that seccomp does not see, and a steady source of kernel bugs; ``ENOSYS``, as on a kernel
  without it, so runtimes fall back to ordinary calls.
- **Kernel keyrings** (``keyctl``, ``add_key``, ``request_key``): kernel state that is not
  namespaced and outlives the job.
- **Kernel programs and hooks**: ``bpf``, ``perf_event_open``, ``userfaultfd`` (a tool for
  winning kernel races).
- **Mounts and the filesystem's roots**: ``mount``, ``umount2``, the new mount API
  (``open_tree``, ``move_mount``, ``fsopen``, ``fsconfig``, ``fsmount``, ``fspick``,
  ``mount_setattr``), ``pivot_root``, ``chroot``, ``setns``, ``open_by_handle_at`` and
  ``name_to_handle_at`` (files by inode handle, past any mount: the classic container escape).
- **Another process's memory**: ``ptrace`` ``PTRACE_ATTACH``/``PTRACE_SEIZE`` (a job may still
  trace its own children, which ask with ``PTRACE_TRACEME``), ``process_vm_readv``/``writev``.
- **personality** flags other than the harmless ones (``ADDR_NO_RANDOMIZE`` would turn ASLR off,
  ``READ_IMPLIES_EXEC`` would make data executable): only Linux, Linux32 and UNAME26 are allowed.
- **The machine itself**: ``kexec_load``, ``kexec_file_load``, module loading, ``reboot``,
  ``swapon``/``swapoff``, ``acct``, ``syslog``, ``quotactl``, setting the clock, ``iopl`` and
  ``ioperm``, ``vhangup``, ``uselib``. These need capabilities a job does not hold; refusing
  them too costs nothing and holds if a capability were ever left by mistake.
- **memfd_create and shmget**, only where the worker has no memory cgroup (`_cgroup`): their
  pages are counted by no rlimit (a memfd written with ``write()`` and never mapped, a System V
  segment once detached, are not address space), so without a cgroup to count them they are
  refused. (POSIX shared memory is a file in ``/dev/shm``, a size-limited tmpfs.)

Refused calls fail with ``EPERM`` (``ENOSYS`` where noted), never kill: a program at fault gets
its own error. System calls of another ABI (i386 or x32 on x86-64, arm32 on aarch64) kill the
process: their numbers differ, so the filter could not judge them.

The filter is a classic BPF program built here in pure Python, with no libseccomp binding
(Debian's ``python3-seccomp`` serves only the system interpreter; PyPI's are third-party ctypes
wrappers of the C library). bubblewrap loads it (``--seccomp FD``); the ``unshare`` path's root
builder loads it itself; in a docker container, where the engine's own profile is already
loaded, this module is the launcher that stacks it on top (``python3 -I -S _seccomp.py HEX --
COMMAND...``). Built for x86-64 and aarch64; elsewhere `filter_problem` says why there is none
(and workers run without it). Standard library only: `install` runs inside the sandbox.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys
from dataclasses import dataclass

__all__ = ["ARCHES", "Rule", "build", "filter_problem", "install", "refused_calls"]

# Classic BPF opcodes and seccomp return values (linux/filter.h, linux/seccomp.h).
_LD_W_ABS, _JEQ, _JGE, _JSET, _JA, _RET = 0x20, 0x15, 0x35, 0x45, 0x05, 0x06
_ALLOW, _KILL_PROCESS, _ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_EPERM, _ENOSYS = 1, 38
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (arg0's low 32 bits, little-endian)
_X32_BIT = 0x40000000
CLONE_NEWUSER = 0x10000000
_PTRACE_ATTACH, _PTRACE_SEIZE = 16, 0x4206
# personality(2) values Docker's default profile allows too: Linux, Linux32, UNAME26, and
# 0xffffffff (a query that changes nothing).
_PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)

ARCHES = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
"""The machines a filter is built for, with their AUDIT_ARCH value."""

# name -> (x86-64 number, aarch64 number); None: the call does not exist there.
_CALLS: dict[str, tuple[int | None, int | None]] = {
    "unshare": (272, 97),
    "clone": (56, 220),
    "clone3": (435, 435),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "mount": (165, 40),
    "umount2": (166, 39),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "setns": (308, 268),
    "open_by_handle_at": (304, 265),
    "name_to_handle_at": (303, 264),
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "personality": (135, 92),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "reboot": (169, 142),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "acct": (163, 89),
    "syslog": (103, 116),
    "quotactl": (179, 60),
    "settimeofday": (164, 170),
    "clock_settime": (227, 112),
    "clock_adjtime": (305, 266),
    "adjtimex": (159, 171),
    "iopl": (172, None),
    "ioperm": (173, None),
    "vhangup": (153, 58),
    "uselib": (134, None),
    "memfd_create": (319, 279),
    "shmget": (29, 194),
}
_UNCOUNTED = ("memfd_create", "shmget")  # memory no rlimit counts: refused without a cgroup


@dataclass(frozen=True, slots=True)
class Rule:
    """How one system call is refused.

    Attributes:
        call: Its name (a key of the syscall table).
        errno: The error it fails with.
        when_flags: Refuse only when the first argument has one of these bits (else always).
        when_in: Refuse only when the first argument is one of these values.
        unless_in: Refuse unless the first argument is one of these values.
    """

    call: str
    errno: int = _EPERM
    when_flags: int = 0
    when_in: tuple[int, ...] = ()
    unless_in: tuple[int, ...] = ()


def _rules(without_cgroup: bool) -> list[Rule]:
    # The calls that are tried most often come first: a filter runs on every system call, and
    # an allowed one walks the whole list.
    rules = [
        Rule("clone", when_flags=CLONE_NEWUSER),
        Rule("clone3", errno=_ENOSYS),
        Rule("unshare", when_flags=CLONE_NEWUSER),
        Rule("io_uring_setup", errno=_ENOSYS),
        Rule("io_uring_enter", errno=_ENOSYS),
        Rule("io_uring_register", errno=_ENOSYS),
        Rule("ptrace", when_in=(_PTRACE_ATTACH, _PTRACE_SEIZE)),
        Rule("personality", unless_in=_PERSONALITIES),
    ]
    plain = [name for name in _CALLS if name not in {r.call for r in rules}]
    rules += [Rule(name) for name in plain if name not in _UNCOUNTED or without_cgroup]
    return rules


def refused_calls(without_cgroup: bool) -> list[str]:
    """The names of the system calls the filter refuses (some only for some arguments)."""
    return [rule.call for rule in _rules(without_cgroup)]


class _Program:
    """A classic BPF program, with forward jumps to labels resolved at the end."""

    def __init__(self) -> None:
        self.ops: list[tuple[int, int | str, int | str, int | str]] = []
        self.labels: dict[str, int] = {}

    def add(self, code: int, k: int | str = 0, jt: int | str = 0, jf: int | str = 0) -> None:
        """One instruction; a str jump target (jt, jf; k for an unconditional jump) is a label."""
        self.ops.append((code, jt, jf, k))

    def label(self, name: str) -> None:
        self.labels[name] = len(self.ops)

    def assemble(self) -> bytes:
        out = bytearray()
        for at, (code, jt, jf, k) in enumerate(self.ops):
            offsets = [self.labels[j] - at - 1 if isinstance(j, str) else j for j in (jt, jf)]
            if not all(0 <= o <= 255 for o in offsets):
                raise ValueError(f"seccomp filter: jump out of range at {at}: {offsets}")
            value = self.labels[k] - at - 1 if isinstance(k, str) else k
            out += struct.pack("<HBBI", code, offsets[0], offsets[1], value)
        return bytes(out)


def build(machine: str, without_cgroup: bool = False) -> bytes:
    """The filter for `machine` (``os.uname().machine``), as struct sock_filter instructions.

    Args:
        machine: ``x86_64`` or ``aarch64``.
        without_cgroup: No memory cgroup counts the worker's pages: refuse ``memfd_create``
            and ``shmget`` too.

    Raises:
        ValueError: No filter is known for `machine`.
    """
    if machine not in ARCHES:
        raise ValueError(f"no seccomp filter for {machine!r}: known are {sorted(ARCHES)}")
    column = 0 if machine == "x86_64" else 1
    prog = _Program()
    prog.add(_LD_W_ABS, _ARCH)
    prog.add(_JEQ, ARCHES[machine], jt=0, jf="kill")
    prog.add(_LD_W_ABS, _NR)
    if machine == "x86_64":  # x32 calls carry this bit: another ABI, other numbers
        prog.add(_JGE, _X32_BIT, jt="kill", jf=0)
    for n, rule in enumerate(_rules(without_cgroup)):
        number = _CALLS[rule.call][column]
        if number is None:
            continue
        refuse, reload, nxt = f"refuse{n}", f"reload{n}", f"next{n}"
        action = _ERRNO | rule.errno
        if not (rule.when_flags or rule.when_in or rule.unless_in):
            prog.add(_JEQ, number, jt=0, jf=1)
            prog.add(_RET, action)
            continue
        prog.add(_JEQ, number, jt=0, jf=nxt)
        prog.add(_LD_W_ABS, _ARG0)
        if rule.when_flags:
            prog.add(_JSET, rule.when_flags, jt=refuse, jf=reload)
        elif rule.when_in:
            for value in rule.when_in:
                prog.add(_JEQ, value, jt=refuse, jf=0)
            prog.add(_JA, reload)
        else:
            for value in rule.unless_in:
                prog.add(_JEQ, value, jt=reload, jf=0)
        prog.label(refuse)
        prog.add(_RET, action)
        prog.label(reload)
        prog.add(_LD_W_ABS, _NR)
        prog.label(nxt)
    prog.add(_RET, _ALLOW)
    prog.label("kill")
    prog.add(_RET, _KILL_PROCESS)
    return prog.assemble()


def filter_problem(machine: str | None = None) -> str | None:
    """None when a filter can be built for this machine, else why not."""
    machine = machine or os.uname().machine
    if machine in ARCHES:
        return None
    return f"no seccomp filter for {machine} (built for {', '.join(sorted(ARCHES))})"


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(program: bytes) -> None:
    """Load `program` as this process's seccomp filter (and its descendants').

    no_new_privs is set first: the kernel requires it of a process without CAP_SYS_ADMIN, and
    it keeps set-uid programs from running without the filter's limits.

    Raises:
        OSError: The kernel refused the filter.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        errno = ctypes.get_errno()
        raise OSError(errno, f"no_new_privs: {os.strerror(errno)}")
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
    if libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"seccomp filter: {os.strerror(errno)}")


def main(argv: list[str]) -> None:
    """As a launcher: ``_seccomp.py HEX -- COMMAND...``: load the filter, exec the command."""
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: _seccomp.py FILTER_HEX -- COMMAND...\n")
        sys.exit(2)
    try:
        install(bytes.fromhex(argv[0]))
        os.execv(argv[2], argv[2:])
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"referee sandbox (seccomp launcher): {exc}\n")
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
