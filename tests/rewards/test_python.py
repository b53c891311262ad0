"""``type: python``: a function or a class of yours, named by a spec, scores as a built-in does.

The forms (a file relative to the spec, a module; a function sync or async, decorated or
plain, a class, a Reward object), its options, its errors (each naming the file, the key path
and the fix), its deadline (a spin in C killed in a worker process), its pickling (in a fresh
interpreter) and its failures (never a silent 0 or 1). The trainers' and the server's entry
points are in test_python_backends.py.
"""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

import referee
from referee import Rollout, SpecError
from referee.reward import needs_groups, top_components
from referee.rewards.python import AsyncPythonReward, PythonReward, build, load_file

# A user's file: every form `function` can name.
REWARDS = '''
import asyncio
import re
from dataclasses import dataclass

import referee
from referee import Rollout, Score

with open(__file__ + ".imports", "a") as imports:  # one line per import of this file
    imports.write("imported\\n")


def has_answer(rollout, tag="answer"):
    """1 where the completion holds <tag>...</tag>."""
    return f"<{tag}>" in rollout.completion_text


async def waits(rollout):
    await asyncio.sleep(0.001)
    return len(rollout.completion_text) / 100


def parts(rollout):
    return Score(value=0.5, components={"a": 1.0, "b": 0.0}, reason="half")


def as_mapping(rollout):
    return {"reward": 0.25, "components": {"x": 1.0}, "reason": "a quarter"}


def divides(rollout):
    return 1 / 0


def nothing(rollout):
    return None


def not_a_number(rollout):
    return float("nan")


def wrong_mapping(rollout):
    return {"score": 1.0}


def not_applicable(rollout):
    raise referee.errors.NotApplicable("no reference to compare with")


def spins_in_c(rollout):
    return re.match(r"(a+)+$", "a" * 40 + "b") is not None  # backtracks, holding the GIL


@referee.reward(deadline=3, run_in="inline")
def decorated(rollout):
    return 0.75


@dataclass(kw_only=True)
class Short(referee.CheckReward):
    """1 up to `max_chars` characters, else 0."""

    max_chars: int = 10
    name: str = "short"

    def check(self, rollout):
        return len(rollout.completion_text) <= self.max_chars


@dataclass(kw_only=True)
class Longest(referee.GroupRewardBase):
    """1 for the longest attempts of a group."""

    name: str = "longest"

    async def evaluate_group(self, rollouts):
        best = max(len(r.completion_text) for r in rollouts)
        return [len(r.completion_text) == best for r in rollouts]


class Counts:
    """A class whose instances are functions of a rollout."""

    def __init__(self, letter="a"):
        self.letter = letter

    def __call__(self, rollout):
        return rollout.completion_text.count(self.letter)


shared = Short(max_chars=3, name="shared")
'''


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "rewards.py").write_text(REWARDS)
    return tmp_path


def load(folder: Path, **spec: Any) -> referee.Reward:
    """The reward a spec file in `folder` builds from ``type: python`` and `spec`."""
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump({"type": "python", **spec}))
    return referee.load(path)


def one(reward: referee.Reward, completion: str = "<answer>4</answer>", **fields: Any) -> Any:
    return referee.score(reward, [Rollout(completion=completion, **fields)])[0]


# --- the forms ------------------------------------------------------------------------------

FORMS: list[tuple[str, dict[str, Any], type, float, dict[str, float | None]]] = [
    # a plain sync function: a check, in a worker process by default
    ("has_answer", {}, PythonReward, 1.0, {}),
    # its options are keyword arguments after the rollout
    ("has_answer", {"tag": "final"}, PythonReward, 0.0, {}),
    # async: on the event loop
    ("waits", {}, AsyncPythonReward, 0.18, {}),
    # a Score keeps its components
    ("parts", {}, PythonReward, 0.5, {"a": 1.0, "b": 0.0}),
    # the shape `referee score` writes
    ("as_mapping", {}, PythonReward, 0.25, {"x": 1.0}),
    # @referee.reward: its function, its deadline and run_in
    ("decorated", {}, PythonReward, 0.75, {}),
    # a Reward class, built with the options: the reward is the class's own
    ("Short", {"max_chars": 100}, None, 1.0, {}),
    # a class whose instances are functions of a rollout
    ("Counts", {"letter": "w"}, PythonReward, 2.0, {}),
    # a Reward object in the file: a copy
    ("shared", {}, None, 0.0, {}),
]


