"""The worker that runs inside the sandbox: it forks one child per job.

Standard library only; started by the host as ``python3 -s -S _zygote.py UID WORK ISOLATED
CHANNEL`` inside the sandbox, in a clean environment (``PYTHONHASHSEED=0``: the same hashes,
so the same set orders, in every worker). The Python interpreter is already warm when a job
arrives, so a Python job costs a fork, not an interpreter start.

Protocol (frames of `_wire`, on fds 0 and 1 of this process, moved out of the way at start):
  {"op": "run", job}          -> run to completion -> result
  {"op": "start", job}        -> load a Python module and serve calls -> {"loaded": [names]}
  {"op": "call", fn, args}    -> relay one call to the serving job -> {"ok": value} | {"error"}
  {"op": "finish"}            -> stop the serving job -> result
  {"op": "ping"}              -> {"pong": pid}

Every job starts clean: it runs in the same fresh work dir (its HOME), with a fresh
environment, and after it ends every process it left is killed and every place it could write
(`_scrub.PLACES` and the work dir) is emptied, before the result is sent. A job that leaves
something the wipe cannot remove is reported ``dirty``, and the host replaces the worker.
"""

import _signal  # type: ignore[import-not-found]  # (no stub: the C half of signal)
import base64
import contextlib
import os
import resource
import select
import signal
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from referee.verifiers.sandbox import _scrub, _wire
else:  # inside the sandbox referee is not importable: _wire sits beside this file
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _scrub
    import _wire

WORK = "/work"  # replaced from argv
ISOLATED = True  # in namespaces of our own (bubblewrap, unshare, a container); False: the host
IN_FD, OUT_FD = 10, 11
JOB_FILES = 256  # a job's RLIMIT_NOFILE
PLACES: "list[str]" = []  # the shared writable places that exist here (isolated only)
LIBC: Any = None  # ctypes' libc, loaded only where jobs share our uid (to keep us undumpable)
_RESET_SIGNALS = (int(signal.SIGINT), int(signal.SIGTERM), int(signal.SIGCHLD))
_SIGPIPE, _SIG_DFL = int(signal.SIGPIPE), int(signal.SIG_DFL)


