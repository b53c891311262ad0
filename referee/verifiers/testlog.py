"""Test logs graded the SWE-bench way: which tests passed, and whether a patch resolved a task.

A task names the tests that must go from failing to passing (``FAIL_TO_PASS``) and those that
must keep passing (``PASS_TO_PASS``). A run of the tests leaves a log in SWE-bench's format:
the runner's output between ``>>>>> Start Test Output`` and ``>>>>> End Test Output``, then
``>>>>> Test Exit Code: N``. `grade_log` reads it with the semantics of SWE-bench's harness
(``swebench.harness.grading``, 5.0.2), so a verdict here is the verdict there:

- the runner's output is read by pytest's ``-rA`` summary lines (``PASSED path::test``), as
  ``parse_log_pytest`` reads them; a test's last line wins;
- a log with a failure marker (patch apply failed, reset failed, tests errored or timed out),
  or without both output markers, is invalid: nothing resolved; so is a log where no test
  was seen and nothing shows the suite ran, and one whose test command exited non-zero
  while no test failed (the log does not describe the run);
- a ``FAIL_TO_PASS`` test succeeds when it passed or xfailed; skipped, failed, errored or
  missing, it fails. A ``PASS_TO_PASS`` test is kept when it passed, xfailed or was skipped;
- an id truncated inside its parameters (``test_x[a-b``) matches the ids it begins, when they
  agree on passing;
- resolved (``RESOLVED_FULL``): every ``FAIL_TO_PASS`` succeeds and every ``PASS_TO_PASS`` is
  kept; ``RESOLVED_PARTIAL``: some but not all ``FAIL_TO_PASS`` succeed, every
  ``PASS_TO_PASS`` kept; else ``RESOLVED_NO``. An empty list counts as all succeeding.

The log is the test runner's account, so code running inside the tests can forge it (print
``PASSED`` lines, exit 0); `referee.rewards.PatchTests` keeps the patch away from the tests
and their configuration, not from the runner's process.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "APPLY_PATCH_FAIL",
    "END_TEST_OUTPUT",
    "RESET_FAILED",
    "START_TEST_OUTPUT",
    "TESTS_ERROR",
    "TESTS_TIMEOUT",
    "TEST_EXIT_CODE",
    "Resolution",
    "TestsReport",
    "grade_log",
    "parse_pytest_log",
    "read_log",
    "tests_report",
]

START_TEST_OUTPUT = ">>>>> Start Test Output"
END_TEST_OUTPUT = ">>>>> End Test Output"
TEST_EXIT_CODE = ">>>>> Test Exit Code"
APPLY_PATCH_FAIL = ">>>>> Patch Apply Failed"
RESET_FAILED = ">>>>> Reset Failed"
TESTS_ERROR = ">>>>> Tests Errored"
TESTS_TIMEOUT = ">>>>> Tests Timed Out"
_BAD_CODES = (APPLY_PATCH_FAIL, RESET_FAILED, TESTS_ERROR, TESTS_TIMEOUT)

Resolution = Literal["RESOLVED_FULL", "RESOLVED_PARTIAL", "RESOLVED_NO"]
"""SWE-bench's resolution status of a task instance."""

_STATUSES = ("FAILED", "PASSED", "SKIPPED", "ERROR", "XFAIL")
_PASSING = frozenset({"PASSED", "XFAIL"})
_FAILING = frozenset({"FAILED", "ERROR", "SKIPPED"})  # for FAIL_TO_PASS, a skip is no fix
_SKIP_SUMMARY_COUNT = re.compile(r"^\[\d+\]$")
_EXIT_CODE = re.compile(rf"{re.escape(TEST_EXIT_CODE)}:\s*(-?\d+)")
# Evidence that a runner ran although no test status was read (SWE-bench's SUITE_RAN): every
# count non-zero, so a suite that never started is not read as one that passed.
_SUITE_RAN = re.compile(
    r"Executed [1-9]\d* of \d+"
    r"|TOTAL: [1-9]\d* (?:SUCCESS|FAILED)"
    r"|[1-9]\d* passing"
    r"|Tests:\s+[1-9]\d*"
    r"|Test Suites:\s+(?:\d+ \w+, )*[1-9]\d* total"
    r"|^# tests [1-9]\d*"
    r"|[1-9]\d* specs?, \d+ failures?"
    r"|': ok$",
    re.M,
)


def parse_pytest_log(log: str) -> dict[str, str]:
    """Test id -> status (``PASSED``, ``FAILED``, ``SKIPPED``, ``ERROR``, ``XFAIL``) from
    pytest's ``-rA`` output, as SWE-bench's ``parse_log_pytest`` reads it."""
    status_map: dict[str, str] = {}
    for line in log.split("\n"):
        if not line.startswith(_STATUSES):
            continue
        if line.startswith("FAILED"):
            line = line.replace(" - ", " ")
        words = line.split()
        if len(words) <= 1:
            continue
        if words[0] == "SKIPPED" and _SKIP_SUMMARY_COUNT.match(words[1]):
            continue  # ``SKIPPED [N] path:line: reason``: a summary count, not a test
        status_map[words[1]] = words[0]
    return status_map