@pytest.mark.parametrize(
    ("name", "options", "cls", "value", "components"), FORMS, ids=[f[0] for f in FORMS]
)
def test_every_form_scores(
    folder: Path,
    name: str,
    options: dict[str, Any],
    cls: type | None,
    value: float,
    components: dict[str, float | None],
) -> None:
    reward = load(folder, function=f"rewards.py:{name}", options=options)
    if cls is not None:
        assert type(reward) is cls
        assert reward.kind == "python"  # type: ignore[attr-defined]
    score = one(reward)
    assert score.failure is None, score.failure
    assert score.value == pytest.approx(value)
    assert dict(score.components) == components
    assert reward.name == "spec"  # the spec's name, as a built-in's


def test_a_class_is_the_users_own_reward(folder: Path) -> None:
    reward = load(folder, name="brief", function="rewards.py:Short", options={"max_chars": 5})
    assert type(reward).__name__ == "Short" and reward.name == "brief"
    assert reward.max_chars == 5  # type: ignore[attr-defined]
    assert reward.runs_in == "process"  # a CheckReward of yours, as in Python
    group = load(folder, function="rewards.py:Longest")
    assert needs_groups(group)  # seen as a group reward: its attempts scored together
    rollouts = [Rollout(completion=c, group="g") for c in ("a", "abc", "ab")]
    assert [s.value for s in referee.score(group, rollouts)] == [0.0, 1.0, 0.0]


def test_a_reward_object_is_copied_not_changed(folder: Path) -> None:
    reward = load(folder, name="mine", function="rewards.py:shared", deadline=4)
    module = load_file(folder / "rewards.py")
    assert reward is not module.shared and reward.name == "mine"
    assert reward.deadline == 4.0  # type: ignore[attr-defined]
    assert module.shared.name == "shared" and module.shared.deadline is None


def test_the_module_form_imports_the_module(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = folder / "my_rewards_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "checks.py").write_text(
        "def short(rollout):\n    return len(rollout.completion_text) < 5\n"
    )
    monkeypatch.syspath_prepend(str(folder))
    reward = load(folder, function="my_rewards_pkg.checks:short")
    assert one(reward, "abc").value == 1.0
    assert reward.function == "my_rewards_pkg.checks:short"  # type: ignore[attr-defined]


def test_a_decorated_function_keeps_its_deadline_unless_the_spec_sets_one(folder: Path) -> None:
    own = load(folder, function="rewards.py:decorated")
    assert (own.deadline, own.runs_in) == (3.0, "inline")  # type: ignore[attr-defined]
    spec = load(folder, function="rewards.py:decorated", deadline=1, run_in="process")
    assert (spec.deadline, spec.runs_in) == (1.0, "process")  # type: ignore[attr-defined]
    assert one(spec).value == 0.75
    plain = load(folder, function="rewards.py:has_answer")
    assert plain.deadline is None and plain.runs_in == "process"  # type: ignore[attr-defined]


def test_components_of_a_combination_are_reported(folder: Path) -> None:
    path = folder / "spec.yaml"
    path.write_text(
        textwrap.dedent("""
        combine: weighted
        components:
          answer: {type: python, function: rewards.py:has_answer, weight: 0.5}
          parts: {type: python, function: rewards.py:parts, weight: 0.5}
        """)
    )
    reward = referee.load(path)
    assert top_components(reward) == [("answer", 0.5), ("parts", 0.5)]
    score = one(reward)
    assert score.value == pytest.approx(0.75)
    assert dict(score.components) == {"answer": 1.0, "parts": 0.5, "parts.a": 1.0, "parts.b": 0.0}


# --- where the file is, and how often it loads ------------------------------------------------


def test_a_relative_path_is_the_spec_files_not_the_current_directory(
    folder: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "rewards.py").write_text("def has_answer(rollout):\n    return 0.5\n")
    monkeypatch.chdir(elsewhere)
    reward = load(folder, function="rewards.py:has_answer")
    assert reward.function == f"{folder / 'rewards.py'}:has_answer"  # type: ignore[attr-defined]
    assert one(reward).value == 1.0  # the spec folder's file, not the current directory's
    # A spec given as a mapping has no folder: the current directory's file.
    mapping = referee.load({"type": "python", "function": "rewards.py:has_answer"})
    assert one(mapping).value == 0.5


def test_a_file_loads_once_as_a_module_no_package_can_collide_with(folder: Path) -> None:
    first = load(folder, function="rewards.py:has_answer")
    second = load(folder, function="rewards.py:waits")
    module = load_file(folder / "rewards.py")
    assert (folder / "rewards.py.imports").read_text() == "imported\n"  # once for both
    assert module.__name__.startswith("referee.rewards._imports._2f")
    assert module.__name__ in sys.modules and module.__file__ == str(folder / "rewards.py")
    assert first._call.fn is module.has_answer and second._call.fn is module.waits  # type: ignore[attr-defined]
    # A file named as a standard module neither shadows it nor is shadowed by it.
    (folder / "json.py").write_text("def loads(rollout):\n    return 0.125\n")
    mine = load(folder, function="json.py:loads")
    assert one(mine).value == 0.125
    import json

    assert json.loads("[1]") == [1]


