"""`patch_tests` in a SWE-bench instance's own image, on a real Docker Engine: small instance
images built in the test (a git work tree at /testbed, one commit), rows in SWE-bench 5's
shape, and swebench's own report on the same log as the oracle."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import referee
from referee.rewards.patch import images
from referee.rewards.patch.patch_tests import PatchTests
from referee.rollout import Rollout
from referee.verifiers.containers import close_shared, shared_pool
from tests.support.images import swebench_instance_image

pytest.importorskip(
    "swebench", reason="swebench is not installed (pip install 'referee[swebench]')"
)

START, END = ">>>>> Start Test Output", ">>>>> End Test Output"
HEREDOC = "EOF_114329324912"

# --- a Python repository, graded with swebench's pytest parser ----------------------------

CALC = "def add(a, b):\n    return a - b\ndef sub(a, b):\n    return a - b\n"
TESTS = "from calc import sub\ndef test_sub():\n    assert sub(5, 3) == 2\n"
PY_TEST_PATCH = """\
diff --git a/tests/test_calc.py b/tests/test_calc.py
--- a/tests/test_calc.py
+++ b/tests/test_calc.py
@@ -1,3 +1,5 @@
-from calc import sub
+from calc import add, sub
 def test_sub():
     assert sub(5, 3) == 2
+def test_add():
+    assert add(2, 3) == 5
"""
PY_FIX = """\
diff --git a/calc.py b/calc.py
--- a/calc.py
+++ b/calc.py
@@ -1,4 +1,4 @@
 def add(a, b):
-    return a - b
+    return a + b
 def sub(a, b):
     return a - b
"""
PY_WRONG = PY_FIX.replace("a + b", "a * b")
PY_STALE = PY_FIX.replace("-    return a - b", "-    return a // b")  # does not apply
# A conftest.py that passes every test, and an edit to the test file: what a cheat writes.
CHEAT = """\
diff --git a/conftest.py b/conftest.py
new file mode 100644
--- /dev/null
+++ b/conftest.py
@@ -0,0 +1,8 @@
+import pytest
+
+
+@pytest.hookimpl(hookwrapper=True)
+def pytest_runtest_makereport(item, call):
+    outcome = yield
+    report = outcome.get_result()
+    report.outcome = "passed"
"""
EDIT_TEST = """\
diff --git a/tests/test_calc.py b/tests/test_calc.py
--- a/tests/test_calc.py
+++ b/tests/test_calc.py
@@ -1,3 +1,3 @@
 from calc import sub
 def test_sub():
-    assert sub(5, 3) == 2
+    assert True
"""
# The same hook as a plugin the patch installs: a module and its distribution's entry point.
PLUGIN = (
    CHEAT.replace("conftest.py", "evilplug.py")
    + """\
diff --git a/evil-1.0.dist-info/METADATA b/evil-1.0.dist-info/METADATA
new file mode 100644
--- /dev/null
+++ b/evil-1.0.dist-info/METADATA
@@ -0,0 +1,3 @@
+Metadata-Version: 2.1
+Name: evil
+Version: 1.0
diff --git a/evil-1.0.dist-info/entry_points.txt b/evil-1.0.dist-info/entry_points.txt
new file mode 100644
--- /dev/null
+++ b/evil-1.0.dist-info/entry_points.txt
@@ -0,0 +1,2 @@
+[pytest11]
+evil = evilplug
"""
)

# --- a repository whose tests are a shell runner printing Go test lines ---------------------

OPS = "add() { echo $(($1 - $2)); }\n"
RUNNER = """\
#!/bin/bash
. ./ops.sh
status=0
check() {
  r=PASS; [ "$2" = "$3" ] || { r=FAIL; status=1; }; echo "--- $r: $1 (0.00s)"
}
check TestZero "$(add 0 0)" 0
exit $status
"""
GO_TEST_PATCH = """\
diff --git a/run_tests.sh b/run_tests.sh
--- a/run_tests.sh
+++ b/run_tests.sh
@@ -6,4 +6,5 @@
   r=PASS; [ "$2" = "$3" ] || { r=FAIL; status=1; }; echo "--- $r: $1 (0.00s)"
 }
 check TestZero "$(add 0 0)" 0
