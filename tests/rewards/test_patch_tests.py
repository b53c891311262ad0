"""patch_tests: real repositories built here, real patches, the real local sandbox, and
SWE-bench's own grading of the same logs."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import sys
import tarfile
import tempfile
import types
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

import referee
from referee.errors import SpecError
from referee.rewards import PatchTests
from referee.rewards.patch import PatchReference, PatchRun
from referee.rewards.patch import patch_tests as patch_module
from referee.rewards.patch._diff import diff_paths, extract_diff, unsafe_path
from referee.rewards.patch._snapshot import snapshot_tar
from referee.verifiers import testlog
from tests.support.patches import (
    EVIL_PLUGIN,
    F2P,
    FIXED,
    OPS,
    P2P,
    REPO,
    SETUP_CFG,
    SITECUSTOMIZE,
    TESTS,
    Edit,
    make_diff,
    write_tree,
)
from tests.support.rollouts import make

SANDBOX = {"workers": 2}
REWARD = PatchTests(timeout=60, sandbox=SANDBOX)
UNGUARDED = PatchTests(timeout=60, sandbox=SANDBOX, protected=[])  # shows an attack is real
REJECT = PatchTests(timeout=60, sandbox=SANDBOX, protected_edits="reject")


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tree(tmp_path_factory.mktemp("snapshot") / "calc-repo", dict(REPO))


def reference(repo: Path, **extra: Any) -> dict[str, Any]:
    return {"snapshot": str(repo), "FAIL_TO_PASS": F2P, "PASS_TO_PASS": P2P, **extra}


# --- the cases -----------------------------------------------------------------------------

CONFTEST_XFAIL = """\
import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if "add" in item.name:
            item.add_marker(pytest.mark.xfail(reason="known"))
"""
CONFTEST_SKIP = """\
import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.skip(reason="later"))
"""
CONFTEST_RUNTEST = """\
def pytest_collection_modifyitems(items):
    for item in items:
        item.runtest = lambda: None
"""
MARKER_AT_EXIT = (
    "import atexit\nfrom calc.ops import add, mul, sub\n\n"
    "atexit.register(lambda: open('calc/marker', 'w').write('left'))\n"
)
BAD_BINARY = """\
diff --git a/calc/blob.bin b/calc/blob.bin
new file mode 100644
index 0000000000000000000000000000000000000000..1111111111111111111111111111111111111111
GIT binary patch
literal 10
zcmZ?wbhEHbG-uLm

literal 0
HcmV?d00001