def _become_subreaper() -> None:
    """Orphans of our jobs come back to us (not to the host's init) so we reap them."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _warm_up() -> None:
    """Do once here what every job does first, so forked jobs start warm.

    The first compile() in a process costs over a millisecond (parser state, allocator
    arenas); done in the zygote, every child inherits it. gc.freeze() then keeps the
    collector from walking (and so copying) the zygote's pages in each child.
    """
    import gc
    import io

    exec(compile("def _f(a, b):\n    return [a, b]\n_f(1, 2)\n", "<warm-up>", "exec"), {})
    io.TextIOWrapper(io.BytesIO(), encoding="utf-8").write("x")
    _wire.decode(_wire.encode({"a": (1, 2.5, "x")}))
    gc.collect()
    gc.freeze()


SOCK: Any = None  # the host channel as a socket, when it is one: it can carry file descriptors


def _setup_channels(channel: str | None) -> None:
    """The host channel on IN_FD/OUT_FD: stdin/stdout, an inherited socket (``fd:N``), or a
    unix socket the host listens on (a path: a container's stdio goes through the engine's
    multiplexed stream; a socket does not)."""
    global SOCK
    if channel:
        import socket

        if channel.startswith("fd:"):
            sock = socket.socket(fileno=int(channel[3:]))
        else:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(channel)
        fd = sock.detach()
        # Never inheritable (a job's exec drops them even if its closing of fds missed one);
        # the job child closes them itself before any of its code runs (`Job._child`).
        _place(fd, IN_FD)
        _place(fd, OUT_FD)
        if fd not in (IN_FD, OUT_FD):  # it may already be one of them: then keep it
            os.close(fd)
        SOCK = socket.socket(fileno=os.dup(IN_FD))
    else:
        _place(0, IN_FD)
        _place(1, OUT_FD)
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    os.close(null)


def _place(fd: int, target: int) -> None:
    """`fd` at `target` too, not inheritable (dup3 refuses a descriptor onto itself)."""
    if fd == target:
        os.set_inheritable(fd, False)
    else:
        os.dup2(fd, target, inheritable=False)


def _set_dumpable(flag: int) -> None:
    """Where jobs run as our own uid, only an undumpable zygote is safe from their ptrace (and
    so from a job that would plant code in it for the next); each job is made dumpable again."""
    global LIBC
    if LIBC is None:
        import ctypes

        LIBC = ctypes.CDLL(None, use_errno=True)
    LIBC.prctl(4, flag, 0, 0, 0)  # PR_SET_DUMPABLE


def _safe_path(root: str, name: str) -> str:
    path = os.path.normpath(os.path.join(root, name))
    if not path.startswith(root + os.sep) or os.path.isabs(name):
        raise ValueError(f"file name {name!r} leaves the work dir")
    return path


class Job:
    """One job: its files, its process, its output, and the cleanup after it."""

    def __init__(self, spec: dict[str, Any], uid: int) -> None:
        self.spec = spec
        self.uid = uid
        self.limits = spec["limits"]
        # The same path for every job: what a program sees never says how many ran before it.
        self.dir = os.path.join(WORK, "job")
        self.stdin_path = os.path.join(WORK, ".stdin")
        self.tmp = "/tmp" if ISOLATED else os.path.join(WORK, "tmp")
        self.dirty: str | None = None
        self.pid: int | None = None
        self.out = bytearray()
        self.err = bytearray()
        self.out_cut = self.err_cut = False
        self.output_limited = False
        self.timed_out = False
        self.status: int | None = None
        self.started = time.monotonic()
        self.deadline = self.started + self.limits["wall_seconds"]
        self.resp: _wire.Channel | None = None
        self.direct = False  # the host holds the call pipes (see handover)
        self.pidfd = -1

    # -- setup ------------------------------------------------------------------------------

    def prepare(self) -> None:
        os.mkdir(self.dir, 0o777)
        os.chmod(self.dir, 0o777)
        if not ISOLATED:  # the host's /tmp is shared: a well-behaved program gets one of its own
            os.mkdir(self.tmp, 0o1777)
            os.chmod(self.tmp, 0o1777)
        for name, data in self.spec.get("files", {}).items():
            path = _safe_path(self.dir, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as fh:
                fh.write(base64.b64decode(data))
            os.chmod(path, 0o644)
        stdin = base64.b64decode(self.spec.get("stdin", ""))
        if stdin:
            with open(self.stdin_path, "wb") as fh:
                fh.write(stdin)
        else:
            self.stdin_path = "/dev/null"
        if self.uid >= 0:
            if self.spec.get("files"):
                for base, dirs, files in os.walk(self.dir):
                    for name in dirs + files:
                        os.lchown(os.path.join(base, name), self.uid, self.uid)
            os.chown(self.dir, self.uid, self.uid)

    def spawn(self, serve: bool) -> None:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        req_r = req_w = resp_r = resp_w = -1
        if serve:
            req_r, req_w = os.pipe()
            resp_r, resp_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the job
            try:
                self._child(out_w, err_w, req_r, resp_w, serve)
            finally:
                os._exit(127)
        for fd in (out_w, err_w, req_r, resp_w):
            if fd >= 0:
                os.close(fd)
        self.pid = pid
        try:
            self.pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):  # Python < 3.9 or Linux < 5.3: poll instead
            self.pidfd = -1
        self.out_fd, self.err_fd = out_r, err_r
        self.req_fd = req_w
        # The program's own frames: its code can write anything there, so they are capped
        # at what a reply may be and read as the program's (`_wire.call_reply`).
        self.resp = _wire.Channel(resp_r, self.reply_limit()) if serve else None

    def reply_limit(self) -> int:
        return int(self.limits.get("reply_bytes", _wire.MAX_FRAME))

    def _child(self, out_w: int, err_w: int, req_r: int, resp_w: int, serve: bool) -> None:
        os.setsid()
        stdin = os.open(self.stdin_path, os.O_RDONLY)
        os.dup2(stdin, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        keep = 3
        if serve:
            os.dup2(req_r, 3)
            os.dup2(resp_w, 4)
            keep = 5
        # Every descriptor of ours (the host channel included) is gone before the job's code
        # runs (ours are all low numbers: each is the lowest free one when it is made, and the
        # inherited channel was moved to IN_FD/OUT_FD), so what the job writes reaches the host
        # only through its own pipes.
        os.closerange(keep, 65536)
        kind = self.spec["kind"]
        # _signal, not signal: its enum wrapping made every job copy some 35 pages more.
        for sig in _RESET_SIGNALS:
            _signal.signal(sig, _SIG_DFL)
        if kind == "exec":  # a program starts with SIGPIPE as it would anywhere (Python ignores it)
            _signal.signal(_SIGPIPE, _SIG_DFL)
        if LIBC is not None:
            _set_dumpable(1)
        lim = self.limits
        cpu = max(1, int(lim["cpu_seconds"] + 0.999))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_AS, (lim["memory_bytes"], lim["memory_bytes"]))
        resource.setrlimit(resource.RLIMIT_FSIZE, (lim["file_size_bytes"], lim["file_size_bytes"]))
        resource.setrlimit(resource.RLIMIT_NPROC, (lim["processes"], lim["processes"]))
        resource.setrlimit(resource.RLIMIT_NOFILE, (JOB_FILES, JOB_FILES))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))  # no POSIX queue outlives the job
        _first_to_kill()
        os.chdir(self.dir)
        if self.uid >= 0:
            os.setgroups([])
            os.setgid(self.uid)
            os.setuid(self.uid)
        os.umask(0o022)
        if kind == "exec":  # (a forked Python job has the job environment already: see main)
            argv = self.spec["command"]
            try:
                os.execvpe(argv[0], argv, dict(os.environ))
            except OSError as exc:
                os.write(2, (f"cannot run {argv[0]!r}: {exc}\n").encode())
                os._exit(127)
        _run_python(self.spec, serve)

    # -- waiting ----------------------------------------------------------------------------

    def _drain(self, timeout: float) -> list[int]:
        """Read output for up to `timeout` seconds; return the fds that became readable."""
        fds = [fd for fd in (self.out_fd, self.err_fd) if fd >= 0]
        if self.resp is not None and not self.resp.closed:
            fds.append(self.resp.fd)
        if self.pidfd >= 0 and self.status is None:
            fds.append(self.pidfd)  # readable the moment the job exits: no polling sleep
        if not fds:
            time.sleep(min(timeout, 0.001))
            return []
        ready, _, _ = select.select(fds, [], [], max(0.0, timeout))
        cap = self.limits["output_bytes"]
        for fd in ready:
            if fd == self.out_fd or fd == self.err_fd:  # (the pidfd needs no reading)
                chunk = os.read(fd, 1 << 16)
                is_out = fd == self.out_fd
                if not chunk:
                    os.close(fd)
                    if is_out:
                        self.out_fd = -1
                    else:
                        self.err_fd = -1
                    continue
                buf = self.out if is_out else self.err
                room = cap - len(buf)
                buf += chunk[: max(0, room)]
                if len(chunk) > room:
                    if is_out:
                        self.out_cut = True
                    else:
                        self.err_cut = True
                    self.output_limited = True
                    self.kill()
        return ready

    def _reap_child(self) -> bool:
        if self.status is not None or self.pid is None:
            return True
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        if pid == 0:
            return False
        self.status = status
        return True

    def wait(self) -> None:
        """Run until the job exits (and its output is drained) or its time is up."""
        exited_at = None
        while True:
            now = time.monotonic()
            if now >= self.deadline:
                self.timed_out = True
                self.kill()
                break
            self._drain(min(0.05, self.deadline - now))
            if self._reap_child():
                if self.out_fd < 0 and self.err_fd < 0:
                    break
                # A detached grandchild may hold the pipes open: give it a moment, then stop.
                exited_at = exited_at or time.monotonic()
                if time.monotonic() - exited_at > 0.2:
                    break
            if self.output_limited:
                break

    def kill(self) -> None:
        if self.pid is not None and self.status is None:
            with contextlib.suppress(OSError):
                os.killpg(self.pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)

    def call(self, message: dict[str, Any]) -> Any:
        if self.status is not None or self.resp is None or self.resp.closed:
            return {"error": "the program is no longer running", "dead": True}
        timeout = message.get("timeout") or self.limits["wall_seconds"]
        call_deadline = min(self.deadline, time.monotonic() + timeout)
        try:
            _wire.write_frame(
                self.req_fd,
                {"fn": message["fn"], "args": message["args"], "kwargs": message.get("kwargs", {})},
            )
        except OSError:
            self.kill()
            return {"error": "the program closed its input", "dead": True}
        return self.await_frame(call_deadline, _wire.call_reply)

    def await_frame(self, deadline: float, check: Any) -> Any:
        """The serving job's next frame as `check` rebuilds it (`_wire.loaded_reply`,
        `_wire.call_reply`), or an error of ours once it dies, breaks the protocol or its
        time is up. Whatever the job wrote, only `check`'s rebuilt frame reaches the host."""
        if self.resp is None:
            return {"error": "no program is serving", "dead": True}
        resp = self.resp
        while True:
            try:
                frame = resp.pop()
                if frame is not None:
                    return check(frame)
            except _wire.WireError as exc:
                self.kill()
                return {"error": f"protocol violation: {exc}", "dead": True}
            now = time.monotonic()
            if now >= deadline:
                self.timed_out = True
                self.kill()
                return {"error": "timed out", "dead": True}
            if self.output_limited:
                return {"error": "output limit exceeded", "dead": True}
            ready = self._drain(min(0.05, deadline - now))
            try:
                if resp.fd in ready:
                    resp.feed()
                if resp.closed or self._reap_child():
                    frame = resp.pop()  # a last frame may have come with the exit
                    if frame is not None:
                        return check(frame)
                    self.kill()
                    return {"error": "the program exited", "dead": True}
            except _wire.WireError as exc:
                self.kill()
                return {"error": f"protocol violation: {exc}", "dead": True}

    def finish(self) -> dict[str, Any]:
        if self.req_fd >= 0:
            os.close(self.req_fd)
            self.req_fd = -1
        if self.resp is not None or self.direct:
            # A served program ends when its input closes; give it a moment, then kill it.
            self.deadline = min(self.deadline, time.monotonic() + 0.5)
        self.wait()
        self.kill()
        wall = time.monotonic() - self.started
        if self.status is None and self.pid is not None:
            try:
                _, self.status = os.waitpid(self.pid, 0)
            except ChildProcessError:
                self.status = None
        self.cleanup()
        code = sig = None
        if self.status is not None:
            if os.WIFEXITED(self.status):
                code = os.WEXITSTATUS(self.status)
            elif os.WIFSIGNALED(self.status):
                sig = os.WTERMSIG(self.status)
        return {
            "exit_code": code,
            "signal": sig,
            "timed_out": self.timed_out,
            "output_limited": self.output_limited,
            "stdout": base64.b64encode(bytes(self.out)).decode("ascii"),
            "stderr": base64.b64encode(bytes(self.err)).decode("ascii"),
            "stdout_truncated": self.out_cut,
            "stderr_truncated": self.err_cut,
            "wall_time": wall,
            "dirty": self.dirty,
        }

    def handover(self, loaded: dict[str, Any]) -> None:
        """Send the "loaded" reply with the job's call pipes attached, and let go of them."""
        import socket

        assert self.resp is not None  # a serving job has its response channel
        data = _wire.frame_bytes(loaded)
        socket.send_fds(SOCK, [data], [self.req_fd, self.resp.fd])
        os.close(self.req_fd)
        os.close(self.resp.fd)
        self.req_fd = -1
        self.resp = None
        self.direct = True

    def cleanup(self) -> None:
        """Kill what the job left behind and empty every place it could write, before the
        result is sent: when the host hears that a job ended, nothing of it is left."""
        for fd in (self.out_fd, self.err_fd, self.pidfd):
            if fd >= 0:
                os.close(fd)
        self.out_fd = self.err_fd = self.pidfd = -1
        if self.resp is not None:
            os.close(self.resp.fd)
            self.resp = None
        # Whatever the job left (a tree too deep to walk, a process that will not die), its
        # result stands: a clean-up that fails says so ("dirty"), and the host replaces us.
        try:
            alive = _scrub.kill_all_others(self.uid, ISOLATED)
            self.dirty = clean_up_after(self.uid, alive)
        except Exception as exc:
            self.dirty = f"the clean-up failed: {type(exc).__name__}: {exc}"


