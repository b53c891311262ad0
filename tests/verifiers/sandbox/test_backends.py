"""Hostile programs against every sandbox path (bubblewrap, unshare, no isolation, docker):
each is stopped or contained, and the host is left as it was: no process of a sandbox uid
survives the job, and every worker's writable places are empty again (seen from the host)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

from referee.verifiers.sandbox import Job, Limits, ProgramError
from referee.verifiers.sandbox.pool import WorkerPool
from tests.support.sandboxes import left_in_places, sandbox_processes

FAST = Limits(wall_seconds=3, cpu_seconds=3, memory_bytes=512 << 20, processes=32,
              output_bytes=1 << 16, file_size_bytes=16 << 20, disk_bytes=64 << 20)  # fmt: skip


def run(sandbox: WorkerPool, source: str, **kw: object) -> object:
    result = sandbox.run(Job(source=textwrap.dedent(source), limits=kw.pop("limits", FAST), **kw))  # type: ignore[arg-type]
    assert sandbox_processes() == []  # nothing outlives its job
    if sandbox.mode != "none":  # type: ignore[attr-defined]
        assert left_in_places(sandbox) == {}  # nor anything it wrote
    return result


def test_runs_python_and_captures_output(sandbox: WorkerPool) -> None:
    r = sandbox.run(
        Job(source="import sys\nprint(input()[::-1])\nprint('e', file=sys.stderr)", stdin=b"abc\n")
    )
    assert r.ok and r.stdout == b"cba\n" and r.stderr == b"e\n"


def test_exit_codes_and_exceptions(sandbox: WorkerPool) -> None:
    assert sandbox.run(Job(source="raise SystemExit(3)")).exit_code == 3
    r = sandbox.run(Job(source="1/0"))
    assert r.exit_code == 1 and b"ZeroDivisionError" in r.stderr


def test_runs_commands_and_files(sandbox: WorkerPool) -> None:
    r = sandbox.run(
        Job(command=("bash", "run.sh"), files={"run.sh": "cat data/x.txt\n", "data/x.txt": "hello"})
    )
    assert r.ok and r.stdout == b"hello"


def test_infinite_loop_times_out(sandbox: WorkerPool) -> None:
    start = time.monotonic()
    r = run(sandbox, "while True: pass", limits=Limits(wall_seconds=1.5, cpu_seconds=30))
    assert r.timed_out and not r.ok  # type: ignore[attr-defined]
    assert time.monotonic() - start < 10


def test_cpu_limit_kills(sandbox: WorkerPool) -> None:
    r = run(sandbox, "while True: pass", limits=Limits(wall_seconds=10, cpu_seconds=1))
    assert r.signal in (signal.SIGXCPU, signal.SIGKILL)  # type: ignore[attr-defined]


def test_fork_bomb_is_contained(sandbox: WorkerPool) -> None:
    r = run(
        sandbox,
        """
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
    """,
    )
    assert not r.ok  # type: ignore[attr-defined]
    assert sandbox.run(Job(source="print('still works')")).stdout == b"still works\n"


def test_huge_allocation_fails(sandbox: WorkerPool) -> None:
    r = run(sandbox, "x = bytearray(4 * 1024**3)\nprint('allocated')")
    assert not r.ok and b"MemoryError" in r.stderr and r.stdout == b""  # type: ignore[attr-defined]


@pytest.mark.parametrize("where", ["big", "/tmp/big"])
def test_huge_file_is_stopped(sandbox: WorkerPool, where: str) -> None:
    started = time.time()
    r = run(
        sandbox,
        f"""
        with open({where!r}, "wb") as f:
            for _ in range(1024):
                f.write(b"x" * (1 << 20))
        print("wrote 1 GB")
    """,
    )
    assert not r.ok and b"wrote 1 GB" not in r.stdout  # type: ignore[attr-defined]
    # On the host's disk: nothing left, or, with no isolation (the opt-out, which shares the
    # host's /tmp), no more than the file size limit.
    left = [
        os.path.join(base, "big")
        for base, _, files in os.walk(tempfile.gettempdir())
        if "big" in files and os.path.getmtime(os.path.join(base, "big")) >= started
    ]
    sizes = [os.path.getsize(path) for path in left]
    for path in left:
        os.unlink(path)
    if sandbox.mode == "none":  # type: ignore[attr-defined]
        assert all(size <= FAST.file_size_bytes for size in sizes)
    else:
        assert left == []


def test_stdout_flood_is_cut_and_stopped(sandbox: WorkerPool) -> None:
    start = time.monotonic()
    r = run(
        sandbox,
        """
        import sys
        chunk = "y" * (1 << 20)
        for _ in range(1024):
            sys.stdout.write(chunk)
    """,
    )
    assert r.output_limited and r.stdout_truncated  # type: ignore[attr-defined]
    assert len(r.stdout) == FAST.output_bytes  # type: ignore[attr-defined]
    assert time.monotonic() - start < 10


@pytest.mark.parametrize(
    "target",
    ["/etc/shadow", "HOME_SECRET", "PLANTED"],
)
def test_cannot_read_files_outside_the_work_dir(
    sandbox: WorkerPool, tmp_path: Path, target: str
) -> None:
    planted = tmp_path / "secret.txt"
    planted.write_text("TOPSECRET")
    home_secret = Path.home() / ".referee-test-secret"
    home_secret.write_text("TOPSECRET")
    try:
        path = {"HOME_SECRET": str(home_secret), "PLANTED": str(planted)}.get(target, target)
        r = run(
            sandbox,
            f"""
            try:
                print(open({path!r}).read())
            except OSError as exc:
                print("blocked", type(exc).__name__)
        """,
        )
    finally:
        home_secret.unlink()
    assert b"TOPSECRET" not in r.stdout and r.stdout.startswith(b"blocked")  # type: ignore[attr-defined]


def test_cannot_reach_a_loopback_server(sandbox: WorkerPool) -> None:
    if sandbox.mode == "none":  # type: ignore[attr-defined]
        pytest.skip("only a network namespace blocks loopback; isolation none is the opt-out")
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    accepted: list[object] = []
    server.settimeout(1)

    def accept() -> None:
        with contextlib.suppress(OSError):
            accepted.append(server.accept())

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    r = run(
        sandbox,
        f"""
        import socket
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=2)
            print("connected")
        except OSError as exc:
            print("blocked", exc)
    """,
    )
    thread.join()
    server.close()
    assert r.stdout.startswith(b"blocked") and not accepted  # type: ignore[attr-defined]


def test_cannot_signal_a_host_process(sandbox: WorkerPool) -> None:
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        r = run(
            sandbox,
            f"""
            import os, signal
            try:
                os.kill({victim.pid}, signal.SIGKILL)
                print("sent")
            except OSError as exc:
                print("blocked", type(exc).__name__)
        """,
        )
        time.sleep(0.2)
        assert victim.poll() is None  # still alive
        assert r.stdout.startswith(b"blocked")  # type: ignore[attr-defined]
    finally:
        victim.kill()
        victim.wait()


def test_detached_process_does_not_outlive_the_job(sandbox: WorkerPool, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    os.chmod(tmp_path, 0o777)
    r = run(
        sandbox,
        f"""
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(1.5)
                try:
                    open({str(marker)!r}, "w").write("survived")
                except OSError:
                    pass
                open("/tmp/survived", "w").write("x")
                os._exit(0)
            os._exit(0)
        print("parent done")
    """,
    )
    assert r.stdout == b"parent done\n"  # type: ignore[attr-defined]
    time.sleep(2.0)
    assert not marker.exists()
    assert sandbox_processes() == []


def test_session_calls_return_plain_data(sandbox: WorkerPool) -> None:
    source = "def f(x):\n    return {'a': (x, [1.5, None]), 'b': {1, 2}}\n"
    with sandbox.session(Job(source=source, limits=FAST)) as s:
        assert s.names == ["f"]
        assert s.call("f", [3]) == {"a": (3, [1.5, None]), "b": {1, 2}}


def test_session_refuses_objects_that_are_not_plain_data(sandbox: WorkerPool) -> None:
    source = textwrap.dedent("""
        class Always(int):
            def __eq__(self, other):
                return True
        def f():
            return Always(1)
    """)
    with (
        sandbox.session(Job(source=source, limits=FAST)) as s,
        pytest.raises(ProgramError, match="not plain data"),
    ):
        s.call("f", [])


def test_session_survives_nothing_after_exit(sandbox: WorkerPool) -> None:
    with sandbox.session(
        Job(source="import sys\nsys.exit(0)\ndef f(): return 1\n", limits=FAST)
    ) as s:
        assert s.dead is not None
        with pytest.raises(ProgramError):
            s.call("f", [])


def test_session_call_timeout(sandbox: WorkerPool) -> None:
    with sandbox.session(
        Job(source="def f():\n    while True: pass\n", limits=FAST), call_timeout=0.5
    ) as s:
        with pytest.raises(ProgramError, match="timed out"):
            s.call("f", [])
        with pytest.raises(ProgramError):
            s.call("f", [])  # dead after a timeout
    assert sandbox_processes() == []


def test_session_chatty_program_does_not_block(sandbox: WorkerPool) -> None:
    # 200 KB of output per call overflows a pipe: the worker must drain it while we call.
    source = "def f(i):\n    print('x' * 200_000)\n    return i\n"
    limits = Limits(wall_seconds=10, cpu_seconds=10, output_bytes=4 << 20)
    with sandbox.session(Job(source=source, limits=limits), call_timeout=5) as s:
        assert [s.call("f", [i]) for i in range(5)] == list(range(5))
        result = s.close()
    assert len(result.stdout) == 5 * 200_001


def test_session_output_flood_kills_the_program(sandbox: WorkerPool) -> None:
    source = "import sys\ndef f():\n    while True:\n        sys.stdout.write('y' * 65536)\n"
    with sandbox.session(Job(source=source, limits=FAST), call_timeout=5) as s:
        with pytest.raises(ProgramError):
            s.call("f", [])
        result = s.close()
    assert result.stdout_truncated and len(result.stdout) <= FAST.output_bytes
    assert sandbox_processes() == []


CHANNEL_ON_FD = """
import os, socket, subprocess, sys
sys.path.insert(0, sys.argv[1])
import _wire
target = int(sys.argv[2])
ours, theirs = socket.socketpair()
os.dup2(theirs.fileno(), target)
if theirs.fileno() != target:
    theirs.close()
