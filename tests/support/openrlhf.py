"""OpenRLHF's side of a test: an extraction spec and its answers, tokenizers of each chat template
family built in-process (no hub), and one sample run through OpenRLHF's own executor with a
scripted engine in vLLM's place."""

from __future__ import annotations

import asyncio
import json
import string
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import referee
from referee import Rollout

SPEC = {
    "name": "extraction",
    "combine": "weighted",
    "components": {
        "valid": {"type": "json_valid", "weight": 0.2, "gate": True},
        "fields": {"type": "field_match", "fields": {"company": "exact", "amount": "number"},
                   "weight": 0.8},
    },
}  # fmt: skip
LABEL = '{"company": "Acme", "amount": 12}'  # OpenRLHF's label: dataset text
QUESTION = "Extract the company and amount as JSON: Acme raised 12 dollars . Who ?"
ANSWERS = [  # perfect (1.0), one field wrong (0.6), not JSON (0.0, the gate)
    '{"company": "Acme", "amount": 12}',
    '{"company": "Acme", "amount": 13}',
    "Acme, 12 dollars",
]


def clean_scores(prompt: str) -> list[float | None]:
    """What `referee score` gives for the answers as the model wrote them (no markers)."""
    rollouts = [Rollout(prompt=prompt, completion=a, reference=json.loads(LABEL)) for a in ANSWERS]
    return [s.value for s in referee.score(referee.load(SPEC), rollouts)]


# --- template families, built in-process ---------------------------------------------------

CHARS = sorted(set(string.printable) - {"\x0b", "\x0c"})


def char_tokenizer(specials: list[str], template: str | None, **tokens: Any) -> Any:
    """A character-level fast tokenizer with these special tokens and chat template."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(["<unk>", *specials, *CHARS])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", **tokens)
    tok.add_special_tokens({"additional_special_tokens": specials})
    tok.chat_template = template
    return tok


def chatml() -> Any:  # Qwen 2/2.5/3, Phi-4, Yi, SmolLM
    return char_tokenizer(
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
        eos_token="<|im_end|>", pad_token="<|endoftext|>",
    )  # fmt: skip


def llama3() -> Any:
    # Llama 3's tokenizer_config sets clean_up_tokenization_spaces: decoding turns " ?" into
    # "?", so the decoded query no longer starts with the prompt as sent.
    return char_tokenizer(
        ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
         "<|eot_id|>", "<|finetune_right_pad_id|>"],
        "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}"
        "<|end_header_id|>\n\n{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
        "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n"
        "{% endif %}",
        bos_token="<|begin_of_text|>", eos_token="<|eot_id|>",
        pad_token="<|finetune_right_pad_id|>", clean_up_tokenization_spaces=True,
    )  # fmt: skip


def mistral() -> Any:  # Mistral and Llama 2: sentencepiece (Metaspace) via LlamaTokenizer
    from transformers import LlamaTokenizer

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for ch in [*sorted(set(CHARS) - {" "}), "▁"]:
        vocab[ch] = len(vocab)
    tok = LlamaTokenizer(vocab=vocab, merges=[])
    tok.chat_template = (
        "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}"
        "[INST] {{ m['content'] }} [/INST]{% else %}{{ m['content'] }}{{ eos_token }}{% endif %}"
        "{% endfor %}"
    )
    return tok


def gemma() -> Any:
    return char_tokenizer(
        ["<bos>", "<eos>", "<pad>", "<start_of_turn>", "<end_of_turn>"],
        "{{ bos_token }}{% for m in messages %}<start_of_turn>"
        "{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n{{ m['content'] | trim }}"
        "<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n"
        "{% endif %}",
        bos_token="<bos>", eos_token="<eos>", pad_token="<pad>",
    )  # fmt: skip


def phi3() -> Any:
    return char_tokenizer(
        ["<|endoftext|>", "<|user|>", "<|assistant|>", "<|end|>"],
        "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>\n{% else %}{{ eos_token }}{% endif %}",
        eos_token="<|endoftext|>",
    )  # fmt: skip


def deepseek() -> Any:  # DeepSeek V3/R1 and the R1 distills
    return char_tokenizer(
        ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>"],
        "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}<｜User｜>"
        "{{ m['content'] }}{% else %}<｜Assistant｜>{{ m['content'] }}<｜end▁of▁sentence｜>"
        "{% endif %}{% endfor %}{% if add_generation_prompt %}<｜Assistant｜>{% endif %}",
        bos_token="<｜begin▁of▁sentence｜>", eos_token="<｜end▁of▁sentence｜>",
    )  # fmt: skip


def plain() -> Any:  # a base model: no chat template, the prompt as written, EOS at the end
    return char_tokenizer(["</s>"], None, eos_token="</s>")


def custom() -> Any:  # a template of one's own, whose markers no built-in list knows
    return char_tokenizer(
        ["<|my_eos|>", "<|turn|>", "<|my_end|>"],
        "{% for m in messages %}<|turn|>{{ m['role'] }}: {{ m['content'] }}<|my_end|>"
        "{% endfor %}{% if add_generation_prompt %}<|turn|>assistant: {% endif %}",
        eos_token="<|my_eos|>",
    )  # fmt: skip


@dataclass
class Family:
    make: Callable[[], Any]
    stop: str  # the token the model stops on, which ends the decoded query

    def prompt(self, tok: Any) -> str:
        if tok.chat_template is None:
            return f"Question: {QUESTION}\nAnswer (JSON): "
        messages = [{"role": "user", "content": QUESTION}]
        return str(tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))


FAMILIES = {
    "chatml": Family(chatml, "<|im_end|>"),
    "llama3": Family(llama3, "<|eot_id|>"),
    "mistral": Family(mistral, "</s>"),
    "gemma": Family(gemma, "<end_of_turn>"),
    "phi3": Family(phi3, "<|end|>"),
    "deepseek": Family(deepseek, "<｜end▁of▁sentence｜>"),
    "plain-eos": Family(plain, "</s>"),
}


# --- OpenRLHF's executor, with a scripted engine in vLLM's place ---------------------------


@dataclass
class SamplingParams:  # the two fields OpenRLHF's executor reads from vLLM's SamplingParams
    max_tokens: int | None = None
    logprobs: int | None = None


class ScriptedEngine:
    """vLLM's engine as the executor calls it: the response's token ids, stop token included."""

    def __init__(self, token_ids: list[int]) -> None:
        self.token_ids = token_ids

    async def generate(self, prompt_token_ids: list[int], params: Any, **kwargs: Any) -> Any:
        ids = self.token_ids[: params.max_tokens]
        output = SimpleNamespace(
            token_ids=ids,
            text="",
            logprobs=None,
            finish_reason="stop" if ids == self.token_ids else "length",
        )
        return SimpleNamespace(outputs=[output])  # fmt: skip


def run_openrlhf(
    agent: Any, target: str, tok: Any, prompt: str, answer: str, stop: str, **kw: Any
) -> dict[str, Any]:
    """One sample through OpenRLHF's SingleTurnAgentExecutor (`target`: --reward.remote_url)."""
    response = tok(text=answer, add_special_tokens=False)["input_ids"]
    response.append(tok.convert_tokens_to_ids(stop))
    executor = agent.SingleTurnAgentExecutor(remote_rm_url=target)
    params = SamplingParams(max_tokens=kw.get("max_tokens"))
    out: dict[str, Any] = asyncio.run(executor.execute(
        prompt, LABEL, params, kw.get("max_length", 4096), tok, ScriptedEngine(response)
    ))  # fmt: skip
    assert out["reward"] is not None, "OpenRLHF got no reward (its executor logs why at INFO)"
    return out
