"""Attacks on the sandbox's result channel and on the host's resources, tried as a policy would.

Each test runs the attack through the real local sandbox and asserts the honest outcome: a
program that forges frames, floods a reply or leaves a tree the clean-up must walk gets the
verdict of a program at fault (its own score, its own failure), never ``Failure("sandbox")``;
a host that runs out of file descriptors reports a sandbox failure, never a score of 0.0; a
batch whose workers retire never hangs; the uid locks never follow a planted symlink.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from referee.errors import SandboxError
from referee.rewards import IoTests, PythonTests
from referee.rollout import Rollout
from referee.verifiers.sandbox import Job, Limits, LocalSandbox, ProgramError, _scrub, _wire, uids
from referee.verifiers.sandbox.local import bwrap_problem

pytestmark = pytest.mark.skipif(
    bwrap_problem() is not None, reason=f"bubblewrap unavailable: {bwrap_problem()}"
)

OPTIONS = {"backend": "local", "isolation": "bwrap", "workers": 2}
ADD = {"test": "def check(candidate):\n    assert candidate(1, 2) == 3\n", "entry_point": "add"}
IO_CASE = {"cases": [{"stdin": "1 2\n", "stdout": "3\n"}]}
LIMITS = Limits(wall_seconds=20, cpu_seconds=20)

# A frame of the host protocol that says "the sandbox broke": what a forger would send.
FORGE = """
import json, os, struct
def forge(fds=(3, 4, 10, 11)):
    data = json.dumps({"worker_error": True, "error": "forged by the program"}).encode()
    for fd in fds:
        try:
            os.write(fd, struct.pack(">I", len(data)) + data)
        except OSError:
            pass
"""


def completion(code: str) -> str:
    return f"```python\n{textwrap.dedent(code)}\n```"


def score(reward: Any, code: str, reference: Any) -> Any:
    return reward.score_sync(Rollout(prompt="p", completion=completion(code), reference=reference))


def within(seconds: float, work: Callable[[], None]) -> None:
    """Run `work` on a thread and fail (rather than hang) when it is not done in time."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            work()
        except BaseException as exc:  # reported below, on the test's thread
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds}s: the pool hangs"
    if errors:
        raise errors[0]


@pytest.fixture(scope="module")
def box() -> Iterator[LocalSandbox]:
    sandbox = LocalSandbox(workers=1, isolation="bwrap")
    yield sandbox
    sandbox.close()


# -- 1. forged frames -------------------------------------------------------------------------


def test_a_frame_forged_at_load_is_the_programs_failure() -> None:
    # The serving program's code shares its process with the frame writer: at load it writes
    # a host error frame on its reply pipe (fd 4) and on the zygote's channel numbers.
    code = FORGE + "forge()\ndef add(a, b):\n    return a - b\n"
    result = score(PythonTests(sandbox=OPTIONS), code, ADD)
    assert result.failure is None, result.failure
    assert result.value == 0.0
    assert "protocol violation" in (result.reason or "")


def test_a_frame_forged_in_a_call_is_the_programs_failure() -> None:
    code = FORGE + "def add(a, b):\n    forge((4,))\n    return a + b\n"
    result = score(PythonTests(sandbox=OPTIONS), code, ADD)
    assert result.failure is None, result.failure
    assert result.value == 0.0


@pytest.mark.parametrize(
    "garbage",
    [
        b"nope!",  # a frame that is not JSON
        b"[]",  # JSON, not an object
        b'{"dead": false}',  # an object the protocol does not know
    ],
)
def test_garbage_on_the_reply_pipe_is_the_programs_failure(
    box: LocalSandbox, garbage: bytes
) -> None:
    frame = len(garbage).to_bytes(4, "big") + garbage
    source = f"import os\nos.write(4, {frame!r})\ndef add(a, b):\n    return a + b\n"
    with box.session(Job(source=source, limits=LIMITS)) as session:
        assert session.names == []
        assert session.dead is not None and "protocol violation" in session.dead
        with pytest.raises(ProgramError):
            session.call("add", [1, 2])
    assert box.run(Job(source="print(1 + 2)")).stdout == b"3\n"  # the pool serves on