def read_log(log: str) -> dict[str, str] | None:
    """The test statuses a log reports, or None when it is not a valid account of a run
    (SWE-bench's ``get_logs_eval``)."""
    if any(code in log for code in _BAD_CODES):
        return None
    if START_TEST_OUTPUT not in log or END_TEST_OUTPUT not in log:
        return None
    sliced = log.split(START_TEST_OUTPUT)[1].split(END_TEST_OUTPUT)[0]
    status_map = parse_pytest_log(sliced)
    if not status_map:
        status_map = parse_pytest_log(log)
    if not status_map and not _SUITE_RAN.search(log):
        return None
    found = _EXIT_CODE.search(log)
    exit_code = int(found.group(1)) if found else None
    if (
        exit_code not in (None, 0)
        and status_map
        and not any(status in ("FAILED", "ERROR") for status in status_map.values())
    ):
        return None
    return status_map


def _status(case: str, status_map: Mapping[str, str]) -> str | None:
    """`case`'s status, tolerating an id truncated inside its parameters; None when the log
    has no such test."""
    if case in status_map:
        return status_map[case]
    if case.count("[") > case.count("]"):
        matches = [key for key in status_map if key.startswith(case)]
        if matches and len({status_map[key] in _PASSING for key in matches}) == 1:
            return status_map[matches[0]]
    return None


@dataclass(frozen=True, slots=True)
class TestsReport:
    """Which of a task's tests succeeded (SWE-bench's ``get_eval_tests_report``).

    Attributes:
        f2p_success: ``FAIL_TO_PASS`` tests that now pass.
        f2p_failure: ``FAIL_TO_PASS`` tests that do not.
        p2p_success: ``PASS_TO_PASS`` tests still passing (or skipped).
        p2p_failure: ``PASS_TO_PASS`` tests broken.
    """

    __test__ = False  # not a pytest test class, whatever its name says

    f2p_success: tuple[str, ...]
    f2p_failure: tuple[str, ...]
    p2p_success: tuple[str, ...]
    p2p_failure: tuple[str, ...]

    @property
    def fail_to_pass(self) -> float:
        """The share of ``FAIL_TO_PASS`` tests that pass (1.0 when there are none)."""
        total = len(self.f2p_success) + len(self.f2p_failure)
        return 1.0 if total == 0 else len(self.f2p_success) / total

    @property
    def pass_to_pass(self) -> float:
        """The share of ``PASS_TO_PASS`` tests still passing (1.0 when there are none)."""
        total = len(self.p2p_success) + len(self.p2p_failure)
        return 1.0 if total == 0 else len(self.p2p_success) / total

    @property
    def resolution(self) -> Resolution:
        """SWE-bench's ``get_resolution_status``."""
        f2p, p2p = self.fail_to_pass, self.pass_to_pass
        if f2p == 1 and p2p == 1:
            return "RESOLVED_FULL"
        if 0 < f2p < 1 and p2p == 1:
            return "RESOLVED_PARTIAL"
        return "RESOLVED_NO"


def tests_report(
    status_map: Mapping[str, str], fail_to_pass: Sequence[str], pass_to_pass: Sequence[str]
) -> TestsReport:
    """How a task's tests fared in `status_map` (SWE-bench's pass-and-fail evaluation).

    A test whose status is none of the known ones (a line such as ``PASSEDx name``) lands in
    neither list of its kind, as in SWE-bench.
    """
    f2p_ok, f2p_bad, p2p_ok, p2p_bad = [], [], [], []
    for case in fail_to_pass:
        status = _status(case, status_map)
        if status in _PASSING:
            f2p_ok.append(case)
        elif status is None or status in _FAILING:
            f2p_bad.append(case)
    for case in pass_to_pass:
        status = _status(case, status_map)
        if status in _PASSING or status == "SKIPPED":  # a skipped test is not broken
            p2p_ok.append(case)
        elif status is None or status in _FAILING:
            p2p_bad.append(case)
    return TestsReport(tuple(f2p_ok), tuple(f2p_bad), tuple(p2p_ok), tuple(p2p_bad))


def grade_log(
    log: str, fail_to_pass: Sequence[str], pass_to_pass: Sequence[str]
) -> TestsReport | None:
    """A task's tests graded from a log in SWE-bench's format; None when the log is invalid
    (then nothing is resolved).

    Example:
        ```python
        report = grade_log(log, ["tests/test_ops.py::test_add"], [])
        resolved = report is not None and report.resolution == "RESOLVED_FULL"
        ```
    """
    status_map = read_log(log)
    if status_map is None:
        return None
    return tests_report(status_map, fail_to_pass, pass_to_pass)
