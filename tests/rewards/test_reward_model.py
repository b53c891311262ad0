"""``reward_model``: the numbers of a direct transformers forward (as TRL's GRPOTrainer makes
it), whatever the batching; the length rule; normalisation; pickling; deadlines; the
served protocols over real HTTP; and what the report and the probes see of it. CPU only."""

from __future__ import annotations

import asyncio
import json
import math
import pickle
import threading
from pathlib import Path
from typing import Any

import pytest

import referee
from referee import Rollout
from referee._aio import run_sync
from referee.models import loading
from referee.models.testing import FakeRewardServer, Fault, tiny_model
from referee.report.diagnostics import ReportRow, build_report
from referee.report.probes import run_probes
from referee.reward import needs_groups
from referee.rewards import GroupRewardModel, RewardModel
from tests.support.extras import needs

pytestmark = needs("torch", "transformers", reason="the reward model's libraries are not installed")

TOL = 1e-5
PROMPT = [{"role": "system", "content": "w1 w2"}, {"role": "user", "content": "w3 w4 w5"}]


@pytest.fixture(scope="session")
def rm_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_model(tmp_path_factory.mktemp("rm") / "model", max_position=1024)


@pytest.fixture(scope="session")
def direct(rm_path: Path) -> Any:
    """TRL's GRPOTrainer's own computation, on its own copy of the model."""
    import torch
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(rm_path)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        rm_path, dtype=torch.float32
    ).eval()

    def forward(texts: list[str]) -> list[float]:
        inputs = tokenizer(text=texts, return_tensors="pt", padding=True, padding_side="right",
                           add_special_tokens=False)  # fmt: skip
        with torch.inference_mode():
            return [float(v) for v in model(**inputs).logits[:, 0]]

    def ids(ids: list[int]) -> float:
        with torch.inference_mode():
            return float(model(input_ids=torch.tensor([ids])).logits[0, 0])

    forward.tokenizer = tokenizer  # type: ignore[attr-defined]
    forward.ids = ids  # type: ignore[attr-defined]
    return forward


def text(n: int, start: int = 0) -> str:
    return " ".join(f"w{(start + i) % 400}" for i in range(n))


def reward(path: Path | str, **options: Any) -> referee.Reward:
    return referee.load({"type": "reward_model", "model": str(path), **options})


def values(scores: list[referee.Score]) -> list[float]:
    assert all(s.value is not None for s in scores), [s.failure for s in scores]
    return [s.value for s in scores]  # type: ignore[misc]


# --- the numbers -------------------------------------------------------------------------------


def test_text_rollouts_score_as_a_direct_forward_of_prompt_plus_completion(
    rm_path: Path, direct: Any
) -> None:
    rollouts = [Rollout(prompt=text(5, i), completion=" " + text(3 + 7 * i, 50)) for i in range(6)]
    got = values(referee.score(reward(rm_path), rollouts))
    want = direct([r.prompt + r.completion for r in rollouts])  # type: ignore[operator]
    assert got == pytest.approx(want, abs=TOL)
    scores = referee.score(reward(rm_path), rollouts)
    assert [s.components["raw"] for s in scores] == pytest.approx(want, abs=TOL)


def test_chat_rollouts_go_through_the_chat_template_as_trl_applies_it(
    rm_path: Path, direct: Any
) -> None:
    data_utils = pytest.importorskip("trl.data_utils")
    completions = [text(4), text(9, 100), ""]
    rollouts = [Rollout(prompt=PROMPT, completion=c) for c in completions]  # type: ignore[arg-type]
    # TRL: apply_chat_template({"messages": prompt + completion}, reward_tokenizer)["text"]
    texts = [
        data_utils.apply_chat_template(
            {"messages": [*PROMPT, {"role": "assistant", "content": c}]}, direct.tokenizer
        )["text"]
        for c in completions
    ]
    assert "<|im_start|>assistant\n" in texts[0]
    assert values(referee.score(reward(rm_path), rollouts)) == pytest.approx(direct(texts), abs=TOL)