REACH = """
import json, os, struct
data = json.dumps({"worker_error": True, "error": "forged by the program"}).encode()
frame = struct.pack(">I", len(data)) + data
reached = []
for fd in range(3, 1024):
    try:
        os.write(fd, frame)
        reached.append(fd)
    except OSError:
        pass
for pid in [p for p in os.listdir("/proc") if p.isdigit() and p != str(os.getpid())]:
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        continue
    for name in names:
        try:
            fd = os.open(f"/proc/{pid}/fd/{name}", os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            os.write(fd, frame)
            reached.append(f"{pid}/{name}")
        except OSError:
            pass
        os.close(fd)
print(json.dumps(reached))
"""


def test_a_run_job_reaches_no_descriptor_of_the_channel(box: LocalSandbox) -> None:
    # An io_tests-style job: every descriptor it holds, and every one it can open through
    # /proc (the zygote's included), is tried with a forged frame.
    result = box.run(Job(source=REACH, limits=LIMITS))
    assert result.ok, result.stderr
    assert json.loads(result.stdout) == []


def test_an_io_program_that_forges_frames_gets_its_own_score() -> None:
    code = FORGE + "forge()\nprint(4)\n"  # a wrong answer, and frames everywhere it can write
    result = score(IoTests(sandbox=OPTIONS), code, IO_CASE)
    assert result.failure is None, result.failure
    assert result.value == 0.0


def test_replies_are_rebuilt_from_the_programs_frame_only() -> None:
    # Whatever a program's frame holds besides its answer is dropped or refused.
    assert _wire.call_reply({"ok": 3}) == {"ok": 3}
    assert _wire.call_reply({"error": "x" * 5000}) == {"error": "x" * 1000}
    assert _wire.loaded_reply({"loaded": ["add"]}) == {"loaded": ["add"]}
    for forged in (
        {"ok": 3, "worker_error": True},
        {"error": "x", "dead": True},
        {"worker_error": True, "error": "forged"},
        {"exit_code": 0},
        [1],
        {"error": 1},
    ):
        with pytest.raises(_wire.WireError):
            _wire.call_reply(forged)
        with pytest.raises(_wire.WireError):
            _wire.loaded_reply(forged)


# -- 2. trees the clean-up must walk ----------------------------------------------------------

DEEP_TREE = {
    # 10,000 nested directories: a recursive walk runs out of stack
    "deep": "for _ in range(10000):\n    os.mkdir('d')\n    os.chdir('d')\n",
    # names of 255 bytes, 40 deep: every path past PATH_MAX
    "long": "for _ in range(40):\n    os.mkdir('n' * 255)\n    os.chdir('n' * 255)\n",
    # a locked directory at the bottom of a deep tree
    "locked": (
        "for _ in range(3000):\n    os.mkdir('d')\n    os.chdir('d')\n"
        "os.mkdir('x')\nopen('x/f', 'w').close()\nos.chmod('x', 0)\nos.chmod('.', 0o500)\n"
    ),
}


@pytest.mark.parametrize("shape", sorted(DEEP_TREE))
@pytest.mark.parametrize("where", ["/tmp", "."])
def test_a_tree_left_for_the_clean_up_does_not_fail_the_sandbox(shape: str, where: str) -> None:
    code = f"import os\nos.chdir({where!r})\n{DEEP_TREE[shape]}def add(a, b):\n    return a - b\n"
    result = score(PythonTests(sandbox=OPTIONS), code, ADD)
    assert result.failure is None, result.failure
    assert result.value == 0.0  # the wrong answer's own score
    io_code = f"import os\nos.chdir({where!r})\n{DEEP_TREE[shape]}print(3)\n"
    result = score(IoTests(sandbox=OPTIONS), io_code, IO_CASE)
    assert result.failure is None, result.failure
    assert result.value == 1.0


