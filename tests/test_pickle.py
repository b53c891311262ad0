"""Every built-in reward survives a pickle round trip: trainers ship rewards to worker processes.

The clone must score as the original does, on a rollout it can really score: each type gets one
here (a judge asks a scripted judge over real HTTP on 127.0.0.1, code runs in the real sandbox,
a patch is applied to a real repository, the learned models are tiny real ones), and the test
asserts a value, not only equality: two Failures are equal too, and a clone that lost its
client or its sandbox would give the same Failure as an original that never reached them.
"""

from __future__ import annotations

import json
import pickle
import re
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import referee
from referee import Rollout
from referee.judges.testing import FakeJudgeServer, Reply
from referee.registry import lookup, registered_types
from tests.support.images import harbor_case
from tests.support.judges import letter_judge, relative
from tests.support.options import OPTIONS, ROLLOUTS
from tests.support.patches import F2P, FIXED, P2P, REPO, make_diff, write_tree
from tests.support.rollouts import make


def _fenced(request: dict[str, Any], label: str) -> str:
    """The text a judge request holds under `label`, inside the fence its system prompt names."""
    system, user = (m["content"] for m in request["messages"][:2])
    fence = re.search(r"<<([0-9a-f]{24})>>", system).group(1)  # type: ignore[union-attr]
    return str(re.findall(rf"{label}:\n<<{fence}>>\n(.*?)\n<</{fence}>>", user, re.DOTALL)[0])


def _checklist(request: dict[str, Any]) -> Reply:
    """Each item holds when the response says "polite"."""
    items = re.findall(r"^\d+\. ", request["messages"][1]["content"], re.MULTILINE)
    return Reply(json.dumps({"items": ["polite" in _fenced(request, "RESPONSE")] * len(items)}))


def _equivalent(request: dict[str, Any]) -> Reply:
    """Equivalent when the response says 42."""
    return Reply(json.dumps({"equivalent": "42" in _fenced(request, "RESPONSE")}))


def _longer(request: dict[str, Any]) -> Reply:
    """Prefers the longer answer; a tie when they are as long."""
    a, b = (len(_fenced(request, f"ANSWER {x}")) for x in "AB")
    return Reply(json.dumps({"better": "tie" if a == b else ("A" if a > b else "B")}))


# The scripted judge of each judge type: a pure function of what it is shown.
JUDGES: dict[str, Callable[[dict[str, Any]], Reply]] = {
    "rubric_judge": letter_judge,
    "checklist_judge": _checklist,
    "reference_judge": _equivalent,
    "pairwise_judge": _longer,
    "group_rank": relative,
    "pairwise_tournament": _longer,
}


@dataclass(frozen=True)
class Case:
    """A type's options over its `OPTIONS`, and rollouts it gives a value for."""

    rollouts: list[Rollout]
    options: dict[str, Any]


@pytest.fixture(scope="module")
def judge_urls() -> Iterator[dict[str, str]]:
    with ExitStack() as stack:
        yield {
            kind: stack.enter_context(FakeJudgeServer(script)).url
            for kind, script in JUDGES.items()
        }


@pytest.fixture(scope="module")
def patch_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tree(tmp_path_factory.mktemp("pickle") / "calc-repo", dict(REPO))


ADD = "def add(a, b):\n    return a + b\n"
ADD_CHECK = (
    "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(2, 2) == 4\n"
)
ADD_PYTEST = "from solution import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
SUM = "a, b = map(int, input().split())\nprint(a + b)\n"
TOOLS = [{"name": "f", "parameters": {"type": "dict", "required": ["x"],
          "properties": {"x": {"type": "integer"}}}}]  # fmt: skip