def _first_to_kill() -> None:
    """Make the job, not the zygote, the one the kernel's OOM killer stops when the worker's
    memory cgroup is full. It weighs a process by the pages it maps, so a job that holds its
    memory in memfds or files (mapped by no one) would weigh no more than the zygote, which
    then went first: the job's result lost with its worker. (Raising one's own score needs no
    privilege; a job that lowers it again risks only its worker, and a worker that dies in a
    job is that job's failure.)"""
    try:
        fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
    except OSError:
        return
    try:
        os.write(fd, b"1000")
    except OSError:
        pass
    finally:
        os.close(fd)


def clean_up_after(uid: int, alive: "str | None") -> "str | None":
    """Empty the work dir and the shared places, and clear what the kernel keeps for `uid`;
    None when all is as it was, else what is left (the host then replaces this worker)."""
    global UID_STATE
    # Bounded: the host waits only GRACE seconds past a job's time for its result.
    deadline = time.monotonic() + WIPE_SECONDS
    left = [alive, _scrub.wipe(WORK, 0o711, deadline)]
    left += [_scrub.wipe(place, 0o1777, deadline) for place in PLACES]
    if OWN_UID and _scrub.uid_state(uid) != UID_STATE:
        _scrub.clear_uid_state(uid)
        UID_STATE = _scrub.uid_state(uid)
    problems = [problem for problem in left if problem]
    return "; ".join(problems) or None


