"""`function_tests`: call-based tests (APPS/TACO ``fn_name``, LeetCode style) in seven languages.

The multi-language counterpart of `python_tests`: the completion defines a function; a driver
generated here calls it with each case's arguments in the sandbox, one job per case, and
prints what it returned as JSON; the verdict is computed here, outside the sandbox, from that
JSON. Expected values never enter the sandbox. The drivers are in `_drivers`, the signature
reading of the typed languages in `_signatures`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from referee.errors import NotApplicable
from referee.registry import register
from referee.reward import Need
from referee.rewards._common import short
from referee.rewards._sandboxed import SandboxFailure, Scoring, extract_code, limits
from referee.rewards.code._cases import (
    CaseJobs,
    Tally,
    check_held_out,
    out_of_time,
)
from referee.rewards.code._drivers import DRIVER_CLASS, FLAGS, program
from referee.rewards.code._signatures import Signature, Unsupported, defines, fits, signature
from referee.rewards.code.languages import (
    COMPILED,
    Build,
    build,
    case_job,
    toolchain_problem,
    verdict,
)
from referee.rollout import Rollout
from referee.scores import Score
from referee.verifiers.sandbox import Sandbox, SandboxError

__all__ = ["FunctionCase", "FunctionLanguage", "FunctionTests", "FunctionTestsReference"]

FunctionLanguage = Literal["python", "javascript", "typescript", "cpp", "java", "go", "rust"]
"""A language `function_tests` calls functions in (C is not one: it has no overloading or
generic containers to build arguments and print results with)."""

_TYPED = ("cpp", "java", "go", "rust")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_USAGE = (
    'function_tests needs {"fn_name", "inputs": [[args...]], "outputs": [...]} (APPS/TACO, '
    'also as JSON text or under "input_output") or {"entry_point", "cases": [{"args", '
    '"expected"}]}'
)


# --- the reference -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FunctionCase:
    """One call: its arguments and the value it must return."""

    args: tuple[Any, ...]
    expected: Any


@dataclass(frozen=True, slots=True)
class FunctionTestsReference:
    """Call-based cases: APPS/TACO's ``{"fn_name", "inputs", "outputs"}``, or
    ``{"entry_point", "cases": [{"args", "expected"}]}``.

    APPS/TACO's form may be JSON text, or be under ``input_output`` (JSON text or a mapping,
    with ``fn_name`` inside it or beside it). Each input is the list of the call's
    arguments; where every input is a string instead, each is the arguments as JSON values,
    one a line, and each output JSON text (LiveCodeBench's functional form, which verl's
    ``prime_code`` reads). APPS and TACO often wrap an output in a one-element list: there,
    a result equal to the element passes too, as their graders let it.

    A ``held_out`` key beside the cases (a list of ``{"args", "expected"}``, or ``{"inputs",
    "outputs"}``) gives cases that run but are not paid (`referee.rewards.code._cases`).

    Attributes:
        name: The function to call.
        cases: At least one case.
        unwrapped: A one-element list as the expected value also accepts its element.
        held_out: The reference's held-out cases (none by default).
    """

    name: str
    cases: tuple[FunctionCase, ...]
    unwrapped: bool = False
    held_out: tuple[FunctionCase, ...] = ()

    @classmethod
    def parse(cls, reference: object) -> FunctionTestsReference:
        """Read a rollout's reference.

        Raises:
            NotApplicable: It is none of the shapes above, names no function, or has no case.
        """
        read = cls._parse(reference)
        held: Any = None
        for where in (reference, _decoded(reference)):
            if isinstance(where, dict) and where.get("held_out"):
                held = where["held_out"]
        if held is None:
            return read
        if isinstance(held, list):
            held = {"cases": held} if all(isinstance(c, dict) for c in held) else None
        if not isinstance(held, dict) or "held_out" in held:
            raise NotApplicable(
                'function_tests held_out is a list of {"args", "expected"} or {"inputs", '
                f'"outputs"}}, got {short(held)}'
            )
        cases = cls._parse({"fn_name": read.name, **held}).cases
        return cls(read.name, read.cases, read.unwrapped, cases)

    @classmethod
    def _parse(cls, reference: object) -> FunctionTestsReference:
        ref: Any = reference
        outer_name = ref.get("fn_name") if isinstance(ref, dict) else None
        if isinstance(ref, dict) and isinstance(ref.get("input_output"), str | dict):
            ref = ref["input_output"]
        if isinstance(ref, str):
            try:
                ref = json.loads(ref)
            except ValueError:
                raise NotApplicable("function_tests reference is a string but not JSON") from None
        if not isinstance(ref, dict):
            raise NotApplicable(f"{_USAGE}, got {short(reference)}")
        name = ref.get("fn_name", ref.get("entry_point", outer_name))
        if name is None:
            raise NotApplicable(
                "function_tests needs the function's name (fn_name or entry_point); this "
                "reference has none (stdin/stdout cases are for io_tests)"
            )
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise NotApplicable(f"reference fn_name must be a function name, got {short(name)}")
        if isinstance(ref.get("cases"), list):
            return cls(name, tuple(_case(c, i) for i, c in enumerate(ref["cases"])) or _none())
        inputs, outputs = ref.get("inputs"), ref.get("outputs")
        if not isinstance(inputs, list) or not isinstance(outputs, list):
            raise NotApplicable(f"{_USAGE}, got {short(reference)}")
        if len(inputs) != len(outputs):
            raise NotApplicable(
                f"function_tests reference has {len(inputs)} inputs but {len(outputs)} outputs"
            )
        if inputs and all(isinstance(i, str) for i in inputs):
            pairs = [_lines(i, o, k) for k, (i, o) in enumerate(zip(inputs, outputs, strict=True))]
        else:
            pairs = list(zip(inputs, outputs, strict=True))
        cases = []
        for k, (args, expected) in enumerate(pairs):
            if not isinstance(args, list):
                raise NotApplicable(
                    f"function_tests input {k + 1} must be the list of the call's arguments, "
                    f"got {short(args)}"
                )
            cases.append(FunctionCase(tuple(args), expected))
        return cls(name, tuple(cases) or _none(), unwrapped=True)


def _decoded(reference: object) -> object:
    """The reference as JSON text decoded, or the mapping inside its ``input_output``."""
    inner = reference.get("input_output") if isinstance(reference, dict) else reference
    if isinstance(inner, str):
        try:
            return json.loads(inner)
        except ValueError:
            return None
    return inner


def _none() -> tuple[FunctionCase, ...]:
    raise NotApplicable("function_tests reference has no case")


def _case(case: object, k: int) -> FunctionCase:
    if (
        not isinstance(case, dict)
        or not isinstance(case.get("args"), list)
        or ("expected" not in case)
    ):
        raise NotApplicable(
            f'function_tests case {k + 1} must be {{"args": [...], "expected": value}}, '
            f"got {short(case)}"
        )
    return FunctionCase(tuple(case["args"]), case["expected"])


def _lines(inputs: str, output: object, k: int) -> tuple[object, object]:
    """LiveCodeBench's functional form: one JSON argument a line, the output JSON text."""
    try:
        args = [json.loads(line) for line in inputs.split("\n") if line.strip()]
        expected = json.loads(output) if isinstance(output, str) else output
    except ValueError:
        raise NotApplicable(
            f"function_tests input {k + 1} is text, but not one JSON argument a line"
        ) from None
    return args, expected


