from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import referee
from referee import Rollout
from referee.backends import verl as rv
from referee.errors import SpecError
from referee.judges.testing import FakeJudgeServer
from tests.support import tiny
from tests.support.extras import needs
from tests.support.judges import GROUPED, GROUPED_WANT, attempts, rank_spec, relative
from tests.support.verl import last_token_positions, loop_config, make_batch

pytestmark = needs("verl", reason="the verl extra is not installed (pip install 'referee[verl]')")

SPEC = {
    "name": "extract",
    "combine": "weighted",
    "components": {
        "valid": {"type": "json_schema", "schema": {"type": "object"}, "weight": 0.2,
                  "gate": True},
        "fields": {"type": "field_match", "weight": 0.8,
                   "fields": {"a": "number", "tags": "set_f1"}},
    },
}  # fmt: skip

SAMPLES = [  # (response, ground truth)
    ('{"a": 1, "tags": ["x", "y"]}', {"a": 1, "tags": ["x", "y"]}),
    ('{"a": 2, "tags": ["x"]}', {"a": 1, "tags": ["x", "y"]}),
    ("not json", {"a": 1, "tags": ["x"]}),
    ('{"a": 5}', {"a": 5, "tags": []}),
]


@pytest.fixture
def spec_path(tmp_path: Path) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(SPEC, sort_keys=False))  # in order: the gate first
    return str(path)


def expected(spec: Any, samples: list[tuple[str, Any]], **kw: Any) -> list[referee.Score]:
    rollouts = [Rollout(completion=r, reference=gt, **kw) for r, gt in samples]
    return referee.score(referee.load(spec), rollouts)


def test_compute_score_has_fixed_keys_and_referee_values(spec_path: str) -> None:
    results = [
        rv.compute_score("extraction", r, gt, {"index": i}, spec=spec_path)
        for i, (r, gt) in enumerate(SAMPLES)
    ]
    keys = {"score", "referee_failed", "referee/valid", "referee/fields",
            "referee/valid/skipped", "referee/fields/skipped"}  # fmt: skip
    assert all(set(r) == keys for r in results)
    assert [r["score"] for r in results] == [s.value for s in expected(SPEC, SAMPLES)]
    assert results[2] == {
        "score": 0.0,
        "referee_failed": 0.0,
        "referee/valid": 0.0,
        "referee/valid/skipped": 0.0,
        "referee/fields": None,  # gated: fields never ran, so it has no value (it read 0.0)
        "referee/fields/skipped": 1.0,
    }  # fmt: skip
    for r in results:
        assert all(isinstance(v, float) for k, v in r.items() if r.get(f"{k}/skipped") != 1.0)


def test_parquet_shapes_numpy_arrays_are_plain_values(spec_path: str) -> None:
    gt = {"a": np.int64(1), "tags": np.array(["x", "y"], dtype=object)}
    info = {"index": np.int64(3), "prompt": np.array([{"role": "user", "content": "hi"}])}
    result = rv.compute_score("extraction", SAMPLES[0][0], gt, info, spec=spec_path)
    assert result["score"] == 1.0
    rollout = rv.rollout_from_verl("extraction", "x", gt, info)
    assert rollout.reference == {"a": 1, "tags": ["x", "y"]} and rollout.id == "3"
    assert rollout.prompt_text == "hi" and rollout.metadata["data_source"] == "extraction"


def test_a_failure_gives_the_fallback_value_and_the_flag(spec_path: str) -> None:
    spec = {"type": "math_answer", "no_answer": "fail"}
    result = rv.compute_score("math", "no boxed answer", "4", None, spec=spec, failure_value=-1.0)
    assert result == {"score": -1.0, "referee_failed": 1.0}
    assert rv.compute_score("math", "\\boxed{4}", "4", None, spec=spec) == {
        "score": 1.0,
        "referee_failed": 0.0,
    }


def test_compute_score_async_gives_the_same(spec_path: str) -> None:
    for r, gt in SAMPLES:
        sync = rv.compute_score("x", r, gt, None, spec=spec_path)
        assert asyncio.run(rv.compute_score_async("x", r, gt, None, spec=spec_path)) == sync


DEMO_MATH = Path(referee.__file__).parent / "data" / "demo" / "math.yaml"