zygote = sys.argv[1] + "/_zygote.py"
argv = ["/usr/bin/python3", "-I", "-S", zygote, "-1", "/tmp", "0", f"fd:{target}"]
proc = subprocess.Popen(argv, pass_fds=[target])
os.close(target)
_wire.write_frame(ours.fileno(), {"op": "ping"})
print(_wire.read_frame(ours.fileno())["pong"] > 0)
ours.close()
proc.wait(10)
"""


@pytest.mark.parametrize("target", [10, 11])
def test_worker_channel_on_the_zygotes_own_fd_numbers(target: int) -> None:
    # A worker's inherited socket can land on fd 10 or 11, the numbers the zygote moves its
    # channel to; it used to close its own channel then (two workers starting at once). In a
    # child process, so the fd juggling cannot touch this one's files.
    from referee.verifiers.sandbox.local import _HERE

    done = subprocess.run(
        [sys.executable, "-c", CHANNEL_ON_FD, str(_HERE), str(target)],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.stdout.strip() == "True", done.stderr[-800:]


COUNTER = "n = 0\ndef f(x):\n    global n\n    n += 1\n    return [x, n]\n"


def test_pipelined_calls_answer_like_live_ones(sandbox: WorkerPool) -> None:
    with sandbox.session(Job(source=COUNTER, limits=FAST)) as s:
        sent = s.pipeline("f", [([1], {}), ([2], {}), ([3], {})])  # type: ignore[attr-defined]
        results = [s.call("f", [x]) for x in (1, 2, 3)]
        assert results == [[1, 1], [2, 2], [3, 3]]  # the program's state advanced in order
        assert s.call("f", [4]) == [4, 4]  # then live calls go on from there
    assert sent == 3  # every backend talks to the program directly


def test_leaving_the_plan_drains_it_first(sandbox: WorkerPool) -> None:
    with sandbox.session(Job(source=COUNTER, limits=FAST)) as s:
        s.pipeline("f", [([1], {}), ([2], {})])  # type: ignore[attr-defined]
        # The caller asks for something else: the planned calls still ran (and are not
        # misattributed), then the live call.
        assert s.call("f", [9]) == [9, 3]


def test_a_hang_inside_a_pipeline_times_out(sandbox: WorkerPool) -> None:
    source = "def f(x):\n    while x == 2:\n        pass\n    return x\n"
    with sandbox.session(Job(source=source, limits=FAST), call_timeout=0.5) as s:
        s.pipeline("f", [([1], {}), ([2], {}), ([3], {})])  # type: ignore[attr-defined]
        assert s.call("f", [1]) == 1
        with pytest.raises(ProgramError, match="timed out"):
            s.call("f", [2])
        with pytest.raises(ProgramError):
            s.call("f", [3])
    assert sandbox_processes() == []
