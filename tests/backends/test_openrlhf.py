"""OpenRLHF, driven by its own code: the number it trains on is the number `referee score` gives.

OpenRLHF 0.11's rollout executor (``openrlhf.utils.agent.SingleTurnAgentExecutor``) is run for
real: it tokenizes the chat-templated prompt, "generates" (a scripted engine hands back the
response's token ids ending in the template's stop token, as vLLM does), decodes prompt and
response together with ``skip_special_tokens=False``, and asks for the reward over its own
HTTP client (a real ``referee serve`` on loopback) or through the ``reward_func`` file it loads
with its own importlib code (written by ``referee openrlhf-func``). The tokenizers are built
in-process (no hub) with each template family's special tokens, its chat template, and its
decoding quirks (sentencepiece spaces for Mistral/Llama 2, space clean-up for Llama 3).
"""

from __future__ import annotations

import asyncio
import json
import math
import pickle
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip(
    "aiohttp", reason="the serve extra is not installed (pip install 'referee[serve]')"
)

import referee
from referee import Rollout
from referee.backends.openrlhf import (
    COMMON_END_MARKERS,
    EndMarkers,
    RewardFunc,
    completion_of,
    reward_func_source,
    rollouts_from,
)
from referee.errors import RolloutError
from tests.support.openrlhf import (
    ANSWERS,
    FAMILIES,
    LABEL,
    SPEC,
    Family,
    char_tokenizer,
    clean_scores,
    custom,
    llama3,
    run_openrlhf,
)
from tests.support.serving import Server, request

OPENRLHF_PIN = "openrlhf==0.11.2"

# --- OpenRLHF's executor, with a scripted engine in vLLM's place ---------------------------


@pytest.fixture(scope="module")
def agent() -> Any:
    pytest.importorskip("transformers", reason="the family tokenizers need transformers")
    return pytest.importorskip(
        "openrlhf.utils.agent",
        reason=f"openrlhf is not installed (pip install --no-deps {OPENRLHF_PIN})",
    )


def spec_file(tmp: Path, spec: dict[str, Any] = SPEC) -> Path:
    path = tmp / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started = Server(spec_file(tmp_path_factory.mktemp("serve")))
    yield started
    started.stop()


@pytest.mark.parametrize("family", FAMILIES)
def test_openrlhf_http_client_trains_on_referee_score(agent: Any, server: Server, family: str):
    fam = FAMILIES[family]
    tok = fam.make()
    prompt = fam.prompt(tok)
    got = [run_openrlhf(agent, server.url + "/get_reward", tok, prompt, a, fam.stop)
           for a in ANSWERS]  # fmt: skip
    want = clean_scores(prompt)
    assert want == pytest.approx([1.0, 0.6, 0.0])  # perfect, one field wrong, not JSON
    assert [o["reward"] for o in got] == [[v] for v in want]
    assert [o["scores"] for o in got] == [o["reward"] for o in got]
    assert got[0]["extra_logs"]["referee_failed"] == [0.0]


def test_without_stripping_a_perfect_answer_trained_as_zero(agent: Any, tmp_path: Path) -> None:
    """The bug: the response ends in the template's end-of-turn token, and the JSON gate
    rejected it."""
    fam = FAMILIES["chatml"]
    tok = fam.make()
    bare = Server(spec_file(tmp_path), "--no-strip-markers")
    try:
        out = run_openrlhf(agent, bare.url + "/get_reward", tok, fam.prompt(tok), ANSWERS[0],
                           fam.stop)  # fmt: skip
    finally:
        bare.stop()
    assert out["reward"] == [0.0]


def test_a_prompt_openrlhf_cut_to_fit_is_still_found(agent: Any, server: Server) -> None:
    """A prompt longer than max_len - max_new_tokens loses its start (OpenRLHF keeps its last
    tokens), so the query starts inside the prompt."""
    fam = FAMILIES["chatml"]
    tok = fam.make()
    prompt = fam.prompt(tok)
    kept = 40  # prompt tokens OpenRLHF keeps: max_length - max_tokens
    url = server.url + "/get_reward"
    got = [run_openrlhf(agent, url, tok, prompt, a, fam.stop, max_length=kept + 60,
                        max_tokens=60)["reward"] for a in ANSWERS]  # fmt: skip
    assert got == [[v] for v in clean_scores(prompt)]


def test_custom_markers_by_name_or_from_the_tokenizer(agent: Any, tmp_path: Path) -> None:
    tok = custom()
    tok.save_pretrained(tmp_path / "tok")
    prompt = Family(custom, "<|my_end|>").prompt(tok)
    spec = spec_file(tmp_path)
    for args, want in (
        ((), 0.0),  # the built-in list does not know <|my_end|>
        (("--end-marker", "<|my_end|>"), 1.0),
        (("--tokenizer", str(tmp_path / "tok")), 1.0),
    ):
        started = Server(spec, *args)
        try:
            out = run_openrlhf(agent, started.url + "/get_reward", tok, prompt, ANSWERS[0],
                               "<|my_end|>")  # fmt: skip
        finally:
            started.stop()
        assert out["reward"] == [want], args


