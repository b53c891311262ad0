"""Unit-test rewards: generated code run in the sandbox, graded outside it.

- `python_tests` (HumanEval / MBPP style): the dataset's test code runs in *this* process, and
  the function under test is a proxy whose calls run in the sandbox and return plain data.
  Expected values never enter the sandbox and the comparison happens here, on fresh builtin
  values, so ``sys.exit(0)``, a printed "PASSED", an object whose ``__eq__`` is always True, a
  patched ``unittest`` or assert machinery, or reading the tests from disk or a caller's frame
  earn nothing: the tests and the expected values are simply not there.
- `io_tests`: each case's stdin is fed to the program in the sandbox; its stdout comes back
  and is compared here.

The test code comes from the dataset and is trusted; it must never be model-generated. A
failing case, a timeout or a crash scores 0 for that case; a sandbox that cannot start is a
``sandbox`` Failure (no score), never 0.
"""

from __future__ import annotations

import ast
import asyncio
import functools
import json
import math
import re
import secrets
import shlex
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from referee.errors import NotApplicable, RewardError
from referee.registry import register
from referee.reward import AsyncReward
from referee.rewards._common import short
from referee.rewards._plan import Call, plan_calls
from referee.rollout import Rollout
from referee.score import Score
from referee.verifiers.sandbox import (
    Backend,
    Isolation,
    Job,
    Limits,
    ProgramError,
    Sandbox,
    SandboxError,
    get_sandbox,
)

__all__ = ["IoTests", "PytestTests", "PythonTests", "extract_code"]

Scoring = Literal["fraction", "all"]
"""``fraction``: the share of test cases passed. ``all``: 1.0 only when every case passes."""

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)
_LANGS = {
    "python": {"python", "py", "python3", ""},
    "javascript": {"javascript", "js", "node", ""},
    "bash": {"bash", "sh", "shell", ""},
}


class _SandboxFailure(RewardError):
    failure_type = "sandbox"


def extract_code(text: str, language: str = "python") -> str:
    """The code in a completion: the last fenced block in `language` (or untagged), else all."""
    blocks = [body for lang, body in _FENCE.findall(text) if lang.lower() in _LANGS[language]]
    return blocks[-1] if blocks else text


@dataclass(kw_only=True)
class _Sandboxed(AsyncReward):
    """What the code rewards share: the sandbox options, and grading in a thread."""

    backend: Backend = "local"
    isolation: Isolation = "auto"
    runtime: str | None = None
    workers: int | None = None

    async def evaluate(self, rollout: Rollout) -> Score:
        return await asyncio.to_thread(self.grade, rollout)

    @abstractmethod
    def grade(self, rollout: Rollout) -> Score:
        """Score one rollout, blocking (what `evaluate` runs in a thread)."""

    def sandbox(self) -> Sandbox:
        """The shared sandbox these options name; a `sandbox` Failure if it cannot start."""
        try:
            return get_sandbox(
                self.backend, workers=self.workers, isolation=self.isolation, runtime=self.runtime
            )
        except SandboxError as exc:
            raise _SandboxFailure(str(exc)) from None


def _limits(timeout: float, memory_mb: int) -> Limits:
    return Limits(wall_seconds=timeout, cpu_seconds=timeout, memory_bytes=memory_mb << 20)


# --- python_tests --------------------------------------------------------------------------


class _RecordAsserts(ast.NodeTransformer):
    """``assert X`` becomes ``__referee_assert__(lambda: X, line)``: every assert is a case."""

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        self.generic_visit(node)
        at = node.test
        args = ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])
        lam = ast.copy_location(ast.Lambda(args=args, body=at), at)
        name = ast.copy_location(ast.Name("__referee_assert__", ast.Load()), node)
        line = ast.copy_location(ast.Constant(node.lineno), node)
        call = ast.copy_location(ast.Call(func=name, args=[lam, line], keywords=[]), node)
        return ast.copy_location(ast.Expr(call), node)


@dataclass
class _Cases:
    passed: int = 0
    total: int = 0
    failures: list[str] = field(default_factory=list)

    def check(self, test: Callable[[], object], line: int) -> None:
        self.total += 1
        try:
            ok = bool(test())
            why = "assertion failed"
        except ProgramError as exc:
            ok, why = False, str(exc)
        except Exception as exc:  # the dataset's own check raised on the returned value
            ok, why = False, f"{type(exc).__name__}: {exc}"
        if ok:
            self.passed += 1
        elif len(self.failures) < 5:
            self.failures.append(f"line {line}: {why[:200]}")


