"""A tiny causal LM and a character tokenizer built in-process: trainer tests never touch a hub."""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

CHAT_TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


def tokenizer() -> Any:
    """A character-level fast tokenizer with pad/eos/unk tokens and a chat template."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "</s>", "<unk>", "<user>", "<assistant>", "<system>"]
    chars = sorted(set(string.printable) - {"\x0b", "\x0c"})
    vocab = {t: i for i, t in enumerate(specials + chars)}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", eos_token="</s>", unk_token="<unk>"
    )
    tok.add_special_tokens({"additional_special_tokens": specials[3:]})
    tok.chat_template = CHAT_TEMPLATE
    return tok


def model(tok: Any, seed: int = 0) -> Any:
    """A two-layer Qwen2 with random weights, sized for a CPU test."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=512,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    return Qwen2ForCausalLM(config)


def save(directory: Path) -> Path:
    """Write the tokenizer and model where a trainer can load them by path."""
    tok = tokenizer()
    tok.save_pretrained(directory)
    model(tok).save_pretrained(directory)
    return directory