def test_the_next_job_finds_the_places_empty(box: LocalSandbox) -> None:
    plant = "import os\nos.chdir('/tmp')\n" + DEEP_TREE["deep"]
    assert box.run(Job(source=plant, limits=LIMITS)).ok
    look = "import os\nprint(sorted(os.listdir('/tmp') + os.listdir('.')))\n"
    assert box.run(Job(source=look, limits=LIMITS)).stdout == b"[]\n"


def test_wipe_walks_any_depth_and_follows_no_symlink(tmp_path: Path) -> None:
    place, outside = tmp_path / "place", tmp_path / "outside"
    place.mkdir()
    outside.mkdir()
    (outside / "keep").write_text("not the job's")
    here = os.getcwd()
    os.chdir(place)
    try:
        for i in range(5000):  # (a recursive walk stops at about 1,000)
            os.mkdir("d")
            os.chdir("d")
            if i % 1000 == 0:
                os.symlink(outside, "link")
        os.chdir(here)
        assert _scrub.wipe(str(place), 0o1777) is None
        assert os.listdir(place) == []
        assert (outside / "keep").read_text() == "not the job's"
    finally:
        os.chdir(here)
        # Never leave the tree on the host, whatever happened: a recursive os.walk of the
        # temporary directory (other tests do one) would fail on it.
        subprocess.run(["rm", "-rf", str(place)], check=False)


# -- 3. reply frames capped at the parent -----------------------------------------------------


def test_a_reply_over_the_cap_is_refused_unread(box: LocalSandbox) -> None:
    source = "def big():\n    return 'x' * (48 << 20)\n"
    assert box.run(Job(source="print(1)")).stdout == b"1\n"
    before = box.zygote_pids()
    tracemalloc.start()
    try:
        with box.session(Job(source=source, limits=LIMITS), call_timeout=20) as session:
            with pytest.raises(ProgramError, match="reply over"):
                session.call("big", [])
            assert session.dead is not None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * LIMITS.reply_bytes  # the 48 MB reply was never read into memory
    assert box.run(Job(source="print(1)")).stdout == b"1\n"
    assert box.zygote_pids() != before  # its worker was replaced


def test_a_load_reply_over_the_cap_is_the_programs_failure(box: LocalSandbox) -> None:
    # So many functions that their names alone pass the cap.
    source = "for i in range(5000):\n    globals()['f' * 200 + str(i)] = print\n"
    small = Limits(wall_seconds=20, cpu_seconds=20, reply_bytes=64 << 10)
    with box.session(Job(source=source, limits=small)) as session:
        assert session.names == []
        assert session.dead is not None and "reply over" in session.dead


def test_a_channel_refuses_a_frame_by_its_header(tmp_path: Path) -> None:
    read, write = os.pipe()
    try:
        os.write(write, (50 << 20).to_bytes(4, "big"))  # a header alone: no body to read
        channel = _wire.Channel(read, limit=1 << 20)
        with pytest.raises(_wire.FrameTooLarge, match="reply over 1048576 bytes"):
            channel.feed()  # the header is enough to refuse it
    finally:
        os.close(read)
        os.close(write)


# -- 4. pool slots ----------------------------------------------------------------------------


def test_waiters_get_the_slots_of_retiring_workers() -> None:
    # One slot, every worker retired after its job, more jobs than slots at once: each
    # retirement must hand the slot to a waiting thread.
    sandbox = LocalSandbox(workers=1, isolation="bwrap")
    sandbox.recycle_after = 1
    outputs: list[bytes] = []

    def one(i: int) -> None:
        outputs.append(sandbox.run(Job(source=f"print({i})", limits=LIMITS)).stdout)

    def batch() -> None:
        threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    try:
        within(120, batch)
    finally:
        sandbox.close()
    assert sorted(outputs) == [b"0\n", b"1\n", b"2\n", b"3\n"]