# A user's script, as a new user writes one: no ``if __name__ == "__main__"`` guard. Its
# top-level code writes a line to `ran` each time it runs. math_answer's old pool was a
# multiprocessing forkserver, which imports the main script again (and so ran it again, its
# own compute_score_async calls failing inside): every door but this one gave 1.0.
_SCRIPT = """
import asyncio, json, sys, time
from referee.backends.verl import compute_score, compute_score_async

spec, rows, ran = sys.argv[1], sys.argv[2], sys.argv[3]
with open(ran, "a") as fh:
    fh.write("ran\\n")
rows = [json.loads(line) for line in open(rows)]

async def gathered():
    return await asyncio.gather(*(compute_score_async(None, r["completion"], r["reference"],
                                                      spec=spec) for r in rows))

out = {"sync": [compute_score(None, r["completion"], r["reference"], spec=spec) for r in rows]}
start = time.monotonic()
out["one_by_one"] = [asyncio.run(compute_score_async(None, r["completion"], r["reference"],
                                                     spec=spec)) for r in rows]
out["gathered"] = asyncio.run(gathered())
out["seconds"] = time.monotonic() - start
print(json.dumps(out))
"""


def test_compute_score_async_pays_math_from_an_unguarded_script(tmp_path: Path) -> None:
    import subprocess
    import sys

    rows = tmp_path / "rows.jsonl"
    demo = DEMO_MATH.with_suffix(".jsonl").read_text().splitlines()[:8]
    rows.write_text("\n".join(demo) + "\n")
    script, ran = tmp_path / "train.py", tmp_path / "ran.txt"
    script.write_text(_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), str(DEMO_MATH), str(rows), str(ran)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert ran.read_text() == "ran\n"  # the script ran once: no worker imported it again
    assert [r["referee_failed"] for r in out["sync"]] == [0.0] * len(demo)
    assert {r["score"] for r in out["sync"]} >= {1.0, 0.0}  # varied: right and wrong answers
    assert out["one_by_one"] == out["sync"]
    assert out["gathered"] == out["sync"]
    assert out["seconds"] < 60  # bounded (each call took 10 s and failed before)


def test_reward_loop_pays_math_on_ray(tmp_path: Path, local_ray: None) -> None:
    """The README's verl path (compute_score_async in verl's reward loop, on Ray) on the demo
    math spec: a Ray worker's main module is Ray's own, which the old forkserver imported."""
    from verl.experimental.reward_loop import RewardLoopManager

    rows = [json.loads(line) for line in DEMO_MATH.with_suffix(".jsonl").read_text().splitlines()]
    samples = [(r["completion"], r["reference"]) for r in rows[:6]]
    config = loop_config(tmp_path, {}, {"spec": str(DEMO_MATH)}, n=1, workers=1)
    batch = make_batch(tiny.tokenizer(), [(r["prompt"], c, gt) for r, (c, gt) in
                                          zip(rows, samples, strict=False)],
                       prompt_len=64, response_len=128)  # fmt: skip
    out = RewardLoopManager(config).compute_rm_score(batch)
    want = [s.value for s in expected(str(DEMO_MATH), samples)]
    scores = out.batch["rm_scores"]
    got = [scores[i, pos].item() for i, pos in enumerate(last_token_positions(batch))]
    assert got == pytest.approx(want)
    assert list(out.non_tensor_batch["referee_failed"]) == [0.0] * len(samples)


def test_missing_spec_and_group_specs_are_clear_errors() -> None:
    with pytest.raises(SpecError, match=r"reward_kwargs=\{spec:"):
        rv.compute_score("x", "y", None, None)
    group = {"type": "group_rank", "model": "openai/j", "api_base": "http://127.0.0.1:9"}
    with pytest.raises(SpecError, match="RefereeRewardLoopManager"):
        rv.compute_score("x", "y", None, None, spec=group)
    # A group reward nested in another reward is still one (the guard walked only
    # combinations and transforms, so this spec was scored one sample at a time).
    nested = {"type": "final_answer", "reward": group}
    with pytest.raises(SpecError, match="RefereeRewardLoopManager"):
        rv.compute_score("x", "y", None, None, spec=nested)