class _Remote:
    """A function of the sandboxed program, callable from the test code."""

    def __init__(self, session: Any, name: str) -> None:
        self._session = session
        self.__name__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._session.call(self.__name__, list(args), kwargs)


@functools.lru_cache(maxsize=512)
def _compile_test(test: str, entry: str) -> tuple[Any, list[Call] | None]:
    """The test code with every assert recorded, and its calls when they can be known in
    advance (see `_plan`); compiled once per distinct test (a GRPO group shares one)."""
    try:
        tree = ast.parse(test, "<test>")
    except SyntaxError as exc:
        raise NotApplicable(f"the reference test code does not parse: {exc}") from None
    plan = plan_calls(tree, entry)
    return compile(_RecordAsserts().visit(tree), "<test>", "exec"), plan


@functools.lru_cache(maxsize=512)
def _compile_prompt(prompt: str) -> Any:
    try:
        return compile(prompt, "<prompt>", "exec")
    except SyntaxError as exc:
        raise NotApplicable(f"the reference prompt does not parse: {exc}") from None


@register("python_tests")
@dataclass(kw_only=True)
class PythonTests(_Sandboxed):
    """HumanEval/MBPP-style tests against the completion's code, graded outside the sandbox.

    ``rollout.reference`` is ``{"test": code, "entry_point": name}``, optionally with
    ``"prompt"`` (code that the completion continues, as in HumanEval). The test code either
    defines ``check(candidate)`` or asserts on the entry point by name; every assert it runs is
    one case.

    Attributes:
        scoring: ``fraction`` of cases passed, or ``all`` (1.0 only if every case passes).
        timeout: Seconds the program may live (loading plus every call).
        call_timeout: Seconds one call may take.
        memory_mb: Address-space limit of the program.
        backend: Which sandbox runs the code (`Backend`).
        isolation: The local sandbox's isolation (`Isolation`).
        runtime: The docker sandbox's container runtime (``runsc`` for gVisor).
        workers: Sandbox workers (jobs at once); default: CPU count.
    """

    scoring: Scoring = "fraction"
    timeout: float = 10.0
    call_timeout: float = 5.0
    memory_mb: int = 1024
    name: str = "python_tests"

    def __post_init__(self) -> None:
        if self.timeout <= 0 or self.call_timeout <= 0:
            raise ValueError("timeout and call_timeout must be positive")

    def grade(self, rollout: Rollout) -> Score:
        """Score one rollout, blocking (what `evaluate` runs in a thread)."""
        ref = rollout.reference
        test_code = ref.get("test") if isinstance(ref, dict) else None
        if not isinstance(ref, dict) or not isinstance(test_code, str):
            raise NotApplicable(
                f'python_tests needs a reference {{"test", "entry_point"}}, got {short(ref)}'
            )
        entry = ref.get("entry_point")
        if not isinstance(entry, str) or not entry.isidentifier():
            raise NotApplicable(
                f"reference entry_point must be a function name, got {short(entry)}"
            )
        code = extract_code(rollout.completion_text)
        raw_prompt = ref.get("prompt")
        prompt = raw_prompt if isinstance(raw_prompt, str) else None
        if prompt and not re.search(rf"^\s*def\s+{re.escape(entry)}\s*\(", code, re.MULTILINE):
            code = prompt + code  # a HumanEval completion continues the prompt's signature
        sandbox = self.sandbox()
        limits = _limits(self.timeout, self.memory_mb)
        try:
            session = sandbox.session(
                Job(source=code, limits=limits, filename="solution.py"), self.call_timeout
            )
        except SandboxError as exc:
            raise _SandboxFailure(str(exc)) from None
        try:
            cases, aborted = self._run_tests(session, test_code, entry, prompt)
        except SandboxError as exc:
            raise _SandboxFailure(str(exc)) from None
        finally:
            try:
                outcome = session.close()
            except SandboxError as exc:
                raise _SandboxFailure(str(exc)) from None
        return self._score(cases, aborted, session.dead, outcome.stderr)

    def _run_tests(
        self, session: Any, test_code: str, entry: str, prompt: str | None
    ) -> tuple[_Cases, str | None]:
        # Everything up to session.names runs while the sandbox loads the program.
        test, plan = _compile_test(test_code, entry)
        cases = _Cases()
        namespace: dict[str, Any] = {"__name__": "__referee_test__"}
        if prompt:
            try:  # the prompt's own helpers (trusted dataset code) stay the dataset's
                exec(_compile_prompt(prompt), namespace)
            except Exception as exc:
                raise NotApplicable(f"the reference prompt does not run: {exc}") from None
        for name in session.names:
            if name not in namespace or name == entry:
                namespace[name] = _Remote(session, name)
        if entry not in namespace or not isinstance(namespace[entry], _Remote):
            namespace[entry] = _Remote(session, entry)
        namespace["candidate"] = namespace[entry]
        namespace["__referee_assert__"] = cases.check
        if plan and isinstance(namespace[entry], _Remote):
            session.pipeline(entry, plan)  # known calls go out at once; replies come in order
        aborted = None
        try:
            exec(test, namespace)
            check = namespace.get("check")
            if callable(check) and not isinstance(check, _Remote):
                check(namespace[entry])
        except ProgramError as exc:
            aborted = str(exc)
        except Exception as exc:
            aborted = f"{type(exc).__name__}: {exc}"
        return cases, aborted

    def _score(self, cases: _Cases, aborted: str | None, dead: str | None, stderr: bytes) -> Score:
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


