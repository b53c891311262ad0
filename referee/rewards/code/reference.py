"""Code-test references: the ground truth that `python_tests`, `io_tests` and `pytest_tests`
grade against, defined once.

The rewards read a rollout's reference with the ``parse`` of their kind, whose error says what
shape was expected; `code_reference` says whether a reference is a code-test reference at all
(the hacking probes ask it before sending code to a reward).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeAlias

from referee.errors import NotApplicable
from referee.rewards._common import short

__all__ = [
    "CodeReference",
    "IoCase",
    "IoTestsReference",
    "PytestReference",
    "PythonTestsReference",
    "code_reference",
]


@dataclass(frozen=True, slots=True)
class PythonTestsReference:
    """A HumanEval/MBPP task: ``{"test", "entry_point"}``, optionally with ``"prompt"``.

    Attributes:
        test: The dataset's test code: it defines ``check(candidate)``, or asserts on the entry
            point by name.
        entry_point: The function under test.
        prompt: Code that the completion continues (HumanEval), or None.
        held_out: Test code of the same kind, run after `test` but not paid (its asserts
            are the held-out cases, `referee.rewards.code._cases`), or None.
    """

    test: str
    entry_point: str
    prompt: str | None = None
    held_out: str | None = None

    @classmethod
    def parse(cls, reference: object) -> PythonTestsReference:
        """Read a rollout's reference.

        Raises:
            NotApplicable: It is not ``{"test": code, "entry_point": name}``.
        """
        test = reference.get("test") if isinstance(reference, dict) else None
        if not isinstance(reference, dict) or not isinstance(test, str):
            raise NotApplicable(
                f'python_tests needs a reference {{"test", "entry_point"}}, got {short(reference)}'
            )
        entry = reference.get("entry_point")
        if not isinstance(entry, str) or not entry.isidentifier():
            raise NotApplicable(
                f"reference entry_point must be a function name, got {short(entry)}"
            )
        prompt = reference.get("prompt")
        held = reference.get("held_out")
        if held is not None and not isinstance(held, str):
            raise NotApplicable(f"python_tests held_out is test code (text), got {short(held)}")
        return cls(test, entry, prompt if isinstance(prompt, str) else None, held or None)


class IoCase(NamedTuple):
    """One stdin/stdout case."""

    stdin: str
    stdout: str


@dataclass(frozen=True, slots=True)
class IoTestsReference:
    """Stdin/stdout cases: ``{"cases": [{"stdin", "stdout"}]}``, or ``{"inputs": [...],
    "outputs": [...]}`` as verl's and APPS-style datasets write it (also as a JSON string, or
    under ``input_output``). A case's input or output given as a list is its lines.

    A ``held_out`` key beside the cases (a list of cases, or ``{"inputs", "outputs"}``)
    gives cases that run but are not paid (`referee.rewards.code._cases`).

    Attributes:
        cases: At least one case.
        held_out: The reference's held-out cases (none by default).
    """

    cases: tuple[IoCase, ...]
    held_out: tuple[IoCase, ...] = ()

    @classmethod
    def parse(cls, reference: object) -> IoTestsReference:
        """Read a rollout's reference.

        Raises:
            NotApplicable: It is none of the shapes above, or has no case.
        """
        ref: Any = reference
        if isinstance(ref, dict) and isinstance(ref.get("input_output"), str):
            ref = ref["input_output"]
        if isinstance(ref, str):
            try:
                ref = json.loads(ref)
            except ValueError:
                raise NotApplicable("io_tests reference is a string but not JSON") from None
        if isinstance(ref, dict) and isinstance(ref.get("cases"), list):
            pairs = [
                (c.get("stdin", ""), c.get("stdout")) for c in ref["cases"] if isinstance(c, dict)
            ]
        elif (
            isinstance(ref, dict)
            and isinstance(ref.get("inputs"), list)
            and isinstance(ref.get("outputs"), list)
        ):
            if len(ref["inputs"]) != len(ref["outputs"]):
                raise NotApplicable(
                    "io_tests reference has different numbers of inputs and outputs"
                )
            pairs = list(zip(ref["inputs"], ref["outputs"], strict=True))
        else:
            raise NotApplicable(
                'io_tests needs {"cases": [{"stdin", "stdout"}]} or '
                '{"inputs": [...], "outputs": [...]}'
            )
        cases = tuple(_case(stdin, stdout) for stdin, stdout in pairs)
        if not cases:
            raise NotApplicable("io_tests reference has no case")
        held = next((r["held_out"] for r in (ref, reference)
                     if isinstance(r, dict) and r.get("held_out")), None)  # fmt: skip
        if not held:
            return cls(cases)
        if isinstance(held, list):
            held = {"cases": held}
        if not isinstance(held, dict) or "held_out" in held:
            raise NotApplicable(
                'io_tests held_out is a list of cases or {"inputs", "outputs"}, got ' + short(held)
            )
        return cls(cases, cls.parse(held).cases)


def _case(stdin: object, stdout: object) -> IoCase:
    if isinstance(stdin, list):
        stdin = "\n".join(map(str, stdin))
    if isinstance(stdout, list):
        stdout = "\n".join(map(str, stdout))
    if not isinstance(stdin, str) or not isinstance(stdout, str):
        raise NotApplicable(f"io_tests case is not text: {short((stdin, stdout))}")
    return IoCase(stdin, stdout)


@dataclass(frozen=True, slots=True)
class PytestReference:
    """A repository-style task: ``{"tests": "<pytest code>"}``, optionally with
    ``"test_file"``, ``"solution_file"`` and ``"files"``.

    Attributes:
        tests: The pytest file's code.
        test_file: Its name in the work dir.
        solution_file: The name the completion's code gets.
        files: More files by relative path.
    """

    tests: str
    test_file: str = "test_solution.py"
    solution_file: str = "solution.py"
    files: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, reference: object) -> PytestReference:
        """Read a rollout's reference.

        Raises:
            NotApplicable: It is not ``{"tests": code, ...}``.
        """
        tests = reference.get("tests") if isinstance(reference, dict) else None
        if not isinstance(reference, dict) or not isinstance(tests, str):
            raise NotApplicable(
                f'pytest_tests needs a reference {{"tests": code}}, got {short(reference)}'
            )
        extra = reference.get("files")
        return cls(
            tests,
            test_file=str(reference.get("test_file") or "test_solution.py"),
            solution_file=str(reference.get("solution_file") or "solution.py"),
            files={str(k): str(v) for k, v in extra.items()} if isinstance(extra, dict) else {},
        )


CodeReference: TypeAlias = PythonTestsReference | IoTestsReference | PytestReference
"""Any code-test reference."""

_IO_KEYS = frozenset({"cases", "inputs", "input_output"})


def code_reference(reference: object) -> CodeReference | None:
    """The code-test reference `reference` is, read; None when it is not one.

    Its keys say which kind it is (``test``: `python_tests`, ``tests``: `pytest_tests`,
    ``cases``, ``inputs`` or ``input_output``, or JSON text: `io_tests`). A reference of a kind
    that does not parse (no ``entry_point``, no case) is None too: no code reward can grade
    against it.

    Example:
        ```python
        ref = code_reference(rollout.reference)
        entry = ref.entry_point if isinstance(ref, PythonTestsReference) else "solution"
        ```
    """
    parse: Callable[[object], CodeReference]
    if isinstance(reference, dict):
        if "test" in reference:
            parse = PythonTestsReference.parse
        elif "tests" in reference:
            parse = PytestReference.parse
        elif _IO_KEYS.intersection(reference):
            parse = IoTestsReference.parse
        else:
            return None
    elif isinstance(reference, str):
        parse = IoTestsReference.parse
    else:
        return None
    try:
        return parse(reference)
    except NotApplicable:
        return None
