"""referee rewards scored by PrimeIntellect's verifiers 0.4, through its own entry points.

Per trace: ``Task.score(trace)``, what a verifiers rollout (and ``vf replay``) calls after the
agent finished, with referee's reward in the task's class body, in a ``@vf.reward`` method,
and plugged by config. Per episode: the ``finalize`` of a real ``BestOfNEnv`` built from its
config over a taskset module of the test's own. Every value is compared with
``referee.score`` on the same rollouts. Traces are built by hand (a verifiers episode needs a
model server and ``uv`` to run its agent program), with the message graph verifiers records.
"""

from __future__ import annotations

import asyncio
import json
import pickle
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip(
    "verifiers.v1",
    reason="PrimeIntellect's verifiers 0.4 (verifiers.v1) is not installed (make install adds it)",
)

import verifiers.v1 as vf

import referee
from referee import Rollout
from referee.backends import prime_verifiers as pv
from referee.backends.prime_verifiers import EpisodeScorer, RefereeReward
from referee.errors import MissingInput, SpecError
from referee.judges.testing import FakeJudgeServer
from tests.support.judges import GROUPED, GROUPED_WANT, rank_spec, relative, spec_with_judge

MATH = {"name": "math", "type": "math_answer"}
EXTRACT = {
    "name": "extract",
    "combine": "weighted",
    "components": {
        "valid": {"type": "json_valid", "weight": 0.2, "gate": True},
        "fields": {"type": "field_match", "weight": 0.8,
                   "fields": {"a": "number", "tags": "set_f1"}},
    },
}  # fmt: skip


class MathData(vf.TaskData):
    answer: str | None = None
    level: int = 1


class MathTask(vf.Task[MathData]):
    correct = RefereeReward(MATH)


class ExtractTask(vf.Task[MathData]):
    # The reference as a dataset stores a nested one: JSON text, decoded.
    extract = RefereeReward(EXTRACT, weight=2.0)


def node(message: Any, parent: int | None, sampled: bool) -> Any:
    return vf.MessageNode(message=message, parent=parent, sampled=sampled)


def trace_of(task: Any, completion: str | Sequence[Any]) -> Any:
    """A finished trace of `task`: its prompt, then `completion` (text: one sampled assistant
    turn; else messages, the assistant's sampled), as verifiers' message graph holds them."""
    turns = [vf.AssistantMessage(content=completion)] if isinstance(completion, str) else completion
    nodes = [node(vf.UserMessage(content=task.data.prompt), None, False)]
    for message in turns:
        nodes.append(node(message, len(nodes) - 1, message.role == "assistant"))
    return vf.Trace(
        task=vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key),
        agent=vf.AgentInfo(config=vf.AgentConfig()),
        nodes=nodes,
    )


def score_all(tasks: Sequence[Any], traces: Sequence[Any]) -> None:
    """Each trace scored by its task, concurrently, as verifiers runs its rollouts."""

    async def run() -> None:
        await asyncio.gather(*(t.score(tr) for t, tr in zip(tasks, traces, strict=True)))

    asyncio.run(run())


def expected(spec: Any, rollouts: list[Rollout]) -> list[float | None]:
    return [s.value for s in referee.score(referee.load(spec), rollouts)]


def as_chat(completion: str | Sequence[Any]) -> list[dict[str, Any]]:
    """A completion as the chat messages a referee rollout file would hold."""
    turns = [vf.AssistantMessage(content=completion)] if isinstance(completion, str) else completion
    return [m.model_dump(exclude_none=True, exclude={"provider_state"}) for m in turns]


# --- math_answer: text and chat completions, tool turns -----------------------------------------

CALL = vf.ToolCall(id="c1", name="calc", arguments='{"expr": "2+2"}')
MATH_CASES: list[tuple[str, str | list[Any]]] = [
    ("4", "The sum is \\boxed{4}."),  # right
    ("4", "The sum is \\boxed{5}."),  # wrong
    ("\\frac{1}{2}", "so \\boxed{0.5}"),  # equal as math
    ("4", "no box at all"),
    ("4", [  # a multi-turn trajectory: a tool call, its result, then the answer
        vf.AssistantMessage(content=None, tool_calls=[CALL]),
        vf.ToolMessage(tool_call_id="c1", content="4"),
        vf.AssistantMessage(content="It is \\boxed{4}"),
    ]),
]  # fmt: skip