WIPE_SECONDS = 4.0  # the clean-up's time; what is left then is left to a new worker
OWN_UID = False  # the job uid's kernel state (IPC objects, keys) is ours to clear
UID_STATE = ""  # `_scrub.uid_state` when the last job ended clean


def _run_python(spec: dict[str, Any], serve: bool) -> None:
    """In the job process: run Python source as __main__, or load it and serve calls."""
    import io

    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False),
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=False,
    )
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False),
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=True,
    )
    sys.argv = [spec.get("filename", "main.py")]
    sys.path[0:0] = [os.getcwd()]
    name = "__main__" if not serve else "solution"
    module = {
        "__name__": name,
        "__file__": os.path.join(os.getcwd(), sys.argv[0]),
        "__builtins__": __builtins__,
    }
    code = 0
    try:
        exec(compile(spec["source"], sys.argv[0], "exec"), module)
        if serve:
            _serve(module)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, (int, type(None))):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _serve(module: dict[str, Any]) -> None:
    names = sorted(k for k, v in module.items() if callable(v) and not k.startswith("__"))
    _wire.write_frame(4, {"loaded": names})
    while True:
        try:
            request = _wire.read_frame(3)
        except EOFError:
            return
        try:
            fn = module.get(request["fn"])
            if not callable(fn):
                raise NameError("no function {!r} in the program".format(request["fn"]))
            args = _wire.decode(request["args"])
            kwargs = _wire.decode(request["kwargs"])
            result = fn(*args, **kwargs)
            reply = {"ok": _wire.encode(result)}
        except Exception as exc:
            reply = {"error": f"{type(exc).__name__}: {str(exc)[:500]}"}
        sys.stdout.flush()
        _wire.write_frame(4, reply)


