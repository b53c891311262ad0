"""Unit-test rewards: generated code run in the sandbox, graded outside it.

- `python_tests` (HumanEval / MBPP style): the dataset's test code runs in *this* process, and
  the function under test is a proxy whose calls run in the sandbox and return plain data.
  Expected values never enter the sandbox and the comparison happens here, on fresh builtin
  values, so ``sys.exit(0)``, a printed "PASSED", an object whose ``__eq__`` is always True, a
  patched ``unittest`` or assert machinery, or reading the tests from disk or a caller's frame
  earn nothing: the tests and the expected values are simply not there.
- `io_tests`: each case's stdin is fed to the program in the sandbox; its stdout comes back
  and is compared here.
- `pytest_tests`: a solution file and a pytest file run by pytest in the sandbox.

The test code comes from the dataset and is trusted; it must never be model-generated. A
failing case, a timeout or a crash scores 0 for that case; a sandbox that cannot start is a
``sandbox`` Failure (no score), never 0. The references they read are defined in
`referee.rewards.code.reference`; the sandbox option they share in `SandboxedReward`.
"""

from __future__ import annotations

import ast
import math
import re
import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from referee.errors import NotApplicable
from referee.registry import register
from referee.reward import Need
from referee.rewards._common import short
from referee.rewards._sandboxed import (
    SandboxedReward,
    SandboxFailure,
    Scoring,
    extract_code,
    limits,
)
from referee.rewards.code._cases import (
    CaseJobs,
    Tally,
    check_held_out,
    out_of_time,
    with_held_out,
)
from referee.rewards.code._harness import Cases, run_tests
from referee.rewards.code.languages import (
    COMPILED,
    Build,
    Language,
    build,
    case_job,
    toolchain_problem,
    verdict,
)
from referee.rewards.code.reference import IoTestsReference, PytestReference, PythonTestsReference
from referee.rollout import Rollout
from referee.scores import Score
from referee.verifiers.sandbox import Job, Limits, RunResult, Sandbox, SandboxError

__all__ = ["IoTests", "PytestTests", "PythonTests", "extract_code"]


# --- python_tests --------------------------------------------------------------------------