def test_task_score_records_referee_values_for_text_and_chat_completions() -> None:
    tasks = [MathTask(MathData(prompt=f"Q{i}", answer=a)) for i, (a, _) in enumerate(MATH_CASES)]
    traces = [trace_of(t, c) for t, (_, c) in zip(tasks, MATH_CASES, strict=True)]
    score_all(tasks, traces)
    got = [t.rewards["correct"].score for t in traces]
    # The same rollouts built by hand, the completion as chat messages and, where it is one
    # turn, as text.
    for text in (False, True):
        rollouts = [
            Rollout(prompt=[{"role": "user", "content": f"Q{i}"}],
                    completion=c if text and isinstance(c, str) else as_chat(c), reference=a)
            for i, (a, c) in enumerate(MATH_CASES)
        ]  # fmt: skip
        assert got == pytest.approx(expected(MATH, rollouts), abs=1e-9)
    assert got == [1.0, 0.0, 1.0, 0.0, 1.0]
    assert [t.reward for t in traces] == got  # the only reward, weight 1
    assert all(t.metrics == {"referee_failed": 0.0} for t in traces)
    assert traces[0].info["referee"]["reason"] == "4 == 4"


def test_rollout_from_trace_maps_prompt_completion_reference_and_metadata() -> None:
    task = MathTask(MathData(prompt="Q", answer="4", level=3, id="row-7"))
    trace = trace_of(task, MATH_CASES[4][1])
    rollout = pv.rollout_from_trace(task.data, trace)
    assert rollout.prompt == [referee.Message(role="user", content="Q")]
    assert [m.role for m in rollout.completion] == ["assistant", "tool", "assistant"]
    assert rollout.completion[0].tool_calls == [
        referee.ToolCall(id="c1", name="calc", arguments='{"expr": "2+2"}')
    ]
    assert (rollout.reference, rollout.id, rollout.group) == ("4", trace.id, task.key)
    assert rollout.metadata == {"id": "row-7", "level": 3}  # the task's own fields, no answer
    # An agent that failed before its first turn: the task's own prompt, an empty completion.
    data = MathData(prompt="Q", system_prompt="Be brief.", answer="4")
    empty = vf.Trace(task=vf.TraceTask(type="MathTask", data=data),
                     agent=vf.AgentInfo(config=vf.AgentConfig()))  # fmt: skip
    rollout = pv.rollout_from_trace(data, empty)
    assert [(m.role, m.content) for m in rollout.prompt] == [
        ("system", "Be brief."), ("user", "Q")
    ]  # fmt: skip
    assert rollout.completion == [] and rollout.group is None  # the trace names no task key


# --- a combination: components as metrics, a gate, JSON text as the reference -------------------

EXTRACT_CASES = [  # (completion, reference as the task stores it: JSON text)
    ('{"a": 1, "tags": ["x", "y"]}', '{"a": 1, "tags": ["x", "y"]}'),
    ('{"a": 2, "tags": ["x"]}', '{"a": 1, "tags": ["x", "y"]}'),
    ("not json", '{"a": 1, "tags": ["x"]}'),  # fails the gate: fields is skipped
]