# --- the verdict ---------------------------------------------------------------------------


def same(got: object, want: object, float_tol: float | None = None) -> bool:
    """Whether two JSON values are equal: lists item by item, objects key by key, strings
    and booleans exactly (``true`` is not ``1``), numbers by value (``2`` is ``2.0``), or
    within `float_tol` (relative or absolute) where it is given."""
    if isinstance(got, bool) or isinstance(want, bool):
        return type(got) is type(want) and got == want
    if isinstance(got, int | float) and isinstance(want, int | float):
        if got == want:
            return True
        if float_tol is None:
            return False
        try:
            return math.isclose(got, want, rel_tol=float_tol, abs_tol=float_tol)
        except OverflowError:  # an integer past a float's range
            return False
    if isinstance(got, list) and isinstance(want, list):
        return len(got) == len(want) and all(
            same(g, w, float_tol) for g, w in zip(got, want, strict=True)
        )
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(same(got[k], want[k], float_tol) for k in want)
    return type(got) is type(want) and got == want  # strings, null


def _passes(
    got: object, case: FunctionCase, ref: FunctionTestsReference, tol: float | None
) -> bool:
    if same(got, case.expected, tol):
        return True
    want = case.expected
    return ref.unwrapped and isinstance(want, list) and len(want) == 1 and same(got, want[0], tol)