def test_a_completion_given_as_messages_is_a_conversation(rm_path: Path, direct: Any) -> None:
    turns = [{"role": "assistant", "content": "w7 w8"}, {"role": "tool", "content": "w9"},
             {"role": "assistant", "content": "w10"}]  # fmt: skip
    rollout = Rollout(prompt="w1 w2", completion=turns)  # type: ignore[arg-type]
    messages = [{"role": "user", "content": "w1 w2"}, *turns]
    want = direct([direct.tokenizer.apply_chat_template(messages, tokenize=False)])
    assert values(referee.score(reward(rm_path), [rollout])) == pytest.approx(want, abs=TOL)


def test_template_chat_renders_a_text_rollout_as_one_exchange(rm_path: Path, direct: Any) -> None:
    rollout = Rollout(prompt="w1 w2", completion="w3")
    chat = direct.tokenizer.apply_chat_template(
        [{"role": "user", "content": "w1 w2"}, {"role": "assistant", "content": "w3"}],
        tokenize=False,
    )
    got = values(referee.score(reward(rm_path, template="chat"), [rollout]))
    assert got == pytest.approx(direct([chat]), abs=TOL)


def test_batching_and_sorting_do_not_change_any_value(rm_path: Path) -> None:
    # lengths from 1 to 300 words, shuffled; batches of at most 600 padded tokens
    rollouts = [Rollout(id=str(i), prompt="w1", completion=" " + text((i * 37) % 300 + 1, i))
                for i in range(40)]  # fmt: skip
    alone = [values(referee.score(reward(rm_path), [r]))[0] for r in rollouts]
    for options in ({"batch_tokens": 600}, {"max_batch": 1}, {"batch_tokens": 100_000}):
        together = values(referee.score(reward(rm_path, **options), rollouts))
        assert together == pytest.approx(alone, abs=TOL), options
    backwards = values(referee.score(reward(rm_path, batch_tokens=600), rollouts[::-1]))
    assert backwards[::-1] == pytest.approx(alone, abs=TOL)


# --- the length rule ---------------------------------------------------------------------------


def test_an_input_past_max_length_fails_or_is_cut_on_the_left(rm_path: Path, direct: Any) -> None:
    long = Rollout(prompt=text(20), completion=" " + text(60, 200))
    [failed] = referee.score(reward(rm_path, max_length=32), [long])
    assert failed.failure is not None and failed.failure.type == "not_applicable"
    assert "80 tokens, over max_length (32)" in failed.failure.message

    [cut] = referee.score(reward(rm_path, max_length=32, overflow="truncate_left"), [long])
    ids = direct.tokenizer(long.prompt + long.completion, add_special_tokens=False)["input_ids"]  # type: ignore[operator]
    assert cut.value == pytest.approx(direct.ids(ids[-32:]), abs=TOL)
    assert "cut by 48 tokens on the left" in (cut.reason or "")


def test_the_model_limit_applies_when_max_length_is_not_set(rm_path: Path) -> None:
    [over] = referee.score(reward(rm_path), [Rollout(completion=text(1100))])  # limit 1024
    assert over.failure is not None and "over max_length (1024)" in over.failure.message


def test_a_huge_completion_is_refused_without_tokenizing(rm_path: Path) -> None:
    huge = Rollout(completion="w1 " * 3_000_000)
    [refused] = referee.score(reward(rm_path, max_length=64), [huge])
    assert refused.failure is not None and "without tokenizing" in refused.failure.message
    [cut] = referee.score(reward(rm_path, max_length=64, overflow="truncate_left"), [huge])
    assert cut.value is not None


def test_empty_completions(rm_path: Path, direct: Any) -> None:
    prompt_only, nothing = referee.score(
        reward(rm_path), [Rollout(prompt="w1 w2", completion=""), Rollout(completion="")]
    )
    assert prompt_only.value == pytest.approx(direct(["w1 w2"])[0], abs=TOL)
    assert nothing.failure is not None and nothing.failure.type == "not_applicable"
    assert "empty" in nothing.failure.message