# --- the reward_func file ------------------------------------------------------------------


def referee_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "referee.cli", *args], capture_output=True,
                          text=True, timeout=120)  # fmt: skip


@pytest.fixture(scope="module")
def reward_func_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("func")
    out = tmp / "reward_func.py"
    done = referee_cli("openrlhf-func", str(spec_file(tmp)), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert f"--reward.remote_url {out}" in done.stderr
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_openrlhf_loads_the_reward_func_file_and_gets_the_same_numbers(
    agent: Any, server: Server, reward_func_file: Path, family: str
) -> None:
    fam = FAMILIES[family]
    tok = fam.make()
    prompt = fam.prompt(tok)
    by_file = [run_openrlhf(agent, str(reward_func_file), tok, prompt, a, fam.stop)
               for a in ANSWERS]  # fmt: skip
    by_http = [run_openrlhf(agent, server.url + "/get_reward", tok, prompt, a, fam.stop)
               for a in ANSWERS]  # fmt: skip
    assert [o["reward"] for o in by_file] == [[v] for v in clean_scores(prompt)]
    for f, h in zip(by_file, by_http, strict=True):
        assert same(f["extra_logs"], h["extra_logs"]) and f["scores"] == h["scores"]


def same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN (a skipped component's value in extra_logs)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_reward_func_file_with_the_tokenizers_markers(agent: Any, tmp_path: Path) -> None:
    tok = custom()
    tok.save_pretrained(tmp_path / "tok")
    out = tmp_path / "reward_func.py"
    done = referee_cli("openrlhf-func", str(spec_file(tmp_path)), "-o", str(out),
                       "--tokenizer", str(tmp_path / "tok"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "'<|my_end|>'" in out.read_text()  # the file says what it strips
    prompt = Family(custom, "<|my_end|>").prompt(tok)
    got = run_openrlhf(agent, str(out), tok, prompt, ANSWERS[0], "<|my_end|>")
    assert got["reward"] == [1.0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("-o", "reward_func.txt"), "only if its name ends in .py"),
        (("-o", "f.py", "--no-strip-markers", "--end-marker", "x"), "--no-strip-markers"),
        (("-o", "f.py", "--end-marker", "  "), "non-blank"),
        (("-o", "f.py", "--tokenizer", "."), "transformers cannot load it"),
    ],
)
def test_openrlhf_func_says_what_is_wrong(
    tmp_path: Path, args: tuple[str, ...], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    done = referee_cli("openrlhf-func", str(spec_file(tmp_path)), *args)
    assert done.returncode != 0 and message in done.stderr, done.stderr
    assert not (tmp_path / "f.py").exists()


def test_openrlhf_func_checks_the_spec_before_writing(tmp_path: Path) -> None:
    bad = spec_file(tmp_path, {"type": "no_such_type"})
    done = referee_cli("openrlhf-func", str(bad), "-o", str(tmp_path / "f.py"))
    assert done.returncode != 0 and "no_such_type" in done.stderr
    assert not (tmp_path / "f.py").exists()


# --- the parts, directly -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ('{"a": 1}<|im_end|>', '{"a": 1}'),  # ChatML
        ('{"a": 1}<|eot_id|>', '{"a": 1}'),  # Llama 3
        (' {"a": 1}</s>', ' {"a": 1}'),  # Mistral/Llama 2: the model's leading space stays
        ('{"a": 1}<end_of_turn>', '{"a": 1}'),  # Gemma
        ('{"a": 1}<|end|>', '{"a": 1}'),  # Phi-3
        ('{"a": 1}<|endoftext|>', '{"a": 1}'),  # plain EOS
        ('{"a": 1}<|im_end|><|endoftext|><|endoftext|>', '{"a": 1}'),  # then padding
        ('{"a": 1}<|im_end|>\n<|endoftext|>', '{"a": 1}'),  # whitespace between markers
        ('{"a": 1}\n<|im_end|>', '{"a": 1}\n'),  # whitespace the model wrote stays
        ('{"a": 1}  ', '{"a": 1}  '),  # no marker: untouched
        ("x</s>y", "x</s>y"),  # only at the end
        ("<|im_end|>", ""),  # an empty answer
    ],
)
def test_end_markers_strip(text: str, want: str) -> None:
    assert EndMarkers().strip(text) == want
    assert EndMarkers.none().strip(text) == text


def test_end_markers_are_checked() -> None:
    with pytest.raises(ValueError, match="non-blank"):
        EndMarkers(("<|x|>", " "))
    with pytest.raises(TypeError, match="not the string"):
        EndMarkers("<|x|>")  # type: ignore[arg-type]
    assert EndMarkers((" <|x|> ", "<|x|>")).markers == ("<|x|>",)
    assert set(COMMON_END_MARKERS) >= {"<|im_end|>", "<|eot_id|>", "</s>", "<end_of_turn>",
                                       "<|end|>", "<|endoftext|>"}  # fmt: skip


@pytest.mark.parametrize(
    ("family", "want"),
    [
        ("chatml", {"<|im_end|>", "<|endoftext|>"}),
        ("gemma", {"<eos>", "<pad>", "<end_of_turn>"}),
        ("phi3", {"<|endoftext|>", "<|end|>"}),
        ("mistral", {"</s>"}),
        ("plain-eos", {"</s>"}),
    ],
)
def test_markers_from_a_tokenizer(agent: Any, tmp_path: Path, family: str, want: set[str]):
    FAMILIES[family].make().save_pretrained(tmp_path)
    assert set(EndMarkers.from_tokenizer(tmp_path).markers) == want


def test_markers_from_a_tokenizer_take_generation_config_eos_ids(agent: Any, tmp_path: Path):
    tok = llama3()
    tok.save_pretrained(tmp_path)
    ids = [tok.convert_tokens_to_ids(t) for t in ("<|end_of_text|>", "<|eot_id|>")]
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": ids}))
    assert set(EndMarkers.from_tokenizer(tmp_path).markers) == {
        "<|eot_id|>", "<|end_of_text|>", "<|finetune_right_pad_id|>"}  # fmt: skip


def test_markers_from_a_tokenizer_say_what_is_wrong(agent: Any, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such directory"):
        EndMarkers.from_tokenizer(tmp_path / "missing")
    with pytest.raises(ValueError, match=f"tokenizer {str(tmp_path)!r}: transformers cannot"):
        EndMarkers.from_tokenizer(tmp_path)
    char_tokenizer([], None).save_pretrained(tmp_path)  # no EOS, no pad, no template
    with pytest.raises(ValueError, match="no EOS, pad or end-of-turn token"):
        EndMarkers.from_tokenizer(tmp_path)


PROMPT = "<|im_start|>user\nWhat is 2 + 2 ?<|im_end|>\n<|im_start|>assistant\n"


@pytest.mark.parametrize(
    ("query", "prompt", "want"),
    [
        (PROMPT + "4<|im_end|>", PROMPT, "4<|im_end|>"),  # as sent
        (PROMPT.replace(" ?", "?") + "4", PROMPT, "4"),  # decoding cleaned up a space
        (PROMPT.replace("\n", " \n") + "4", PROMPT, "4"),  # or added some
        (PROMPT[20:] + "4", PROMPT, "4"),  # cut to fit: the query starts inside the prompt
        ("4", "", "4"),  # no prompt: the whole query
        ("Something else entirely", PROMPT, None),
        (PROMPT[-10:] + "4", PROMPT, None),  # too little of the prompt to be sure
    ],
)
def test_completion_of(query: str, prompt: str, want: str | None) -> None:
    assert completion_of(query, prompt) == want


def test_a_query_without_its_prompt_is_a_failure_not_a_score(server: Server) -> None:
    status, body = request(server.url + "/get_reward", {
        "query": [PROMPT + ANSWERS[0], "Unrelated text " + ANSWERS[0]],
        "prompts": [PROMPT, PROMPT], "labels": [LABEL, LABEL]})  # fmt: skip
    assert status == 200
    assert body["rewards"] == [1.0, 0.0] and body["extra_logs"]["referee_failed"] == [0.0, 1.0]
    items = rollouts_from(["Unrelated"], [PROMPT], names=("query", "prompts", "labels"))
    assert isinstance(items[0], referee.Score) and items[0].failure is not None
    assert items[0].failure.type == "invalid_input"
    assert "query[0] does not start with its prompt (prompts[0]" in items[0].failure.message


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"query": [1]}, 400, "query[0]: must be a string, found int"),
        ({"query": ["a", "b"], "prompts": ["a", 2]}, 400, "prompts[1]: must be a string"),
        ({"query": ["a"], "prompts": ["a", "b"]}, 400, "2 prompts for 1 queries"),
        ({"query": "a"}, 400, "'query' must be a list, found str"),
    ],
)
def test_get_reward_bad_input_names_where(
    server: Server, body: dict[str, Any], status: int, message: str
) -> None:
    got_status, got = request(server.url + "/get_reward", body)
    assert got_status == status
    assert message in got["error"]["message"] or message == got["error"]["type"], got