def run_script(script: str, timeout: float = 120) -> Any:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=timeout,  # a hang fails the test
        cwd=Path(__file__).resolve().parents[3],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# Fills this process's descriptor table but for `free` entries (in a subprocess).
FILL = """
import json, os, resource
resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
held = []
def fill(free):
    while held:
        os.close(held.pop())
    try:
        while True:
            held.append(os.open("/dev/null", os.O_RDONLY))
    except OSError:
        pass
    for _ in range(free):
        os.close(held.pop())
def release():
    while held:
        os.close(held.pop())
"""


def test_a_worker_that_cannot_start_gives_its_slot_back() -> None:
    outcome = run_script(
        FILL
        + """
from referee.verifiers.sandbox import Job, LocalSandbox, SandboxError
box = LocalSandbox(workers=1, isolation="bwrap")
fill(0)
try:
    box.run(Job(source="print(1)"))
    first = "ran"
except Exception as exc:
    first = type(exc).__name__ + ": " + str(exc)
release()
second = box.run(Job(source="print(1)")).stdout.decode()
box.close()
print(json.dumps([first, second]))
"""
    )
    assert outcome[0].startswith("SandboxError: ") and "open files" in outcome[0]
    assert outcome[1] == "1\n"  # (before: the second job waited for the lost slot for ever)


# -- 5. file-descriptor pressure --------------------------------------------------------------


@pytest.mark.parametrize("kind", ["python_tests", "io_tests"])
def test_a_correct_solution_under_fd_pressure_is_never_scored_zero(kind: str) -> None:
    outcomes = run_script(
        FILL
        + f"""
from referee.rewards import IoTests, PythonTests
from referee.rewards._sandboxed import SandboxFailure
from referee.rollout import Rollout
options = {{"backend": "local", "isolation": "bwrap", "workers": 1}}
if {kind!r} == "python_tests":
    reward = PythonTests(sandbox=options)
    code, ref = "def add(a, b):\\n    return a + b\\n", {ADD!r}
else:
    reward = IoTests(sandbox=options)
    code, ref = "print(sum(map(int, input().split())))\\n", {IO_CASE!r}
rollout = Rollout(prompt="p", completion="```python\\n" + code + "```", reference=ref)
outcomes = [reward.grade(rollout).value]
for recycle in (None, 1):  # a warm worker, then a new worker for every job
    reward.open_sandbox().recycle_after = recycle
    for free in range(8):
        fill(free)
        try:
            outcomes.append(reward.grade(rollout).value)
        except SandboxFailure:
            outcomes.append("sandbox")
        release()
print(json.dumps(outcomes))
"""
    )
    assert outcomes[0] == 1.0
    assert "sandbox" in outcomes  # the pressure was real
    assert all(outcome in ("sandbox", 1.0) for outcome in outcomes), outcomes


# -- 6. the uid locks -------------------------------------------------------------------------


def test_the_uid_lock_directory_is_private() -> None:
    claim = uids.claim_uid(64600, 10)
    claim.release()
    info = os.lstat(uids._DIR)
    assert not Path(uids._DIR).is_symlink()
    assert info.st_uid == os.geteuid() and info.st_mode & 0o077 == 0
    # Not a fixed name in a directory everyone can write (where anyone could make it first).
    parent = os.lstat(os.path.dirname(uids._DIR))
    assert not parent.st_mode & 0o002 or uids._DIR.endswith(f"-{os.geteuid()}")


def test_a_planted_lock_symlink_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    uids.claim_uid(64700, 1).release()  # the directory exists
    planted = Path(uids._DIR) / "64700.lock"
    planted.unlink(missing_ok=True)
    planted.symlink_to(victim)
    try:
        claim = uids.claim_uid(64700, 2)
        claim.release()
    finally:
        planted.unlink()
    assert claim.uid == 64701  # the planted uid is passed over
    assert not victim.exists()  # and nothing was made through the link