def test_one_bad_rollout_fails_alone(rm_path: Path) -> None:
    scores = referee.score(
        reward(rm_path, max_length=16),
        [Rollout(completion="w1"), Rollout(completion=text(40)), Rollout(completion="\udcff w2")],
    )
    assert scores[0].value is not None and scores[2].value is not None  # a lone surrogate: U+FFFD
    assert scores[1].failure is not None and scores[1].failure.type == "not_applicable"


# --- normalisation ----------------------------------------------------------------------------


def test_sigmoid_keeps_the_raw_score_as_a_component(rm_path: Path) -> None:
    rollouts = [Rollout(completion=text(5, i)) for i in range(4)]
    raw = values(referee.score(reward(rm_path), rollouts))
    scores = referee.score(reward(rm_path, normalize="sigmoid"), rollouts)
    assert values(scores) == pytest.approx([1 / (1 + math.exp(-r)) for r in raw], abs=1e-12)
    assert [s.components["raw"] for s in scores] == raw


def test_group_z_is_a_group_reward_that_z_scores_within_each_group(rm_path: Path) -> None:
    rm = reward(rm_path, normalize="group_z")
    assert isinstance(rm, GroupRewardModel) and needs_groups(rm)
    assert not needs_groups(reward(rm_path))
    with pytest.warns(DeprecationWarning, match="build GroupRewardModel"):  # deprecated form
        assert isinstance(RewardModel(model=str(rm_path), normalize="group_z"), GroupRewardModel)
    rollouts = [Rollout(group=g, completion=text(3 + i, 10 * i)) for g in "ab" for i in range(4)]
    rollouts += [Rollout(group="alone", completion="w1"), Rollout(group="a", completion="")]
    scores = referee.score(rm, rollouts)
    raw = [s.components.get("raw") for s in scores]
    for members in (range(0, 4), range(4, 8)):
        group = [raw[i] for i in members]
        mean = sum(group) / 4  # type: ignore[arg-type]
        std = math.sqrt(sum((v - mean) ** 2 for v in group) / 4)  # type: ignore[operator]
        assert [scores[i].value for i in members] == pytest.approx(
            [(v - mean) / std for v in group],
            abs=1e-9,  # type: ignore[operator]
        )
    assert scores[8].value == 0.0  # a group of one
    assert scores[9].failure is not None  # the empty one fails alone; the others are its group
    assert run_sync(rm.score(rollouts[0])).value == 0.0  # type: ignore[union-attr]
    # score_group: one group, whatever the rollouts' group ids say
    pair = run_sync(rm.score_group([rollouts[0], rollouts[5]]))  # type: ignore[attr-defined]
    assert sorted(s.value for s in pair) == pytest.approx([-1.0, 1.0])


def test_a_gated_group_z_reward_model_as_the_readme_writes_it(rm_path: Path) -> None:
    spec = {
        "combine": "weighted",
        "components": {
            "format": {"type": "format", "preset": "think_answer", "gate": True, "weight": 0},
            "rm": {"type": "reward_model", "model": str(rm_path), "normalize": "group_z"},
        },
    }
    reward_ = referee.load(spec)
    assert needs_groups(reward_)
    good = [f"<think>{text(3, i)}</think><answer>w{i}</answer>" for i in range(3)]
    rollouts = [Rollout(group="g", completion=c) for c in [*good, "no format"]]
    scores = referee.score(reward_, rollouts)
    assert scores[3].value == 0.0 and scores[3].skipped == ("rm",)
    z = [s.components["rm"] for s in scores[:3]]
    assert sum(z) == pytest.approx(0.0, abs=1e-9)  # z-scored among the three that passed
    assert all("rm.raw" in s.components for s in scores[:3])


# --- pickling ----------------------------------------------------------------------------------


def test_pickling_carries_the_options_not_the_model(rm_path: Path) -> None:
    rm = RewardModel(model=str(rm_path), normalize="sigmoid")
    rm.load()
    data = pickle.dumps(rm)
    assert len(data) < 2_000 and b"torch" not in data
    clone = pickle.loads(data)
    assert clone == rm
    rollouts = [Rollout(completion=text(4))]
    assert referee.score(clone, rollouts) == referee.score(rm, rollouts)
    group = pickle.loads(pickle.dumps(GroupRewardModel(model=str(rm_path))))
    assert isinstance(group, GroupRewardModel)