@register("python_tests")
@dataclass(kw_only=True)
class PythonTests(SandboxedReward):
    """HumanEval/MBPP-style tests against the completion's code, graded outside the sandbox.

    ``rollout.reference`` is ``{"test": code, "entry_point": name}``, optionally with
    ``"prompt"`` (code that the completion continues, as in HumanEval): see
    `PythonTestsReference`. The test code either defines ``check(candidate)`` or asserts on the
    entry point by name; every assert it runs is one case. A ``held_out`` key of test code
    beside ``test`` runs after it, in the same program, and is not paid: its asserts are
    held-out cases (``held_out_passed``, ``held_out_cases``; `referee.rewards.code._cases`).

    The code is the completion's last fenced ``python`` (or untagged) block, else the whole
    completion. The test code runs in this process and the function under test is a proxy
    whose calls run in the sandbox and return plain data, so the expected values never enter
    the sandbox: ``sys.exit(0)``, a printed "PASSED" or an object whose ``__eq__`` is always
    true earn nothing. The test code comes from the dataset and is trusted: it must never be
    model-generated. A failing case, a timeout or a crash scores 0 for that case; a sandbox
    that cannot start is ``Failure("sandbox")``, never 0.

    Attributes:
        scoring: ``fraction`` of cases passed, or ``all`` (1.0 only if every case passes).
        timeout: Seconds the program may live (loading plus every call).
        call_timeout: Seconds one call may take.
        memory_mb: Address-space limit of the program, in MiB.

    Example:
        ```yaml
        type: python_tests
        scoring: all
        timeout: 10
        call_timeout: 3
        sandbox: {backend: local, isolation: auto}
        ```

    Scores:
        ````yaml
        needs: [sandbox]
        rollouts:
          - prompt: Write `is_palindrome(s)`, ignoring case and non-letters.
            completion: |-
              ```python
              def is_palindrome(s):
                  letters = [c.lower() for c in s if c.isalpha()]
                  return letters == letters[::-1]
              ```
            reference: &tests
              entry_point: is_palindrome
              test: |
                def check(candidate):
                    assert candidate("Racecar")
                    assert candidate("A man, a plan, a canal: Panama")
                    assert not candidate("referee!")
                    assert candidate("")
            value: 1.0
          - prompt: Write `is_palindrome(s)`, ignoring case and non-letters.
            completion: |-
              ```python
              def is_palindrome(s):
                  return s == s[::-1]
              ```
            reference: *tests
            value: 0.0
        ````
    """

    scoring: Scoring = "fraction"
    timeout: float = 10.0
    call_timeout: float = 5.0
    memory_mb: int = 1024
    name: str = "python_tests"

    def needs(self) -> frozenset[Need]:
        """The test code and entry point."""
        return frozenset({"reference"})

    def check_options(self) -> None:
        if self.timeout <= 0 or self.call_timeout <= 0:
            raise ValueError("timeout and call_timeout must be positive")

    def reference_powers(self) -> tuple[str, ...]:
        return ("runs the test code (and prompt) of each reference in this process, unsandboxed",)

    def grade(self, rollout: Rollout) -> Score:
        """Score one rollout, blocking (what `evaluate` runs on the reward's threads)."""
        ref = PythonTestsReference.parse(rollout.reference)
        entry, prompt = ref.entry_point, ref.prompt
        code = extract_code(rollout.completion_text)
        if prompt and not re.search(rf"^\s*def\s+{re.escape(entry)}\s*\(", code, re.MULTILINE):
            code = prompt + code  # a HumanEval completion continues the prompt's signature
        sandbox = self.open_sandbox()
        job = Job(source=code, limits=limits(self.timeout, self.memory_mb), filename="solution.py")
        try:
            session = sandbox.session(job, self.call_timeout)
        except SandboxError as exc:
            raise SandboxFailure(str(exc)) from None
        held: tuple[Cases, str | None] | None = None
        try:
            cases, aborted = run_tests(session, ref.test, entry, prompt)
            if ref.held_out is not None:  # after the paid asserts, in the same program
                held = run_tests(session, ref.held_out, entry, prompt)
        except SandboxError as exc:
            raise SandboxFailure(str(exc)) from None
        finally:
            try:
                outcome = session.close()
            except SandboxError as exc:
                raise SandboxFailure(str(exc)) from None
        score = self._score(cases, aborted, session.dead, outcome.stderr)
        if held is None:
            return score
        cases, aborted = held
        return with_held_out(score, cases.passed, cases.total + (1 if aborted else 0))

    def _score(self, cases: Cases, aborted: str | None, dead: str | None, stderr: bytes) -> Score:
        total = cases.total + (1 if aborted else 0)  # a test that stopped early failed a case
        if total == 0:
            raise NotApplicable("the test code ran no assert: nothing to grade")
        if self.scoring == "all":
            value = 1.0 if cases.passed == total else 0.0
        else:
            value = cases.passed / total
        notes = [f"{cases.passed}/{total} cases passed"]
        if dead:
            notes.append(f"program: {dead}")
        if aborted:
            notes.append(f"tests stopped: {aborted[:200]}")
        notes += cases.failures
        if value < 1.0 and stderr:
            tail = stderr.decode(errors="replace").strip().splitlines()[-1:]
            notes += [f"stderr: {line[:200]}" for line in tail]
        return Score(
            value=value,
            components={"passed": float(cases.passed), "cases": float(total)},
            reason="; ".join(notes),
        )


# --- io_tests ------------------------------------------------------------------------------