def test_an_inline_spec_is_loaded_once_not_per_sample() -> None:
    """Hydra hands reward_kwargs' spec as a DictConfig with every sample: one reward for it,
    so a judge keeps its client and cache (it was loaded anew per sample)."""
    from omegaconf import OmegaConf

    spec = {"combine": "weighted", "components": {
        "valid": {"type": "json_valid", "weight": 0.5},
        "name": {"type": "field_match", "fields": {"name": "exact"}, "weight": 0.5}}}  # fmt: skip
    first = rv.reward_for(OmegaConf.create(spec), door=rv.manager_door(per_turn=True))
    assert (
        rv.reward_for(
            OmegaConf.create(json.loads(json.dumps(spec))), door=rv.manager_door(per_turn=True)
        )
        is first
    )
    # Nested lists arrive as ListConfig: plain lists by the time the spec is loaded
    markers = OmegaConf.create({"type": "tool_use", "error_markers": ["fail", "oops"]})
    assert rv.reward_for(markers, door=rv.manager_door(per_turn=True)).error_markers == [
        "fail",
        "oops",
    ]  # type: ignore[attr-defined]
    got = rv.compute_score("x", '{"name": "Bo"}', '{"name": "Ada"}', None,
                           spec=OmegaConf.create(spec))  # fmt: skip
    [want] = referee.score(referee.load(spec), [Rollout(completion='{"name": "Bo"}',
                                                        reference={"name": "Ada"})])  # fmt: skip
    assert got["score"] == want.value == 0.5


# --- real DataProto batches -------------------------------------------------------------


def test_legacy_naive_reward_manager_with_compute_score(spec_path: str) -> None:
    from verl.workers.reward_manager import NaiveRewardManager

    tok = tiny.tokenizer()
    batch = make_batch(tok, [("Extract:", r, gt) for r, gt in SAMPLES])
    score_fn = partial(rv.compute_score, spec=spec_path)
    manager = NaiveRewardManager(tok, num_examine=0, compute_score=score_fn)
    out = manager(batch, return_dict=True)
    tensor, extra = out["reward_tensor"], out["reward_extra_info"]
    want = [s.value for s in expected(SPEC, SAMPLES)]
    for i, pos in enumerate(last_token_positions(batch)):
        assert tensor[i, pos].item() == pytest.approx(want[i])
        assert tensor[i].count_nonzero().item() == (1 if want[i] else 0)  # only the last token
    assert set(extra) == {"score", "referee_failed", "referee/valid", "referee/fields",
                          "referee/valid/skipped", "referee/fields/skipped"}  # fmt: skip
    assert extra["score"] == pytest.approx(want)


def test_validation_metrics_average_a_gated_component_where_it_ran(spec_path: str) -> None:
    """verl's validation metrics from referee's extra info: a component a gate skipped (None)
    is left out of its mean, where a 0.0 dragged it down and a NaN would make it NaN."""
    from verl.trainer.ppo.metric_utils import process_validation_metrics

    tok = tiny.tokenizer()
    batch = make_batch(tok, [("Extract:", r, gt) for r, gt in SAMPLES])
    extra = rv.RefereeRewardManager(tok, spec=spec_path)(batch, return_dict=True)
    infos = extra["reward_extra_info"]
    # As verl's trainer holds them: numpy arrays in the batch, lists again for the metrics.
    batch.non_tensor_batch.update({k: np.array(v) for k, v in infos.items()})
    infos = {k: batch.non_tensor_batch[k].tolist() for k in infos}
    metrics = process_validation_metrics(["x"] * len(SAMPLES), ["u"] * len(SAMPLES), infos)["x"]
    ran = [v for s in expected(SPEC, SAMPLES) if (v := s.components.get("fields")) is not None]
    assert len(ran) == 3  # the sample that is not JSON never reached `fields`
    n = len(SAMPLES)
    assert metrics["referee/fields"][f"mean@{len(ran)}"] == pytest.approx(sum(ran) / len(ran))
    assert metrics["referee/fields/skipped"][f"mean@{n}"] == pytest.approx(1 / n)
    assert metrics["score"][f"mean@{n}"] == pytest.approx(
        sum(s.value or 0.0 for s in expected(SPEC, SAMPLES)) / n
    )


# --- group rewards: a scripted judge that ranks within the group it is shown ----------------


@pytest.fixture(scope="module")
def ranking_server() -> Iterator[FakeJudgeServer]:
    with FakeJudgeServer(relative) as server:
        yield server