def test_single_scores_made_at_once_share_one_forward(rm_path: Path) -> None:
    rm = RewardModel(model=str(rm_path))
    calls: list[int] = []
    hook = rm.load().model.register_forward_hook(lambda m, args, out: calls.append(1))
    try:
        rollouts = [Rollout(completion=text(3 + i)) for i in range(12)]

        async def each() -> list[referee.Score]:
            return list(await asyncio.gather(*(rm.score(r) for r in rollouts)))

        singly = run_sync(each())
        assert len(calls) == 1
        assert values(singly) == pytest.approx(values(referee.score(rm, rollouts)), abs=TOL)
    finally:
        hook.remove()


def test_the_deadline_bounds_a_batch_and_the_model_goes_on_after(rm_path: Path) -> None:
    rm = RewardModel(model=str(rm_path))
    rm.timeout = 0.3
    held = loading.shared(rm._model_spec())
    release = threading.Event()
    held.executor.submit(release.wait, 30)  # the model's thread is busy
    try:
        scores = referee.score(rm, [Rollout(completion="w1"), Rollout(completion="w2")])
    finally:
        release.set()
    assert all(s.failure is not None and s.failure.type == "timeout" for s in scores)
    assert "ran past its deadline" in scores[0].failure.message  # type: ignore[union-attr]
    assert referee.score(rm, [Rollout(completion="w1")])[0].value is not None


def test_default_deadlines(rm_path: Path) -> None:
    assert RewardModel(model=str(rm_path)).deadline_seconds == 600.0
    served = RewardModel(api_base="http://127.0.0.1:9", request_timeout=10, retries=1,
                         max_backoff=5)  # fmt: skip
    assert served.deadline_seconds == 2 * 15 + 5
    assert (
        referee.load({"type": "reward_model", "model": str(rm_path), "timeout": 7}).deadline_seconds
        == 7
    )  # type: ignore[attr-defined]


# --- served ------------------------------------------------------------------------------------


@pytest.fixture
def server(direct: Any) -> Any:
    """A scripted vLLM / OpenRLHF server whose score is the tiny model's direct forward."""
    with FakeRewardServer(lambda t: direct([t])[0]) as fake:
        yield fake


@pytest.mark.parametrize("protocol", ["vllm_pooling", "vllm_classify"])
def test_served_vllm_gives_the_in_process_numbers(
    rm_path: Path, server: FakeRewardServer, protocol: str
) -> None:
    rollouts = [Rollout(prompt=PROMPT, completion=text(3 + i)) for i in range(5)]  # type: ignore[arg-type]
    rollouts.append(Rollout(prompt="w1", completion=" w2"))
    served = reward("tiny", api_base=server.url + "/v1", protocol=protocol,
                    tokenizer=str(rm_path), batch_size=4)  # fmt: skip
    got = values(referee.score(served, rollouts))
    assert got == pytest.approx(values(referee.score(reward(rm_path), rollouts)), abs=TOL)
    paths = [p for p, _ in server.requests]
    endpoint = "/pooling" if protocol == "vllm_pooling" else "/classify"
    assert paths == [endpoint, endpoint]  # 6 rollouts, 4 to a request; /v1 dropped
    # The two requests are in flight at once: either may arrive first.
    assert sorted(len(body["input"]) for _, body in server.requests) == [2, 4]
    for _, body in server.requests:
        assert body["model"] == "tiny"
        assert body["use_activation"] is False and body["add_special_tokens"] is False
        assert body.get("task") == ("classify" if protocol == "vllm_pooling" else None)