+check TestAdd "$(add 2 3)" 5
 exit $status
"""
GO_FIX = """\
diff --git a/ops.sh b/ops.sh
--- a/ops.sh
+++ b/ops.sh
@@ -1 +1 @@
-add() { echo $(($1 - $2)); }
+add() { echo $(($1 + $2)); }
"""
GO_WRONG = GO_FIX.replace("$1 + $2", "$1 * $2")


def eval_script(base: str, test_files: list[str], test_patch: str, command: str) -> str:
    """An eval script in SWE-bench 5's shape: the test files checked out at the base commit,
    the test patch applied, the markers around the test command, the files reset after."""
    files = " ".join(test_files)
    return "\n".join(
        [
            "#!/bin/bash",
            "set -uxo pipefail",
            "cd /testbed",
            "git config --global --add safe.directory /testbed",
            "cd /testbed",
            "git status",
            "git show",
            f"git -c core.fileMode=false diff {base}",
            f"git checkout {base} {files}",
            f"git apply -v - <<'{HEREDOC}'",
            test_patch.rstrip("\n"),
            HEREDOC,
            f": '{START}'",
            command,
            f": '{END}'",
            f"git checkout {base} {files}",
            "",
        ]
    )


PYTEST = "python3 -m pytest --no-header -rA --tb=no -p no:cacheprovider tests/test_calc.py"


@pytest.fixture(scope="module")
def instances(docker_engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    root = tmp_path_factory.mktemp("instances")
    site_root = Path(pytest.__file__).parent.parent  # this run's pytest, copied into the image
    site = [site_root / n for n in ("pytest", "_pytest", "pluggy", "iniconfig", "packaging")]
    site += [site_root / "pygments", site_root / "py.py"]
    site += list(site_root.glob("pytest-*.dist-info"))
    engine = shared_pool(docker_engine).engine
    py_image, py_base = swebench_instance_image(
        engine, root, "calc-py", {"calc.py": CALC, "tests/test_calc.py": TESTS}, site=site
    )
    go_image, go_base = swebench_instance_image(
        engine, root, "calc-sh", {"ops.sh": OPS, "run_tests.sh": RUNNER}
    )
    py = {
        "instance_id": "acme__calc-1",
        "repo": "acme/calc",
        "image": py_image,
        "log_parser": "parse_log_pytest",
        "eval_type": "pass_and_fail",
        "test_patch": PY_TEST_PATCH,
        "eval_script": eval_script(py_base, ["tests/test_calc.py"], PY_TEST_PATCH, PYTEST),
        "FAIL_TO_PASS": json.dumps(["tests/test_calc.py::test_add"]),
        "PASS_TO_PASS": json.dumps(["tests/test_calc.py::test_sub"]),
    }
    go = {
        "instance_id": "acme__ops-2",
        "repo": "acme/ops",
        "image": go_image,
        "log_parser": "parse_log_gotest",
        "eval_type": "pass_and_fail",
        "test_patch": GO_TEST_PATCH,
        "eval_script": eval_script(go_base, ["run_tests.sh"], GO_TEST_PATCH, "./run_tests.sh"),
        "FAIL_TO_PASS": ["TestAdd"],
        "PASS_TO_PASS": ["TestZero"],
    }
    yield {"py": py, "go": go, "engine": engine}
    close_shared()


def _reward(url: str, **options: Any) -> PatchTests:
    sandbox = {"backend": "docker", "base_url": url, "workers": 2}
    return PatchTests(timeout=60, sandbox=sandbox, **options)


def _rollout(diff: str | None, row: dict[str, Any]) -> Rollout:
    completion = f"My fix:\n```diff\n{diff}```\n" if diff else "No idea."
    return Rollout(prompt="Fix it.", completion=completion, reference=row)


def _oracle(row: dict[str, Any], log: str, tmp_path: Path) -> dict[str, Any]:
    """swebench's own report on `log`, as its harness writes report.json."""
    from swebench.harness.grading import get_eval_report
    from swebench.harness.utils import make_test_spec

    path = tmp_path / "test_output.txt"
    path.write_text(log)
    lists = {k: json.loads(v) if isinstance(v, str) else v for k, v in row.items() if "_TO_" in k}
    spec = make_test_spec({**row, **lists, "version": ""})
    pred = {"instance_id": row["instance_id"], "model_patch": "x"}
    return dict(get_eval_report(spec, pred, str(path), True)[row["instance_id"]])


