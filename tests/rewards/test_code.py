"""Unit-test rewards, with the real local sandbox."""

from __future__ import annotations

import gc
import json
import os
import pickle
import shutil
import sys
import textwrap
import threading
from typing import Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

import referee
from referee.errors import SpecError
from referee.rewards import IoTests, PytestTests, PythonTests
from referee.rewards._sandboxed import SandboxedReward
from referee.rewards.code import (
    IoCase,
    IoTestsReference,
    PytestReference,
    PythonTestsReference,
    code_reference,
)
from referee.rewards.code import unit_tests as code_module
from referee.verifiers.sandbox import (
    BACKENDS,
    BackendOptions,
    DockerOptions,
    Job,
    LocalOptions,
    Pipelining,
    RunResult,
    Sandbox,
    SandboxSession,
    get_sandbox,
)
from referee.verifiers.sandbox.local import bwrap_problem
from tests.support.rollouts import make

ADD_TEST = textwrap.dedent("""
    def check(candidate):
        assert candidate(1, 2) == 3
        assert candidate(2, 2) == 4
        assert candidate(-1, 1) == 0
        assert candidate(10, 5) == 15
""")
ADD = {"test": ADD_TEST, "entry_point": "add"}


@pytest.fixture(params=["local", "docker"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each sandbox backend, the docker one on the test engine."""
    if request.param == "docker":
        monkeypatch.setenv("DOCKER_HOST", request.getfixturevalue("docker_engine"))
    return str(request.param)


def grade(completion: str, reference: Any = ADD, **options: Any) -> referee.Score:
    return referee.score(
        PythonTests(timeout=5, call_timeout=2, **options), [make(completion, reference)]
    )[0]


@pytest.mark.parametrize(
    ("completion", "value"),
    [
        ("```python\ndef add(a, b):\n    return a + b\n```", 1.0),  # fenced
        ("def add(a, b):\n    return a + b\n", 1.0),  # bare code
        (
            "Here:\n```py\ndef add(a, b):\n    return a - b\n```\n"
            "Better:\n```python\ndef add(a, b):\n    return a + b\n```",
            1.0,
        ),  # last block
        ("def add(a, b):\n    return 3\n", 0.25),  # one case of four
        ("def add(a, b):\n    return a * b\n", 0.25),  # 2*2 == 4 only
        ("def add(a, b):\n    raise ValueError('no')\n", 0.0),  # raising fails each case
        (
            "def add(a, b):\n    while True: pass\n",
            0.0,
        ),  # a hang: the first call times out, the rest fail
        ("def add(a, b) return", 0.0),  # syntax error: nothing loads
        ("", 0.0),
    ],
)
def test_python_tests_fraction(completion: str, value: float) -> None:
    s = grade(completion)
    assert s.value == value, s.reason
    assert s.components["cases"] == 4.0


def test_all_or_nothing() -> None:
    assert grade("def add(a, b):\n    return 3\n", scoring="all").value == 0.0
    assert grade("def add(a, b):\n    return a + b\n", scoring="all").value == 1.0


# Each of these must earn 0: the verdict is computed outside the sandbox, from plain data.
FORGERIES = {
    "sys.exit(0) before the tests": "import sys\nsys.exit(0)\ndef add(a, b):\n    return a + b\n",
    "print PASSED then os._exit(0)": "import os\nprint('PASSED' * 4)\nos._exit(0)\n",
    "__eq__ always True": textwrap.dedent("""
        class Yes:
            def __eq__(self, other):
                return True
        def add(a, b):
            return Yes()
    """),
    "int subclass with __eq__ always True": textwrap.dedent("""
        class Yes(int):
            def __eq__(self, other):
                return True
            __hash__ = int.__hash__
        def add(a, b):
            return Yes(0)
    """),
    "monkeypatched unittest and assert machinery": textwrap.dedent("""
        import builtins, unittest
        unittest.TestCase.assertEqual = lambda *a, **k: None
        builtins.AssertionError = type("Never", (Exception,), {})
        def add(a, b):
            return -999
    """),
    "expected values read from disk": textwrap.dedent("""
        import os, re
        def add(a, b):
            for base in ("/", "/work", "/tmp", os.getcwd()):
                for root, dirs, files in os.walk(base):
                    for name in files:
                        try:
                            text = open(os.path.join(root, name), errors="ignore").read()
                        except OSError:
                            continue
                        m = re.search(r"candidate\\(%d, %d\\) == (-?\\d+)" % (a, b), text)
                        if m:
                            return int(m.group(1))
            return None
    """),
    "expected values from the caller's frame": textwrap.dedent("""
        import sys
        def add(a, b):
            frame = sys._getframe(1)
            while frame is not None:
                for value in list(frame.f_locals.values()):
                    if isinstance(value, str) and "assert candidate" in value:
                        return value
                frame = frame.f_back
            return None
    """),
}


@pytest.mark.parametrize("label", sorted(FORGERIES))
def test_forgeries_earn_nothing(label: str, backend: str) -> None:
    local = backend == "local"
    if label == "expected values read from disk" and local and bwrap_problem() is not None:
        # Without a mount namespace the job sees world-readable files, datasets included:
        # the documented limit of the process fallback.
        pytest.skip(f"needs bubblewrap's filesystem isolation: {bwrap_problem()}")
    s = grade(FORGERIES[label], backend=backend)
    assert s.value == 0.0, s.reason
    assert s.failure is None  # a score of 0, not a Failure that a trainer would mask


# A test that leans on built-ins and helpers of its own; the wrong program below returns 0.
SHADOW_TEST = textwrap.dedent("""
    def _close(a, b):
        return abs(a - b) < 1e-9
    def check(candidate):
        assert set(candidate([3, 1, 2])) == set([1, 2, 3])
        assert abs(candidate([2.5])[0] - 2.5) < 1e-9
        assert _close(len(candidate([1, 2])), 2)
        assert isinstance(candidate([]), list)
""")
SHADOW = {"test": SHADOW_TEST, "entry_point": "same"}

# Each wrong program also defines names the test uses as its own; none may reach the test.
SHADOWS = {
    "built-ins the test calls": "set = lambda *a: 1\nabs = lambda x: 0\nlen = lambda x: 2\n"
    "isinstance = lambda *a: True\n",
    "the test's own helper": "def _close(a, b):\n    return True\n",
    "check and candidate": "def check(c):\n    return None\ncandidate = check\n",
    "the namespace's builtins": "def __builtins__():\n    return None\n",
    "the recorder": "def __referee_assert__(test, line):\n    return None\n",
}


@pytest.mark.parametrize("label", sorted(SHADOWS))
def test_a_program_cannot_shadow_the_tests_names(label: str) -> None:
    right = grade("def same(xs):\n    return list(xs)\n", SHADOW)
    assert right.value == 1.0, right.reason
    wrong = grade("def same(xs):\n    return 0\n" + SHADOWS[label], SHADOW)
    assert wrong.value == 0.0, wrong.reason
    assert wrong.failure is None


def test_the_test_still_calls_other_functions_of_the_program_by_name() -> None:
    ref = {"test": "assert double(2) == 4\nassert half(4) == 2\n", "entry_point": "double"}
    program = "def double(x):\n    return 2 * x\ndef half(x):\n    return x // 2\n"
    assert grade(program, ref).value == 1.0


def test_humaneval_style_prompt_and_helpers() -> None:
    # The completion continues the prompt; the test uses a helper from the prompt, which stays
    # the dataset's own even if the completion redefines it.
    prompt = 'def helper(x):\n    return x * 10\n\ndef f(x):\n    """x * 10 + 1"""\n'
    test = "def check(candidate):\n    assert candidate(2) == helper(2) + 1\n"
    ref = {"prompt": prompt, "test": test, "entry_point": "f"}
    assert grade("    return helper(x) + 1\n", ref).value == 1.0
    cheat = "    return 1\n\ndef helper(x):\n    return 0\n"
    assert grade(cheat, ref).value == 0.0


def test_mbpp_style_top_level_asserts() -> None:
    ref = {"test": "assert double(2) == 4\nassert double(0) == 0\n", "entry_point": "double"}
    assert grade("def double(x):\n    return 2 * x\n", ref).value == 1.0
    assert grade("def double(x):\n    return 4\n", ref).value == 0.5


def test_loops_count_each_assert() -> None:
    ref = {
        "test": "def check(c):\n    for i in range(10):\n        assert c(i) == i * i\n",
        "entry_point": "sq",
    }
    assert grade("def sq(x):\n    return x * x if x < 5 else 0\n", ref).value == pytest.approx(0.5)


@pytest.mark.parametrize(
    "reference",
    [
        None,
        {"test": "assert True"},  # no entry_point
        {"test": "def check(:", "entry_point": "f"},  # the dataset's test does not parse
        {"test": "x = 1", "entry_point": "f"},  # no assert: nothing to grade
    ],
)
def test_bad_references_are_not_applicable(reference: Any) -> None:
    s = grade("def f(): pass", reference)
    assert s.value is None and s.failure is not None and s.failure.type == "not_applicable"


def test_sandbox_that_cannot_start_is_a_failure() -> None:
    broken = {"isolation": "process", "python": "/nonexistent/python3", "workers": 1}
    s = grade("def add(a, b):\n    return a + b\n", sandbox=broken)
    assert s.value is None and s.failure is not None and s.failure.type == "sandbox"
    io_case = make("print(1)", {"cases": [{"stdin": "", "stdout": "1"}]})
    io = referee.score(IoTests(sandbox=broken), [io_case])[0]
    assert io.value is None and io.failure is not None and io.failure.type == "sandbox"


def test_without_isolation_a_code_reward_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    # No bubblewrap, no unshare: a Failure that says how to fix it, never code run loose.
    monkeypatch.setenv("PATH", "/nonexistent")
    s = grade("def add(a, b):\n    return a + b\n", sandbox={"workers": 13})
    assert s.value is None and s.failure is not None and s.failure.type == "sandbox"
    assert "apt-get install bubblewrap" in s.failure.message
    assert "isolation: none" in s.failure.message


# A completion that plants the answer for later rollouts, and one that would use it.
PLANTER = "open('/tmp/answer', 'w').write('42')\ndef answer():\n    return 0\n"
PROBER = (
    "import os\ndef answer():\n"
    "    for path in ('/tmp/answer', os.path.expanduser('~/answer')):\n"
    "        if os.path.exists(path):\n            return int(open(path).read())\n"
    "    return int(os.environ.get('ANSWER', 0))\n"
)
ANSWER = {"test": "assert answer() == 42\n", "entry_point": "answer"}


def test_a_rollouts_score_does_not_depend_on_what_ran_before(backend: str) -> None:
    reward = PythonTests(sandbox=backend, concurrency=4, timeout=5)
    alone = referee.score(reward, [make(PROBER, ANSWER)])[0]
    mixed = [make(PLANTER if i % 2 == 0 else PROBER, ANSWER) for i in range(8)]
    later = [make(PROBER, ANSWER) for _ in range(4)]
    scores = referee.score(reward, mixed, concurrency=4) + referee.score(reward, later)
    assert alone.value == 0.0 and alone.failure is None
    assert [s.value for s in scores] == [0.0] * 12  # planted in a batch, in the one before


def test_workers_survive_the_thread_that_started_them() -> None:
    # bwrap's --die-with-parent would kill a worker when the creating thread ends.
    thread = threading.Thread(target=lambda: grade("def add(a, b):\n    return a + b\n"))
    thread.start()
    thread.join()
    for _ in range(4):
        assert grade("def add(a, b):\n    return a + b\n").value == 1.0


# --- io_tests ------------------------------------------------------------------------------

SUM = "a, b = map(int, input().split())\nprint(a + b)\n"


@pytest.mark.parametrize(
    "reference",
    [
        {"cases": [{"stdin": "1 2\n", "stdout": "3\n"}, {"stdin": "5 5", "stdout": "10"}]},
        {"inputs": ["1 2\n", "5 5\n"], "outputs": ["3\n", "10\n"]},  # verl / APPS shape
        json.dumps({"inputs": ["1 2\n", "5 5\n"], "outputs": ["3", "10"]}),  # as a JSON string
        {"input_output": json.dumps({"inputs": ["1 2"], "outputs": ["3"]})},
    ],
)
def test_io_reference_shapes(reference: Any) -> None:
    assert referee.score(IoTests(), [make(SUM, reference)])[0].value == 1.0


def test_both_rewards_on_every_backend(backend: str) -> None:
    assert grade("def add(a, b):\n    return a + b\n", backend=backend).value == 1.0
    assert grade("def add(a, b):\n    return 3\n", backend=backend).value == 0.25
    io = IoTests(backend=backend)  # type: ignore[arg-type]
    reference = {"inputs": ["1 2", "2 2"], "outputs": ["3", "5"]}
    assert referee.score(io, [make(SUM, reference)])[0].value == 0.5


@pytest.mark.parametrize(
    ("options", "completion", "expected", "value"),
    [
        ({}, "print('3   ')\nprint()\n", "3", 1.0),  # trailing whitespace and blank lines
        ({}, "print(' 3  4')", "3 4", 1.0),  # whitespace between tokens is normalised
        ({}, "print('34')", "3 4", 0.0),  # but tokens are not merged
        ({}, "print(3)\nprint(4)", "3 4", 0.0),  # nor lines
        ({}, "print(0.3333)", "0.333333", 0.0),
        ({"float_tol": 1e-3}, "print(0.3333)", "0.333333", 1.0),
        ({"float_tol": 1e-3}, "print('x 0.3333')", "x 0.333333", 1.0),
        pytest.param(
            {"language": "javascript"},
            "console.log(3)",
            "3",
            1.0,
            marks=pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed"),
        ),
        ({"language": "bash"}, "echo 3", "3", 1.0),
        ({"timeout": 1}, "while True: pass", "3", 0.0),
        ({}, "import sys\nprint(3)\nsys.exit(1)", "3", 0.0),  # right output, failing exit status
    ],
)
def test_io_comparison(
    options: dict[str, Any], completion: str, expected: str, value: float
) -> None:
    reference = {"cases": [{"stdin": "", "stdout": expected}]}
    s = referee.score(IoTests(**options), [make(completion, reference)])[0]
    assert s.value == value, s.reason


def test_io_fraction_and_all() -> None:
    reference = {"inputs": ["1 2", "2 2", "3 3"], "outputs": ["3", "4", "7"]}
    wrong_one = "a, b = map(int, input().split())\nprint(a + b if a != 3 else 0)\n"
    assert referee.score(IoTests(), [make(wrong_one, reference)])[0].value == pytest.approx(2 / 3)
    assert referee.score(IoTests(scoring="all"), [make(wrong_one, reference)])[0].value == 0.0


# Prints the case's number; sleeps (past any per-case limit here) where the case says "slow".
SLOW_WHERE_ASKED = (
    "import time\nkind, n = input().split()\nkind == 'slow' and time.sleep(30)\nprint(n)"
)


def _fast_then_slow(fast: int, slow: int) -> dict[str, Any]:
    kinds = ["fast"] * fast + ["slow"] * slow
    return {"cases": [{"stdin": f"{k} {i}\n", "stdout": f"{i}\n"} for i, k in enumerate(kinds)]}


def test_io_cases_past_the_rollouts_deadline_fail_and_the_rollout_is_scored() -> None:
    # Twelve slow cases at 0.5 s do not fit a 4 s deadline: those that cannot start in time
    # are failed cases, the program's verdict, never Failure("timeout") (a masked sample).
    reward = referee.load({"type": "io_tests", "timeout": 0.5, "deadline": 4})
    s = referee.score(reward, [make(SLOW_WHERE_ASKED, _fast_then_slow(2, 12))])[0]
    assert s.failure is None and s.value == pytest.approx(2 / 14), s
    assert s.reason is not None and "not run: the rollout's deadline came first" in s.reason
    assert "case 3: time limit" in s.reason, s.reason


@pytest.mark.slow
def test_io_many_slow_cases_are_the_programs_verdict_not_a_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 20 cases at timeout 0.5 whose program sleeps in each: 10 s of cases, past the 6 s that a
    # deadline behind one case's limit allowed (the backstop's 60 s of slack cut to 1 s here,
    # so the test need not sleep 70 s). The rollout's deadline follows its cases.
    monkeypatch.setattr(sys.modules["referee.reward"], "_BACKSTOP_SLACK", 1.0)
    reward = referee.load({"type": "io_tests", "timeout": 0.5})
    assert reward.deadline_for(1) == 6.0 < 20 * 0.5  # one case's deadline would cut it
    s = referee.score(reward, [make(SLOW_WHERE_ASKED, _fast_then_slow(0, 20))])[0]
    assert s.failure is None and s.value == 0.0, s
    assert s.reason is not None and s.reason.startswith("0/20 cases passed; case 1: time limit")
    assert "not run" not in s.reason  # every case ran, under its own limit


def test_io_a_rollouts_deadline_follows_its_cases_and_builds() -> None:
    one_case = IoTests(timeout=0.5)
    assert one_case.deadline_seconds == 10 * 0.5 + 60  # a one-case rollout's, as before
    assert one_case.deadline_for(140) == 10 * 0.5 * 140 + 60
    assert IoTests(language="cpp", timeout=2).deadline_for(22) == 10 * 2 * 22 + 60 + 30
    set_by_user = IoTests(timeout=0.5)
    set_by_user.deadline = 4.0
    assert set_by_user.deadline_for(140) == 4.0


@pytest.mark.parametrize(
    "reference",
    [{"inputs": ["1"], "outputs": []}, {"cases": []}, "not json", 5],
)
def test_io_bad_references(reference: Any) -> None:
    s = referee.score(IoTests(), [make(SUM, reference)])[0]
    assert s.value is None and s.failure is not None and s.failure.type == "not_applicable"


# --- pytest_tests --------------------------------------------------------------------------

PYTEST_FILE = textwrap.dedent("""
    import pytest
    from solution import add

    def test_basic():
        assert add(1, 2) == 3

    @pytest.mark.parametrize("x", [1, 2, 3])
    def test_identity(x):
        assert add(x, 0) == x

    class TestSigns:
        def test_negative(self):
            assert add(-1, 1) == 0
""")


def pytest_grade(completion: str, **options: Any) -> referee.Score:
    reward = PytestTests(timeout=20, **options)
    return referee.score(reward, [make(completion, {"tests": PYTEST_FILE})])[0]


@pytest.mark.parametrize(
    ("completion", "value", "why"),
    [
        ("def add(a, b):\n    return a + b\n", 1.0, "5/5 tests passed"),
        ("def add(a, b):\n    return a\n", 0.6, "failing: test_basic, test_negative"),
        ("import os\nos._exit(0)\n", 0.0, "tests missing from the report"),  # early exit
        ("import pytest\npytest.skip('x', allow_module_level=True)\n", 0.0, "missing"),  # skip
        ("def add(a, b) return", 0.0, "failing"),  # does not import
    ],
)
def test_pytest_tests(completion: str, value: float, why: str, backend: str) -> None:
    s = pytest_grade(completion, backend=backend)
    assert s.value == pytest.approx(value), s.reason
    assert s.reason is not None and why in s.reason


def test_pytest_missing_in_the_sandbox_is_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(code_module._PYTEST_PRESENT, id(get_sandbox()), False)
    s = pytest_grade("def add(a, b):\n    return a + b\n")
    assert s.value is None and s.failure is not None and s.failure.type == "sandbox"
    assert "python3-pytest" in s.failure.message


def test_pipelined_and_live_tests_score_alike() -> None:
    # A stateful candidate: the same asserts, once plannable (pipelined), once in a loop (live).
    stateful = "calls = 0\ndef f(x):\n    global calls\n    calls += 1\n    return x + calls\n"
    straight = "def check(c):\n    assert c(0) == 1\n    assert c(0) == 2\n    assert c(5) == 9\n"
    looped = (
        "def check(c):\n    for x, want in [(0, 1), (0, 2), (5, 9)]:\n        assert c(x) == want\n"
    )
    a = grade(stateful, {"test": straight, "entry_point": "f"})
    b = grade(stateful, {"test": looped, "entry_point": "f"})
    assert a.value == b.value == pytest.approx(2 / 3)


# --- the sandbox option and the published protocol ----------------------------------------


class _SessionOnly:
    """A third-party session: exactly the published `SandboxSession` protocol (no pipelining)."""

    def __init__(self, inner: SandboxSession) -> None:
        self._inner = inner

    @property
    def names(self) -> list[str]:
        return self._inner.names

    @property
    def dead(self) -> str | None:
        return self._inner.dead

    def call(self, fn: str, args: list[Any], kwargs: dict[str, Any] | None = None) -> Any:
        return self._inner.call(fn, args, kwargs)

    def close(self) -> RunResult:
        return self._inner.close()


class _ProtocolOnly:
    """A third-party backend: exactly the published `Sandbox` protocol, around the local one."""

    def __init__(self) -> None:
        self._inner = get_sandbox()

    def run(self, job: Job) -> RunResult:
        return self._inner.run(job)

    def session(self, job: Job, call_timeout: float | None = None) -> SandboxSession:
        return _SessionOnly(self._inner.session(job, call_timeout))

    def close(self) -> None:
        pass  # the local sandbox it wraps is the process's own


class _ProtocolOnlyOptions(BackendOptions):
    backend: Literal["protocol_only"] = "protocol_only"

    def create(self) -> Sandbox:
        return _ProtocolOnly()


def test_a_backend_with_only_the_published_protocol_scores_humaneval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # python_tests used to call `session.pipeline`, which the protocol does not have: every
    # plannable test (this one) became a Failure on such a backend.
    monkeypatch.setitem(BACKENDS, "protocol_only", _ProtocolOnlyOptions)
    session = _ProtocolOnly().session(Job(source="def f(): pass"))
    assert isinstance(session, SandboxSession) and not isinstance(session, Pipelining)
    session.close()
    prompt = 'def add(a, b):\n    """a + b"""\n'
    reference = {"prompt": prompt, "test": ADD_TEST, "entry_point": "add"}
    assert grade("    return a + b\n", reference, sandbox="protocol_only").value == 1.0
    assert grade("    return 3\n", reference, sandbox="protocol_only").value == 0.25
    spec = {"type": "python_tests", "sandbox": {"backend": "protocol_only"}}
    scores = referee.score(referee.load(spec), [make("    return a + b\n", reference)])
    assert scores[0].value == 1.0


class _Gate:
    """A sandbox whose jobs each wait until `parties` jobs are in flight together."""

    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=20)

    def run(self, job: Job) -> RunResult:
        self.barrier.wait()  # BrokenBarrierError (a Failure) unless `parties` jobs run at once
        return RunResult(0, None, False, False, b"3\n", b"", False, False, 0.0)

    def session(self, job: Job, call_timeout: float | None = None) -> SandboxSession:
        raise NotImplementedError

    def close(self) -> None:
        self.barrier.abort()


class _GateOptions(BackendOptions):
    backend: Literal["gate"] = "gate"
    parties: int
    label: str  # one gate per test

    def create(self) -> Sandbox:
        return _Gate(self.parties)


# Above asyncio's default thread pool, which used to cap the jobs in flight.
MANY = min(32, (os.cpu_count() or 1) + 4) + 4
IO_CASE = {"cases": [{"stdin": "", "stdout": "3"}]}


@pytest.mark.parametrize(
    ("own", "asked"),
    [
        (MANY, None),  # the reward's own concurrency option
        (1, MANY),  # a caller's concurrency for one batch, above the reward's
    ],
)
def test_jobs_in_flight_follow_concurrency_not_the_default_thread_pool(
    own: int, asked: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(BACKENDS, "gate", _GateOptions)
    gate = {"backend": "gate", "parties": MANY, "label": f"{own}-{asked}"}
    reward = IoTests(sandbox=gate, concurrency=own)
    scores = referee.score(reward, [make("print(3)", IO_CASE)] * MANY, concurrency=asked)
    assert [s.value for s in scores] == [1.0] * MANY, scores[0].failure


def test_sandbox_threads_end_with_their_reward(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(BACKENDS, "gate", _GateOptions)
    gate = {"backend": "gate", "parties": 1, "label": "threads"}
    reward = IoTests(sandbox=gate, concurrency=4, name="threads_probe")

    def threads() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name.startswith("referee-threads_probe")]

    assert referee.score(reward, [make("print(3)", IO_CASE)] * 8)[0].value == 1.0
    first = threads()
    assert 1 <= len(first) <= 4
    # A caller asking for more at once gets a larger pool; the smaller one's threads end.
    assert referee.score(reward, [make("print(3)", IO_CASE)] * 8, concurrency=8)[0].value == 1.0
    for thread in first:
        thread.join(timeout=10)
        assert not thread.is_alive()
    assert pickle.loads(pickle.dumps(reward)) == reward  # the pool stays behind
    left = threads()
    assert left
    del reward
    gc.collect()
    for thread in left:
        thread.join(timeout=10)
    assert threads() == []


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({}, LocalOptions()),  # the default
        ({"sandbox": "docker"}, DockerOptions()),  # a backend by name
        ({"sandbox": {"backend": "docker", "runtime": "runsc"}}, DockerOptions(runtime="runsc")),
        (
            {"sandbox": {"isolation": "bwrap", "workers": 2}},
            LocalOptions(isolation="bwrap", workers=2),
        ),
        ({"backend": "docker", "runtime": "runsc"}, DockerOptions(runtime="runsc")),  # flat keys
        ({"isolation": "process", "workers": 3}, LocalOptions(isolation="process", workers=3)),
        ({"sandbox": "docker", "workers": 2}, DockerOptions(workers=2)),  # a block and a flat key
    ],
)
def test_sandbox_option_shapes(options: dict[str, Any], expected: BackendOptions) -> None:
    for kind in ("python_tests", "io_tests", "pytest_tests"):
        reward = referee.load({"type": kind, **options})
        assert isinstance(reward, SandboxedReward) and reward.sandbox == expected
        assert pickle.loads(pickle.dumps(reward)).sandbox == expected


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (
            {"sandbox": {"backend": "docker", "isolation": "process"}},
            ["isolation", "local", "docker"],
        ),
        ({"backend": "docker", "isolation": "process"}, ["isolation", "local", "docker"]),  # flat
        ({"sandbox": {"runtime": "runsc"}}, ["runtime", "docker", "not local"]),
        ({"sandbox": {"backend": "local", "image": "x"}}, ["image", "local", "workers, isolation"]),
        ({"sandbox": {"isolation": "strong"}}, ["isolation", "local", "'auto', 'bwrap'"]),
        ({"sandbox": {"backend": "docker", "workers": 0}}, ["workers", "docker", "greater than"]),
        ({"sandbox": "podman"}, ["podman", "docker, local"]),
        ({"sandbox": {"workers": 2}, "workers": 3}, ["workers", "twice"]),
    ],
)
def test_a_wrong_sandbox_option_names_the_option_and_the_backend(
    options: dict[str, Any], words: list[str]
) -> None:
    with pytest.raises(SpecError) as caught:
        referee.load({"type": "python_tests", **options})
    for word in words:
        assert word in str(caught.value)
    with pytest.raises(ValueError, match=words[0]):
        PythonTests(**options)


# --- code-test references ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        (ADD, PythonTestsReference(ADD_TEST, "add")),
        (
            {**ADD, "prompt": "def add(a, b):\n"},
            PythonTestsReference(ADD_TEST, "add", "def add(a, b):\n"),
        ),
        ({**ADD, "prompt": 3}, PythonTestsReference(ADD_TEST, "add")),  # a prompt that is not code
        ({"cases": [{"stdin": "1", "stdout": "2"}]}, IoTestsReference((IoCase("1", "2"),))),
        ({"cases": [{"stdout": "2"}]}, IoTestsReference((IoCase("", "2"),))),  # no stdin: empty
        ({"inputs": [["1", 2]], "outputs": ["3"]}, IoTestsReference((IoCase("1\n2", "3"),))),
        ('{"inputs": ["1"], "outputs": ["2"]}', IoTestsReference((IoCase("1", "2"),))),  # JSON
        (
            {"input_output": '{"inputs": ["1"], "outputs": ["2"]}'},
            IoTestsReference((IoCase("1", "2"),)),
        ),
        ({"tests": "def test_x(): pass"}, PytestReference("def test_x(): pass")),
        (
            {"tests": "t", "test_file": "test_a.py", "files": {"data.txt": 5}},
            PytestReference("t", test_file="test_a.py", files={"data.txt": "5"}),
        ),
        # Not code-test references, or ones no code reward can grade against.
        (None, None),
        ("Paris", None),
        ("42", None),  # JSON, but not cases
        ({"answer": "4"}, None),
        ({"test": "assert f(1)"}, None),  # no entry_point
        ({"test": "assert f(1)", "entry_point": "not a name"}, None),
        ({"cases": []}, None),
        ({"inputs": ["1"], "outputs": []}, None),
        ({"tests": 5}, None),
    ],
)
def test_code_reference(reference: Any, expected: Any) -> None:
    assert code_reference(reference) == expected


@pytest.mark.parametrize(
    ("kind", "reference", "message"),
    [
        ("python_tests", None, 'python_tests needs a reference {"test", "entry_point"}, got None'),
        ("python_tests", {"test": "x"}, "reference entry_point must be a function name, got None"),
        ("io_tests", "not json", "io_tests reference is a string but not JSON"),
        ("io_tests", {"inputs": ["1"], "outputs": []}, "different numbers of inputs and outputs"),
        ("io_tests", {"answer": 1}, 'io_tests needs {"cases": [{"stdin", "stdout"}]} or'),
        ("io_tests", {"cases": [{"stdin": 1, "stdout": "2"}]}, "io_tests case is not text"),
        ("io_tests", {"cases": []}, "io_tests reference has no case"),
        ("pytest_tests", {"test": "x"}, 'pytest_tests needs a reference {"tests": code}, got'),
    ],
)
def test_a_reward_says_what_reference_it_needs(kind: str, reference: Any, message: str) -> None:
    s = referee.score(referee.load({"type": kind}), [make("print(1)", reference)])[0]
    assert s.failure is not None and s.failure.type == "not_applicable"
    assert message in s.failure.message


KEYS = ["test", "tests", "cases", "inputs", "outputs", "stdin", "stdout", "entry_point",
        "prompt", "input_output", "files", "x"]  # fmt: skip
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(JSON)
def test_code_reference_reads_anything(reference: Any) -> None:
    # Whatever the dataset holds, the answer is a reference or None, never an exception; and
    # a reference the function accepts is one its reward accepts.
    ref = code_reference(reference)
    if ref is not None:
        assert type(ref).parse(reference) == ref