@pytest.mark.parametrize("plant", ["symlink", "world-writable"])
def test_a_planted_lock_directory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plant: str
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    path = tmp_path / "locks"
    if plant == "symlink":
        path.symlink_to(elsewhere)
    else:
        path.mkdir()
        path.chmod(0o777)
    monkeypatch.setattr(uids, "_DIR", str(path))
    with pytest.raises(SandboxError, match="uid-lock directory"):
        uids.claim_uid(64800, 2)
    assert list(elsewhere.iterdir()) == []


def test_a_wipe_out_of_time_reports_what_is_left(tmp_path: Path) -> None:
    # Millions of files would hold a job's result past the host's patience: the wipe stops at
    # its deadline and says so (the worker is then replaced), it does not run on.
    for i in range(100):
        (tmp_path / f"f{i}").write_text("x")
    left = _scrub.wipe(str(tmp_path), 0o1777, deadline=time.monotonic() - 1)
    assert left is not None and "out of time" in left


# -- 7. frames nested too deep ----------------------------------------------------------------

# The program writes one frame by hand on its reply pipe (fd 4): at load, or in place of the
# reply to a call (its own reply comes after: the pipe is never read again).
WRITE = "import os, struct\ndef w(data):\n    os.write(4, struct.pack('>I', len(data)) + data)\n"
DEEP = {
    "100,000 deep": "b'[' * 100000 + b']' * 100000",
    "100,000 opened, never closed": "b'[' * 100000",
    "objects, 100,000 deep": "b'{\"a\":' * 100000 + b'1' + b'}' * 100000",
    "just past the limit": f"b'[' * {_wire.FRAME_DEPTH + 1} + b']' * {_wire.FRAME_DEPTH + 1}",
}


@pytest.mark.parametrize("frame", DEEP.values(), ids=DEEP.keys())
@pytest.mark.parametrize("when", ["at load", "in a call"])
def test_a_frame_nested_too_deep_is_the_programs_failure(when: str, frame: str) -> None:
    # The parser recurses once a level: unchecked, such a frame ended in a RecursionError, at
    # load in the zygote (its reply "worker: RecursionError", a Failure("sandbox")), in a call
    # on the host (an exception of the host's, not the program's failure).
    if when == "at load":
        code = f"{WRITE}w({frame})\ndef add(a, b):\n    return a + b\n"
    else:
        wrapped = f"b'{{\"ok\":' + {frame} + b'}}'"
        code = f"{WRITE}def add(a, b):\n    w({wrapped})\n    return a + b\n"
    result = score(PythonTests(sandbox=OPTIONS), code, ADD)
    assert result.failure is None, result.failure
    assert result.value == 0.0
    assert f"nested more than {_wire.FRAME_DEPTH} deep" in (result.reason or "")
    good = "def add(a, b):\n    return a + b\n"
    assert score(PythonTests(sandbox=OPTIONS), good, ADD).value == 1.0  # the pool serves on


def test_a_deep_frame_kills_the_session_and_its_worker_is_replaced(box: LocalSandbox) -> None:
    deep = f"b'{{\"ok\":' + {DEEP['100,000 deep']} + b'}}'"
    source = f"{WRITE}def add(a, b):\n    w({deep})\n    return a + b\n"
    assert box.run(Job(source="print(1)")).stdout == b"1\n"
    before = box.zygote_pids()
    with box.session(Job(source=source, limits=LIMITS)) as session:
        assert session.names == ["add", "w"]
        with pytest.raises(ProgramError, match="nested more than"):
            session.call("add", [1, 2])
        assert session.dead is not None
    assert box.zygote_pids() != before  # its pipe may hold more of what it wrote: never reused
    assert box.run(Job(source="print(1)")).stdout == b"1\n"


def test_a_deep_frame_at_load_leaves_the_worker_serving(box: LocalSandbox) -> None:
    # At load the zygote reads the frame (not the host): it refuses it, kills the program and
    # answers the host as ever.
    source = f"{WRITE}w({DEEP['100,000 deep']})\ndef add(a, b):\n    return a + b\n"
    assert box.run(Job(source="print(1)")).stdout == b"1\n"
    before = box.zygote_pids()
    with box.session(Job(source=source, limits=LIMITS)) as session:
        assert session.names == []
        assert session.dead is not None and "nested more than" in session.dead
    assert box.run(Job(source="print(1)")).stdout == b"1\n"
    assert box.zygote_pids() == before