def test_components_are_metrics_and_a_skipped_one_reads_none() -> None:
    tasks = [ExtractTask(MathData(prompt="Extract", answer=ref)) for _, ref in EXTRACT_CASES]
    traces = [trace_of(t, c) for t, (c, _) in zip(tasks, EXTRACT_CASES, strict=True)]
    score_all(tasks, traces)
    scores = referee.score(
        referee.load(EXTRACT),
        [Rollout(completion=c, reference=json.loads(r)) for c, r in EXTRACT_CASES],
    )
    got = [t.rewards["extract"] for t in traces]
    assert [r.score for r in got] == pytest.approx([s.value for s in scores], abs=1e-9)
    assert all(r.weight == 2.0 for r in got)
    assert [t.reward for t in traces] == pytest.approx([2 * (s.value or 0) for s in scores])
    assert traces[2].metrics == {
        "referee_failed": 0.0,
        "referee/valid": 0.0,
        "referee/valid/skipped": 0.0,
        "referee/fields": None,  # gated: it never ran, which is not a zero
        "referee/fields/skipped": 1.0,
    }
    assert traces[1].metrics["referee/fields"] == pytest.approx(scores[1].components["fields"])
    assert traces[2].info["referee"]["skipped"] == ["fields"]


# --- the other ways to put it in a task -----------------------------------------------------


def test_plugged_by_config_with_the_spec_in_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "math.yaml"
    spec.write_text(yaml.safe_dump(MATH))
    monkeypatch.setenv("REFEREE_SPEC", str(spec))
    monkeypatch.setenv("REFEREE_REFERENCE", "solution")

    class SolutionData(vf.TaskData):
        solution: str

    plugged = vf.RewardFunctionConfig(fn="referee.backends.prime_verifiers:reward", weight=0.5)
    config = vf.TaskConfig(rewards={"referee": plugged})
    task = vf.Task(SolutionData(prompt="Q", solution="7"), config)
    traces = [trace_of(task, "\\boxed{7}"), trace_of(task, "\\boxed{8}")]
    score_all([task, task], traces)
    assert [t.rewards["referee"].score for t in traces] == [1.0, 0.0]
    assert traces[0].rewards["referee"].weight == 0.5


def test_a_reward_method_may_call_it_with_a_reference_function() -> None:
    scorer = RefereeReward(MATH, reference=lambda data: str(data.level * 2))

    class Doubled(vf.Task[MathData]):
        @vf.reward
        async def doubled(self, task: Any, trace: Any) -> float:
            return await scorer(task, trace)

    task = Doubled(MathData(prompt="Q", level=3))
    trace = trace_of(task, "\\boxed{6}")
    asyncio.run(task.score(trace))
    assert trace.rewards["doubled"].score == 1.0


def test_an_async_judge_scores_concurrently_on_verifiers_loop(
    judge_server: FakeJudgeServer,
) -> None:
    spec = spec_with_judge(judge_server, cache=None)

    class Judged(vf.Task[MathData]):
        graded = RefereeReward(spec)

    completions = ['{"e": "eee"}', '{"x": 1}', "not json", '{"ee": 2}']
    tasks = [Judged(MathData(prompt=f"Q{i}")) for i in range(len(completions))]
    traces = [trace_of(t, c) for t, c in zip(tasks, completions, strict=True)]
    score_all(tasks, traces)
    want = expected(spec, [Rollout(prompt=[{"role": "user", "content": f"Q{i}"}], completion=c)
                           for i, c in enumerate(completions)])  # fmt: skip
    assert [t.rewards["graded"].score for t in traces] == pytest.approx(want, abs=1e-9)


def test_it_pickles_and_scores_the_same() -> None:
    task = MathTask(MathData(prompt="Q", answer="4"))
    copy = pickle.loads(pickle.dumps(MathTask.correct))
    trace = trace_of(task, "\\boxed{4}")
    assert asyncio.run(copy(task.data, trace)) == 1.0
    assert copy.__name__ == "correct" and getattr(copy, "_vf_weight", None) == 1.0


# --- failures ---------------------------------------------------------------------------------


def test_a_rollout_with_no_reference_gets_the_failure_value_and_the_flag() -> None:
    class Strict(vf.Task[MathData]):
        correct = RefereeReward(MATH, failure_value=-1.0)

    for cls, value in ((MathTask, 0.0), (Strict, -1.0)):
        task = cls(MathData(prompt="Q", answer=None))  # the task has no ground truth
        trace = trace_of(task, "\\boxed{4}")
        asyncio.run(task.score(trace))
        [score] = referee.score(referee.load(MATH), [pv.rollout_from_trace(task.data, trace)])
        assert score.value is None and score.failure is not None
        assert trace.rewards["correct"].score == value
        assert trace.metrics["referee_failed"] == 1.0
        assert trace.info["referee"]["failure"]["type"] == score.failure.type == "not_applicable"