"""


class Case(NamedTuple):
    label: str
    completion: Callable[[Path], str]
    value: float  # under the default reward
    reason: str  # a fragment of its reason
    unguarded: float | None = None  # with protected: [] (None: not run)
    ref: dict[str, Any] | None = None  # more reference keys


def fix(*more: dict[str, Edit]) -> Callable[[Path], str]:
    edits: dict[str, Edit] = {"calc/ops.py": FIXED}
    for extra in more:
        edits.update(extra)
    return lambda repo: make_diff(repo, edits)


def edit(edits: dict[str, Edit], links: dict[str, str] | None = None) -> Callable[[Path], str]:
    return lambda repo: make_diff(repo, edits, links)


def fix_with(statement: str) -> Callable[[Path], str]:
    """The right fix, with `statement` run on every call of add."""
    return edit({"calc/ops.py": FIXED.replace("return a + b", f"{statement}\n    return a + b", 1)})


def fuzzy(repo: Path) -> str:
    # one context line no longer matches: git apply refuses, patch --fuzz applies
    return make_diff(repo, {"calc/ops.py": FIXED}).replace(" def mul(a, b):", " def mul(x, y):")


def trajectory_answer(repo: Path) -> Any:
    return [
        {"role": "user", "content": "fix add"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "1", "type": "function", "function": {"name": "cat", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "1", "content": OPS},
        {"role": "assistant", "content": f"Fixed:\n```diff\n{fix()(repo)}```"},
    ]  # fmt: skip


CASES = [
    # what a patch does to the code
    Case("right", fix(), 1.0, "RESOLVED_FULL: FAIL_TO_PASS 2/2 pass, PASS_TO_PASS 3/3"),
    Case("right, fenced with prose", lambda r: f"Here:\n```diff\n{fix()(r)}```\nOK.", 1.0, "FULL"),
    Case("right, in patch tags", lambda r: f"<patch>\n{fix()(r)}</patch>", 1.0, "FULL"),
    Case("right, a trajectory's final answer", trajectory_answer, 1.0, "FULL"),
    Case("wrong", edit({"calc/ops.py": OPS.replace("a - b", "a * b", 1)}), 0.0, "failing: tests"),
    Case("partial", edit({"calc/ops.py": OPS.replace("a - b", "abs(a) + abs(b)", 1)}), 0.0,
         "RESOLVED_PARTIAL: FAIL_TO_PASS 1/2"),
    Case("fixes add, breaks mul", fix({"calc/ops.py": FIXED.replace("a * b", "a + b")}), 0.0,
         "broken: tests/test_ops.py::test_mul"),
    Case("does not apply", lambda r: fix()(r).replace("-    return a - b", "-    return b - a"),
         0.0, "the patch does not apply"),
    Case("applies only with fuzz", fuzzy, 1.0, "applied with patch --batch --forward --fuzz=5"),
    Case("deletes the whole repository", edit(dict.fromkeys(REPO)), 0.0, "RESOLVED_NO"),
    Case("no diff at all", lambda r: "I fixed it, trust me.", 0.0, "no diff in the completion"),
    # what a patch does to the tests and their runner
    Case("rewrites the failing tests to assert True",
         edit({"tests/test_ops.py": TESTS.replace("assert add", "assert True or add")}), 0.0,
         "modified tests/test_ops.py): restored"),
    Case("fixes the code and rewrites the tests",
         fix({"tests/test_ops.py": TESTS + "\n\ndef test_new():\n    assert True\n"}), 1.0,
         "modified tests/test_ops.py): restored"),
    Case("deletes the tests", edit({"tests/test_ops.py": None}), 0.0, "deleted tests/test_ops.py"),
    Case("conftest.py xfails the failing tests", edit({"conftest.py": CONFTEST_XFAIL}), 0.0,
         "added conftest.py", unguarded=1.0),
    Case("conftest.py skips everything", edit({"tests/conftest.py": CONFTEST_SKIP}), 0.0,
         "added tests/conftest.py", unguarded=0.0),
    Case("conftest.py makes every test a no-op", edit({"conftest.py": CONFTEST_RUNTEST}), 0.0,
         "added conftest.py", unguarded=1.0),
    Case("pytest.ini loads a plugin that passes everything",
         edit({"pytest.ini": "[pytest]\naddopts = -p evil\n", "evil.py": EVIL_PLUGIN}), 0.0,
         "added pytest.ini", unguarded=1.0),
    Case("setup.cfg's [tool:pytest] loads that plugin",
         edit({"setup.cfg": SETUP_CFG + "addopts = -p evil\n", "evil.py": EVIL_PLUGIN}), 0.0,
         "modified setup.cfg", unguarded=1.0),
    Case("setup.cfg deselects the failing tests",
         edit({"setup.cfg": SETUP_CFG + f"addopts = --deselect {F2P[0]} --deselect {F2P[1]}\n"}),
         0.0, "modified setup.cfg", unguarded=0.0),
    Case("sitecustomize.py forges PASSED lines and exit 0",
         edit({"sitecustomize.py": SITECUSTOMIZE}), 0.0, "added sitecustomize.py", unguarded=1.0,
         ref={"test_command": "PYTHONPATH=. python3 -m pytest -rA -p no:cacheprovider tests"}),
    Case("a .pyc beside the tests",
         edit({"tests/__pycache__/test_ops.cpython-311.pyc": b"\0" * 16}), 0.0,
         "added tests/__pycache__/test_ops.cpython-311.pyc"),
    Case("replaces the tests folder by a link to fake tests",
         edit({"tests": None, "fake/test_ops.py": "def test_add():\n    pass\n"},
              {"tests": "fake"}), 0.0, "added tests"),
    # what the patched code does when the tests run
    Case("allocates past the memory limit", fix_with("bytearray(8 << 30)"), 0.0,
         "failing: tests/test_ops.py::test_add"),
    Case("prints 10 MB while the tests run", fix_with("print('x' * (5 << 20))"), 1.0, "FULL"),
    # hostile diffs
    Case("a 2 MB diff", fix({"calc/table.py": "x = 1\n" * 350_000}), 0.0, "bytes, over 1048576"),
    Case("a 500 kB diff", fix({"calc/table.py": "x = 1\n" * 80_000}), 1.0, "FULL"),
    Case("NUL bytes in the diff", lambda r: fix()(r).replace("a + b", "a + b  # \0\0"), 0.0, ""),
    Case("a binary patch", fix({"calc/blob.bin": bytes(range(256)) * 4}), 1.0, "FULL"),
    Case("a corrupt binary patch", lambda r: BAD_BINARY, 0.0, "does not apply"),
    Case("path traversal in a header",
         lambda r: "--- /dev/null\n+++ b/../../etc/passwd\n@@ -0,0 +1 @@\n+root::0:0::/:/bin/sh\n",
         0.0, "outside the repository: 'b/../../etc/passwd'"),
]  # fmt: skip
BY_LABEL = {case.label: case for case in CASES}


@pytest.fixture(scope="module")
def runs(repo: Path) -> dict[tuple[str, str], tuple[Any, PatchRun, referee.Score]]:
    """Every case run once per reward that checks it: (label, reward) -> (rollout, run, score)."""
    jobs = [(case, "default", REWARD) for case in CASES]
    jobs += [(case, "unguarded", UNGUARDED) for case in CASES if case.unguarded is not None]
    jobs.append((BY_LABEL["fixes the code and rewrites the tests"], "reject", REJECT))

    def one(job: tuple[Case, str, PatchTests]) -> tuple[Any, PatchRun, referee.Score]:
        case, _, reward = job
        rollout = make(case.completion(repo), reference(repo, **(case.ref or {})))
        ref = PatchReference.parse(rollout.reference)
        run = reward.execute(rollout, ref)
        return rollout, run, reward.score_run(run, ref)

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(one, jobs))
    return {
        (case.label, kind): result for (case, kind, _), result in zip(jobs, results, strict=True)
    }


@pytest.mark.parametrize("label", list(BY_LABEL))
def test_case(label: str, runs: dict[tuple[str, str], Any]) -> None:
    case = BY_LABEL[label]
    _, run, score = runs[(label, "default")]
    assert score.failure is None, score.failure
    assert score.value == case.value, (score.reason, run.log[-3000:])
    assert case.reason in (score.reason or ""), score.reason


@pytest.mark.parametrize("label", [c.label for c in CASES if c.unguarded is not None])
def test_each_attack_works_where_nothing_is_protected(
    label: str, runs: dict[tuple[str, str], Any]
) -> None:
    _, run, score = runs[(label, "unguarded")]
    assert score.value == BY_LABEL[label].unguarded, (score.reason, run.log[-3000:])


def test_reject_mode_scores_a_patch_that_edits_tests_zero(runs: dict[tuple[str, str], Any]) -> None:
    _, run, score = runs[("fixes the code and rewrites the tests", "reject")]
    assert run.outcome == "protected"
    assert score.value == 0.0
    assert score.components["applied"] == 1.0
    assert "the patch changed protected files (modified tests/test_ops.py): rejected" in str(
        score.reason
    )


def test_the_scored_path_gives_the_same_scores(runs: dict[tuple[str, str], Any]) -> None:
    labels = ["right", "partial", "rewrites the failing tests to assert True", "no diff at all"]
    rollouts = [runs[(label, "default")][0] for label in labels]
    scores = referee.score(REWARD, rollouts, concurrency=2)
    assert scores == [runs[(label, "default")][2] for label in labels]


def test_fraction_scoring(repo: Path, runs: dict[tuple[str, str], Any]) -> None:
    fraction = PatchTests(scoring="fraction", sandbox=SANDBOX)
    for label, value in [("partial", 0.5), ("right", 1.0), ("fixes add, breaks mul", 0.0)]:
        rollout, run, _ = runs[(label, "default")]
        assert fraction.score_run(run, PatchReference.parse(rollout.reference)).value == value


def test_the_snapshot_is_never_touched(repo: Path, runs: dict[tuple[str, str], Any]) -> None:
    for name, content in REPO.items():
        assert (repo / name).read_text() == content
    assert sorted(str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file()) == sorted(REPO)
    assert not Path("/etc/passwd").read_text().startswith("root::0:0::")


@pytest.mark.parametrize("pattern", ["calc/ops.py", "calc/", "ops.py", "c*/o*.py", "calc/*"])
def test_protected_patterns(repo: Path, pattern: str) -> None:
    reward = PatchTests(sandbox=SANDBOX, protected=[pattern])
    score = referee.score(reward, [make(fix()(repo), reference(repo))])[0]
    assert score.value == 0.0
    assert "(modified calc/ops.py): restored" in str(score.reason), score.reason


FAKE_PYTEST = """\
print("PASSED tests/test_ops.py::test_add")
print("PASSED tests/test_ops.py::test_add_negative")
for name in ("test_mul", "test_sub"):
    print("PASSED tests/test_ops.py::" + name)