def _cases_of(ref: Any) -> list[tuple[str, str]]:
    if isinstance(ref, dict) and isinstance(ref.get("input_output"), str):
        ref = ref["input_output"]
    if isinstance(ref, str):
        try:
            ref = json.loads(ref)
        except ValueError:
            raise NotApplicable("io_tests reference is a string but not JSON") from None
    if isinstance(ref, dict) and isinstance(ref.get("cases"), list):
        pairs = [(c.get("stdin", ""), c.get("stdout")) for c in ref["cases"] if isinstance(c, dict)]
    elif (
        isinstance(ref, dict)
        and isinstance(ref.get("inputs"), list)
        and isinstance(ref.get("outputs"), list)
    ):
        if len(ref["inputs"]) != len(ref["outputs"]):
            raise NotApplicable("io_tests reference has different numbers of inputs and outputs")
        pairs = list(zip(ref["inputs"], ref["outputs"], strict=True))
    else:
        raise NotApplicable(
            'io_tests needs {"cases": [{"stdin", "stdout"}]} or {"inputs": [...], "outputs": [...]}'
        )
    out = []
    for stdin, stdout in pairs:
        if isinstance(stdin, list):
            stdin = "\n".join(map(str, stdin))
        if isinstance(stdout, list):
            stdout = "\n".join(map(str, stdout))
        if not isinstance(stdin, str) or not isinstance(stdout, str):
            raise NotApplicable(f"io_tests case is not text: {short((stdin, stdout))}")
        out.append((stdin, stdout))
    if not out:
        raise NotApplicable("io_tests reference has no case")
    return out


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
class IoTests(_Sandboxed):
    """Stdin/stdout cases: each case's input is fed to the program, its output compared here.

    ``rollout.reference`` is ``{"cases": [{"stdin", "stdout"}]}``, or ``{"inputs": [...],
    "outputs": [...]}`` as verl's and APPS-style datasets write it (also as a JSON string, or
    under ``input_output``).

    Attributes:
        language: The program's language.
        scoring: ``fraction`` of cases passed, or ``all``.
        float_tol: Compare numeric tokens within this tolerance (else exact text).
        timeout: Seconds per case.
        memory_mb: Address-space limit of the program.
        stop_on_failure: Stop at the first failing case (with ``scoring: all`` the rest cannot
            change the score).
        backend: Which sandbox runs the code (`Backend`).
        isolation: The local sandbox's isolation.
        runtime: The docker sandbox's container runtime (``runsc`` for gVisor).
        workers: Sandbox workers; default: CPU count.
    """

    language: Literal["python", "javascript", "bash"] = "python"
    scoring: Scoring = "fraction"
    float_tol: float | None = None
    timeout: float = 5.0
    memory_mb: int = 1024
    stop_on_failure: bool = False
    name: str = "io_tests"

    def _job(self, code: str, stdin: str) -> Job:
        limits = _limits(self.timeout, self.memory_mb)
        data = stdin.encode()
        if self.language == "python":
            return Job(source=code, stdin=data, limits=limits)
        if self.language == "javascript":
            return Job(
                command=("node", "main.js"), files={"main.js": code}, stdin=data, limits=limits
            )
        return Job(command=("bash", "main.sh"), files={"main.sh": code}, stdin=data, limits=limits)

    def grade(self, rollout: Rollout) -> Score:
        """Score one rollout, blocking (what `evaluate` runs in a thread)."""
        cases = _cases_of(rollout.reference)
        code = extract_code(rollout.completion_text, self.language)
        sandbox = self.sandbox()
        passed = 0
        notes: list[str] = []
        stop = self.stop_on_failure or self.scoring == "all"
        for i, (stdin, want) in enumerate(cases):
            try:
                result = sandbox.run(self._job(code, stdin))
            except SandboxError as exc:
                raise _SandboxFailure(str(exc)) from None
            got = result.stdout.decode(errors="replace")
            if result.ok and _same_output(got, want, self.float_tol):
                passed += 1
                continue
            if len(notes) < 5:
                why = result.describe() if not result.ok else f"output {short(got.strip(), 40)}"
                notes.append(f"case {i + 1}: {why}")
            if stop:
                break
        value = passed / len(cases) if self.scoring == "fraction" else float(passed == len(cases))
        return Score(
            value=value,
            components={"passed": float(passed), "cases": float(len(cases))},
            reason="; ".join([f"{passed}/{len(cases)} cases passed", *notes]),
        )


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
class PytestTests(_Sandboxed):
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

    Attributes:
        scoring: ``fraction`` of tests passed, or ``all``.
        timeout: Seconds for the whole pytest run.
        memory_mb: Address-space limit.
        backend, isolation, runtime, workers: The sandbox, as for `python_tests`.
    """

    scoring: Scoring = "fraction"
    timeout: float = 30.0
    memory_mb: int = 2048
    name: str = "pytest_tests"

    def _check_pytest(self, sandbox: Sandbox) -> None:
        key = id(sandbox)
        if key not in _PYTEST_PRESENT:
            probe = sandbox.run(Job(command=("python3", "-c", "import pytest")))
            _PYTEST_PRESENT[key] = probe.ok
        if not _PYTEST_PRESENT[key]:
            raise _SandboxFailure(
                "pytest is not importable by the sandbox's python3; "
                "install it there (apt-get install python3-pytest)"
            )

    def grade(self, rollout: Rollout) -> Score:
        """Score one rollout, blocking (what `evaluate` runs in a thread)."""
        ref = rollout.reference
        tests = ref.get("tests") if isinstance(ref, dict) else None
        if not isinstance(ref, dict) or not isinstance(tests, str):
            raise NotApplicable(
                f'pytest_tests needs a reference {{"tests": code}}, got {short(ref)}'
            )
        test_file = str(ref.get("test_file") or "test_solution.py")
        solution_file = str(ref.get("solution_file") or "solution.py")
        extra = ref.get("files")
        files: dict[str, str | bytes] = {}
        if isinstance(extra, dict):
            files.update({str(k): str(v) for k, v in extra.items()})
        files[test_file] = tests
        files[solution_file] = extract_code(rollout.completion_text)
        expected = _count_tests(tests)
        nonce = secrets.token_hex(16)
        pytest = "python3 -m pytest -q -p no:cacheprovider --junitxml=.report.xml"
        script = (
            f"{pytest} {shlex.quote(test_file)} >/dev/null 2>&1;"
            f" printf '\\n%s\\n' {nonce}; cat .report.xml 2>/dev/null"
        )
        sandbox = self.sandbox()
        try:
            self._check_pytest(sandbox)
            limits = Limits(
                wall_seconds=self.timeout,
                cpu_seconds=self.timeout,
                memory_bytes=self.memory_mb << 20,
                output_bytes=4 << 20,
            )
            result = sandbox.run(Job(command=("sh", "-c", script), files=files, limits=limits))
        except SandboxError as exc:
            raise _SandboxFailure(str(exc)) from None
        out = result.stdout.decode(errors="replace")
        _, sep, xml = out.rpartition(f"\n{nonce}\n")
        passed = reported = 0
        failing: list[str] = []
        why = None
        if not sep or not xml.strip():
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
