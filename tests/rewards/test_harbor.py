"""`harbor_task` on a real Docker Engine: small Harbor tasks built in the test, graded in their
own images, and read the way Harbor's own task classes read them."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import referee
from referee.rewards.harbor import HarborTask, parse_reward_json, parse_reward_text, read_task
from referee.rewards.harbor.job import staging
from referee.rollout import Rollout
from referee.verifiers.containers import close_shared
from tests.support.images import HARBOR_CALC as CALC
from tests.support.images import HARBOR_FIX as FIX
from tests.support.images import base_image

WRONG = FIX.replace("a + b", "a * b")
STALE = FIX.replace("-    return a - b", "-    return a / b")  # does not apply
# Tries to replace the tests and plant a reward: the workspace of `escape` is "/".
PLANT = """\
--- /dev/null
+++ b/tests/test.sh
@@ -0,0 +1,2 @@
+#!/bin/bash
+echo 1 > /logs/verifier/reward.txt
--- /dev/null
+++ b/logs/verifier/reward.txt
@@ -0,0 +1 @@
+1
"""

PY_CHECK = """#!/bin/bash
if python3 -c 'import calc; assert calc.add(2, 3) == 5'; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""
JSON_CHECK = """#!/bin/bash
correct=0
python3 -c 'import calc; assert calc.add(2, 3) == 5' && correct=1
json="{\\"reward\\": $correct, \\"correct\\": $correct, \\"style\\": 0.5}"
echo "$json" > /logs/verifier/reward.json
"""
SHELL_CHECK = """#!/bin/bash
python3 -c 'import calc; print(calc.add(40, 2))' > /tmp/out.txt 2>&1
if diff /tmp/out.txt /tests/expected.txt; then r=1; else r=0; fi
echo $r > /logs/verifier/reward.txt
"""
PREBUILT_CHECK = """#!/bin/bash
[ "$(id -u)" = 65534 ] || exit 1  # the verifier's user, not root
echo "$GREETING" | grep -q hello && echo 0.25 > /logs/verifier/reward.txt
"""
ESCAPE_CHECK = """#!/bin/bash
cd /app && python3 -c 'import calc; assert calc.add(2, 3) == 5' && r=1 || r=0
echo $r > /logs/verifier/reward.txt
"""


def make_task(
    root: Path,
    name: str,
    test_sh: str,
    *,
    toml: str = "",
    dockerfile: str | None = None,
    base: str = "",
    extra_tests: dict[str, str] | None = None,
) -> Path:
    task = root / name
    (task / "tests").mkdir(parents=True)
    (task / "instruction.md").write_text("Fix calc.add.\n")
    (task / "task.toml").write_text(f'version = "1.0"\n{toml}')
    (task / "tests" / "test.sh").write_text(test_sh)
    for file, text in (extra_tests or {}).items():
        (task / "tests" / file).write_text(text)
    if dockerfile is not None or base:
        env = task / "environment"
        (env / "app").mkdir(parents=True)
        (env / "app" / "calc.py").write_text(CALC)
        (env / "Dockerfile").write_text(
            dockerfile or f"FROM {base}\nWORKDIR /app\nCOPY app/ /app/\n"
        )
    return task