print("PASSED tests/test_clean.py::test_fresh_copy")
"""


def test_a_pytest_py_at_the_root_does_not_replace_the_runner(repo: Path) -> None:
    diff = make_diff(repo, {"pytest.py": FAKE_PYTEST})
    minus_m = reference(repo, test_command="python3 -m pytest -rA -p no:cacheprovider tests")
    rollouts = [make(diff, reference(repo)), make(diff, minus_m)]
    scores = referee.score(REWARD, rollouts)
    # The default command loads the real pytest; `python -m pytest` in a reference's
    # test_command runs the patch's pytest.py (the README says so).
    assert [s.value for s in scores] == [0.0, 1.0], [s.reason for s in scores]


def test_each_rollout_gets_a_fresh_copy(repo: Path) -> None:
    # One worker: the rollout that leaves calc/marker behind runs right before the next one.
    reward = PatchTests(timeout=60, sandbox={"workers": 1})
    edits = {"calc/ops.py": FIXED, "calc/__init__.py": MARKER_AT_EXIT}
    leaves = make(make_diff(repo, edits), reference(repo))
    right = make(make_diff(repo, {"calc/ops.py": FIXED}), reference(repo))
    scores = referee.score(reward, [leaves, right, leaves, right])
    assert [s.value for s in scores] == [1.0, 1.0, 1.0, 1.0], [s.reason for s in scores]
    assert not (repo / "calc" / "marker").exists()


def test_tests_that_never_end_time_out(repo: Path) -> None:
    loop = OPS.replace("return a - b", "while True:\n        pass", 1)
    reward = PatchTests(timeout=5, sandbox=SANDBOX)
    rollout = make(make_diff(repo, {"calc/ops.py": loop}), reference(repo))
    score = referee.score(reward, [rollout])[0]
    assert score.value == 0.0 and score.failure is None
    assert "timed out" in str(score.reason)


def test_tools_refuse_traversal_the_host_check_would_catch(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(patch_module, "unsafe_path", lambda diff: None)
    diff = fix()(repo) + "--- /dev/null\n+++ b/../../escaped.txt\n@@ -0,0 +1 @@\n+out\n"
    run = REWARD.execute(make(diff, reference(repo)))
    assert run.outcome == "not_applied", run


def test_a_patch_half_in_the_snapshot_already_is_not_applied(repo: Path, tmp_path: Path) -> None:
    # The fix is in the snapshot already; the README edit is not. Every command fails (patch
    # --forward applies the README hunk, skips the other, exits 1), and that half-applied
    # tree must not pass for "already applied": SWE-bench says the patch did not apply.
    diff = make_diff(repo, {"calc/ops.py": FIXED, "README.md": "A fixed calculator.\n"})
    fixed = write_tree(tmp_path / "fixed", {**REPO, "calc/ops.py": FIXED})
    run = REWARD.execute(make(diff, reference(fixed)))
    assert run.outcome == "not_applied", run
    # The whole patch in the snapshot already: that is "already applied", tested as it is.
    both = write_tree(
        tmp_path / "both", {**REPO, "calc/ops.py": FIXED, "README.md": "A fixed calculator.\n"}
    )
    run = REWARD.execute(make(diff, reference(both)))
    assert run.outcome == "tested" and run.command == "already applied", run


def test_a_test_patch_adds_the_reference_tests(repo: Path, tmp_path: Path) -> None:
    # SWE-bench's shape: the snapshot lacks the new tests; test_patch brings them, after the
    # model's patch, over whatever the model did to those files.
    files = {name: text for name, text in REPO.items() if name != "tests/test_ops.py"}
    base = write_tree(tmp_path / "base", files)
    test_patch = make_diff(base, {"tests/test_ops.py": TESTS})
    ref = {**reference(base), "test_patch": test_patch}
    forged = TESTS.replace("assert add", "assert True or add")
    rollouts = [
        make(make_diff(base, {"calc/ops.py": FIXED}), ref),
        make(make_diff(base, {"tests/test_ops.py": forged}), ref),  # tests of its own: replaced
    ]
    scores = referee.score(REWARD, rollouts)
    assert [s.value for s in scores] == [1.0, 0.0], [s.reason for s in scores]


@pytest.mark.parametrize("kind", ["tar.gz", "zip", "tar"])
def test_archive_snapshots(repo: Path, tmp_path: Path, kind: str) -> None:
    archive = tmp_path / f"calc.{kind}"
    if kind == "zip":
        with zipfile.ZipFile(archive, "w") as zf:  # GitHub-style: one top folder, stripped
            for name, content in REPO.items():
                zf.writestr(f"calc-main/{name}", content)
    else:
        with tarfile.open(archive, "w:gz" if kind == "tar.gz" else "w") as tf:
            for name, content in REPO.items():
                data = content.encode()
                info = tarfile.TarInfo(f"./{name}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    diff = make_diff(repo, {"calc/ops.py": FIXED})
    score = referee.score(REWARD, [make(diff, reference(archive))])[0]
    assert score.value == 1.0, score.reason


def test_a_tar_symlink_to_a_name_that_is_not_utf8_is_kept(tmp_path: Path) -> None:
    # tarfile reads such a target surrogate-escaped; packing it must give its bytes back, not
    # raise UnicodeEncodeError out of the reward.
    archive = tmp_path / "links.tar"
    with tarfile.open(archive, "w", format=tarfile.GNU_FORMAT) as tf:
        info = tarfile.TarInfo("repo/link")
        info.type, info.linkname = tarfile.SYMTYPE, os.fsdecode(b"caf\xe9")
        tf.addfile(info)
        info = tarfile.TarInfo("repo/a.txt")
        tf.addfile(info, io.BytesIO(b""))
    with tarfile.open(fileobj=io.BytesIO(snapshot_tar(archive))) as packed:
        link = packed.getmember("link")
    assert link.issym() and os.fsencode(link.linkname) == b"caf\xe9"


def test_relative_snapshots_start_at_snapshot_root(repo: Path) -> None:
    reward = PatchTests(sandbox=SANDBOX, snapshot_root=str(repo.parent))
    ref = {**reference(repo), "snapshot": repo.name}
    score = referee.score(reward, [make(make_diff(repo, {"calc/ops.py": FIXED}), ref)])[0]
    assert score.value == 1.0, score.reason


# --- references and options ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ({"FAIL_TO_PASS": F2P}, "patch_tests reference has no snapshot"),
        ({"snapshot": "/no/such/repo", "FAIL_TO_PASS": F2P}, "reference snapshot '/no/such/repo'"),
        ({"snapshot": 3, "FAIL_TO_PASS": F2P}, "reference snapshot must be a path"),
        ({"snapshot": "{repo}"}, "patch_tests reference has no FAIL_TO_PASS"),
        ({"snapshot": "{repo}", "FAIL_TO_PASS": "tests/t.py::x"}, "reference FAIL_TO_PASS must be"),
        ({"snapshot": "{repo}", "FAIL_TO_PASS": 5}, "reference FAIL_TO_PASS must be a list"),
        ({"snapshot": "{repo}", "FAIL_TO_PASS": [1]}, "reference FAIL_TO_PASS must be a list"),
        ({"snapshot": "{repo}", "FAIL_TO_PASS": F2P, "PASS_TO_PASS": {}}, "reference PASS_TO_PASS"),
        ({"snapshot": "{repo}", "FAIL_TO_PASS": F2P, "test_command": 7}, "reference test_command"),
        (
            {"snapshot": "{repo}/README.md", "FAIL_TO_PASS": F2P},
            "neither a directory nor an archive",
        ),
        ("just text", "patch_tests needs a reference"),
    ],
)
def test_bad_references_name_the_key(repo: Path, ref: Any, message: str) -> None:
    if isinstance(ref, dict) and isinstance(ref.get("snapshot"), str):
        ref = {**ref, "snapshot": ref["snapshot"].replace("{repo}", str(repo))}
    score = referee.score(REWARD, [make(fix()(repo), ref)])[0]
    assert score.value is None and score.failure is not None
    assert score.failure.type == "not_applicable"
    assert message in score.failure.message, score.failure.message


def test_swebench_rows_store_test_ids_as_json_text(repo: Path) -> None:
    import json

    ref = PatchReference.parse(
        {"snapshot": str(repo), "FAIL_TO_PASS": json.dumps(F2P), "PASS_TO_PASS": "[]",
         "repo": "calc/calc", "base_commit": "abc"}
    )  # fmt: skip
    assert ref.fail_to_pass == tuple(F2P) and ref.pass_to_pass == ()
    assert ref.test_args == ["tests/test_ops.py"]
    assert "tests/test_ops.py" in ref.test_files


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"scoring": "all"}, "scoring"),
        ({"protected_edits": "ignore"}, "protected_edits"),
        ({"timeout": 0}, "timeout must be positive"),
        ({"protected": ["/"]}, "protected must hold path patterns"),
    ],
)
def test_bad_options_are_spec_errors(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        referee.load({"type": "patch_tests", **spec})


# --- reading diffs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"),
        ("Sure.\ndiff --git a/x b/x\n--- a/x", "diff --git a/x b/x\n--- a/x\n"),  # prose dropped
        ("```diff\nfirst\n```\n```patch\n--- a/y\n+++ b/y\n```", "--- a/y\n+++ b/y\n"),  # last
        ("```\n--- a/z\n+++ b/z\n```", "--- a/z\n+++ b/z\n"),  # untagged, but a diff
        ("```python\nprint(1)\n```", None),
        ("no diff here", None),
        ("```diff\n\n```", None),
    ],
)
def test_extract_diff(text: str, expected: str | None) -> None:
    assert extract_diff(text) == expected


def test_header_names_skip_hunk_bodies() -> None:
    diff = (
        "diff --git a/sql/q.sql b/sql/q.sql\n--- a/sql/q.sql\n+++ b/sql/q.sql\n"
        "@@ -1,2 +1,1 @@\n--- see ../../notes\n select 1;\n"
        'diff --git "a/t\\303\\251st.py" "b/t\\303\\251st.py"\n'
    )
    assert diff_paths(diff) == ["a/sql/q.sql", "b/sql/q.sql", "a/sql/q.sql", "b/sql/q.sql",
                                "a/tést.py", "b/tést.py"]  # fmt: skip
    assert unsafe_path(diff) is None
    assert unsafe_path("--- a/ok\n+++ b/.git/config\n") == "b/.git/config"
    assert unsafe_path('+++ "b/\\056\\056/x"\n') == "b/../x"


@given(st.text(alphabet='-+@ abd./\\\n"\t012,', max_size=300))
def test_reading_any_text_as_a_diff_never_raises(text: str) -> None:
    extract_diff(text)
    diff_paths(text)
    unsafe_path(text)


# --- agreement with SWE-bench's own grading --------------------------------------------------


def _swebench_grading() -> Any:
    """swebench.harness.grading, loaded without its package's __init__, which imports the Docker
    and Modal runners (modal is not installed: swebench is installed with --no-deps)."""
    pytest.importorskip("swebench", reason="pip install --no-deps swebench==5.0.2 unidiff==1.0.1")
    try:
        from swebench.harness import grading

        return grading
    except ImportError:
        for name in [m for m in sys.modules if m.startswith("swebench.harness")]:
            del sys.modules[name]
    spec = importlib.util.find_spec("swebench.harness")
    assert spec is not None and spec.submodule_search_locations is not None
    stub = types.ModuleType("swebench.harness")
    stub.__path__ = list(spec.submodule_search_locations)
    sys.modules["swebench.harness"] = stub
    from swebench.harness import grading

    return grading


@pytest.fixture(scope="module")
def swebench() -> Any:
    return _swebench_grading()


def swebench_verdict(grading: Any, log: str, f2p: list[str], p2p: list[str]) -> tuple[str, Any]:
    """SWE-bench's resolution and tests report for a log, by its own functions."""
    from swebench.types import TestSpec

    spec = TestSpec(
        instance_id="calc__calc-1", image="", eval_script_list=[], repo="calc/calc", version="0",
        FAIL_TO_PASS=f2p, PASS_TO_PASS=p2p, log_parser="parse_log_pytest",
        eval_type="pass_and_fail",
    )  # fmt: skip
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
        fh.write(log)
    try:
        prediction = {"instance_id": spec.instance_id, "model_patch": "x"}
        full = grading.get_eval_report(spec, prediction, fh.name, include_tests_status=True)
        status_map, found = grading.get_logs_eval(spec, fh.name)
    finally:
        os.unlink(fh.name)
    entry = full[spec.instance_id]
    if not found:
        assert not entry["resolved"]
        return "RESOLVED_NO", None
    report = grading.get_eval_tests_report(status_map, {"FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p})
    resolution = grading.get_resolution_status(report)
    assert entry["resolved"] == (resolution == "RESOLVED_FULL")
    return resolution, report


@pytest.mark.parametrize("label", list(BY_LABEL))
def test_swebench_grades_every_run_alike(
    label: str, runs: dict[tuple[str, str], Any], swebench: Any
) -> None:
    for kind in ("default", "unguarded", "reject"):
        if (label, kind) not in runs:
            continue
        rollout, run, score = runs[(label, kind)]
        ref = PatchReference.parse(rollout.reference)
        f2p, p2p = list(ref.fail_to_pass), list(ref.pass_to_pass)
        theirs, their_report = swebench_verdict(swebench, run.log, f2p, p2p)
        ours = testlog.grade_log(run.log, f2p, p2p)
        assert (ours.resolution if ours else "RESOLVED_NO") == theirs, (kind, run.log[-2000:])
        assert score.value == (1.0 if theirs == "RESOLVED_FULL" else 0.0)
        if ours is not None:
            assert their_report is not None
            assert list(ours.f2p_success) == their_report["FAIL_TO_PASS"]["success"]
            assert list(ours.f2p_failure) == their_report["FAIL_TO_PASS"]["failure"]
            assert list(ours.p2p_success) == their_report["PASS_TO_PASS"]["success"]
            assert list(ours.p2p_failure) == their_report["PASS_TO_PASS"]["failure"]


STATUS_LINES = st.lists(
    st.one_of(
        st.tuples(
            st.sampled_from(["PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL", "XPASS", "PASSEDx"]),
            st.sampled_from(
                ["t.py::a", "t.py::b", "t.py::c[1-2]", "t.py::c[1-3]", "[2]", "t.py::c[1"]
            ),
            st.sampled_from(["", " - boom", " - a - b"]),
        ).map(lambda t: f"{t[0]} {t[1]}{t[2]}"),
        st.sampled_from(["", "noise", "3 passing", ">>>>> Test Exit Code: 1", "PASSED"]),
    ),
    max_size=12,
)
IDS = st.lists(
    st.sampled_from(["t.py::a", "t.py::b", "t.py::c[1", "t.py::c[1-2]", "t.py::d"]), max_size=4
)


@given(
    lines=STATUS_LINES,
    f2p=IDS,
    p2p=IDS,
    framed=st.booleans(),
    exit_code=st.sampled_from([None, 0, 1]),
)
def test_log_semantics_match_swebench(
    lines: list[str], f2p: list[str], p2p: list[str], framed: bool, exit_code: int | None
) -> None:
    grading = _swebench_grading()
    from swebench.harness.log_parsers import parse_log_pytest

    body = "\n".join(lines)
    log = f"{testlog.START_TEST_OUTPUT}\n{body}\n{testlog.END_TEST_OUTPUT}\n" if framed else body
    if exit_code is not None:
        log += f"{testlog.TEST_EXIT_CODE}: {exit_code}\n"
    assert testlog.parse_pytest_log(body) == parse_log_pytest(body, None)
    theirs, _ = swebench_verdict(grading, log, f2p, p2p)
    ours = testlog.grade_log(log, f2p, p2p)
    assert (ours.resolution if ours else "RESOLVED_NO") == theirs


# --- the docker backend ------------------------------------------------------------------------


def test_on_the_docker_backend(
    repo: Path, docker_engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", docker_engine)
    reward = PatchTests(timeout=60, sandbox={"backend": "docker", "workers": 1})
    forged = edit({"conftest.py": CONFTEST_RUNTEST})(repo)
    rollouts = [make(fix()(repo), reference(repo)), make(forged, reference(repo))]
    scores = referee.score(reward, rollouts)
    assert [s.value for s in scores] == [1.0, 0.0], [(s.reason, s.failure) for s in scores]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(autouse=True, scope="module")
def _passwd_untouched() -> Iterator[None]:
    before = _digest(Path("/etc/passwd"))
    yield
    assert _digest(Path("/etc/passwd")) == before