@pytest.mark.parametrize("kind", ["py", "go"])
def test_the_gold_patch_resolves_as_swebench_reports(
    kind: str, instances: dict[str, Any], docker_engine: str, tmp_path: Path
) -> None:
    row = instances[kind]
    fix, wrong = (PY_FIX, PY_WRONG) if kind == "py" else (GO_FIX, GO_WRONG)
    f2p = json.loads(row["FAIL_TO_PASS"]) if kind == "py" else row["FAIL_TO_PASS"]
    reward = _reward(docker_engine)
    for diff, want in ((fix, 1.0), (wrong, 0.0)):
        task, run = images.run_in_image(reward, _rollout(diff, row))
        assert run.outcome == "tested", run
        score = images.score_image_run(reward, run, task)
        assert score.value == want, score
        report = _oracle(row, run.log, tmp_path)
        assert report["resolved"] is (want == 1.0)
        assert score.components["fail_to_pass"] == (1.0 if want else 0.0)
        assert report["tests_status"]["FAIL_TO_PASS"]["success"] == (f2p if want else [])
        assert report["tests_status"]["PASS_TO_PASS"]["failure"] == []
    scores = referee.score(reward, [_rollout(fix, row)])
    assert scores[0].value == 1.0, scores[0]


def test_a_patch_that_does_not_apply_or_is_missing_scores_zero(
    instances: dict[str, Any], docker_engine: str
) -> None:
    row = instances["py"]
    stale, none = referee.score(
        _reward(docker_engine), [_rollout(PY_STALE, row), _rollout(None, row)]
    )
    assert stale.value == 0.0 and stale.failure is None, stale
    assert stale.components["applied"] == 0.0
    assert "does not apply" in (stale.reason or "")
    assert none.value == 0.0 and "no diff" in (none.reason or "")


def test_protected_files_are_restored_or_the_patch_rejected(
    instances: dict[str, Any], docker_engine: str
) -> None:
    row = instances["py"]
    cheat = _rollout(CHEAT + EDIT_TEST, row)
    fix_and_cheat = _rollout(PY_FIX + CHEAT, row)
    restore = _reward(docker_engine)
    cheated, fixed = referee.score(restore, [cheat, fix_and_cheat])
    assert cheated.value == 0.0, cheated  # graded on the real tests
    for said in ("added conftest.py", "modified tests/test_calc.py", "restored"):
        assert said in (cheated.reason or ""), cheated
    assert fixed.value == 1.0, fixed
    unguarded = _reward(docker_engine, protected=[])
    assert referee.score(unguarded, [cheat])[0].value == 1.0  # the control: the cheat works
    reject = _reward(docker_engine, protected_edits="reject")
    rejected = referee.score(reject, [fix_and_cheat])[0]
    assert rejected.value == 0.0 and "rejected" in (rejected.reason or ""), rejected


# A protected test file's folder replaced by a file, or by a link out of the tree: the restore
# went through it (tar: "Not a directory", a Failure a trainer masks; or writes through the
# link as root). Only test_*.py is protected by name here, so the folder itself is not.
FOLDER_AWAY = """\
diff --git a/tests/test_calc.py b/tests/test_calc.py
deleted file mode 100644
--- a/tests/test_calc.py
+++ /dev/null
@@ -1,3 +0,0 @@
-from calc import sub
-def test_sub():
-    assert sub(5, 3) == 2
"""
AS_FILE = (
    FOLDER_AWAY
    + """\
diff --git a/tests b/tests
new file mode 100644
--- /dev/null
+++ b/tests
@@ -0,0 +1 @@
+not a folder
"""
)
AS_LINK = (
    FOLDER_AWAY
    + """\
diff --git a/tests b/tests
new file mode 120000
--- /dev/null
+++ b/tests
@@ -0,0 +1 @@
+/etc
\\ No newline at end of file
"""
)