def test_legacy_referee_manager_scores_whole_groups_by_uid(
    tmp_path: Path, ranking_server: FakeJudgeServer
) -> None:
    tok = tiny.tokenizer()
    batch = make_batch(tok, [(q, r, None) for q, r, _ in GROUPED], uids=[g for *_, g in GROUPED])
    manager = rv.RefereeRewardManager(tok, spec=rank_spec(ranking_server))
    out = manager(batch, return_dict=True)
    positions = last_token_positions(batch)
    got = [out["reward_tensor"][i, p].item() for i, p in enumerate(positions)]
    assert got == pytest.approx(GROUPED_WANT)
    assert out["reward_extra_info"]["referee_failed"] == [0.0] * len(GROUPED)


# --- verl's reward loop on local Ray ----------------------------------------------------------


@pytest.mark.slow
def test_reward_loop_with_compute_score_async(
    tmp_path: Path, spec_path: str, local_ray: None
) -> None:
    from verl.experimental.reward_loop import RewardLoopManager

    config = loop_config(tmp_path, {}, {"spec": spec_path}, n=1, workers=2)
    tok = tiny.tokenizer()
    batch = make_batch(tok, [("Extract:", r, gt) for r, gt in SAMPLES])
    out = RewardLoopManager(config).compute_rm_score(batch)
    want = [s.value for s in expected(SPEC, SAMPLES)]
    scores = out.batch["rm_scores"]
    for i, pos in enumerate(last_token_positions(batch)):
        assert scores[i, pos].item() == pytest.approx(want[i])
        assert scores[i].count_nonzero().item() == (1 if want[i] else 0)
    assert set(out.meta_info["reward_extra_keys"]) == {
        "score", "referee_failed", "referee/valid", "referee/fields",
        "referee/valid/skipped", "referee/fields/skipped"
    }  # fmt: skip
    scores = expected(SPEC, SAMPLES)
    fields = [s.components.get("fields") for s in scores]  # None where the gate stopped it
    assert list(out.non_tensor_batch["referee/fields"]) == fields
    skipped = [float("fields" in s.skipped) for s in scores]
    assert list(out.non_tensor_batch["referee/fields/skipped"]) == skipped


@pytest.mark.slow
def test_reward_loop_manager_meets_groups_across_workers(
    tmp_path: Path, ranking_server: FakeJudgeServer, local_ray: None
) -> None:
    from verl.experimental.reward_loop import RewardLoopManager

    manager = {"source": "importlib", "name": "RefereeRewardLoopManager",
               "module": {"path": "pkg://referee.backends.verl", "name": None}}  # fmt: skip
    # Three workers, nine interleaved samples: each worker gets three, from different groups.
    # (Nine over three: verl pads no copy in. A batch it pads is the open case of
    # tests/backends/test_cohort.py::test_a_padding_copy_does_not_stand_in_for_a_real_member.)
    config = loop_config(tmp_path, manager, {"spec": rank_spec(ranking_server)}, n=3, workers=3)
    tok = tiny.tokenizer()
    batch = make_batch(tok, [(q, r, None) for q, r, _ in GROUPED], uids=[g for *_, g in GROUPED])
    out = RewardLoopManager(config).compute_rm_score(batch)
    positions = last_token_positions(batch)
    got = [out.batch["rm_scores"][i, p].item() for i, p in enumerate(positions)]
    assert got == pytest.approx(GROUPED_WANT)
    assert sorted(len(attempts(r)) for r in ranking_server.requests[-3:]) == [3, 3, 3]


def test_group_collector_late_copies_stragglers_and_timeouts(
    ranking_server: FakeJudgeServer, caplog: pytest.LogCaptureFixture
) -> None:
    collector = rv.GroupCollector(rank_spec(ranking_server), timeout=0.5)

    def member(text: str, uid: str = "g") -> dict[str, Any]:
        return Rollout(completion=text, prompt="Q", group=uid).model_dump()

    async def run() -> list[list[float]]:
        whole = await asyncio.gather(*(collector.submit(member(t), 3) for t in ("x", "xxx", "xx")))
        copy = await collector.submit(member("x"), 3)  # verl's padding: a copy, after the fact
        straggler = await collector.submit(member("xxxx"), 3)  # its group closed without it
        partial = await asyncio.gather(*(collector.submit(member(t, "h"), 3) for t in ("y", "yy")))
        return [[d["reward"] for d in part] for part in (whole, [copy], [straggler], partial)]

    with caplog.at_level("WARNING", logger="referee.cohort"):
        whole, copy, straggler, partial = asyncio.run(run())
    assert whole == [0.0, 1.0, 0.5] and copy == [0.0]
    assert straggler == [1.0]  # ranked with the group it missed (the longest: 1.0), not alone
    assert partial == [0.0, 1.0]  # scored with what arrived, after the timeout
    assert "group 'h' scored with 2 of 3 members after 0.5 s" in caplog.text


