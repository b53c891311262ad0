"""`referee.rewards.patch.swebench`: SWE-bench's own harness as a library. Every verdict is
checked against swebench itself (``get_eval_report`` on the same log, called here as the
oracle), for logs of each language's runner, with a failing control; the hostile logs show
where swebench's own reading lets a forged log through and strict reading does not."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("swebench")

from swebench.harness.grading import get_eval_report
from swebench.harness.log_parsers import PARSER_REGISTRY
from swebench.harness.utils import make_test_spec
from swebench.image_builder.image_spec import ImageSpec
from swebench.task.checks import expected_image

from referee.errors import MissingDependency, NotApplicable
from referee.rewards.patch import swebench as sw

START, END = ">>>>> Start Test Output", ">>>>> End Test Output"
BASE = "e7fd69d051eaa67cb17f172a39b57253e9cb831a"

DJANGO_SCRIPT = f"""#!/bin/bash
set -uxo pipefail
source /opt/miniconda3/bin/activate
conda activate testbed
cd /testbed
git config --global --add safe.directory /testbed
cd /testbed
git status
git show
git -c core.fileMode=false diff {BASE}
source /opt/miniconda3/bin/activate
conda activate testbed
python -m pip install -e .
git checkout {BASE} tests/auth_tests/test_validators.py
git apply -v - <<'EOF_114329324912'
diff --git a/tests/auth_tests/test_validators.py b/tests/auth_tests/test_validators.py
--- a/tests/auth_tests/test_validators.py
+++ b/tests/auth_tests/test_validators.py
@@ -1 +1,2 @@
 import re
+# more
EOF_114329324912
: '{START}'
./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 auth_tests.test_validators
: '{END}'
git checkout {BASE} tests/auth_tests/test_validators.py
"""


def _row(repo: str, parser: str, f2p: list[str], p2p: list[str], **more: Any) -> dict[str, Any]:
    instance_id = repo.replace("/", "__") + "-1234"
    return {
        "instance_id": instance_id,
        "repo": repo,
        "version": "1.0",
        "image": f"swebench/sweb.eval.x86_64.{instance_id}:latest".replace("__", "_1776_"),
        "eval_script": DJANGO_SCRIPT,
        "log_parser": parser,
        "eval_type": "pass_and_fail",
        # as the datasets store them: JSON text
        "FAIL_TO_PASS": json.dumps(f2p),
        "PASS_TO_PASS": json.dumps(p2p),
        **more,
    }


def _log(output: str, exit_code: int = 0) -> str:
    """A log as swebench's eval script leaves it (markers traced by ``set -x``)."""
    return (
        "+ git apply -v -\nApplied patch tests/x cleanly.\n"
        f"+ : '{START}'\n{output}\n+ SWEBENCH_TEST_EXIT_CODE={exit_code}\n"
        f"+ : '{END}'\n+ echo '>>>>> Test Exit Code: {exit_code}'\n"
        f">>>>> Test Exit Code: {exit_code}\n+ git checkout {BASE} tests/x\n"
        "Updated 1 path from 2f3a1b\n"
    )