@pytest.mark.parametrize("diff", [AS_FILE, AS_LINK], ids=["file", "link"])
def test_a_protected_files_folder_replaced_is_restored_not_a_failure(
    diff: str, instances: dict[str, Any], docker_engine: str
) -> None:
    row = instances["py"]
    reward = _reward(docker_engine, protected=["test_*.py"])
    score = referee.score(reward, [_rollout(PY_FIX + diff, row)])[0]
    assert score.failure is None, score  # never a Failure the patch can cause
    assert "added tests" in (score.reason or "") and "restored" in (score.reason or ""), score
    assert score.value == 1.0, score  # the fix, graded on the real tests
    reject = _reward(docker_engine, protected=["test_*.py"], protected_edits="reject")
    assert referee.score(reject, [_rollout(PY_FIX + diff, row)])[0].value == 0.0


def test_a_plugin_the_patch_installs_does_not_autoload(
    instances: dict[str, Any], docker_engine: str
) -> None:
    row = instances["py"]
    unguarded = _reward(docker_engine, protected=[])  # the dist-info stays in the tree
    score = referee.score(unguarded, [_rollout(PLUGIN, row)])[0]
    assert score.value == 0.0, score
    # The control: the same run with autoload back on in the (trusted) eval script loads it.
    script = row["eval_script"].replace(PYTEST, f"unset PYTEST_DISABLE_PLUGIN_AUTOLOAD\n{PYTEST}")
    control = referee.score(unguarded, [_rollout(PLUGIN, {**row, "eval_script": script})])[0]
    assert control.value == 1.0, control
    # A plugin named in pytest_plugins is loaded (here the patch's own module, to show it).
    named = _reward(docker_engine, protected=[], pytest_plugins=["evilplug"])
    assert referee.score(named, [_rollout(PLUGIN, row)])[0].value == 1.0


def test_tests_past_the_timeout_score_zero_as_patch_tests_does(
    instances: dict[str, Any], docker_engine: str
) -> None:
    row = instances["go"]
    slow = {**row, "eval_script": row["eval_script"].replace("./run_tests.sh", "sleep 60")}
    reward = PatchTests(
        timeout=2, sandbox={"backend": "docker", "base_url": docker_engine, "workers": 2}
    )
    score = referee.score(reward, [_rollout(GO_FIX, slow)])[0]
    assert score.value == 0.0 and score.failure is None, score
    assert "timed out" in (score.reason or "")


def test_a_missing_image_or_engine_is_a_sandbox_failure_naming_it(
    instances: dict[str, Any], docker_engine: str, tmp_path: Path
) -> None:
    row = {**instances["go"], "image": "referee-test/no-such-image:1"}
    score = referee.score(_reward(docker_engine), [_rollout(GO_FIX, row)])[0]
    assert score.value is None and score.failure is not None, score
    assert score.failure.type == "sandbox" and "no-such-image" in score.failure.message
    url = f"unix://{tmp_path}/no-engine.sock"
    score = referee.score(_reward(url), [_rollout(GO_FIX, instances["go"])])[0]
    assert score.failure is not None and score.failure.type == "sandbox"
    assert url in score.failure.message


def test_each_job_gets_a_fresh_container_and_the_image_is_built_once(
    instances: dict[str, Any], docker_engine: str
) -> None:
    row = instances["go"]
    # Fails when a file an earlier job left in the container is there.
    leftover = "[ -e /tmp/leftover ] && exit 3; touch /tmp/leftover; ./run_tests.sh"
    marked = {**row, "eval_script": row["eval_script"].replace("./run_tests.sh", leftover, 1)}
    reward = _reward(docker_engine)
    engine = instances["engine"]
    image_id = engine.client.images.get(row["image"]).id
    builds = engine.builds
    scores = referee.score(reward, [_rollout(GO_FIX, marked) for _ in range(3)])
    assert [s.value for s in scores] == [1.0, 1.0, 1.0], [s.reason for s in scores]
    assert engine.builds == builds and engine.client.images.get(row["image"]).id == image_id
    pool = images._pool(_reward(docker_engine, per_image=1, warm=0))
    assert (pool.per_image, pool.warm) == (1, 0)  # the limits come from the options