# --- several turns in one response: per-turn rewards at each turn's last token ---------------


def test_per_turn_rewards_sit_at_the_end_of_each_turn(spec_path: str) -> None:
    import torch
    from verl import DataProto

    tok = tiny.tokenizer()
    pad = tok.pad_token_id
    parameters = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": parameters}}]
    turn1 = 'Let me look.<tool_call>{"name": "lookup", "arguments": {"q": "x"}}</tool_call>'
    tool_out = "Error: service down"
    turn2 = "It is 4."
    segments = [(turn1, 1), (tool_out, 0), (turn2, 1)]
    prompt = tok("Find x.", add_special_tokens=False).input_ids
    response: list[int] = []
    mask: list[int] = []
    for text, generated in segments:
        ids = tok(text, add_special_tokens=False).input_ids
        response += ids
        mask += [generated] * len(ids)
    width = len(response) + 5
    tensors = {
        "prompts": torch.tensor([prompt]),
        "responses": torch.tensor([response + [pad] * 5]),
        "response_mask": torch.tensor([mask + [0] * 5]),
        "attention_mask": torch.tensor([[1] * len(prompt) + [1] * len(response) + [0] * 5]),
    }
    tensors["input_ids"] = torch.cat([tensors["prompts"], tensors["responses"]], dim=1)
    non_tensors = {
        "data_source": np.array(["agent"], dtype=object),
        "reward_model": np.array([{"ground_truth": "4"}], dtype=object),
        "extra_info": np.array([{"index": 0, "tools": tools}], dtype=object),
    }
    batch = DataProto.from_dict(tensors=tensors, non_tensors=non_tensors)
    manager = rv.RefereeRewardManager(tok, spec={"type": "tool_use"}, per_turn=True)
    out = manager(batch, return_dict=True)
    row = out["reward_tensor"][0]
    end1 = len(tok(turn1, add_special_tokens=False).input_ids) - 1
    end2 = len(response) - 1
    assert row[end1].item() == 0.5  # the call got an error back
    assert row[end2].item() == 1.0  # the answer turn
    assert row.count_nonzero().item() == 2 and row.shape[0] == width
    assert out["reward_extra_info"]["score"] == [0.75]  # the folded total (mean), for logging
    # Without per_turn the response is text, where a trajectory reward sees no call: refused.
    with pytest.raises(SpecError, match="per_turn"):
        rv.RefereeRewardManager(tok, spec={"type": "tool_use"})


def test_per_turn_reads_a_single_turn_tool_call() -> None:
    # One model turn that calls a tool (no tool output in the response): its <tool_call> was
    # left as text, so tool_call_match found no call and paid 0.
    tok = tiny.tokenizer()
    call = '<tool_call>{"name": "lookup", "arguments": {"q": "x"}}</tool_call>'
    reference = json.dumps([{"lookup": {"q": ["x"]}}])  # BFCL's possible answers
    batch = make_batch(tok, [("Find x.", call, reference)], response_len=160)
    parameters = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    tool = {"type": "function", "function": {"name": "lookup", "parameters": parameters}}
    batch.non_tensor_batch["extra_info"][0]["tools"] = [tool]
    manager = rv.RefereeRewardManager(tok, spec={"type": "tool_call_match"}, per_turn=True)
    out = manager(batch, return_dict=True)
    assert out["reward_extra_info"]["score"] == [1.0]
    assert out["reward_extra_info"]["referee_failed"] == [0.0]


# --- what verl's own path cannot carry: refused when the spec loads -----------------------


def test_compute_score_refuses_what_verl_does_not_pass() -> None:
    tokens = {"type": "length", "max_length": 10, "cache_length": 5}
    with pytest.raises(SpecError, match="token count") as refused:
        rv.compute_score("x", "some answer", None, {"index": 0}, spec=tokens)
    assert "RefereeRewardLoopManager" in str(refused.value)
    # A script that passes the count gets it scored.
    got = rv.compute_score("x", "a", None, {"completion_tokens": 8}, spec=tokens)
    assert got["score"] == pytest.approx(-0.6) and got["referee_failed"] == 0.0
    with pytest.raises(SpecError, match="chat messages"):
        rv.compute_score("x", "text", None, None, spec={"type": "tool_use"})
    messages = [{"role": "assistant", "content": "done"}]
    optional = {"type": "tool_use", "no_calls": 1.0}  # a trajectory without calls, paid
    assert rv.compute_score("x", messages, None, None, spec=optional)["score"] == 1.0