def _depth(value: Any) -> int:
    """How deep a JSON value nests its lists and dicts (without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, depth)
            stack += [
                (inner, depth + 1) for inner in (item.values() if isinstance(item, dict) else item)
            ]
    return deepest


def _nest(value: Any, levels: int, key: str) -> Any:
    for n in range(levels):
        value = [value] if n % 2 else {key: value}
    return value


# Strings that hold what the depth check must see through: brackets, quotes, escapes.
TRICKY = st.sampled_from(["[[[", "]]}", '"', "\\", '\\"[', '[\\\\"', "é[", '{"a": [', ""])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | TRICKY,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text() | TRICKY, inner, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(JSON, TRICKY, st.booleans())
def test_the_depth_check_is_exact_on_json(value: Any, key: str, ascii_only: bool) -> None:
    # Brought to the limit exactly, the frame is parsed; one level more, refused unparsed.
    room = _wire.FRAME_DEPTH - _depth(value)
    at_limit = json.dumps(_nest(value, room, key), ensure_ascii=ascii_only).encode()
    past_it = json.dumps(_nest(value, room + 1, key), ensure_ascii=ascii_only).encode()
    assert _wire.loads(at_limit) == json.loads(at_limit)
    with pytest.raises(_wire.WireError, match="nested more than"):
        _wire.loads(past_it)


@pytest.mark.parametrize(
    "data",
    [
        b"[" * 100000,  # opened, never closed: a parser descends before it finds out
        b'["' + b"x" * 10 + b'",' + b"[" * 1000,  # after a string
        b'["\\"",' + b"[" * 1000,  # after a string that holds an escaped quote
        b"[" * 1000 + b'"\\\\"' + b"]" * 1000,  # an escaped backslash, then the real quote
        b"[" * 700 + b'"' + b'\\"[' * 1000,  # an unterminated string: at least 700 deep
    ],
)
def test_the_depth_check_refuses_what_a_parser_would_descend_into(data: bytes) -> None:
    with pytest.raises(_wire.WireError, match="nested more than"):
        _wire.loads(data)


@pytest.mark.parametrize(
    "data",
    [
        b'"' + b"[" * 100000 + b'"',  # brackets in a string are no nesting
        b'["\\\\", "' + b"[" * 1000 + b'"]',  # nor after an escaped backslash
        json.dumps([[i, [i]] for i in range(5000)]).encode(),  # wide, not deep
    ],
)
def test_the_depth_check_passes_what_is_not_deep(data: bytes) -> None:
    assert _wire.loads(data) == json.loads(data)


def test_a_value_as_deep_as_the_wire_allows_fits_in_a_frame() -> None:
    # The deepest value `encode` sends (dicts, each three levels of JSON) is not refused as a
    # frame: it reaches the value's own checks whole.
    value: Any = 1
    for _ in range(_wire.MAX_DEPTH):
        value = {0: value}
    frame = _wire.frame_bytes({"ok": _wire.encode(value)})[4:]
    assert _wire.decode(_wire.loads(frame)["ok"]) == value


def test_decoding_on_a_deep_stack_is_a_wire_error_never_a_recursion_error() -> None:
    # A reader with a deep stack of its own (a test harness, a trainer's callbacks) may run out
    # before `MAX_DEPTH`: the value is then refused, as any value the reader cannot take.
    value: Any = 1
    for _ in range(_wire.MAX_DEPTH):
        value = (value,)
    encoded = _wire.encode(value)

    def deep(levels: int) -> Any:
        return _wire.decode(encoded) if levels == 0 else deep(levels - 1)

    with pytest.raises(_wire.WireError, match="too deep"):
        deep(sys.getrecursionlimit() - 100)
