from __future__ import annotations

import asyncio
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl", reason="the trl extra is not installed (pip install 'referee[trl]')")

import referee
from referee import Rollout
from referee.backends.trl import reward_funcs
from referee.errors import MissingInput, RolloutError
from referee.judges.testing import FakeJudgeServer
from referee.reward import GroupRewardBase
from tests.support import tiny
from tests.support.judges import spec_with_judge

LENGTHS = {
    "name": "lengths",
    "combine": "weighted",
    "components": {
        "valid": {"type": "json_valid", "weight": 0.5},
        "short": {"type": "length", "unit": "chars", "max_length": 10, "cache_length": 5},
    },
}


class Metrics:
    def __init__(self) -> None:
        self.metrics: dict[str, list[float]] = {}
        self.extra: dict[str, list[Any]] = {}

    def log_metric(self, name: str, value: float) -> None:
        self.metrics.setdefault(name, []).append(value)

    def log_extra(self, column: str, values: list[Any]) -> None:
        self.extra.setdefault(column, []).extend(values)


def call(fn: Any, prompts: list[Any], completions: list[Any], **columns: Any) -> list[Any]:
    result = fn(prompts=prompts, completions=completions, completion_ids=None, **columns)
    return asyncio.run(result) if asyncio.iscoroutine(result) else result


def test_values_are_what_referee_score_gives() -> None:
    [fn] = funcs = reward_funcs(LENGTHS)
    completions = ['{"a": 1}', "not json at all, and long", "{}", "[1, 2"]
    values = call(fn, ["p"] * 4, completions)
    rollouts = [Rollout(completion=c, prompt="p") for c in completions]
    assert values == [s.value for s in referee.score(referee.load(LENGTHS), rollouts)]
    assert funcs.weights == [1.0] and fn.__name__ == "lengths"
    assert not asyncio.iscoroutinefunction(type(fn).__call__)  # deterministic: sync for TRL


def test_reference_and_metadata_columns_reach_the_rollout() -> None:
    seen: list[Rollout] = []

    @referee.reward(run_in="inline")  # `seen` is this process's
    def spy(rollout: Rollout) -> float:
        seen.append(rollout)
        return 1.0

    [fn] = reward_funcs(spy)
    call(fn, ["p1", "p2"], ["a", "b"], reference=[{"x": 1}, {"x": 2}], source=["s1", "s2"])
    assert [r.reference for r in seen] == [{"x": 1}, {"x": 2}]
    assert [r.metadata for r in seen] == [{"source": "s1"}, {"source": "s2"}]

    seen.clear()
    [fn] = reward_funcs(spy, reference=lambda row: row["answer"] * 2, metadata=[])
    call(fn, ["p"], ["a"], answer=[21], source=["s"])
    assert seen[0].reference == 42 and seen[0].metadata == {}

    seen.clear()
    [fn] = reward_funcs(spy, reference="solution")
    fn(prompts=["p"], completions=["a"], completion_ids=[[5, 6, 7]], solution=["s"])
    assert seen[0].reference == "s" and seen[0].metadata == {"completion_tokens": 3}