def _lines(text: str) -> list[list[str]]:
    """Whitespace-separated tokens per line, blank lines at the start and end dropped."""
    lines = [line.split() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return lines


def _same_output(got: str, want: str, float_tol: float | None) -> bool:
    """Equal line by line and token by token (whitespace normalised); numbers within
    `float_tol` when given."""
    g, w = _lines(got), _lines(want)
    if g == w:
        return True
    if float_tol is None or len(g) != len(w):
        return False
    for gt, wt in zip(g, w, strict=True):
        if len(gt) != len(wt):
            return False
        for a, b in zip(gt, wt, strict=True):
            if a == b:
                continue
            try:
                if not math.isclose(float(a), float(b), rel_tol=float_tol, abs_tol=float_tol):
                    return False
            except ValueError:
                return False
    return True


@register("io_tests")
@dataclass(kw_only=True)
class IoTests(CaseJobs[IoTestsReference]):
    """Stdin/stdout cases: each case's input is fed to the program, its output compared here.

    ``rollout.reference`` is ``{"cases": [{"stdin", "stdout"}]}``, or ``{"inputs": [...],
    "outputs": [...]}`` as verl's and APPS-style datasets write it (also as a JSON string, or
    under ``input_output``): see `IoTestsReference`.

    The program is the completion's last fenced block in `language` (or untagged), else the
    whole completion. A compiled language is built once per rollout, in the sandbox, under
    `compile_timeout` and `compile_memory_mb`; every case then runs that build in a clean job
    of its own (`referee.rewards.code.languages` lists each language's flags and runtime
    settings). Its stdout is compared here, outside the sandbox, line by line and token by
    token (whitespace normalised). A compile error, a runtime error, a time, memory or output
    limit or a wrong output fails that case, and the reason names which; a sandbox that cannot
    start, or one without the language's toolchain, is ``Failure("sandbox")`` naming the
    package to install, never 0.

    Attributes:
        language: ``python``, ``javascript`` (``node``), ``bash``, ``c``, ``cpp``, ``go``,
            ``rust``, ``java`` or ``typescript`` (transpiled, not type-checked; run by
            ``node``).
        scoring: ``fraction`` of cases passed, or ``all`` (1.0 only if every case passes).
        float_tol: Compare numeric tokens within this tolerance (else exact text).
        timeout: Seconds per case (a rollout's deadline follows its cases: `deadline_for`).
        memory_mb: Memory limit of the program, in MiB: its address space; for ``java`` its
            heap (``-Xmx``), the JVM's reservations on top.
        stop_on_failure: Stop at the first failing case (with ``scoring: all`` the rest cannot
            change the score).
        compile_timeout: Seconds the build may take (compiled languages).
        compile_memory_mb: Address-space limit of the compiler, in MiB.
        compile_flags: The compiler's flags, replacing the language's defaults (``c``,
            ``cpp``, ``go``, ``rust``, ``java``), e.g. ``["-std=gnu++20", "-O2"]``.
        held_out: The share of each reference's cases that run but are not paid (chosen by
            their text, the same for every attempt; at least one, never all), beside any the
            reference lists under ``held_out``: the monitor compares their pass rate with the
            paid cases' (`referee.rewards.code._cases`).

    Example:
        ```yaml
        type: io_tests
        language: python
        scoring: all
        timeout: 2
        memory_mb: 256
        float_tol: 1.0e-6
        stop_on_failure: true
        ```

    Scores:
        ````yaml
        needs: [sandbox]
        rollouts:
          - prompt: Read n and then n integers; print their sum and their maximum.
            completion: |-
              ```python
              n = int(input())
              xs = list(map(int, input().split()))
              print(sum(xs), max(xs))
              ```
            reference: &cases
              cases:
                - {stdin: "3\\n1 5 2\\n", stdout: "8 5\\n"}
                - {stdin: "1\\n-4\\n", stdout: "-4 -4\\n"}
              held_out:  # run, not paid: the monitor's held-out pass rate
                - {stdin: "2\\n7 3\\n", stdout: "10 7\\n"}
            value: 1.0
          - prompt: Read n and then n integers; print their sum and their maximum.
            completion: |-
              ```python
              n = int(input())
              xs = list(map(int, input().split()))
              print(sum(xs), xs[-1])
              ```
            reference: *cases
            value: 0.0
        ````
    """

    language: Language = "python"
    scoring: Scoring = "fraction"
    float_tol: float | None = None
    timeout: float = 5.0
    memory_mb: int = 1024
    stop_on_failure: bool = False
    compile_timeout: float = 30.0
    compile_memory_mb: int = 2048
    compile_flags: list[str] | None = None
    held_out: float | None = None
    name: str = "io_tests"

    def needs(self) -> frozenset[Need]:
        """The input/output cases."""
        return frozenset({"reference"})

    def check_options(self) -> None:
        if self.timeout <= 0 or self.compile_timeout <= 0:
            raise ValueError("timeout and compile_timeout must be positive")
        if self.memory_mb < 1 or self.compile_memory_mb < 1:
            raise ValueError("memory_mb and compile_memory_mb must be at least 1")
        if self.compile_flags is not None and self.language not in COMPILED:
            raise ValueError(f"compile_flags is for a compiled language, not {self.language}")
        if self.compile_flags is not None and self.language == "typescript":
            raise ValueError("compile_flags: typescript is transpiled with fixed options")
        check_held_out(self.held_out)

    def read(self, rollout: Rollout) -> tuple[IoTestsReference, int]:
        """The cases, and how many (the held-out ones with them)."""
        reference = IoTestsReference.parse(rollout.reference)
        return reference, len(reference.cases) + len(reference.held_out)

    def grade_cases(
        self, rollout: Rollout, reference: IoTestsReference, until: float | None
    ) -> Score:
        """Score one rollout, blocking (what `score` runs on the reward's threads), starting
        no case that could end past `until`."""
        cases = reference.cases + reference.held_out
        keys = [f"{c.stdin}\0{c.stdout}" for c in reference.cases]
        stops = self.stop_on_failure or self.scoring == "all"
        tally = Tally.of(keys, len(reference.held_out), self.held_out, stops)
        code = extract_code(rollout.completion_text, self.language)
        sandbox = self.open_sandbox()
        built = None
        try:
            problem = toolchain_problem(sandbox, self.language)
            if problem is not None:  # never a 0 for every program: what to install, said
                raise SandboxFailure(problem)
            if self.language in COMPILED:
                flags = None if self.compile_flags is None else tuple(self.compile_flags)
                built = build(
                    sandbox,
                    self.sandbox,
                    self.language,
                    code,
                    flags,
                    self.compile_timeout,
                    self.compile_memory_mb,
                )
                if built.error is not None:
                    return tally.score(self.scoring, built.error)  # every case failed
            return self._run_cases(sandbox, code, built, cases, tally, until)
        except SandboxError as exc:
            raise SandboxFailure(str(exc)) from None

    def _run_cases(
        self,
        sandbox: Sandbox,
        code: str,
        built: Build | None,
        cases: Sequence[tuple[str, str]],
        tally: Tally,
        until: float | None,
    ) -> Score:
        bounds = limits(self.timeout, self.memory_mb)
        for i in tally.order:
            if not tally.wants(i):
                continue
            if out_of_time(until, self.timeout):
                tally.cut(i)  # this case and the rest: failed
                break
            stdin, want = cases[i]
            result = sandbox.run(case_job(self.language, code, built, stdin.encode(), bounds))
            got = result.stdout.decode(errors="replace")
            why = verdict(result, bounds.cpu_seconds)
            ok = not why and _same_output(got, want, self.float_tol)
            tally.record(i, ok, why or f"wrong answer: {short(got.strip(), 40)}")
        return tally.score(self.scoring)


# --- pytest_tests --------------------------------------------------------------------------

_PYTEST_PRESENT: dict[int, bool] = {}


def _count_tests(source: str) -> int:
    """Test functions pytest would collect at least once: ``test_*`` at top level and in
    ``Test*`` classes (parametrization only adds to this)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise NotApplicable(f"the reference tests do not parse: {exc}") from None
    count = 0
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test"
        ):
            count += 1
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            count += sum(
                1
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                and item.name.startswith("test")
            )
    return count


def _junit_outcomes(xml: str) -> tuple[int, int, list[str]]:
    """(passed, reported, failing test names) from a JUnit XML report."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(xml)
    passed = reported = 0
    failing: list[str] = []
    for case in root.iter("testcase"):
        reported += 1
        if any(child.tag in ("failure", "error", "skipped") for child in case):
            failing.append(str(case.get("name")))
        else:
            passed += 1
    return passed, reported, failing


@register("pytest_tests")
@dataclass(kw_only=True)
class PytestTests(SandboxedReward):
    """Repository-style tasks: a solution file and a pytest file, run by pytest in the sandbox.

    ``rollout.reference`` is ``{"tests": "<pytest code>"}``, optionally with ``"test_file"``
    (default ``test_solution.py``), ``"solution_file"`` (default ``solution.py``) and
    ``"files"`` (more files by relative path). The completion's code becomes the solution file.

    What it guarantees: the code runs with the sandbox's isolation and limits; each test's
    outcome comes from pytest's JUnit report, not from the program's output; skipped tests
    earn nothing; tests that vanish from the report (at least every ``test_*`` function found
    in the test file) count as failed; an early exit before the report is written fails all.
    What it cannot guarantee: the solution and the tests run in one process, so code that
    patches pytest on import, rewrites the report, or reads the tests' expected values can
    forge a pass. Prefer `python_tests` or `io_tests` (verdict outside the sandbox) for RL;
    use this where only a pytest suite exists, and probe it with hacking checks.

    The solution is the completion's last fenced ``python`` (or untagged) block, else the
    whole completion. The sandbox's ``python3`` must have pytest; where it has not, or the
    sandbox cannot start, the rollout is ``Failure("sandbox")``, never 0.

    Attributes:
        scoring: ``fraction`` of tests passed, or ``all`` (1.0 only if every test passes).
        timeout: Seconds for the whole pytest run.
        memory_mb: Address-space limit, in MiB.

    Example:
        ```yaml
        type: pytest_tests
        scoring: fraction
        timeout: 60
        sandbox: {backend: local, isolation: auto}
        ```

    Scores:
        ````yaml
        needs: [sandbox]
        rollouts:
          - prompt: Write `slugify(title)` for our blog; the tests are in test_solution.py.
            completion: |-
              ```python
              import re

              def slugify(title):
                  return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
              ```
            reference: &tests
              tests: |
                from solution import slugify

                def test_spaces():
                    assert slugify("Hello World") == "hello-world"

                def test_punctuation():
                    assert slugify("Rust, Go & Zig!") == "rust-go-zig"

                def test_case():
                    assert slugify("ABC") == "abc"
            value: 1.0
          - prompt: Write `slugify(title)` for our blog; the tests are in test_solution.py.
            completion: |-
              ```python
              def slugify(title):
                  return title.lower().replace(" ", "-")
              ```
            reference: *tests
            value: 0.6666666666666666
        ````
    """

    scoring: Scoring = "fraction"
    timeout: float = 30.0
    memory_mb: int = 2048
    name: str = "pytest_tests"

    def needs(self) -> frozenset[Need]:
        """The pytest code."""
        return frozenset({"reference"})

    def _check_pytest(self, sandbox: Sandbox) -> None:
        key = id(sandbox)
        if key not in _PYTEST_PRESENT:
            probe = sandbox.run(Job(command=("python3", "-c", "import pytest")))
            _PYTEST_PRESENT[key] = probe.ok
        if not _PYTEST_PRESENT[key]:
            raise SandboxFailure(
                "pytest is not importable by the sandbox's python3; "
                "install it there (apt-get install python3-pytest)"
            )

    def grade(self, rollout: Rollout) -> Score:
        """Score one rollout, blocking (what `evaluate` runs on the reward's threads)."""
        ref = PytestReference.parse(rollout.reference)
        files: dict[str, str | bytes] = dict(ref.files)
        files[ref.test_file] = ref.tests
        files[ref.solution_file] = extract_code(rollout.completion_text)
        expected = _count_tests(ref.tests)
        nonce = secrets.token_hex(16)
        pytest = "python3 -m pytest -q -p no:cacheprovider --junitxml=.report.xml"
        script = (
            f"{pytest} {shlex.quote(ref.test_file)} >/dev/null 2>&1;"
            f" printf '\\n%s\\n' {nonce}; cat .report.xml 2>/dev/null"
        )
        bounds = Limits(
            wall_seconds=self.timeout,
            cpu_seconds=self.timeout,
            memory_bytes=self.memory_mb << 20,
            output_bytes=4 << 20,
        )
        sandbox = self.open_sandbox()
        try:
            self._check_pytest(sandbox)
            result = sandbox.run(Job(command=("sh", "-c", script), files=files, limits=bounds))
        except SandboxError as exc:
            raise SandboxFailure(str(exc)) from None
        _, sep, xml = result.stdout.decode(errors="replace").rpartition(f"\n{nonce}\n")
        return self._score(xml if sep else "", result, expected)

    def _score(self, xml: str, result: RunResult, expected: int) -> Score:
        passed = reported = 0
        failing: list[str] = []
        why = None
        if not xml.strip():
            why = f"no test report ({result.describe()})"
        else:
            try:
                passed, reported, failing = _junit_outcomes(xml)
            except Exception as exc:
                why = f"unreadable test report: {type(exc).__name__}"
        total = max(reported, expected, 1)
        value = passed / total if self.scoring == "fraction" else float(passed == total)
        notes = [f"{passed}/{total} tests passed"]
        if why:
            notes.append(why)
        if reported < expected:
            notes.append(f"{expected - reported} tests missing from the report")
        if failing:
            notes.append(f"failing: {', '.join(failing[:5])}")
        return Score(
            value=value,
            components={"passed": float(passed), "tests": float(total)},
            reason="; ".join(notes),
        )