# --- failures are data, never a silent value ------------------------------------------------

FAILURES = [
    # an exception: the function, the exception and the line
    ("divides", "error", r"rewards.py:divides raised ZeroDivisionError: division by zero "
                         r"\(rewards.py, line \d+\)"),
    ("nothing", "no_score", "returned None"),
    ("not_a_number", "invalid_value", "nan"),
    ("wrong_mapping", "error", r"rewards.py:wrong_mapping returned a mapping with keys "
                               r"\['score'\]"),
    ("not_applicable", "not_applicable", "no reference to compare with"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "failure", "words"), FAILURES, ids=[f[0] for f in FAILURES])
@pytest.mark.parametrize("run_in", ["inline", "process"])
def test_a_function_that_cannot_score_is_a_failure(
    folder: Path, name: str, failure: str, words: str, run_in: str
) -> None:
    reward = load(folder, function=f"rewards.py:{name}", run_in=run_in)
    score = one(reward)
    assert score.value is None and score.failure is not None
    assert score.failure.type == failure and score.failure.where == "spec"
    assert re.search(words, score.failure.message), score.failure.message
    # In a combination the total fails too (on_failure: fail), naming the component.
    path = folder / "combined.yaml"
    path.write_text(yaml.safe_dump({"components": {
        "bad": {"type": "python", "function": f"rewards.py:{name}", "run_in": run_in},
        "good": {"type": "python", "function": "rewards.py:has_answer", "run_in": run_in},
    }}))  # fmt: skip
    total = one(referee.load(path))
    assert total.value is None and total.failure is not None and "bad" in total.failure.message


def test_a_function_spinning_in_c_is_killed_at_its_deadline(folder: Path) -> None:
    reward = load(folder, function="rewards.py:spins_in_c", deadline=1)
    assert reward.runs_in == "process"  # type: ignore[attr-defined]
    start = time.monotonic()
    scores = referee.score(reward, [Rollout(completion=c) for c in ("x", "y")])
    took = time.monotonic() - start
    # It spun on the policy's output: the policy's verdict, 0 with the reason (issue 44).
    assert [s.fault or s.failure for s in scores] == ["timeout", "timeout"]
    assert [s.value for s in scores] == [0.0, 0.0]
    assert took < 10, took  # two deadlines and a worker's start, not the backtracking's hours
    # The batch around it is scored, in another worker.
    ok = load(folder, function="rewards.py:has_answer")
    assert one(ok).value == 1.0


def test_an_async_function_is_stopped_at_its_deadline(folder: Path) -> None:
    (folder / "slow.py").write_text(
        "import asyncio\n\nasync def sleeps(rollout):\n    await asyncio.sleep(60)\n"
    )
    reward = load(folder, function="slow.py:sleeps", deadline=0.2)
    start = time.monotonic()
    score = one(reward)
    assert score.failure is not None and score.failure.type == "timeout"
    assert time.monotonic() - start < 5


# --- pickling: trainers ship rewards to other processes ---------------------------------------

_UNPICKLE = """
import pickle, sys
import referee
reward = pickle.loads(sys.stdin.buffer.read())
rollouts = [referee.Rollout(completion=c) for c in ("<answer>1</answer>", "a" * 20)]
print(type(reward).__name__, [s.value for s in referee.score(reward, rollouts)])
"""


