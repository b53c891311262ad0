"""``process_reward_model``: per-step values read at the separator, as a direct forward reads
them (Qwen2.5-Math-PRM's recipe), for text and trajectories; folds; the separator the policy
writes; the length rule; the served form; and the per-step views that take ``Score.steps``."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

import referee
from referee import Rollout, SpecError
from referee.models.testing import FakeRewardServer, tiny_model
from referee.report.diagnostics import ReportRow, build_report
from referee.rewards import ProcessRewardModel
from referee.rollout import Message
from referee.steps import fold_steps
from tests.support.extras import needs

pytestmark = needs("torch", "transformers", reason="the reward model's libraries are not installed")

TOL = 1e-5
SEP = "<extra_0>"


@pytest.fixture(scope="session")
def prm_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_model(tmp_path_factory.mktemp("prm") / "model", head="token")


@pytest.fixture(scope="session")
def direct(prm_path: Path) -> Any:
    """Qwen2.5-Math-PRM's own recipe: softmax of the logits where the input is the separator,
    class 1."""
    import torch
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(prm_path)
    model = transformers.AutoModelForTokenClassification.from_pretrained(
        prm_path, dtype=torch.float32
    ).eval()
    sep = tokenizer.convert_tokens_to_ids(SEP)

    def steps(text: str) -> list[float]:
        ids = tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
        with torch.inference_mode():
            probs = model(input_ids=ids).logits[0].softmax(-1)
        return [float(p) for p in probs[ids[0] == sep][:, 1]]

    steps.tokenizer = tokenizer  # type: ignore[attr-defined]
    return steps


def prm(path: Path | str, **options: Any) -> referee.Reward:
    return referee.load({"type": "process_reward_model", "model": str(path), **options})


def test_text_steps_are_read_at_the_separator_as_a_direct_forward_reads_them(
    prm_path: Path, direct: Any
) -> None:
    rollout = Rollout(prompt="w1 w2 ", completion="w3 w4\n\nw5\n\n\n\n  w6 w7 w8  \n\n")
    [score] = referee.score(prm(prm_path), [rollout])
    want = direct(f"w1 w2 w3 w4{SEP}w5{SEP}w6 w7 w8{SEP}")
    assert len(want) == 3
    assert score.steps == pytest.approx(want, abs=TOL)
    assert score.value == pytest.approx(min(want), abs=TOL)  # fold: min
    assert score.components == {"steps": 3.0}


def test_a_chat_prompt_puts_the_steps_in_one_assistant_turn(prm_path: Path, direct: Any) -> None:
    prompt = [{"role": "system", "content": "w1"}, {"role": "user", "content": "w2 w3"}]
    rollout = Rollout(prompt=prompt, completion="w4\n\nw5 w6")  # type: ignore[arg-type]
    messages = [*prompt, {"role": "assistant", "content": f"w4{SEP}w5 w6{SEP}"}]
    want = direct(direct.tokenizer.apply_chat_template(messages, tokenize=False))
    [score] = referee.score(prm(prm_path), [rollout])
    assert score.steps == pytest.approx(want, abs=TOL)
    [chat] = referee.score(
        prm(prm_path, template="chat"), [Rollout(prompt="w2 w3", completion="w4")]
    )
    assert chat.steps is not None and len(chat.steps) == 1


def test_one_assistant_message_is_split_into_steps_as_its_text_is(prm_path: Path) -> None:
    # TRL's conversational completions and a verifiers trace of one turn: an answer in chat
    # form, whose steps are the text's (it counted one step, the whole message).
    text = Rollout(prompt=[{"role": "user", "content": "w1"}], completion="w2\n\nw3")  # type: ignore[arg-type]
    chat = text.model_copy(update={"completion": [Message(role="assistant", content="w2\n\nw3")]})
    [as_text, as_chat] = referee.score(prm(prm_path), [text, chat])
    assert as_chat.steps is not None and len(as_chat.steps) == 2
    assert as_chat.steps == pytest.approx(as_text.steps, abs=TOL)


def test_a_trajectory_has_one_step_per_assistant_turn_calls_included(
    prm_path: Path, direct: Any
) -> None:
    turns = [
        {
            "role": "assistant",
            "content": "w4",
            "tool_calls": [{"name": "f", "arguments": {"x": 1}}],
        },
        {"role": "tool", "content": "w5"},
        {"role": "assistant", "content": ""},
        {"role": "assistant", "content": "w6 w7"},
    ]
    rollout = Rollout(prompt="w1", completion=turns)  # type: ignore[arg-type]
    [score] = referee.score(prm(prm_path), [rollout])
    messages = [
        {"role": "user", "content": "w1"},
        {"role": "assistant", "content": f'w4\nf({{"x": 1}}){SEP}'},
        {"role": "tool", "content": "w5"},
        {"role": "assistant", "content": SEP},
        {"role": "assistant", "content": f"w6 w7{SEP}"},
    ]
    want = direct(direct.tokenizer.apply_chat_template(messages, tokenize=False))
    assert len(want) == 3 and score.steps == pytest.approx(want, abs=TOL)


def test_a_separator_the_policy_writes_adds_no_step(prm_path: Path, direct: Any) -> None:
    rollout = Rollout(prompt=f"w1{SEP}", completion=f"w2 {SEP}{SEP} w3\n\nw4{SEP}")
    [score] = referee.score(prm(prm_path), [rollout])
    assert score.steps == pytest.approx(direct(f"w1w2  w3{SEP}w4{SEP}"), abs=TOL)


@pytest.mark.parametrize("fold", ["min", "mean", "sum", "last", "product", "discounted"])
def test_fold_makes_the_total(prm_path: Path, fold: str) -> None:
    rollout = Rollout(completion="w1\n\nw2\n\nw3\n\nw4")
    [score] = referee.score(prm(prm_path, fold=fold, gamma=0.5), [rollout])
    assert score.steps is not None and len(score.steps) == 4
    assert score.value == pytest.approx(fold_steps(score.steps, fold, 0.5))  # type: ignore[arg-type]


def test_no_steps_score_zero_with_no_steps(prm_path: Path) -> None:
    empty, blank, no_turns = referee.score(prm(prm_path), [
        Rollout(prompt="w1", completion=""),
        Rollout(prompt="w1", completion="\n\n  \n\n"),
        Rollout(prompt="w1", completion=[{"role": "tool", "content": "w2"}]),  # type: ignore[list-item]
    ])  # fmt: skip
    for score in (empty, blank, no_turns):
        assert score.value == 0.0 and score.steps == () and score.failure is None


def test_batching_does_not_change_any_value(prm_path: Path) -> None:
    rollouts = [
        Rollout(completion="\n\n".join(" ".join(f"w{(i * j) % 300}" for j in range(n)) for n in
                                      range(1, 2 + i % 5)))
        for i in range(30)
    ]  # fmt: skip
    alone = [referee.score(prm(prm_path), [r])[0].steps for r in rollouts]
    together = [s.steps for s in referee.score(prm(prm_path, batch_tokens=64), rollouts)]
    for a, b in zip(alone, together, strict=True):
        assert b == pytest.approx(a, abs=TOL)


def test_truncation_may_cut_the_prompt_but_not_a_step(prm_path: Path, direct: Any) -> None:
    long_prompt = " ".join(f"w{i}" for i in range(40)) + " "
    rollout = Rollout(prompt=long_prompt, completion="w1 w2\n\nw3")
    [score] = referee.score(prm(prm_path, max_length=10, overflow="truncate_left"), [rollout])
    ids = direct.tokenizer(f"{long_prompt}w1 w2{SEP}w3{SEP}", add_special_tokens=False)["input_ids"]
    want = direct(direct.tokenizer.decode(ids[-10:]))
    assert score.steps == pytest.approx(want, abs=TOL) and "cut by" in (score.reason or "")
    [cut] = referee.score(prm(prm_path, max_length=3, overflow="truncate_left"), [rollout])
    assert cut.failure is not None and cut.failure.type == "not_applicable"
    # both separators would survive, but not the first step's text
    assert "the completion alone is over max_length (3 tokens)" in cut.failure.message
    [refused] = referee.score(prm(prm_path, max_length=10), [rollout])
    assert refused.failure is not None and "over max_length (10)" in refused.failure.message


def test_a_text_cut_before_tokenizing_into_few_tokens_fails_alone(prm_path: Path) -> None:
    # Over the character cap, but one long unknown "word" is a single token: the kept part
    # is shorter than max_length. It fails alone; the other rollout of the call scores.
    long_word = Rollout(prompt="w1 w2 ", completion="x" * 600 + "\n\nw3")
    fine = Rollout(prompt="w1 ", completion="w2\n\nw3")
    reward = prm(prm_path, max_length=8, overflow="truncate_left")
    hostile, scored = referee.score(reward, [long_word, fine])
    assert hostile.failure is not None and hostile.failure.type == "not_applicable"
    assert "truncate_left may cut only the prompt" in hostile.failure.message
    assert scored.value is not None and scored.failure is None


def test_a_separator_that_is_not_one_token_is_refused(prm_path: Path) -> None:
    [score] = referee.score(prm(prm_path, separator="w1 w2"), [Rollout(completion="w3")])
    assert score.failure is not None and "is 2 tokens" in score.failure.message


def test_a_one_label_token_head_gives_the_sigmoid(tmp_path: Path) -> None:
    path = tiny_model(tmp_path / "one", head="token", labels=1)
    [score] = referee.score(prm(path), [Rollout(completion="w1\n\nw2")])
    assert score.steps is not None and all(0.0 < s < 1.0 for s in score.steps)


def test_a_missing_path_fails_at_spec_time(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"nowhere.*does not exist"):
        prm(tmp_path / "nowhere")


def test_pickling(prm_path: Path) -> None:
    reward = ProcessRewardModel(model=str(prm_path), fold="mean")
    clone = pickle.loads(pickle.dumps(reward))
    rollouts = [Rollout(completion="w1\n\nw2")]
    assert clone == reward and referee.score(clone, rollouts) == referee.score(reward, rollouts)


def test_served_steps_come_one_row_per_step(prm_path: Path, direct: Any) -> None:
    def rows(text: str) -> list[list[float]]:
        return [[1 - p, p] for p in direct(text)]  # STEP pooling: one row per separator

    rollouts = [Rollout(prompt="w1 ", completion="w2\n\nw3 w4"), Rollout(completion="w5")]
    with FakeRewardServer(rows) as server:
        served = prm("prm", api_base=server.url, tokenizer=str(prm_path))
        scores = referee.score(served, rollouts)
        [(path, body)] = server.requests
    assert path == "/pooling" and body["task"] == "token_classify"
    local = referee.score(prm(prm_path), rollouts)
    for s, want in zip(scores, local, strict=True):
        assert s.steps == pytest.approx(want.steps, abs=TOL)
    with FakeRewardServer(lambda t: [[0.5, 0.5]] * 7) as server:  # every token: not STEP pooling
        [score] = referee.score(prm("prm", api_base=server.url), [Rollout(completion="w1")])
    assert score.failure is not None and "1 steps, but the model read 7" in score.failure.message


def test_steps_reach_the_report_per_step_view(prm_path: Path) -> None:
    rollouts = [Rollout(completion="\n\n".join(f"w{j}" for j in range(i + 1))) for i in range(4)]
    scores = referee.score(prm(prm_path), rollouts)
    report = build_report([ReportRow(value=s.value, steps=s.steps) for s in scores])
    assert report.steps is not None and report.steps.rollouts == 4
    assert [p.count for p in report.steps.by_position] == [4, 3, 2, 1]