@pytest.fixture(scope="module")
def tasks(docker_engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = base_image(docker_engine)
    root = tmp_path_factory.mktemp("harbor")
    make_task(root, "python-check", PY_CHECK, base=base, toml="[verifier]\ntimeout_sec = 60\n")
    make_task(root, "json-check", JSON_CHECK, base=base)
    make_task(root, "shell-check", SHELL_CHECK, base=base, extra_tests={"expected.txt": "42\n"})
    make_task(
        root,
        "escape",
        ESCAPE_CHECK,
        base=base,
        toml='[environment]\nworkdir = "/"\n[verifier]\ntimeout_sec = 60\n',
    )
    make_task(root, "silent", "#!/bin/bash\necho checking; exit 3\n", base=base)
    make_task(root, "slow", "#!/bin/bash\nsleep 600\n", base=base,
              toml="[verifier]\ntimeout_sec = 1\n")  # fmt: skip
    make_task(root, "nan", "#!/bin/bash\necho nan > /logs/verifier/reward.txt\n", base=base)
    make_task(
        root,
        "broken",
        PY_CHECK,
        dockerfile=f"FROM {base}\nRUN echo the build breaks here && exit 7\n",
    )
    make_task(
        root,
        "prebuilt",
        PREBUILT_CHECK,
        toml=(
            f'[environment]\ndocker_image = "{base}"\n'
            '[verifier]\nuser = "nobody"\nenv = {GREETING = "hello"}\n'
        ),
    )
    # the tests' user: "whoami" writes the uid as the reward (root is 0)
    whoami = "#!/bin/bash\nid -u > /logs/verifier/reward.txt\n"
    make_task(root, "image-user", whoami,
              dockerfile=f"FROM {base}\nWORKDIR /app\nCOPY app/ /app/\nUSER nobody\n")  # fmt: skip
    make_task(root, "image-root", whoami, base=base)
    yield root
    close_shared()


@pytest.fixture
def reward(tasks: Path, docker_engine: str) -> HarborTask:
    return HarborTask(
        tasks_dir=str(tasks), docker_host=docker_engine, build_network="none", concurrency=2
    )


def _rollout(diff: str | None, task: str) -> Rollout:
    completion = f"Here is my change:\n```diff\n{diff}```\n" if diff else "I changed nothing."
    return Rollout(prompt="Fix it.", completion=completion, reference={"task": task})


def test_a_fix_scores_one_and_a_wrong_change_zero(reward: HarborTask) -> None:
    fixed, wrong = referee.score(
        reward, [_rollout(FIX, "python-check"), _rollout(WRONG, "python-check")]
    )
    assert fixed.value == 1.0, fixed
    assert fixed.components["diff_applied"] == 1.0
    assert "reward.txt" in (fixed.reason or "")
    assert wrong.value == 0.0, wrong
    assert wrong.components["diff_applied"] == 1.0


def test_reward_json_gives_the_value_and_components(reward: HarborTask) -> None:
    score = referee.score(reward, [_rollout(FIX, "json-check")])[0]
    assert score.value == 1.0, score
    assert score.components == {"correct": 1.0, "style": 0.5, "diff_applied": 1.0}


def test_tests_that_are_not_pytest(reward: HarborTask) -> None:
    # its tests/ (test.sh and expected.txt) and the diff are written by the set-up itself
    task = read_task(Path(reward.tasks_dir or "") / "shell-check")
    assert staging("/tmp/referee-x", task, FIX.encode()).by_exec
    fixed, unchanged = referee.score(
        reward, [_rollout(FIX, "shell-check"), _rollout(None, "shell-check")]
    )
    assert fixed.value == 1.0, fixed
    assert unchanged.value == 0.0, unchanged
    assert "no diff" in (unchanged.reason or "") and "unchanged" in (unchanged.reason or "")


def test_a_diff_that_does_not_apply_grades_the_unchanged_workspace(reward: HarborTask) -> None:
    score = referee.score(reward, [_rollout(STALE, "python-check")])[0]
    assert score.value == 0.0, score
    assert score.components["diff_applied"] == 0.0
    assert "does not apply" in (score.reason or "")
    assert "unchanged workspace" in (score.reason or "")


def test_a_diff_whose_errors_flood_the_output_still_does_not_apply(reward: HarborTask) -> None:
    # 24,000 hunks against files that are not there, under max_diff_bytes: git apply and
    # patch say so in about 7 MiB, past what the exec keeps. The set-up's markers come after
    # that; the rollout is still the policy's "does not apply" (0), never Failure("sandbox").
    hunks = "".join(f"--- a/{i}\n+++ b/{i}\n@@ -1 +1 @@\n-x\n+y\n" for i in range(24_000))
    assert len(hunks) <= reward.max_diff_bytes
    task = read_task(Path(reward.tasks_dir or "") / "python-check")
    assert not staging("/tmp/referee-x", task, hunks.encode()).by_exec  # copied in: too large
    score = referee.score(reward, [_rollout(hunks, "python-check")])[0]
    assert score.failure is None and score.value == 0.0, score
    assert score.components["diff_applied"] == 0.0
    assert "does not apply" in (score.reason or ""), score.reason
    assert "unchanged workspace" in (score.reason or "")


def test_a_diff_cannot_replace_the_tests_or_plant_a_reward(reward: HarborTask) -> None:
    planted = referee.score(reward, [_rollout(PLANT, "escape")])[0]
    assert planted.components["diff_applied"] == 1.0, planted  # it did apply, at "/"
    assert planted.value == 0.0, planted  # but the task's own tests ran, on unfixed code
    fixed = referee.score(reward, [_rollout(FIX.replace("calc.py", "app/calc.py"), "escape")])[0]
    assert fixed.value == 1.0, fixed  # the control: the workspace really is "/"


def test_no_reward_file_is_the_task_failure_unless_the_policy_code_ran(
    reward: HarborTask,
) -> None:
    # The unchanged workspace: the task's own tests write no reward, the data's fault.
    score = referee.score(reward, [_rollout(None, "silent")])[0]
    assert score.value is None and score.failure is not None
    assert score.failure.type == "error" and score.failure.blame == "data"
    assert "wrote no reward" in score.failure.message and "checking" in score.failure.message
    # With the policy's diff applied its code ran in the tests, which stopped short: its 0
    # (a Failure here would mask the sample, a way out of a 0 a policy can learn).
    crashed = referee.score(reward, [_rollout(FIX, "silent")])[0]
    assert crashed.failure is None and crashed.value == 0.0 and crashed.fault == "crash"
    assert "wrote no reward" in (crashed.reason or "")


def test_a_verifier_timeout_is_the_policy_zero_and_kills_the_container(
    reward: HarborTask, monkeypatch: pytest.MonkeyPatch
) -> None:
    import docker

    leased: list[str] = []
    run = HarborTask._run

    def spy(self: HarborTask, box: Any, *args: Any) -> Any:
        leased.append(box.id)
        return run(self, box, *args)

    monkeypatch.setattr(HarborTask, "_run", spy)
    score = referee.score(reward, [_rollout(FIX, "slow")])[0]
    assert score.failure is None and score.value == 0.0 and score.fault == "timeout", score
    assert "verifier timeout of 1s" in (score.reason or "")
    # The unchanged workspace hangs the task's own tests: the data's Failure.
    [unchanged] = referee.score(reward, [_rollout(None, "slow")])
    assert unchanged.failure is not None and unchanged.failure.type == "timeout"
    assert unchanged.failure.blame == "data"
    engine = reward.pool(read_task(Path(reward.tasks_dir or "") / "slow")).engine
    assert len(leased) == 2  # the containers that ran the tests, by their ids
    # killed at the deadline (then removed in the background): never left running
    with contextlib.suppress(docker.errors.NotFound):
        assert engine.client.containers.get(leased[0]).status != "running"


def test_a_reward_that_is_not_a_number_is_a_failure(reward: HarborTask) -> None:
    score = referee.score(reward, [_rollout(FIX, "nan")])[0]
    assert score.failure is not None and score.failure.type == "invalid_value", score


def test_an_image_that_does_not_build_is_a_failure_naming_it(reward: HarborTask) -> None:
    score = referee.score(reward, [_rollout(FIX, "broken")])[0]
    assert score.failure is not None and score.failure.type == "sandbox", score
    assert "broken" in score.failure.message and "the build breaks here" in score.failure.message


def test_a_prebuilt_image_the_verifier_env_and_user(reward: HarborTask) -> None:
    score = referee.score(reward, [_rollout(None, "prebuilt")])[0]
    assert score.value == 0.25, score


def test_the_tests_run_as_the_images_user_unless_the_verifier_names_one(
    reward: HarborTask,
) -> None:
    """As Harbor's ``docker exec`` without ``-u``: the image's USER (they ran as root)."""
    user, root = referee.score(reward, [_rollout(FIX, "image-user"), _rollout(FIX, "image-root")])
    assert user.value == 65534 and root.value == 0.0, (user, root)
    assert user.components["diff_applied"] == 1.0  # the diff was applied as root all the same


def test_an_unreachable_engine_is_a_failure_naming_it(tasks: Path, tmp_path: Path) -> None:
    url = f"unix://{tmp_path}/no-engine.sock"
    reward = HarborTask(tasks_dir=str(tasks), docker_host=url)
    score = referee.score(reward, [_rollout(FIX, "python-check")])[0]
    assert score.failure is not None and score.failure.type == "sandbox"
    assert url in score.failure.message


def test_the_image_is_built_once(reward: HarborTask, tasks: Path) -> None:
    referee.score(reward, [_rollout(FIX, "python-check")])
    engine = reward.pool(read_task(tasks / "python-check")).engine
    builds = engine.builds
    tag = engine.image(name="python-check", context=tasks / "python-check" / "environment")
    image_id = engine.client.images.get(tag).id
    again = referee.score(reward, [_rollout(FIX, "python-check"), _rollout(WRONG, "python-check")])
    assert [s.value for s in again] == [1.0, 0.0]
    assert engine.builds == builds
    assert engine.client.images.get(tag).id == image_id


def test_references_are_confined_to_tasks_dir(reward: HarborTask) -> None:
    for task in ("../python-check", "a/b", "", None):
        score = referee.score(reward, [_rollout(FIX, task)])[0]  # type: ignore[arg-type]
        assert score.failure is not None and score.failure.type == "not_applicable"
    open_reward = HarborTask()
    assert open_reward.reference_powers() and not reward.reference_powers()


def test_the_reward_pickles_and_loads_from_a_spec(reward: HarborTask) -> None:
    clone = pickle.loads(pickle.dumps(reward))
    assert clone == reward
    spec = referee.load({"type": "harbor_task", "tasks_dir": "/data/tasks", "warm": 2})
    assert isinstance(spec, HarborTask) and spec.warm == 2
    with pytest.raises(Exception, match="timeout"):
        referee.load({"type": "harbor_task", "timeout": -1})


# --- reading reward files strictly (no engine needed) -------------------------------------


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"nan", "invalid_value"),
        (b"inf\n", "invalid_value"),
        (b"1e999", "invalid_value"),
        (b"0x1", "invalid_value"),
        (b"  ", "invalid_value"),
        (b"", "error"),
        (b"\xff", "invalid_value"),
    ],
)
def test_reward_txt_is_parsed_strictly(data: bytes, kind: str) -> None:
    with pytest.raises(Exception, match=r"reward\.txt") as caught:
        parse_reward_text(data)
    assert getattr(caught.value, "kind", None) == kind