def test_task_data_without_the_field_is_an_error_naming_the_fix() -> None:
    class Plain(vf.Task[vf.TaskData]):
        correct = RefereeReward(MATH)

    class Solution(vf.TaskData):
        solution: str = "4"

    for data in (vf.TaskData(prompt="Q"), Solution(prompt="Q")):
        task = Plain(data)
        with pytest.raises(MissingInput, match="has no field 'answer'") as info:
            asyncio.run(Plain.correct(task.data, trace_of(task, "\\boxed{4}")))
        assert "reference=" in str(info.value)
    assert "reference='solution'" in str(info.value)  # the field it guessed
    # Through verifiers, the rollout fails with the same message (its TaskError wraps it).
    task = Plain(vf.TaskData(prompt="Q"))
    with pytest.raises(Exception, match="has no field 'answer'"):
        asyncio.run(task.score(trace_of(task, "\\boxed{4}")))


def test_the_spec_in_the_environment_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REFEREE_SPEC", raising=False)
    with pytest.raises(SpecError, match="REFEREE_SPEC"):
        pv.reward  # noqa: B018


# --- group rewards ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ranking_server() -> Iterator[FakeJudgeServer]:
    with FakeJudgeServer(relative) as server:
        yield server


def test_a_group_reward_is_refused_per_trace(ranking_server: FakeJudgeServer) -> None:
    group = rank_spec(ranking_server)
    for spec in (group, {"type": "final_answer", "reward": group}):  # nested too
        with pytest.raises(SpecError, match="EpisodeScorer") as info:
            RefereeReward(spec)
        assert "finalize" in str(info.value)


TASKSET = """
import verifiers.v1 as vf


class QData(vf.TaskData):
    answer: str | None = None


class QTask(vf.Task[QData]):
    pass


class QTaskset(vf.Taskset[QTask, vf.TasksetConfig]):
    def load(self):
        for q in ("Q1", "Q2", "Q3"):
            yield QTask(QData(prompt=q), self.config.task)


__all__ = ["QTaskset"]
"""


def test_a_group_reward_scores_an_episode_in_the_envs_finalize(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ranking_server: FakeJudgeServer
) -> None:
    from verifiers.v1.envs.best_of_n.env import BestOfNEnv, BestOfNEnvConfig

    (tmp_path / "referee_vf_tasks.py").write_text(TASKSET)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "referee_vf_tasks", raising=False)
    rank = EpisodeScorer(rank_spec(ranking_server), weight=0.5)

    class RankedEnv(BestOfNEnv):
        async def finalize(self, task: Any, episode: Any) -> None:
            await super().finalize(task, episode)
            await rank(episode)

    env = RankedEnv(BestOfNEnvConfig(taskset={"id": "referee_vf_tasks"}, n=3))
    tasks = {t.data.prompt: t for t in env.taskset}
    traces = [trace_of(tasks[q], r) for q, r, _ in GROUPED]
    for prompt, task in tasks.items():
        members = [t for t, (q, _, _) in zip(traces, GROUPED, strict=True) if q == prompt]
        episode = vf.Episode(task=members[0].task, traces=members)
        asyncio.run(env.finalize(task, episode))
    got = [t.rewards["ranked"].score for t in traces]
    assert got == pytest.approx(GROUPED_WANT, abs=1e-9)
    rollouts = [Rollout(prompt=q, completion=r, group=g) for q, r, g in GROUPED]
    assert got == pytest.approx(expected(rank_spec(ranking_server), rollouts), abs=1e-9)
    assert all(t.rewards["ranked"].weight == 0.5 for t in traces)
    assert all(t.metrics["referee_failed"] == 0.0 and "best" in t.metrics for t in traces)