# (row, output of a resolving run, output of a run whose FAIL_TO_PASS test fails)
CASES: dict[str, tuple[dict[str, Any], str, str]] = {
    "django": (
        _row(
            "django/django",
            "parse_log_django",
            ["test_help_text (auth_tests.test_validators.UserAttributeSimilarityValidatorTest)"],
            ["test_validate (auth_tests.test_validators.MinimumLengthValidatorTest)"],
        ),
        "test_help_text (auth_tests.test_validators.UserAttributeSimilarityValidatorTest) ... ok\n"
        "test_validate (auth_tests.test_validators.MinimumLengthValidatorTest) ... ok\n"
        "-----------------------------------------------------------------\n"
        "Ran 2 tests in 0.012s\n\nOK",
        "test_help_text (auth_tests.test_validators.UserAttributeSimilarityValidatorTest) ... "
        "FAIL\ntest_validate (auth_tests.test_validators.MinimumLengthValidatorTest) ... ok\n"
        "=================================================================\n"
        "FAIL: test_help_text (auth_tests.test_validators.UserAttributeSimilarityValidatorTest)\n"
        "Ran 2 tests in 0.012s\n\nFAILED (failures=1)",
    ),
    "sympy": (
        _row("sympy/sympy", "parse_log_sympy", ["test_Mod"], ["test_Abs", "test_sign"]),
        "============================= test process starts ==============================\n"
        "executable:         /opt/miniconda3/envs/testbed/bin/python  (3.9.19-final-0)\n"
        "sympy/core/tests/test_arit.py[3]\ntest_Mod ok\ntest_Abs ok\ntest_sign ok\n"
        "================== tests finished: 3 passed, in 0.50 seconds ===================",
        "sympy/core/tests/test_arit.py[3]\ntest_Mod F\ntest_Abs ok\ntest_sign ok\n"
        "________________________________________________________________________________\n"
        "_________________ sympy/core/tests/test_arit.py:test_Mod ________________________\n"
        "AssertionError\n"
        "============= tests finished: 2 passed, 1 failed, in 0.50 seconds ==============",
    ),
    "pytest": (
        _row(
            "pytest-dev/pytest",
            "parse_log_pytest",
            ["testing/test_mark.py::test_marker_expr[a-b]"],
            ["testing/test_mark.py::test_addmarker_order"],
        ),
        "============================= test session starts ==============================\n"
        "collected 2 items\n\ntesting/test_mark.py ..                                   [100%]\n"
        "=========================== short test summary info ============================\n"
        "PASSED testing/test_mark.py::test_addmarker_order\n"
        "PASSED testing/test_mark.py::test_marker_expr[a-b]\n"
        "============================== 2 passed in 0.10s ===============================",
        "collected 2 items\n\ntesting/test_mark.py .F                                   [100%]\n"
        "=========================== short test summary info ============================\n"
        "PASSED testing/test_mark.py::test_addmarker_order\n"
        "FAILED testing/test_mark.py::test_marker_expr[a-b] - AssertionError: assert 1\n"
        "========================= 1 failed, 1 passed in 0.10s ==========================",
    ),
    "go": (
        _row("gin-gonic/gin", "parse_log_gotest", ["TestContextRenderJSON"], ["TestRouterGroup"]),
        "=== RUN   TestContextRenderJSON\n--- PASS: TestContextRenderJSON (0.00s)\n"
        "=== RUN   TestRouterGroup\n--- PASS: TestRouterGroup (0.01s)\nPASS\n"
        "ok  \tgithub.com/gin-gonic/gin\t0.042s",
        "=== RUN   TestContextRenderJSON\n    context_test.go:42: expected 200, got 500\n"
        "--- FAIL: TestContextRenderJSON (0.00s)\n=== RUN   TestRouterGroup\n"
        "--- PASS: TestRouterGroup (0.01s)\nFAIL\nFAIL\tgithub.com/gin-gonic/gin\t0.042s",
    ),
    "rust": (
        _row(
            "burntsushi/ripgrep",
            "parse_log_cargo",
            ["regression::r1878"],
            ["feature::f1_sjis", "misc::binary_quit"],
        ),
        "running 3 tests\ntest feature::f1_sjis ... ok\ntest misc::binary_quit ... ok\n"
        "test regression::r1878 ... ok\n\n"
        "test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out",
        "running 3 tests\ntest feature::f1_sjis ... ok\ntest misc::binary_quit ... ok\n"
        "test regression::r1878 ... FAILED\n\nfailures:\n    regression::r1878\n\n"
        "test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out",
    ),
    "jest": (
        _row(
            "babel/babel",
            "parse_log_jest",
            ["optional chaining works with calls"],
            ["parses plain objects"],
        ),
        " PASS  packages/babel-parser/test/index.js\n  parser\n"
        "    ✓ optional chaining works with calls (12 ms)\n    ✓ parses plain objects (3 ms)\n\n"
        "Test Suites: 1 passed, 1 total\nTests:       2 passed, 2 total",
        " FAIL  packages/babel-parser/test/index.js\n  parser\n"
        "    ✕ optional chaining works with calls (12 ms)\n    ✓ parses plain objects (3 ms)\n\n"
        "Test Suites: 1 failed, 1 total\nTests:       1 failed, 1 passed, 2 total",
    ),
    "maven": (
        _row(
            "google/gson",
            "parse_log_maven",
            ["com.google.gson.JsonParserTest#testParseString"],
            ["com.google.gson.GsonTest#testOverridesDefaultExcluder"],
        ),
        "+ mvn test -B -pl gson -Dtest=com.google.gson.JsonParserTest#testParseString\n"
        "[INFO] Tests run: 1, Failures: 0, Errors: 0, Skipped: 0\n[INFO] BUILD SUCCESS\n"
        "+ mvn test -B -pl gson -Dtest=com.google.gson.GsonTest#testOverridesDefaultExcluder\n"
        "[INFO] Tests run: 1, Failures: 0, Errors: 0, Skipped: 0\n[INFO] BUILD SUCCESS",
        "+ mvn test -B -pl gson -Dtest=com.google.gson.JsonParserTest#testParseString\n"
        "[ERROR] Tests run: 1, Failures: 1, Errors: 0, Skipped: 0\n[INFO] BUILD FAILURE\n"
        "+ mvn test -B -pl gson -Dtest=com.google.gson.GsonTest#testOverridesDefaultExcluder\n"
        "[INFO] Tests run: 1, Failures: 0, Errors: 0, Skipped: 0\n[INFO] BUILD SUCCESS",
    ),
    "phpunit": (
        _row(
            "laravel/framework",
            "parse_log_phpunit",
            ["Support Str > Str is url"],
            ["Support Str > Str slug"],
        ),
        "Support Str (Illuminate\\Tests\\Support\\SupportStr)\n ✔ Str is url\n ✔ Str slug\n\n"
        "OK (2 tests, 9 assertions)",
        "Support Str (Illuminate\\Tests\\Support\\SupportStr)\n ✘ Str is url\n ✔ Str slug\n\n"
        "FAILURES!\nTests: 2, Assertions: 9, Failures: 1.",
    ),
}