def test_served_openrlhf_sends_query_prompts_and_labels(
    rm_path: Path, server: FakeRewardServer
) -> None:
    rollouts = [Rollout(prompt=PROMPT, completion="w9", reference={"answer": 1}),  # type: ignore[arg-type]
                Rollout(prompt="w1 ", completion="w2", reference="w2")]  # fmt: skip
    served = reward("tiny", api_base=server.url + "/get_reward", protocol="openrlhf",
                    tokenizer=str(rm_path))  # fmt: skip
    got = values(referee.score(served, rollouts))
    assert got == pytest.approx(values(referee.score(reward(rm_path), rollouts)), abs=TOL)
    [(path, body)] = server.requests
    assert path == "/get_reward" and body["labels"] == ['{"answer": 1}', "w2"]
    assert body["query"][0].startswith(body["prompts"][0])  # the prompt, as the policy saw it
    assert body["prompts"][0].endswith("<|im_start|>assistant\n") and body["prompts"][1] == "w1 "


def test_served_retries_transient_errors_and_fails_on_the_rest() -> None:
    with FakeRewardServer(lambda t: float(len(t))) as fake:
        served = reward("m", api_base=fake.url, backoff=0.01, retries=2)
        fake.faults += [Fault(503), Fault(429, {"retry-after": "0"})]
        assert values(referee.score(served, [Rollout(completion="abc")])) == [3.0]
        assert len(fake.requests) == 3
        fake.faults.append(Fault(400))
        [bad] = referee.score(served, [Rollout(completion="abc")])
        assert bad.failure is not None and bad.failure.type == "judge"
        assert "reward model call failed" in bad.failure.message
        hung = reward("m", api_base=fake.url, request_timeout=0.2, retries=0)
        fake.faults.append(Fault(0, delay=2))
        [late] = referee.score(hung, [Rollout(completion="abc")])
        assert late.failure is not None and late.failure.type == "timeout"


def test_served_requests_respect_max_in_flight() -> None:
    with FakeRewardServer(lambda t: 1.0, delay=0.05) as fake:
        served = reward("m", api_base=fake.url, batch_size=1, max_in_flight=2)
        assert (
            values(referee.score(served, [Rollout(completion=f"w{i}") for i in range(8)]))
            == [1.0] * 8
        )
        assert len(fake.requests) == 8 and fake.peak_in_flight <= 2


def test_served_answers_of_the_wrong_shape_fail() -> None:
    with FakeRewardServer(lambda t: [[0.1, 0.9]]) as fake:  # a token model's answer
        [score] = referee.score(reward("m", api_base=fake.url), [Rollout(completion="w1")])
    assert score.failure is not None and score.failure.type == "judge"


def test_served_group_z(server: FakeRewardServer, rm_path: Path) -> None:
    served = reward("tiny", api_base=server.url, normalize="group_z", tokenizer=str(rm_path))
    scores = referee.score(served, [Rollout(group="g", completion=text(i + 1)) for i in range(3)])
    assert sum(values(scores)) == pytest.approx(0.0, abs=1e-9)


# --- what the report and the probes see -----------------------------------------------------------


def test_the_report_correlates_the_raw_score_with_length_whatever_the_total() -> None:
    rows = [ReportRow(value=0.0, components={"rm": 0.0, "rm.raw": float(n)}, chars=n)
            for n in (10, 200, 35, 90, 400)]  # fmt: skip
    report = build_report(rows)
    assert report.length is not None and report.length.spearman is None  # a flat total
    assert report.length.components["rm.raw"].spearman == pytest.approx(1.0)
    assert "rm.raw" in json.loads(report.to_json())["length"]["components"]


def test_a_reward_model_that_pays_for_length_fails_the_fluent_filler_probe() -> None:
    rollouts = [Rollout(id=str(i), group=str(i), prompt="q", completion=f"The answer is {i}.")
                for i in range(3)]  # fmt: skip
    with FakeRewardServer(lambda t: len(t) / 100) as fake:
        result = run_sync(run_probes(reward("m", api_base=fake.url), rollouts,
                                     only=["fluent_filler"]))  # fmt: skip
    assert result.failed == ("fluent_filler",)
    exact = referee.load({"type": "exact_match", "extract": "last_number"})
    golds = [r.model_copy(update={"reference": r.id}) for r in rollouts]
    result = run_sync(run_probes(exact, golds, only=["fluent_filler"]))
    assert result.failed == ()