def _read(stdout: bytes, marker: str) -> tuple[object, str | None]:
    """(the value printed after the last marker line, None), or (None, why there is none)."""
    text = stdout.decode(errors="replace")
    at = text.rfind(marker)
    if at < 0:
        return None, "unreadable result: nothing printed after the call (it never returned)"
    rest = text[at + len(marker) :]
    line = (rest[1:] if rest.startswith("\n") else rest).split("\n", 1)[0].strip()
    try:
        return json.loads(line), None
    except (ValueError, RecursionError):
        return None, f"unreadable result: {short(line, 40)}"


_KEY = secrets.token_bytes(32)


# --- the reward ----------------------------------------------------------------------------


@register("function_tests")
@dataclass(kw_only=True)
class FunctionTests(CaseJobs[FunctionTestsReference]):
    """Call-based tests of a function (APPS/TACO ``fn_name``, LeetCode), graded outside the sandbox.

    ``rollout.reference`` is ``{"fn_name", "inputs": [[args...], ...], "outputs": [...]}``
    (APPS/TACO; also as JSON text or under ``input_output``) or ``{"entry_point", "cases":
    [{"args": [...], "expected": value}]}``: see `FunctionTestsReference`.

    The program is the completion's last fenced block in `language` (or untagged), else the
    whole completion: a function (``def two_sum``, ``function twoSum``, ``func twoSum``,
    ``fn two_sum``) or a LeetCode class ``Solution`` with the method (``impl Solution`` in
    Rust). A driver generated here is placed after it: it holds every case's arguments (no
    expected value), calls the function once with the case its stdin names, and prints the
    result as JSON on the line after a marker line. The program with its driver is built
    once per rollout (the build cache keeps it for the same completion and cases); each case
    then runs in a job of its own, with its own time and memory limit and a clean state, so
    a crash or a loop fails that case alone. The host reads the JSON after the last marker
    line and compares it with the expected value: lists item by item (a tuple is a list),
    objects key by key, numbers by value (``2`` is ``2.0``), within `float_tol` where given.
    What the function prints itself comes before the marker and is ignored. A program can
    print a marker line of its own (even the real one, read from its own build): that makes
    its result whatever it printed, which it could as well have returned, so it earns
    nothing it could not earn honestly.

    C++, Java, Go and Rust are called with typed arguments: the function's parameter types
    are read from its source (`referee.rewards.code._signatures` lists those supported:
    integers, floats, booleans, characters, strings, lists or arrays, string- or
    integer-keyed maps, nested). A program without the function scores 0 ("no function");
    a case whose arguments do not fit the parameters fails. A parameter or result type the
    driver cannot build or print (a ``TreeNode*``, a ``ListNode``) is the reward's
    limitation, not the program's fault: ``Failure("not_applicable")``, never 0 or 1. (A
    policy that writes such a signature on purpose is not paid: watch the failure rate.) Go
    programs have no ``main`` of their own (LeetCode style): the driver's is the one; so it
    is for C++ and Rust, whose compiler says so if the program brings one. A compile error,
    a runtime error, a time, memory or output limit, a ``wrong answer`` or an ``unreadable
    result`` (no marker, or not JSON after it) fails that case and the reason says which; a
    sandbox that cannot start, or lacks the language's toolchain, is ``Failure("sandbox")``.
    A function is judged by what it returns: one that changes its arguments in place
    (LeetCode's "do not return anything") returns nothing to compare.

    Attributes:
        language: ``python``, ``javascript`` (``node``), ``typescript`` (transpiled, run by
            ``node``), ``cpp``, ``java``, ``go`` or ``rust``.
        scoring: ``fraction`` of cases passed, or ``all`` (1.0 only if every case passes).
        float_tol: Compare numbers within this tolerance, relative or absolute (else
            exactly, ``2`` equal to ``2.0``).
        timeout: Seconds per case (a rollout's deadline follows its cases: `deadline_for`).
        memory_mb: Memory limit of each case's run, in MiB (for ``java``, ``go``,
            ``javascript`` and ``typescript``, their runtime's heap: see
            `referee.rewards.code.languages`).
        stop_on_failure: Stop at the first failing case (with ``scoring: all`` the rest cannot
            change the score).
        compile_timeout: Seconds the build may take (``cpp``, ``java``, ``go``, ``rust``,
            ``typescript``).
        compile_memory_mb: Address-space limit of the compiler, in MiB.
        held_out: The share of each reference's cases that run but are not paid (chosen by
            their arguments and expected value, the same for every attempt; at least one,
            never all), beside any the reference lists under ``held_out``: the monitor
            compares their pass rate with the paid cases' (`referee.rewards.code._cases`).

    Example:
        ```yaml
        type: function_tests
        language: python
        scoring: fraction
        timeout: 2
        memory_mb: 256
        float_tol: 1.0e-6
        ```

    Scores:
        ````yaml
        needs: [sandbox]
        rollouts:
          - prompt: Write `two_sum(nums, target)`, the indices of two numbers adding up to target.
            completion: |-
              ```python
              def two_sum(nums, target):
                  seen = {}
                  for i, x in enumerate(nums):
                      if target - x in seen:
                          return [seen[target - x], i]
                      seen[x] = i
              ```
            reference: &cases
              fn_name: two_sum
              inputs: [[[2, 7, 11, 15], 9], [[3, 2, 4], 6], [[3, 3], 6]]
              outputs: [[0, 1], [1, 2], [0, 1]]
              held_out: {inputs: [[[1, 5, 9], 14]], outputs: [[1, 2]]}  # run, not paid
            value: 1.0
          - prompt: Write `two_sum(nums, target)`, the indices of two numbers adding up to target.
            completion: |-
              ```python
              def two_sum(nums, target):
                  return [0, 1]
              ```
            reference: *cases
            value: 0.6666666666666666
        ````
    """

    language: FunctionLanguage = "python"
    scoring: Scoring = "fraction"
    float_tol: float | None = None
    timeout: float = 5.0
    memory_mb: int = 1024
    stop_on_failure: bool = False
    compile_timeout: float = 30.0
    compile_memory_mb: int = 2048
    held_out: float | None = None
    name: str = "function_tests"

    def needs(self) -> frozenset[Need]:
        """The function's name and its cases."""
        return frozenset({"reference"})

    def check_options(self) -> None:
        if self.timeout <= 0 or self.compile_timeout <= 0:
            raise ValueError("timeout and compile_timeout must be positive")
        if self.memory_mb < 1 or self.compile_memory_mb < 1:
            raise ValueError("memory_mb and compile_memory_mb must be at least 1")
        if self.float_tol is not None and not self.float_tol >= 0:
            raise ValueError(f"float_tol must be at least 0, got {self.float_tol!r}")
        check_held_out(self.held_out)

    def read(self, rollout: Rollout) -> tuple[FunctionTestsReference, int]:
        """The function's name and its cases, and how many (the held-out ones with them)."""
        reference = FunctionTestsReference.parse(rollout.reference)
        return reference, len(reference.cases) + len(reference.held_out)

    def grade_cases(
        self, rollout: Rollout, ref: FunctionTestsReference, until: float | None
    ) -> Score:
        """Score one rollout, blocking (what `score` runs on the reward's threads), starting
        no case that could end past `until`."""
        code = extract_code(rollout.completion_text, self.language)
        cases = ref.cases + ref.held_out
        keys = [json.dumps([c.args, c.expected], default=repr) for c in ref.cases]
        stops = self.stop_on_failure or self.scoring == "all"
        tally = Tally.of(keys, len(ref.held_out), self.held_out, stops)
        sig = self._signature(code, ref.name)
        if sig is None:
            return tally.score(self.scoring, f"no function {ref.name}")
        runs: dict[int, Sequence[Any]] = {}
        misfits: dict[int, str] = {}
        for i, case in enumerate(cases):
            why = _misfit(case.args, sig, self.language)
            if why is None:
                runs[i] = case.args
            else:
                misfits[i] = why
        message = self.language.encode() + b"\0" + code.encode() + b"\0"
        message += json.dumps(sorted(runs.items()), default=repr).encode()
        marker = "referee-result-" + hmac.new(_KEY, message, hashlib.sha256).hexdigest()[:32]
        source = program(self.language, code, sig or None, ref.name, runs, marker)
        try:
            return self._run(source, marker, ref, cases, tally, runs, misfits, until)
        except SandboxError as exc:
            raise SandboxFailure(str(exc)) from None

    def _signature(self, code: str, name: str) -> Signature | Literal[False] | None:
        """The function's signature (typed languages), False (found, untyped), or None."""
        if self.language not in _TYPED:
            return False if defines(self.language, code, name) else None
        try:
            sig = signature(self.language, code, name)
            if sig is not None and self.language == "java" and sig.owner is None:
                raise Unsupported(f"a method {name} outside any class")
        except Unsupported as exc:
            raise NotApplicable(
                f"function_tests cannot call {name} in {self.language}: {exc} is not one its "
                "driver can pass or print (the supported types: "
                "referee.rewards.code._signatures)"
            ) from None
        return sig

    def _run(
        self,
        source: str,
        marker: str,
        ref: FunctionTestsReference,
        cases: Sequence[FunctionCase],
        tally: Tally,
        runs: dict[int, Sequence[Any]],
        misfits: dict[int, str],
        until: float | None,
    ) -> Score:
        built: Build | None = None
        sandbox: Sandbox | None = None
        if runs:
            sandbox = self.open_sandbox()
            built = self._build(sandbox, source)
            if built is not None and built.error is not None:
                return tally.score(self.scoring, built.error)  # every case failed
        bounds = limits(self.timeout, self.memory_mb)
        for i in tally.order:
            if not tally.wants(i):
                continue
            why = misfits.get(i)
            if why is None and out_of_time(until, self.timeout):
                tally.cut(i)  # this case and the rest: failed
                break
            if why is None:
                assert sandbox is not None
                job = case_job(self.language, source, built, f"{i}\n".encode(), bounds)
                result = sandbox.run(job)
                why = verdict(result, bounds.cpu_seconds)
                if not why:
                    got, why = _read(result.stdout, marker)
                    if why is None and _passes(got, cases[i], ref, self.float_tol):
                        tally.record(i, True)
                        continue
                    why = why or f"wrong answer: {short(json.dumps(got), 40)}"
            tally.record(i, False, why)
        return tally.score(self.scoring)

    def _build(self, sandbox: Sandbox, source: str) -> Build | None:
        """The program built with its driver (compiled languages), else None.

        Raises:
            SandboxFailure: The sandbox lacks the language's toolchain.
        """
        problem = toolchain_problem(sandbox, self.language)
        if problem is not None:
            raise SandboxFailure(problem)
        if self.language not in COMPILED:
            return None
        built = build(
            sandbox,
            self.sandbox,
            self.language,
            source,
            FLAGS.get(self.language),
            self.compile_timeout,
            self.compile_memory_mb,
        )
        if self.language == "java":  # the driver's class is the one run, in the program's package
            package = built.main.rpartition(".")[0]
            main = f"{package}.{DRIVER_CLASS}" if package else DRIVER_CLASS
            built = Build(built.artifact, built.error, main, built.seconds)
        return built


def _misfit(args: Sequence[Any], sig: Signature | Literal[False], language: str) -> str | None:
    """Why a case's arguments cannot be passed to the function, or None."""
    if sig is False:
        if language in ("javascript", "typescript") and not _finite(list(args)):
            return "an argument holds NaN or an infinity, which JSON.parse cannot read"
        return None
    if len(args) != len(sig.params):
        return f"{sig.name} takes {len(sig.params)} arguments, the case gives {len(args)}"
    for k, (value, param) in enumerate(zip(args, sig.params, strict=True)):
        why = fits(value, param.ty)
        if why is not None:
            return f"argument {k + 1} ({param.name or param.ty.text}) does not fit: {why}"
    return None


def _finite(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    return True