@pytest.mark.parametrize(
    ("name", "options", "want"),
    [
        ("has_answer", {}, "PythonReward [1.0, 0.0]"),
        ("waits", {}, "AsyncPythonReward [0.18, 0.2]"),
        ("Short", {"max_chars": 18}, "Short [1.0, 0.0]"),  # pickled by reference to the file
        ("Counts", {"letter": "a"}, "PythonReward [2.0, 20.0]"),
    ],
)
def test_a_pickled_reward_scores_the_same_in_a_fresh_interpreter(
    folder: Path, tmp_path_factory: pytest.TempPathFactory, name: str, options: dict[str, Any],
    want: str,
) -> None:  # fmt: skip
    reward = load(folder, function=f"rewards.py:{name}", options=options)
    clone = pickle.loads(pickle.dumps(reward))
    assert type(clone) is type(reward)
    elsewhere = tmp_path_factory.mktemp("elsewhere")  # another current directory
    done = subprocess.run(
        [sys.executable, "-c", _UNPICKLE], input=pickle.dumps(reward), capture_output=True,
        cwd=elsewhere, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.decode().strip() == want


def test_a_function_reward_pickles_as_its_spec(folder: Path) -> None:
    reward = load(folder, function="rewards.py:has_answer", options={"tag": "b"}, deadline=2)
    state = reward.__getstate__()  # type: ignore[attr-defined]
    assert state == {
        "name": "spec",
        "function": f"{folder / 'rewards.py'}:has_answer",
        "options": {"tag": "b"},
        "deadline": 2.0,
    }
    assert pickle.loads(pickle.dumps(reward)) == reward


# --- errors name the file, the key path and the fix -------------------------------------------

ERRORS: list[tuple[dict[str, Any], str, list[str]]] = [
    ({"function": "missing.py:f"}, "function", ["no file", "missing.py", "relative to the spec"]),
    ({"function": "rewards.py:has_anwser"}, "function", ["has no 'has_anwser'",
                                                          "did you mean 'has_answer'"]),
    ({"function": "rewards.py"}, "function", ["<where>:<name>"]),
    ({"function": "broken.py:f"}, "function", ["importing broken.py raised ModuleNotFoundError",
                                               "line 2", "python "]),
    ({"function": "syntax.py:f"}, "function", ["SyntaxError", "syntax.py, line 1"]),
    ({"function": "values.py:x"}, "function", ["not a function", "int 3"]),
    ({"function": "values.py:two"}, "function", ["cannot be called as values.py:two(rollout)",
                                                 "one positional argument"]),
    ({"function": "rewards.py:has_answer", "options": {"tga": 1}}, "options",
     ["unexpected keyword argument 'tga'"]),
    ({"function": "rewards.py:Short", "options": {"max_char": 1}}, "options.max_char",
     ["takes no option 'max_char'", "did you mean 'max_chars'"]),
    ({"function": "rewards.py:Short", "options": {"max_chars": "many"}}, "options.max_chars",
     ["valid integer"]),
    ({"function": "rewards.py:shared", "options": {"a": 1}}, "options", ["takes no options"]),
    ({"function": "no_such_package_here.sub:f"}, "function", ["no module", "sys.path"]),
    ({"function": "rewards.py:waits", "run_in": "process"}, "run_in",
     ["runs on the event loop", "AsyncPythonReward"]),
    ({"function": "rewards.py:has_answer", "fucntion": 1}, "fucntion", ["unknown option"]),
    ({"function": 3}, "function", ["valid string"]),
    ({}, "function", ["needs option 'function'"]),
]  # fmt: skip


@pytest.mark.parametrize(("spec", "where", "words"), ERRORS, ids=[str(e[0])[:50] for e in ERRORS])
def test_errors_name_the_file_the_key_path_and_the_fix(
    folder: Path, spec: dict[str, Any], where: str, words: list[str]
) -> None:
    (folder / "broken.py").write_text('"""Needs a package."""\nimport no_such_package_here\n')
    (folder / "syntax.py").write_text("def f(:\n")
    (folder / "values.py").write_text("x = 3\n\ndef two(a, b):\n    return 1\n")
    path = folder / "errors.yaml"
    path.write_text(yaml.safe_dump({"components": {"mine": {"type": "python", **spec}}}))
    with pytest.raises(SpecError) as info:
        referee.load(path)
    error = info.value
    assert error.source == str(path)
    assert ".".join(map(str, error.path)) == f"components.mine.{where}"
    for word in words:
        assert word in str(error), str(error)


def test_a_file_that_failed_to_import_loads_once_fixed(folder: Path) -> None:
    (folder / "fixed.py").write_text("import no_such_package_here\n")
    with pytest.raises(SpecError, match="ModuleNotFoundError"):
        load(folder, function="fixed.py:f")
    (folder / "fixed.py").write_text("def f(rollout):\n    return 1.0\n")
    assert one(load(folder, function="fixed.py:f")).value == 1.0


def test_in_python_the_classes_and_build_say_what_is_wrong(folder: Path) -> None:
    file = folder / "rewards.py"
    assert one(PythonReward(function=f"{file}:has_answer")).value == 1.0
    with pytest.raises(ValueError, match="is an async function: build AsyncPythonReward"):
        PythonReward(function=f"{file}:waits")
    with pytest.raises(ValueError, match="is a sync function: build PythonReward"):
        AsyncPythonReward(function=f"{file}:has_answer")
    assert type(build(f"{file}:waits")) is AsyncPythonReward
    assert type(build("rewards.py:Short", {"max_chars": 3}, folder=folder)).__name__ == "Short"
    with pytest.raises(ValueError, match="no file"):
        build("nowhere.py:f", folder=folder)


def test_the_value_is_checked_as_a_decorated_functions_is(folder: Path) -> None:
    (folder / "huge.py").write_text("def huge(rollout):\n    return 10 ** 400\n")
    score = one(load(folder, function="huge.py:huge"))
    assert score.value is None and score.failure is not None
    same = one(referee.reward(lambda r: 10**400))
    assert score.failure.type == same.failure.type  # type: ignore[union-attr]