def test_a_patch_too_large_for_the_environment_is_copied_in(
    instances: dict[str, Any], docker_engine: str
) -> None:
    lines = [f"+line {i:06d} of a large file\n" for i in range(4000)]
    large = f"--- /dev/null\n+++ b/data.txt\n@@ -0,0 +1,{len(lines)} @@\n" + "".join(lines)
    row = instances["go"]
    assert not images.stage_files(large.encode(), row["eval_script"], "/tmp/stage").by_exec
    assert images.stage_files(GO_FIX.encode(), row["eval_script"], "/tmp/stage").by_exec
    score = referee.score(_reward(docker_engine), [_rollout(GO_FIX + large, row)])[0]
    assert score.value == 1.0, score


def test_an_image_template_names_the_image(instances: dict[str, Any], docker_engine: str) -> None:
    row = {k: v for k, v in instances["go"].items() if k != "image"}
    task = images.image_task(row, "registry.local/{swebench_image}")
    assert task.image == "registry.local/swebench/sweb.eval.x86_64.acme_1776_ops-2:latest"
    assert images.image_task(row, "mirror/{instance_key}:v1").image == "mirror/acme_1776_ops-2:v1"
    assert images.image_task(row).image == "swebench/sweb.eval.x86_64.acme_1776_ops-2:latest"
    engine = instances["engine"]
    engine.client.images.get(instances["go"]["image"]).tag("referee-test/acme/ops", "v2")
    reward = _reward(docker_engine, image="referee-test/{repo}:v2")
    assert referee.score(reward, [_rollout(GO_FIX, row)])[0].value == 1.0


# --- no engine needed ------------------------------------------------------------------------


def test_the_apply_commands_are_swebenchs() -> None:
    from swebench.harness.run_evaluation import GIT_APPLY_CMDS

    assert list(images.APPLY_COMMANDS) == GIT_APPLY_CMDS


def test_a_row_without_an_eval_script_is_not_applicable() -> None:
    row = {
        "instance_id": "a__b-1",
        "image": "x:1",
        "FAIL_TO_PASS": [],
        "log_parser": "parse_log_gotest",
    }
    score = referee.score(PatchTests(), [_rollout(GO_FIX, row)])[0]
    assert score.failure is not None and score.failure.type == "not_applicable"
    assert "eval_script" in score.failure.message


def test_a_row_with_image_assets_is_not_applicable() -> None:
    """swebench's harness stages a row's image_assets (test baselines) into the container;
    without them even the gold patch fails, so the row is refused rather than scored 0."""
    row = {"instance_id": "a__b-1", "image": "x:1", "FAIL_TO_PASS": [], "eval_script": "true",
           "log_parser": "parse_log_gotest", "image_assets": {"a.png": "iVBORw0KGgo="}}  # fmt: skip
    score = referee.score(PatchTests(), [_rollout(GO_FIX, row)])[0]
    assert score.failure is not None and score.failure.type == "not_applicable", score
    assert "image_assets" in score.failure.message
    row.pop("image_assets")  # the control: the same row without them is read
    assert "true" in images.image_task(row).eval_script


def test_the_find_expression() -> None:
    assert images.find_expression(["conftest.py", "tests/", "a/b/", "x/*.py"], ["t[1].py"]) == [
        "-name", "conftest.py", "-o", "-path", "*/tests/*", "-o", "-name", "tests",
        "-o", "-path", "./a/b/*", "-o", "-path", "./a/b", "-o", "-path", "./x/*.py",
        "-o", "-path", "./t\\[1\\].py",
    ]  # fmt: skip