def test_reward_func_bad_input_names_where() -> None:
    func = RewardFunc(SPEC)
    with pytest.raises(RolloutError, match=r"queries\[1\]: must be a string"):
        func(["a", None], ["", ""], [LABEL, LABEL])
    with pytest.raises(RolloutError, match="queries: must be a list, found str"):
        func("a query", [""], [LABEL])
    with pytest.raises(RolloutError, match="1 labels for 2 queries"):
        func(["a", "b"], None, [LABEL])
    with pytest.raises(RolloutError, match=r"labels\[0\]: JSON nested too deep"):
        func(["a"], None, ["[" * 100_000 + "]" * 100_000])


def test_reward_func_answers_as_get_reward(server: Server) -> None:
    queries = [PROMPT + a + "<|im_end|>" for a in ANSWERS]
    body = {"query": queries, "prompts": [PROMPT] * 3, "labels": [LABEL] * 3}
    assert same(RewardFunc(SPEC)(queries, [PROMPT] * 3, [LABEL] * 3),
                request(server.url + "/get_reward", body)[1])  # fmt: skip


@referee.reward
async def counts_e(rollout: Rollout) -> float:
    await asyncio.sleep(0.01)
    return min(1.0, str(rollout.completion).count("e") / 4)


def test_reward_func_scores_an_async_reward_from_many_threads_on_one_loop() -> None:
    """OpenRLHF calls reward_func in threads (asyncio.to_thread), one query each."""
    func = RewardFunc(counts_e)
    texts = [f"{'e' * (i % 5)}<|im_end|>" for i in range(64)]
    got: dict[int, float] = {}

    def call(i: int) -> None:
        got[i] = func([texts[i]], [""], [None])["rewards"][0]

    threads = [threading.Thread(target=call, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    want = referee.score(counts_e, [Rollout(completion="e" * (i % 5)) for i in range(64)])
    assert [got[i] for i in range(64)] == [w.value for w in want]
    # One event loop for every call: the process's one bridge loop (others may have made it).
    assert sum(t.name == "referee-bridge" for t in threading.enumerate()) == 1


def test_reward_func_pickles() -> None:
    func = RewardFunc(SPEC, end_markers=EndMarkers(("<|x|>",)), failure_value=-1.0)
    copy = pickle.loads(pickle.dumps(func))
    assert copy.end_markers == func.end_markers and copy.failure_value == -1.0
    assert copy(['{"company": "Acme", "amount": 12}<|x|>'], None, [LABEL])["rewards"] == [1.0]


def test_reward_func_source_is_a_loadable_file(tmp_path: Path) -> None:
    spec = spec_file(tmp_path)
    odd = ("<|x|>", 'end"""\\')  # text that could close the file's docstring, or escape
    text = reward_func_source(spec, end_markers=EndMarkers(odd), failure_value=-1)
    namespace: dict[str, Any] = {}
    exec(compile(text, "reward_func.py", "exec"), namespace)
    func = namespace["reward_func"]
    assert isinstance(func, RewardFunc) and func.failure_value == -1.0
    assert func.end_markers.markers == odd
    assert str(spec.resolve()) in text
    assert math.isclose(func(["nope"], None, [LABEL])["rewards"][0], 0.0)


# --- what OpenRLHF cannot carry: refused when the spec loads ------------------------------

UNFIT = [
    pytest.param({"type": "tool_use"}, "chat messages", id="trajectory"),
    pytest.param({"type": "length", "max_length": 100}, "token count", id="tokens"),
    pytest.param(
        {"type": "group_rank", "model": "openai/m", "api_base": "http://127.0.0.1:9/v1"},
        "group reward",
        id="group",
    ),
]


@pytest.mark.parametrize(("spec", "says"), UNFIT)
def test_reward_func_refuses_a_spec_openrlhf_cannot_feed(spec: dict[str, Any], says: str) -> None:
    # OpenRLHF sends one query as text: a trajectory reward would see no call, a length in
    # tokens no count, a group reward one attempt: every sample scored wrong, so no start.
    with pytest.raises(referee.SpecError, match=says) as refused:
        RewardFunc(spec)
    assert "OpenRLHF" in str(refused.value) and "use " in str(refused.value)
    RewardFunc({"type": "length", "max_length": 100, "unit": "words"})  # words need no count


@pytest.mark.parametrize(("spec", "says"), UNFIT[:2])
def test_get_reward_refuses_a_spec_openrlhf_cannot_feed(
    tmp_path: Path, spec: dict[str, Any], says: str
) -> None:
    served = Server(spec_file(tmp_path, spec))
    try:
        status, body = request(served.url + "/get_reward", {"query": ["a"], "prompts": [""]})
        assert status == 422 and body["error"]["type"] == "unfit_spec", body
        assert says in body["error"]["message"]
        one = {"rollouts": [{"prompt": "", "completion": "a"}]}
        status, _ = request(served.url + "/score", one)
        assert status == 200  # the spec's other doors are open
    finally:
        served.stop()