def _check_host_limits() -> None:
    """Refuse to start (the host then reports a sandbox failure) where a job could not get its
    limits: a job whose setup fails would otherwise look like a program that failed."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < JOB_FILES:
        sys.stderr.write(
            f"referee sandbox: the open-files limit ({hard}) is below the {JOB_FILES} each job "
            "gets; raise it (ulimit -n) where referee is started\n"
        )
        sys.exit(1)


def main() -> None:
    global WORK, ISOLATED, OWN_UID, UID_STATE
    _check_host_limits()
    uid = int(sys.argv[1])
    WORK = sys.argv[2]
    ISOLATED = sys.argv[3] == "1"
    socket_path = sys.argv[4] if len(sys.argv) > 4 else None
    if not ISOLATED:
        # In a pid namespace of our own, orphans already go to its init (bwrap's, or us as a
        # container's PID 1); only a plain host process needs to ask for them. Skipping it
        # keeps ctypes out of the zygote: a smaller process forks faster.
        _become_subreaper()
    else:
        PLACES[:] = [place for place in _scrub.PLACES if os.path.isdir(place)]
    if uid < 0:
        _set_dumpable(0)
    if os.getpid() == 1:  # a namespace's init gets only the signals it handles: handle none
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The kernel's state of the job uid is ours to clear where the uid is the worker's own, or
    # in a user namespace of our own; never the host user's (no isolation, not root).
    OWN_UID = uid >= 0 or ISOLATED
    if OWN_UID:  # whoever held the uid before us (another worker, another referee) left nothing
        _scrub.clear_uid_state(uid)
        UID_STATE = _scrub.uid_state(uid)
    # Every job's environment is the same (its dirs have fixed paths): set once, inherited.
    os.environ.clear()
    os.environ.update(
        {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": os.path.join(WORK, "job"),
            "TMPDIR": "/tmp" if ISOLATED else os.path.join(WORK, "tmp"),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": "0",
        }
    )
    _warm_up()
    _setup_channels(socket_path)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    host = _wire.Channel(IN_FD)
    serving: Job | None = None
    while True:
        msg = _next_message(host, serving)
        if msg is None:
            return
        op = msg.get("op")
        reply: dict[str, Any]
        try:
            if op == "ping":
                reply = {"pong": os.getpid()}
            elif op == "run":
                job = Job(msg["job"], uid)
                job.prepare()
                job.spawn(serve=False)
                reply = job.finish()
            elif op == "start":
                job = Job(msg["job"], uid)
                job.prepare()
                job.spawn(serve=True)
                reply = job.await_frame(job.deadline, _wire.loaded_reply)
                serving = job
                if msg.get("direct") and SOCK is not None and "loaded" in reply:
                    # Hand the host the job's request and response pipes: its calls then go
                    # straight to the job, and we only drain output and watch the clock.
                    job.handover(reply)
                    continue
            elif op == "call":
                reply = serving.call(msg) if serving else {"error": "no program", "dead": True}
            elif op == "finish":
                reply = serving.finish() if serving else {"error": "no program"}
                serving = None
            else:
                reply = {"error": f"unknown op {op!r}"}
        except Exception as exc:
            reply = {"error": f"worker: {type(exc).__name__}: {exc}", "worker_error": True}
        _wire.write_frame(OUT_FD, reply)


def _next_message(host: _wire.Channel, serving: Job | None) -> Any:
    """The host's next message (None once it has gone), meanwhile draining a served job's
    output and killing it when its time is up."""
    while True:
        msg = host.pop()
        if msg is not None:
            return msg
        if host.closed:
            return None
        fds = [host.fd]
        timeout = None
        live = serving is not None and serving.direct and serving.status is None
        if live and serving is not None:
            fds += [fd for fd in (serving.out_fd, serving.err_fd, serving.pidfd) if fd >= 0]
            timeout = max(0.0, serving.deadline - time.monotonic())
        ready, _, _ = select.select(fds, [], [], timeout)
        if host.fd in ready:
            host.feed()
        if live and serving is not None:
            if any(fd != host.fd for fd in ready):
                serving._drain(0)
            if time.monotonic() >= serving.deadline:
                serving.timed_out = True
                serving.kill()
            serving._reap_child()


if __name__ == "__main__":
    main()