def test_referee_managers_count_the_response_tokens() -> None:
    tok = tiny.tokenizer()
    texts = ["a b", "a b c d e f g h i j k l"]
    batch = make_batch(tok, [("Q", t, None) for t in texts])
    counts = [len(tok(t, add_special_tokens=False).input_ids) for t in texts]
    spec = {"type": "length", "max_length": counts[1] - 1, "cache_length": 0}
    out = rv.RefereeRewardManager(tok, spec=spec)(batch, return_dict=True)
    assert out["reward_extra_info"]["score"] == [0.0, -1.0]  # within, and over by one


def test_the_reward_function_loads_without_verl_and_the_managers_with_it() -> None:
    # compute_score needs neither verl nor torch (their import costs a script seconds); the
    # managers, named as verl's importlib loader names them, load verl and register by name.
    import subprocess
    import sys

    script = (
        "import sys\n"
        "import referee.backends.verl as v\n"
        "assert 'torch' not in sys.modules and 'verl' not in sys.modules, 'loaded eagerly'\n"
        "got = v.compute_score('math', '\\\\boxed{2}', '2', spec={'type': 'math_answer'})\n"
        "assert got['score'] == 1.0 and 'torch' not in sys.modules, got\n"
        "manager = v.RefereeRewardLoopManager\n"
        "from verl.experimental.reward_loop.reward_manager import registry\n"
        "assert registry.REWARD_MANAGER['referee'] is manager\n"
        "from verl.workers.reward_manager import registry as legacy\n"
        "assert legacy.REWARD_MANAGER_REGISTRY['referee'] is v.RefereeRewardManager\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_batch_manager_runs_the_monitor_and_a_stop_rule_ends_the_run(tmp_path: Path) -> None:
    # Two groups of two attempts a step; from step 11 every attempt gives the right answer,
    # so no group varies: the stop rule (2 steps past 0.5) fires at step 12, verl's step.
    from referee.errors import MonitorStopped

    timeline = tmp_path / "monitor.jsonl"
    rules = {"zero_variance": {"bound": 0.5, "steps": 2, "action": "stop"}}
    manager = rv.RefereeRewardManager(
        tiny.tokenizer(), spec={"type": "contains"},
        monitor={"rules": rules, "timeline": str(timeline)},
    )  # fmt: skip
    tok = tiny.tokenizer()
    for step in (10, 11):
        answers = ["4", "5", "4", "5"] if step == 10 else ["4"] * 4
        batch = make_batch(tok, [("2+2?", a, "4") for a in answers], uids=["a", "a", "b", "b"])
        batch.meta_info["global_steps"] = step
        extra = manager(batch, return_dict=True)["reward_extra_info"]
        assert extra["referee/monitor/zero_variance"] == [0.0 if step == 10 else 1.0] * 4
    batch.meta_info["global_steps"] = 12
    with pytest.raises(MonitorStopped, match="step 12: rule zero_variance") as stopped:
        manager(batch, return_dict=True)
    assert (stopped.value.rule, stopped.value.step) == ("zero_variance", 12)
    lines = [json.loads(line) for line in timeline.read_text().splitlines()]
    assert [line["step"] for line in lines] == [10, 11, 12]
    assert [a["rule"] for line in lines for a in line["alarms"]] == ["zero_variance"]
    assert lines[0]["figures"]["reward"]["mean"] == 0.5


def test_the_reward_loop_refuses_a_monitor_rather_than_ignoring_it(tmp_path: Path) -> None:
    config = loop_config(tmp_path, {}, {"spec": {"type": "contains"}, "monitor": {}}, n=1,
                         workers=1)  # fmt: skip
    with pytest.raises(SpecError, match=r"reward_kwargs\.monitor: the reward loop"):
        rv.RefereeRewardLoopManager(config, tiny.tokenizer(), compute_score=None)


def test_a_monitor_option_that_is_wrong_is_named() -> None:
    with pytest.raises(
        SpecError, match=r"reward_kwargs.monitor: unknown option\(s\) \['gold_spec'\]"
    ):
        rv.RefereeRewardManager(tiny.tokenizer(), spec={"type": "contains"},
                                monitor={"gold_spec": "x.yaml"})  # fmt: skip