def test_a_missing_reference_column_is_a_clear_error() -> None:
    [fn] = reward_funcs(LENGTHS, reference="answer")
    with pytest.raises(RolloutError, match=r"no column 'answer'.*columns are \['solution'\]"):
        call(fn, ["p"], ["a"], solution=["x"])
    # The default column, absent: an error where a component needs a reference (every
    # rollout would fail), naming it and the fix; nothing where none does.
    math_spec = {"components": {
        "answer": {"type": "math_answer", "weight": 0.9},
        "format": {"type": "format", "preset": "think", "weight": 0.1},
    }}  # fmt: skip
    [fn] = reward_funcs(math_spec)
    with pytest.raises(MissingInput, match=r"'answer' needs a reference.*no 'reference' column"
                       r"(?s:.*)reference='answer'"):  # fmt: skip
        call(fn, ["p"], ["a"], answer=["4"])
    [fn] = reward_funcs(LENGTHS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        call(fn, ["p"], ["a"], solution=["x"])
    # A component the spec lets go without it (on_failure: omit): a warning, once.
    math_spec["components"]["answer"]["on_failure"] = "omit"  # type: ignore[index]
    [fn] = reward_funcs(math_spec)
    with pytest.warns(UserWarning, match="no 'reference' column, so answer"):
        call(fn, ["p"], ["a"], solution=["x"])
    with pytest.raises(MissingInput, match="reference=None"):
        reward_funcs({"type": "exact_match"}, reference=None)


def test_conversational_prompts_and_completions() -> None:
    seen: list[Rollout] = []

    @referee.reward(run_in="inline")  # `seen` is this process's
    def spy(rollout: Rollout) -> float:
        seen.append(rollout)
        return float(len(rollout.completion_text))

    [fn] = reward_funcs(spy)
    prompt = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    values = call(fn, [prompt], [[{"role": "assistant", "content": "hello"}]])
    assert values == [5.0]
    assert seen[0].prompt_text == "hi" and seen[0].completion_text == "hello"


def test_failures_reach_trl_as_none_and_are_logged() -> None:
    [fn] = reward_funcs({"type": "math_answer", "no_answer": "fail"})
    log = Metrics()
    values = call(
        fn, ["q"] * 3, ["\\boxed{4}", "no answer here", "\\boxed{5}"],
        reference=["4", "4", "4"], log_metric=log.log_metric, log_extra=log.log_extra,
    )  # fmt: skip
    assert values == [1.0, None, 0.0]
    assert log.metrics["referee/failures"] == [pytest.approx(1 / 3)]
    assert log.metrics["referee/failures/not_applicable"] == [pytest.approx(1 / 3)]
    failure = log.extra["referee_failure"]
    assert failure[0] is None and failure[2] is None
    assert failure[1].startswith("not_applicable")


def test_component_metrics_are_logged_once_per_batch() -> None:
    funcs = reward_funcs(LENGTHS, per_component=True)
    assert [f.__name__ for f in funcs] == ["valid", "short"] and funcs.weights == [0.5, 1.0]
    log = Metrics()
    completions = ["{}", "not json at all, and long"]
    valid, short = (
        call(f, ["p", "p"], completions, log_metric=log.log_metric, log_extra=log.log_extra)
        for f in funcs
    )
    assert valid == [1.0, 0.0]
    assert short == [0.0, pytest.approx(-1.0)]
    assert log.metrics["referee/valid/mean"] == [0.5]  # once, though two functions were called
    assert log.metrics["referee/short/mean"] == [pytest.approx(-0.5)]
    assert log.metrics["referee/failures"] == [0.0]


@referee.reward
def even(rollout: Rollout) -> float:
    """1.0 for a completion of even length: a gate that stops about half of the attempts."""
    return float(len(rollout.completion_text) % 2 == 0)


@referee.reward
def size(rollout: Rollout) -> float:
    return float(len(rollout.completion_text))


def test_a_skipped_component_is_out_of_its_mean_and_counted_as_skipped() -> None:
    """The gate stopped `size` on half the batch: its mean is over the two rollouts where it
    ran (3.0), not over four with the skipped ones as zeros (1.5)."""
    for per_component in (False, True):
        funcs = reward_funcs(referee.gate(even, size), per_component=per_component)
        log = Metrics()
        values = [
            call(f, ["p"] * 4, ["ab", "abc", "abcd", "a"],
                 log_metric=log.log_metric, log_extra=log.log_extra)
            for f in funcs
        ]  # fmt: skip
        assert log.metrics["referee/size/mean"] == [3.0]
        assert log.metrics["referee/size/skipped"] == [0.5]
        assert log.metrics["referee/even/mean"] == [0.5]
        assert log.metrics["referee/even/skipped"] == [0.0]
        assert log.metrics["referee/failures"] == [0.0]
        if per_component:  # the skipped component reaches TRL as None (masked), not as 0
            assert values[1] == [2.0, None, 4.0, None]


def test_per_component_scores_the_batch_once() -> None:
    calls: list[str] = []

    @referee.reward(run_in="inline")  # `calls` is this process's
    def counted(rollout: Rollout) -> float:
        calls.append(rollout.completion_text)
        return 1.0

    funcs = reward_funcs(referee.weighted({"a": counted, "b": counted}), per_component=True)
    completions = ["x", "y"]
    for f in funcs:
        call(f, ["p", "p"], completions)
    assert sorted(calls) == [
        "x",
        "x",
        "y",
        "y",
    ]  # once per rollout, not per function


@dataclass(kw_only=True)
class LongestWins(GroupRewardBase):
    """1 for the longest attempt of its group, 0 for the others."""

    name: str = "longest"

    async def evaluate_group(self, rollouts: Sequence[Rollout]) -> list[referee.Score]:
        longest = max(len(r.completion_text) for r in rollouts)
        return [
            referee.Score(
                1.0 if len(r.completion_text) == longest else 0.0, reason=str(len(rollouts))
            )
            for r in rollouts
        ]


def test_groups_are_found_by_prompt_not_position() -> None:
    [fn] = reward_funcs(LongestWins())
    assert asyncio.iscoroutinefunction(type(fn).__call__)  # a group reward waits: async for TRL
    prompts = ["A", "B", "A", "B", "A", "B"]  # interleaved, not in blocks of the group size
    completions = ["a", "bbbb", "aaa", "b", "aa", "bb"]
    assert call(fn, prompts, completions) == [0.0, 1.0, 1.0, 0.0, 0.0, 0.0]

    chat = [[{"role": "user", "content": "A"}], [{"role": "user", "content": "A"}]]
    assert call(fn, chat, [[{"role": "assistant", "content": c}] for c in ("x", "xx")]) == [
        0.0,
        1.0,
    ]
    # A column can say which attempts belong together instead.
    [fn] = reward_funcs(LongestWins(), group="task")
    assert call(fn, ["A", "B", "C"], ["x", "xx", "y"], task=[1, 1, 2]) == [0.0, 1.0, 1.0]


def test_a_spec_file_path_works(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text("name: shape\ntype: json_valid\n")
    [fn] = reward_funcs(str(path))
    assert fn.__name__ == "shape" and call(fn, ["p"], ["{}"]) == [1.0]


# --- a real GRPOTrainer -------------------------------------------------------------------


Batch = tuple[list[Any], list[Any]]


def train_two_steps(
    tmp_path: Path, funcs: list[Any], weights: list[float], callbacks: list[Any] | None = None
) -> tuple[list[dict[str, Any]], list[Batch]]:
    """Two real GRPOTrainer steps on the tiny model with `funcs` as its reward functions: the
    log of each step, and the batch (prompts, completions) each step scored."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    tok = tiny.tokenizer()
    batches: list[Batch] = []

    def recorder(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
        batches.append((list(prompts), list(completions)))
        return [0.0] * len(completions)

    dataset = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": f"Say e{i}"}]} for i in range(2)]
    )
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=12,
        max_steps=2,
        use_cpu=True,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        reward_weights=[*weights, 0.0],
        seed=0,
    )
    trainer = GRPOTrainer(
        model=tiny.model(tok),
        processing_class=tok,
        args=args,
        reward_funcs=[*funcs, recorder],
        train_dataset=dataset,
        callbacks=callbacks,
    )
    trainer.train()
    return trainer.state.log_history, batches


def test_grpo_trainer_runs_two_steps_with_referee_rewards(
    tmp_path: Path, judge_server: FakeJudgeServer
) -> None:
    spec = spec_with_judge(judge_server, tmp_path / "cache.sqlite")
    funcs = reward_funcs(spec)
    assert asyncio.iscoroutinefunction(type(funcs[0]).__call__)  # the judge makes it async
    log_history, batches = train_two_steps(tmp_path, funcs, funcs.weights)
    steps = [h for h in log_history if "rewards/graded/mean" in h]
    assert len(steps) == 2 and len(batches) == 2
    reward = referee.load(spec)
    for logged, (prompts, completions) in zip(steps, batches, strict=True):
        assert {"referee/valid/mean", "referee/failures"} <= set(logged)
        assert any(k.startswith("referee/judge.") for k in logged)  # the rubric's criteria
        assert logged["referee/failures"] == 0.0
        # No gate in this spec: nothing skipped, and TRL's own log says so per component.
        assert logged["referee/valid/skipped"] == logged["referee/judge/skipped"] == 0.0
        # What TRL optimised is what referee.score gives for the same completions.
        rollouts = [
            Rollout(prompt=p, completion=c, group=str(i // 4))
            for i, (p, c) in enumerate(zip(prompts, completions, strict=True))
        ]
        values = [s.value for s in referee.score(reward, rollouts)]
        assert all(v is not None for v in values)
        mean = sum(values) / len(values)  # type: ignore[arg-type]
        assert math.isclose(logged["rewards/graded/mean"], mean, rel_tol=1e-5)
    assert judge_server.requests  # the judge was really asked, over HTTP


def test_grpo_trainer_logs_a_gated_component_over_the_rollouts_it_ran_on(tmp_path: Path) -> None:
    reward = referee.gate(even, size)
    funcs = reward_funcs(reward)
    log_history, batches = train_two_steps(tmp_path, funcs, funcs.weights)
    steps = [h for h in log_history if "rewards/gate/mean" in h]
    assert len(steps) == 2 and len(batches) == 2
    for logged, (prompts, completions) in zip(steps, batches, strict=True):
        rollouts = [
            Rollout(prompt=p, completion=c) for p, c in zip(prompts, completions, strict=True)
        ]
        scores = referee.score(reward, rollouts)
        skipped = sum("size" in s.skipped for s in scores) / len(scores)
        assert logged["referee/size/skipped"] == pytest.approx(skipped)
        ran = [v for s in scores if (v := s.components.get("size")) is not None]
        if ran:  # the mean over the attempts the gate let through; the others are not zeros
            assert logged["referee/size/mean"] == pytest.approx(sum(ran) / len(ran))
        else:
            assert "referee/size/mean" not in logged
    # The gate stopped some attempts of a batch and passed others (else this shows nothing).
    assert any(0 < logged["referee/size/skipped"] < 1 for logged in steps)


def _rank_main(rank: int, world: int, port: int, out: Any) -> None:
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        [fn] = reward_funcs(LongestWins())
        # As TRL splits a batch: each process holds a slice, and groups span the slices.
        prompts = ["A", "B", "A", "B", "A", "B", "A", "B"]
        completions = ["a", "bbbb", "aaa", "b", "aa", "bb", "aaaa", "bbb"]
        half = slice(rank * 4, rank * 4 + 4)
        values = call(fn, prompts[half], completions[half])
        out.put((rank, values))
    finally:
        dist.destroy_process_group()


def test_group_rewards_see_groups_that_span_processes() -> None:
    import multiprocessing as mp
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_rank_main, args=(r, 2, port, out)) for r in range(2)]
    for p in procs:
        p.start()
    results = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    # Alone, rank 0 would see "aaa" as the longest A; with the whole group, "aaaa" (rank 1) is.
    assert results[0] == [0.0, 1.0, 0.0, 0.0]
    assert results[1] == [0.0, 0.0, 1.0, 0.0]


def test_dense_rewards_reach_trl_folded_and_their_steps_are_logged() -> None:
    from tests.support.rewards import stepped

    [fn] = reward_funcs(stepped(1.0, 0.0, 0.5))
    log = Metrics()
    values = call(fn, ["p"], ["x"], log_metric=log.log_metric, log_extra=log.log_extra)
    assert values == [0.5]  # the folded total
    assert log.metrics["referee/steps/mean"] == [0.5]
    assert log.metrics["referee/steps/per_completion"] == [3.0]
    assert log.extra["referee_steps"] == [[1.0, 0.0, 0.5]]


def test_the_monitor_logs_through_trl_and_a_stop_rule_stops_the_run(tmp_path: Path) -> None:
    """Two GRPO steps asked for; the monitor's figures land in TRL's own log, and a stop rule
    that fires at the first step ends the run there, with a checkpoint saved."""
    from referee.backends.trl import MonitorCallback
    from referee.monitor import Monitor, Rule, Rules

    rules = Rules(gap=Rule(bound=-10.0, steps=1, action="stop"))  # fires at the first step
    monitor = Monitor(gold=referee.load({"type": "contains", "value": "e"}), rules=rules)
    funcs = reward_funcs(size, monitor=monitor)
    log_history, batches = train_two_steps(tmp_path, funcs, funcs.weights,
                                           callbacks=[MonitorCallback(monitor)])  # fmt: skip
    assert len(batches) == 1 and len(monitor.history) == 1  # stopped after one step of two
    assert monitor.stopped is not None and monitor.stopped.rule == "gap"
    logged = next(h for h in log_history if "referee/monitor/reward/mean" in h)
    assert logged["referee/monitor/gap"] == monitor.history[0].gap
    assert logged["referee/monitor/alarms"] == 1.0
    assert list((tmp_path / "out").glob("checkpoint-*")), "no checkpoint was kept"