def _turns(*calls: tuple[str, dict[str, Any], str], answer: str = "done") -> list[dict[str, Any]]:
    """An agent's turns: each call (name, arguments, the tool's answer), then the answer."""
    turns: list[dict[str, Any]] = []
    for i, (name, arguments, result) in enumerate(calls):
        call = {"id": str(i), "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)}}  # fmt: skip
        turns.append({"role": "assistant", "content": "", "tool_calls": [call]})
        turns.append({"role": "tool", "tool_call_id": str(i), "content": result})
    return [*turns, {"role": "assistant", "content": answer}]


def _reasoning_gym() -> list[Rollout]:
    rg = pytest.importorskip("reasoning_gym", reason="reasoning_gym is not installed")
    from referee.rewards.math.reasoning_gym import entry_reference

    entry = rg.create_dataset("chain_sum", seed=1, size=1)[0]
    answer = f"<think>adding</think><answer>{entry['answer']}</answer>"
    return [make(answer, entry_reference(entry))]


def _sql_rollouts(db: Path) -> list[Rollout]:
    """A right and a wrong query against a one-row database."""
    if not db.exists():
        conn = sqlite3.connect(db)
        conn.execute("CREATE TABLE t (a INTEGER)")
        conn.execute("INSERT INTO t VALUES (1)")
        conn.commit()
        conn.close()
    reference = {"sql": "SELECT a FROM t", "db": str(db)}
    return [make("SELECT 1", reference), make("SELECT 2", reference)]


def case(kind: str, judge_urls: dict[str, str], patch_repo: Path) -> Case:
    """What `kind` is scored on; ROLLOUTS where they give every type a value already."""
    judge = {"api_base": judge_urls[kind], "structured": "prompt"} if kind in JUDGES else {}
    rollouts: dict[str, list[Rollout]] = {
        "exact_match": [make("Answer: 1", "1"), make("Answer: 2", "1")],
        "field_match": [ROLLOUTS[0]],
        "final_answer": [make("<answer>1</answer>", "1"), make("<answer>2</answer>", "1")],
        "math_answer": [make("<answer>1</answer>", "1"), make("<answer>3</answer>", "1")],
        "text_similarity": [make("1", {"a": 1}), make("one", {"a": 1})],
        "openai_grader": [make('{"a": 1}', {"a": 1}), make('{"a": 2}', {"a": 1})],
        "python_tests": [make(ADD, {"test": ADD_CHECK, "entry_point": "add"})],
        "io_tests": [make(SUM, {"inputs": ["1 2", "2 2"], "outputs": ["3", "4"]})],
        "function_tests": [
            make(ADD, {"fn_name": "add", "inputs": [[1, 2], [2, 2]], "outputs": [3, 4]})
        ],
        "pytest_tests": [make(ADD, {"tests": ADD_PYTEST})],
        "patch_tests": [
            make(
                make_diff(patch_repo, {"calc/ops.py": FIXED}),
                {"snapshot": str(patch_repo), "FAIL_TO_PASS": F2P, "PASS_TO_PASS": P2P},
            )
        ],
        "retrieval": [
            Rollout(
                prompt="who?",
                completion=_turns(("search", {"q": "x"}, '[{"id": "d1"}]')),  # type: ignore[arg-type]
                reference=["d1", "d2"],
            )
        ],
        "tool_call_match": [
            Rollout(
                completion=_turns(("f", {"x": 1}, "ok")),  # type: ignore[arg-type]
                reference=[{"f": {"x": [1]}}],
                metadata={"function": TOOLS},
            )
        ],
        "checklist_judge": [make("I am polite."), make("Go away.")],
        "reference_judge": [make("It is 42.", "42"), make("It is 41.", "42")],
        "pairwise_judge": [make("a long answer", "short"), make("short", "a long answer")],
        "group_rank": [make(c, group="g", prompt="Q?") for c in ("a", "aaa", "aa")],
        "pairwise_tournament": [make(c, group="g", prompt="Q?") for c in ("a", "aaa", "aa")],
    }
    if kind == "reasoning_gym":
        return Case(_reasoning_gym(), {})
    if kind == "sql_match":
        return Case(_sql_rollouts(patch_repo.parent / "pickle.sqlite"), {})
    return Case(rollouts.get(kind, ROLLOUTS), judge)


def _timeless(score: referee.Score) -> dict[str, Any]:
    """All a score says but how long it took (a judge's latency differs call to call)."""
    return {**score.to_dict(), "latency": None, "skipped": score.skipped, "steps": score.steps}


def test_every_builtin_is_covered() -> None:
    assert set(registered_types()) >= set(OPTIONS)
    assert {n for n in registered_types() if lookup(n).__module__.startswith("referee.")} == set(
        OPTIONS
    )  # type: ignore[union-attr]


@pytest.mark.parametrize("kind", sorted(OPTIONS))
def test_round_trip_scores_the_same(
    kind: str, judge_urls: dict[str, str], patch_repo: Path, request: pytest.FixtureRequest
):
    given = case(kind, judge_urls, patch_repo)
    if kind == "harbor_task":  # graded in the task's own image: needs a Docker Engine
        url = request.getfixturevalue("docker_engine")
        given = Case(*harbor_case(url, patch_repo.parent / "harbor"))
    reward = referee.load({"type": kind, **OPTIONS[kind], **given.options})
    clone = pickle.loads(pickle.dumps(reward))
    assert clone == reward
    before = referee.score(reward, given.rollouts)
    after = referee.score(clone, given.rollouts)
    assert [s.failure for s in before] == [None] * len(before), "no value to compare"
    assert [s.value for s in after] == [s.value for s in before]
    assert [_timeless(s) for s in after] == [_timeless(s) for s in before]


def test_combined_spec_round_trip() -> None:
    reward = referee.load({
        "components": {kind: {"type": kind, **opts} for kind, opts in OPTIONS.items()},
        "clip": [-1, 1],
    })  # fmt: skip
    clone = pickle.loads(pickle.dumps(reward))
    assert referee.score(clone, ROLLOUTS) == referee.score(reward, ROLLOUTS)