def test_reward_txt_and_json_values() -> None:
    assert parse_reward_text(b" 0.75\n").value == 0.75
    parsed = parse_reward_json(b'{"reward": 1, "a": 0.5}')
    assert (parsed.value, parsed.components) == (1.0, {"a": 0.5})
    assert parse_reward_json(b'{"reward": true}').value == 1.0  # a bool is a number, as Harbor
    assert parse_reward_json(b'{"pass": 1, "style": 0.5}', "pass").components == {"style": 0.5}
    for bad in (b'{"reward": "1"}', b'{"reward": NaN}', b'{"a": 1}', b"[1]", b"1"):
        with pytest.raises(Exception, match=r"reward\.json"):
            parse_reward_json(bad)


# Reward files, read by referee and by Harbor's own verifier (harbor.verifier.verifier):
# the same value, or both refuse. Where referee differs on purpose: a reward.json without a
# "reward" key, which Harbor records as metrics with no reward, and one over 64 keys.
REWARD_FILES = [
    ("txt", b"1"), ("txt", b" 0.75\n"), ("txt", b"1_0"), ("txt", b"-2e-3"), ("txt", b"nan"),
    ("txt", b"inf"), ("txt", b"1e999"), ("txt", b"0x1"), ("txt", b""), ("txt", b"  "),
    ("txt", b"one"), ("txt", b"\xff"),
    ("json", b'{"reward": 1, "a": 0.5}'), ("json", b'{"reward": true}'),
    ("json", b'{"reward": "1"}'), ("json", b'{"reward": NaN}'), ("json", b'{"reward": 1e999}'),
    ("json", b"[1]"), ("json", b"1"), ("json", b""), ("json", b"{"),
    ("json", b'{"reward": 0.5, "x": null}'),
]  # fmt: skip
DIFFERS = [("json", b'{"a": 1}')]