def _oracle(row: dict[str, Any], log: str, tmp_path: Path) -> dict[str, Any]:
    """swebench's own report on `log`, as its harness writes it."""
    path = tmp_path / "test_output.txt"
    path.write_text(log)
    spec = make_test_spec(row)
    prediction = {"instance_id": row["instance_id"], "model_patch": "diff"}
    report = get_eval_report(spec, prediction, str(path), True)[row["instance_id"]]
    assert isinstance(report, dict)
    return report


def _agrees(found: sw.Verdict, report: dict[str, Any]) -> None:
    assert found.resolved == report["resolved"]
    assert found.valid == report["patch_successfully_applied"]
    if found.valid:
        tests = report["tests_status"]
        assert found.fail_to_pass == tests["FAIL_TO_PASS"]
        assert found.pass_to_pass == tests["PASS_TO_PASS"]


@pytest.mark.parametrize("markers", ["strict", "swebench"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_verdict_is_swebenchs_report(case: str, markers: sw.Markers, tmp_path: Path) -> None:
    row, good, bad = CASES[case]
    for output, exit_code, resolved in ((good, 0, True), (bad, 1, False)):
        log = _log(output, exit_code)
        found = sw.verdict(row, log, markers=markers)
        report = _oracle(row, log, tmp_path)
        assert report["resolved"] is resolved, (case, report)  # the log is what it claims
        _agrees(found, report)
        assert found.parser == row["log_parser"]
        assert sw.parse_log(row, log, markers=markers) == found.status
        assert sw.score(row, log, markers=markers).value == (1.0 if resolved else 0.0)


def test_the_score_has_patch_tests_shape() -> None:
    row, good, bad = CASES["pytest"]
    passed = sw.score(row, _log(good))
    assert passed.value == 1.0 and passed.failure is None
    assert passed.components == {"applied": 1.0, "fail_to_pass": 1.0, "pass_to_pass": 1.0}
    assert str(passed.reason).startswith("RESOLVED_FULL: FAIL_TO_PASS 1/1 pass, PASS_TO_PASS 1/1")
    failed = sw.score(row, _log(bad, 1))
    assert failed.value == 0.0 and failed.components["fail_to_pass"] == 0.0
    assert "failing: testing/test_mark.py::test_marker_expr[a-b]" in str(failed.reason)
    # fraction: the share of FAIL_TO_PASS passing, 0 unless every PASS_TO_PASS test is kept
    two = _row("pytest-dev/pytest", "parse_log_pytest", ["t.py::a", "t.py::b"], ["t.py::c"])
    half = _log("PASSED t.py::a\nFAILED t.py::b\nPASSED t.py::c", 1)
    assert sw.score(two, half, scoring="fraction").value == 0.5
    assert sw.score(two, half).value == 0.0
    broken = _log("PASSED t.py::a\nFAILED t.py::b\nFAILED t.py::c", 1)
    assert sw.score(two, broken, scoring="fraction").value == 0.0


def test_a_patch_that_did_not_apply_resolves_nothing(tmp_path: Path) -> None:
    row, good, _ = CASES["django"]
    log = ">>>>> Patch Apply Failed:\nerror: patch failed: django/x.py:1\n" + _log(good)
    found = sw.verdict(row, log)
    _agrees(found, _oracle(row, log, tmp_path))
    assert not found.valid and not found.resolved
    result = sw.score(row, log)
    assert result.value == 0.0 and result.components["applied"] == 0.0
    assert str(result.reason).startswith("RESOLVED_NO: the test log is not a valid account")


def test_a_log_without_test_output_resolves_nothing(tmp_path: Path) -> None:
    row = CASES["go"][0]
    log = "+ go test -v ./...\n# github.com/gin-gonic/gin\n./context.go:12: syntax error\n"
    found = sw.verdict(row, log)
    _agrees(found, _oracle(row, log, tmp_path))
    assert not found.valid and sw.score(row, log).value == 0.0


def test_the_image_name_is_swebenchs() -> None:
    name = sw.image_name("django__django-11099")
    assert name == "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"
    assert name == expected_image("django__django-11099")
    spec = ImageSpec(instance_id="django__django-11099", dockerfile="FROM x", namespace="swebench")
    assert name == spec.name
    row = {"instance_id": "astropy__astropy-12907"}
    assert sw.image_name(row, namespace=None, tag="v1") == (
        "sweb.eval.x86_64.astropy__astropy-12907:v1"
    )
    assert sw.image_name(row, arch="arm64").startswith("swebench/sweb.eval.arm64.astropy_1776_")
    # a row without an image gets that name in its TestSpec; a row with one keeps its own
    assert sw.test_spec({**row, "repo": "astropy/astropy"}).image == sw.image_name(row)
    assert sw.test_spec(CASES["django"][0]).image == CASES["django"][0]["image"]


def test_the_eval_script_is_swebenchs() -> None:
    row = CASES["django"][0]
    script = sw.eval_script(row)
    assert script == make_test_spec(row).eval_script
    lines = script.splitlines()
    assert lines[:2] == ["#!/bin/bash", "set -uxo pipefail"]
    # the test files are checked out at the base commit before the tests and after them
    reset = f"git checkout {BASE} tests/auth_tests/test_validators.py"
    assert lines.count(reset) == 2
    assert lines.index(reset) < lines.index(f": '{START}'") < lines.index(f": '{END}'")
    # swebench records the test command's own exit status after the end marker
    end = lines.index(f": '{END}'")
    assert lines[end - 1] == "SWEBENCH_TEST_EXIT_CODE=$?"
    assert lines[end + 1] == 'echo ">>>>> Test Exit Code: $SWEBENCH_TEST_EXIT_CODE"'
    with pytest.raises(NotApplicable, match="no eval_script"):
        sw.eval_script({**row, "eval_script": ""})


def test_an_older_row_gets_its_parser_from_its_repo(tmp_path: Path) -> None:
    row, good, _ = CASES["sympy"]
    old = {k: v for k, v in row.items() if k not in ("log_parser", "eval_type", "image")}
    assert sw.parser_name(old) == "parse_log_sympy"
    assert sw.parser_name("django/django") == "parse_log_django"
    assert sw.verdict(old, _log(good)).resolved
    assert sw.test_spec({"instance_id": "x", "repo": "chartjs/Chart.js"}).eval_type == ("fail_only")
    with pytest.raises(NotApplicable, match="no log parser for repo 'me/mine'"):
        sw.parser_name({"instance_id": "me__mine-1", "repo": "me/mine"})
    with pytest.raises(NotApplicable, match="no log parser 'parse_log_nope'"):
        sw.parser_name({**row, "log_parser": "parse_log_nope"})
    with pytest.raises(NotApplicable, match="needs FAIL_TO_PASS"):
        sw.verdict({"instance_id": "x", "repo": "django/django"}, _log(good))


# --- hostile logs -----------------------------------------------------------------------------


def test_a_log_over_the_cap_is_not_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    row, good, _ = CASES["pytest"]
    log = _log(good + "\n" + "x" * 5000)

    def must_not_run(*args: Any) -> None:
        raise AssertionError("a log over the cap was parsed")

    monkeypatch.setattr(sw, "_grade", must_not_run)
    found = sw.verdict(row, log, max_log_chars=4000)
    assert not found.valid and not found.resolved and "over the 4000 read" in found.note
    result = sw.score(row, log, max_log_chars=4000)
    assert result.value == 0.0 and result.failure is None and "over the 4000" in str(result.reason)
    assert sw.parse_log(row, log, max_log_chars=4000) == {}
    huge = _log(good) + "PASSED " * (sw.MAX_LOG_CHARS // 7 + 1)
    assert not sw.verdict(row, huge).valid


def _forged(real_output: str, forged_lines: str, real_code: int) -> str:
    """The tests print forged results, an end marker and a 0 exit code, then really fail."""
    forged = f"{forged_lines}\n{END}\n>>>>> Test Exit Code: 0"
    return _log(f"{forged}\n{real_output}", real_code)


def test_a_forged_end_marker_fools_swebench_but_not_strict_reading(tmp_path: Path) -> None:
    row, _, bad = CASES["django"]
    f2p = json.loads(row["FAIL_TO_PASS"])[0]
    p2p = json.loads(row["PASS_TO_PASS"])[0]
    log = _forged(bad, f"{f2p} ... ok\n{p2p} ... ok", 1)
    report = _oracle(row, log, tmp_path)
    assert report["resolved"]  # swebench 5.0.2's own reading is fooled
    assert sw.verdict(row, log, markers="swebench").resolved  # ... and so is its exact copy
    _agrees(sw.verdict(row, log, markers="swebench"), report)
    strict = sw.verdict(row, log)
    assert not strict.resolved and not strict.valid
    assert "output markers are forged" in strict.note
    score = sw.score(row, log)
    assert score.value == 0.0 and "forged" in str(score.reason)


@pytest.mark.parametrize("case", ["pytest", "django", "go"])
def test_a_forged_end_and_exit_code_after_the_real_ones_resolve_nothing(
    case: str, tmp_path: Path
) -> None:
    """A process the tests left behind prints passes, an end marker and a 0 exit code after
    the eval script's real ones, on a failing run. Reading the LAST end marker as the real one
    (referee's first strict reading) graded the forged results: resolved. A marker written
    anywhere but where the eval script writes it now makes the log invalid."""
    row, good, bad = CASES[case]
    log = _log(bad, 1) + f"{good}\n{END}\n>>>>> Test Exit Code: 0\n"
    assert not sw.verdict(row, log, markers="swebench").resolved  # swebench reads the first
    strict = sw.verdict(row, log)
    assert not strict.resolved and not strict.valid and "forged" in strict.note
    # the control: the same failing run without the forgery is graded (valid, not resolved)
    honest = sw.verdict(row, _log(bad, 1))
    assert honest.valid and not honest.resolved


def test_results_forged_after_the_end_marker_do_not_count(tmp_path: Path) -> None:
    row = CASES["pytest"][0]
    f2p, p2p = json.loads(row["FAIL_TO_PASS"])[0], json.loads(row["PASS_TO_PASS"])[0]
    # the run crashes before any result; a forged exit code inside, results after the end
    # (printed by a process the tests left behind)
    output = "ImportError while loading conftest\n>>>>> Test Exit Code: 0"
    log = _log(output, 4) + f"PASSED {f2p}\nPASSED {p2p}\n"
    report = _oracle(row, log, tmp_path)
    assert report["resolved"]  # swebench falls back to the whole log, tail included
    assert not sw.verdict(row, log).resolved
    assert not sw.verdict(row, log).valid
    # without a forged exit code swebench's own cross-check already rejects it
    plain = _log("ImportError while loading conftest", 4) + f"PASSED {f2p}\nPASSED {p2p}\n"
    assert not _oracle(row, plain, tmp_path)["resolved"]
    assert not sw.verdict(row, plain, markers="swebench").resolved


def test_a_forged_passed_line_after_the_end_with_real_results_is_ignored(
    tmp_path: Path,
) -> None:
    row, _, bad = CASES["pytest"]
    f2p = json.loads(row["FAIL_TO_PASS"])[0]
    log = _log(bad, 1) + f"PASSED {f2p}\n"
    assert not _oracle(row, log, tmp_path)["resolved"]  # swebench reads to the first end
    markers: sw.Markers
    for markers in ("strict", "swebench"):
        assert not sw.verdict(row, log, markers=markers).resolved


def _echoed(output: str, exit_code: int) -> str:
    """A log of a script that ``echo``es its markers under ``set -x``: each written twice."""
    code = f">>>>> Test Exit Code: {exit_code}"
    return f"+ echo '{START}'\n{START}\n{output}\n+ echo '{END}'\n{END}\n+ echo '{code}'\n{code}\n"


def test_strict_reading_equals_swebench_on_honest_logs(tmp_path: Path) -> None:
    for row, good, bad in CASES.values():
        for log in (_log(good), _log(bad, 1), f"{START}\n{good}\n{END}\n", _echoed(bad, 1)):
            strict, plain = sw.verdict(row, log), sw.verdict(row, log, markers="swebench")
            assert strict == plain
            _agrees(strict, _oracle(row, log, tmp_path))


def test_a_parser_that_raises_scores_zero_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The log is the tests' output, which the patch's code writes: a log that breaks the
    parser is 0 with the reason (swebench counts it unresolved), never a Failure that a
    trainer would mask, and never a pass."""
    row, good, _ = CASES["go"]

    def explodes(log: str, spec: Any) -> dict[str, str]:
        raise IndexError("list index out of range")

    monkeypatch.setitem(PARSER_REGISTRY, "parse_log_gotest", explodes)
    for timeout in (None, 30.0):
        result = sw.score(row, _log(good), parse_timeout=timeout)
        assert result.value == 0.0 and result.failure is None
        assert "parse_log_gotest raised IndexError" in str(result.reason)
        with pytest.raises(sw.LogParserError) as caught:
            sw.verdict(row, _log(good), parse_timeout=timeout)
        assert caught.value.parser == "parse_log_gotest"


@pytest.mark.skipif(sys.platform != "linux", reason="the parser runs in a forked child")
def test_a_parser_that_never_ends_is_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    row, good, _ = CASES["sympy"]

    def spins(log: str, spec: Any) -> dict[str, str]:
        while True:
            pass

    monkeypatch.setitem(PARSER_REGISTRY, "parse_log_sympy", spins)
    result = sw.score(row, _log(good), parse_timeout=0.5)
    assert result.value == 0.0 and result.failure is None
    assert "parse_log_sympy ran past 0.5 s" in str(result.reason)
    with pytest.raises(sw.LogParserError) as caught:  # verdict says what happened
        sw.verdict(row, _log(good), parse_timeout=0.5)
    assert caught.value.timed_out


def test_without_swebench_the_fix_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sw, "_CACHE", {})
    monkeypatch.setitem(sys.modules, "swebench", None)
    with pytest.raises(MissingDependency, match=r"referee\[swebench\]"):
        sw.image_name("django__django-11099")


def test_a_failure_marker_after_the_end_still_counts(tmp_path: Path) -> None:
    row, good, _ = CASES["rust"]
    for marker in (">>>>> Tests Timed Out", ">>>>> Tests Errored", ">>>>> Patch Apply Failed"):
        log = _log(good) + f"{marker}\n"
        assert not _oracle(row, log, tmp_path)["patch_successfully_applied"]
        markers: sw.Markers
    for markers in ("strict", "swebench"):
        found = sw.verdict(row, log, markers=markers)
        assert not found.valid and not found.resolved


def test_the_parser_child_works_past_descriptor_1024() -> None:
    """A trainer holds many descriptors; `select` refused any past 1024 (ValueError), and the
    parent then waited for the child without killing it."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the descriptor limit here is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held: list[int] = []
    try:
        while not held or held[-1] < 1100:
            held.append(os.open(os.devnull, os.O_RDONLY))
        row, good, _ = CASES["go"]
        assert sw.verdict(row, _log(good), parse_timeout=30.0).resolved
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