_HARBOR_PARSE = """
import json, sys, tempfile
from pathlib import Path
from types import SimpleNamespace
from harbor.verifier.verifier import Verifier
out = []
for kind, data in json.loads(sys.stdin.read()):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("reward." + kind)
        path.write_bytes(bytes.fromhex(data))
        fake = SimpleNamespace(trial_paths=SimpleNamespace(reward_text_path=path,
                                                           reward_json_path=path))
        parse = Verifier._parse_reward_text if kind == "txt" else Verifier._parse_reward_json
        try:
            got = parse(fake)
            out.append({k: float(v) for k, v in got.items()} if isinstance(got, dict)
                       else {"not a mapping": repr(got)})
        except Exception as exc:
            out.append(type(exc).__name__)
print(json.dumps(out))
"""


def test_reward_files_read_as_harbor_reads_them(harbor_python: str) -> None:
    cases = REWARD_FILES + DIFFERS
    run = subprocess.run(
        [harbor_python, "-c", _HARBOR_PARSE], capture_output=True, text=True, timeout=120,
        input=json.dumps([[kind, data.hex()] for kind, data in cases]),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    theirs = json.loads(run.stdout)
    for (kind, data), harbor in zip(cases, theirs, strict=True):
        parse = parse_reward_text if kind == "txt" else parse_reward_json
        try:
            got = parse(data)
            ours: Any = {"reward": got.value, **got.components}
        except Exception as exc:
            ours = f"refused: {exc}"
        harbor_ok = isinstance(harbor, dict) and "not a mapping" not in harbor
        if (kind, data) in DIFFERS:  # Harbor: metrics, no reward; referee: a Failure
            assert harbor_ok and "reward" not in harbor and isinstance(ours, str), (data, ours)
        elif harbor_ok:
            assert ours == harbor, (kind, data, harbor)
        else:
            assert isinstance(ours, str), (kind, data, harbor, ours)


# --- agreeing with Harbor's own task classes -----------------------------------------------

_HARBOR_SCRIPT = r"""
import json, sys
from harbor.models.task.task import Task
out = {}
for path in sys.argv[1:]:
    task = Task(path)
    c = task.config
    out[path] = {
        "name": task.name,
        "verifier_timeout": c.verifier.timeout_sec,
        "verifier_env": c.verifier.env,
        "verifier_user": c.verifier.user,
        "docker_image": c.environment.docker_image,
        "workdir": c.environment.workdir,
        "build_timeout": c.environment.build_timeout_sec,
        "memory_mb": c.environment.memory_mb,
        "cpus": c.environment.cpus,
        "test_script": str(task.paths.discovered_test_path_for(None)),
        "environment_dir": str(task.paths.environment_dir),
    }
print(json.dumps(out))
"""


def _python312() -> str | None:
    check = "import sys; assert sys.version_info >= (3, 12)"
    for candidate in (
        os.environ.get("REFEREE_PYTHON312"),
        "/root/.pyenv/versions/3.12.1/bin/python3.12",
        shutil.which("python3.13"),
        shutil.which("python3.12"),
    ):
        if (
            candidate
            and os.path.exists(candidate)
            and subprocess.run([candidate, "-c", check], capture_output=True).returncode == 0
        ):
            return candidate
    return None


@pytest.fixture(scope="session")
def harbor_python() -> str:
    """A Python 3.12 with the ``harbor`` package (its own venv, made once and kept in the
    temp folder: ``REFEREE_HARBOR_VENV`` to put it elsewhere)."""
    venv = Path(
        os.environ.get("REFEREE_HARBOR_VENV") or Path(tempfile.gettempdir()) / "referee-harbor-venv"
    )
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import harbor.models.task.task"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return str(python)
    base = _python312()
    if base is None:
        pytest.skip("harbor needs Python >= 3.12, and none is installed (REFEREE_PYTHON312)")
    made = subprocess.run([base, "-m", "venv", str(venv)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot make a venv for harbor: {made.stderr[-300:]}")
    pip = [str(python), "-m", "pip", "install", "-q", "harbor==0.26.0"]
    installed = subprocess.run(pip, capture_output=True, text=True, timeout=900)
    if installed.returncode != 0 or subprocess.run(probe, capture_output=True).returncode:
        pytest.skip(f"cannot install harbor: {installed.stderr[-500:]}")
    return str(python)


def test_referee_reads_a_task_as_harbor_does(tmp_path: Path, harbor_python: str) -> None:
    plain = make_task(tmp_path, "plain", PY_CHECK, base="base:1")
    full = make_task(
        tmp_path,
        "full",
        PY_CHECK,
        base="base:1",
        toml=(
            '[task]\nname = "org/full-task"\n'
            '[environment]\ndocker_image = "org/image:2"\nworkdir = "/srv/app"\n'
            "build_timeout_sec = 120.0\nmemory_mb = 2048\ncpus = 2\n"
            '[verifier]\ntimeout_sec = 45.0\nuser = "tester"\nenv = {MODE = "strict"}\n'
        ),
    )
    out = subprocess.run(
        [harbor_python, "-c", _HARBOR_SCRIPT, str(plain), str(full)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    theirs: dict[str, Any] = json.loads(out.stdout)
    for path in (plain, full):
        ours = read_task(path)
        want = theirs[str(path)]
        assert ours.name == want["name"]
        assert ours.verifier_timeout == want["verifier_timeout"]
        assert dict(ours.verifier_env) == want["verifier_env"]
        assert ours.verifier_user == want["verifier_user"]
        assert ours.docker_image == want["docker_image"]
        assert ours.workdir == want["workdir"]
        assert ours.build_timeout == want["build_timeout"]
        assert ours.memory_mb == want["memory_mb"]
        assert ours.cpus == want["cpus"]
        assert str(ours.test_script.resolve()) == want["test_script"]
        assert ours.context is not None
        assert str(ours.context.resolve()) == want["environment_dir"]
    assert theirs[str(full)]["verifier_timeout"] == 45.0  # the control: not the defaults
    assert theirs[str(plain)]["verifier_timeout"] == 600.0


def test_a_reward_file_over_the_cap_is_a_failure(tasks: Path, docker_engine: str) -> None:
    small = HarborTask(
        tasks_dir=str(tasks), docker_host=docker_engine, build_network="none", max_reward_bytes=8
    )
    score = referee.score(small, [_rollout(FIX, "json-check")])[0]
    assert score.failure is not None and "over max_reward_bytes 8" in score.failure.message


def test_the_set_up_is_read_when_the_engine_lost_the_first_output() -> None:
    # Docker can drop an exec's first output when its attach is late (moby/moby#27289): the
    # setup marker was lost, and a rollout whose diff applied was Failure("sandbox").
    from referee.rewards.harbor.job import setup_account

    nonce = "ab" * 16
    whole = f"Checking patch calc.py...\n{nonce} setup 0\n\n{nonce} prepared 0 0\nTESTS".encode()
    lost = f"{nonce} prepared 0 0\nTESTS".encode()  # the start gone; its own newline stays
    for output in (whole, b"\n" + lost):
        events, rest = setup_account(output, nonce)
        assert events == {"setup": 0, "prepared": 0}, output
        assert rest == b"TESTS"
    events, _ = setup_account(f"\n{nonce} setup 1\n\n{nonce} prepared 0 1\n".encode(), nonce)
    assert events == {"setup": 1, "prepared": 0}
