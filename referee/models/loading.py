"""Models in-process: each loaded once per process and shared by every reward that names it.

`shared(spec)` returns the process's `Shared` model for a `ModelSpec` (path, head, device,
dtype): the first caller starts the load, later callers get the same one, whatever reward they
come from. Each shared model has one worker thread, which loads it and then runs every forward
of it in turn, so rewards sharing a model never run two forwards on it at once (nor hold two
batches' activations in GPU memory), and the event loop never waits on one.

A forked child loads its own copy (CUDA cannot be shared across a fork). torch and
transformers are imported here, on first use, never at import time.
"""

from __future__ import annotations

import importlib
import os
import re
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from referee.errors import MissingDependency, ModelLoadError

__all__ = [
    "DEVICE_PATTERN",
    "Dtype",
    "Head",
    "Loaded",
    "ModelLoadError",
    "ModelSpec",
    "Shared",
    "check_model_path",
    "clear",
    "load_tokenizer",
    "resolve",
    "shared",
    "torch_module",
    "transformers_module",
]

Head = Literal["sequence", "token"]
"""A model's head: one score per sequence (``AutoModelForSequenceClassification``), or
class logits per token (``AutoModelForTokenClassification``, or a remote-code PRM)."""

Dtype = Literal["auto", "float32", "bfloat16", "float16"]
"""The weights' dtype; ``auto``: bfloat16 on a GPU that has it (else float16), float32 on CPU."""

DEVICE_PATTERN = re.compile(r"auto|cpu|mps|(cuda|xpu)(:\d+)?")
"""The devices a spec may name (``auto``: cuda where torch sees a GPU, else cpu)."""

# An id on the Hugging Face hub: ``name`` or ``org/name``.
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


def torch_module() -> Any:
    """torch, or `MissingDependency` saying how to install the build for the machine (the
    ``rm`` extra does not name torch, so that installing it never pulls a CUDA build)."""
    try:
        return importlib.import_module("torch")
    except ImportError:
        error = MissingDependency("torch", "rm", "reward models")
        error.msg = (
            "reward models need the 'torch' package, which is not installed; the rm extra "
            "leaves its build to you.\n"
            "  fix: pip install torch (CUDA), or pip install torch --index-url "
            'https://download.pytorch.org/whl/cpu (CPU only); then pip install "referee[rm]"'
        )
        error.args = (error.msg,)
        raise error from None


def transformers_module() -> Any:
    """transformers, or `MissingDependency` naming the extra."""
    try:
        return importlib.import_module("transformers")
    except ImportError:
        raise MissingDependency("transformers", "rm", "reward models") from None


def check_model_path(model: str) -> None:
    """Refuse, before anything loads, a model that is a local path and is not there.

    A string that exists on disk is a local model and must hold a ``config.json``. One that
    does not exist is a hub id when it has that shape (``org/name``; it cannot be checked
    offline, so a wrong one fails at load, naming it); anything else (an absolute path, one
    starting with ``.`` or ``~``, one with more than one ``/``) is a path that is not there.

    Raises:
        ValueError: The path does not exist, or holds no ``config.json``.
    """
    path = Path(model).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise ValueError(
                f"reward model path {model!r} has no config.json: give a directory saved with "
                "save_pretrained, or a Hugging Face hub id"
            )
        return
    if model.startswith((".", "~", "/")) or os.path.isabs(model) or not _HUB_ID.fullmatch(model):
        raise ValueError(
            f"reward model path {model!r} does not exist: give a local directory saved with "
            "save_pretrained (absolute, or relative to the working directory), or a Hugging "
            "Face hub id such as 'org/name'"
        )


@dataclass(frozen=True)
class ModelSpec:
    """Which model, and how: the key of the process's cache (device and dtype resolved).

    Attributes:
        path: A local directory or a hub id.
        head: Which head to read (`Head`).
        device: A torch device (``cpu``, ``cuda``, ``cuda:1``, ...).
        dtype: The weights' dtype (never ``auto`` here).
        tokenizer: Where the tokenizer is (None: `path`).
        trust_remote_code: Run the model's own code (Qwen2.5-Math-PRM's head needs it).
    """

    path: str
    head: Head
    device: str
    dtype: str
    tokenizer: str | None = None
    trust_remote_code: bool = False


def resolve(
    path: str,
    head: Head,
    device: str,
    dtype: Dtype,
    tokenizer: str | None = None,
    trust_remote_code: bool = False,
) -> ModelSpec:
    """The `ModelSpec` for these options: ``auto`` device and dtype made concrete (imports
    torch, so call it off the event loop the first time)."""
    torch = torch_module()
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if dtype == "auto":
        if device.startswith("cuda"):
            dtype = "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
        else:
            dtype = "float32"
    return ModelSpec(path, head, device, dtype, tokenizer, trust_remote_code)


@dataclass
class Loaded:
    """A loaded model and what reading it needs.

    Attributes:
        model: The transformers model, in eval mode, on its device.
        tokenizer: Its tokenizer (pad token set: the EOS where it had none, as TRL does).
        pad_id: The id batches are padded with (the model's ``pad_token_id``, set to match).
        max_position: The longest input the model takes, where it says (None: unknown).
        labels: The head's number of labels.
    """

    spec: ModelSpec
    model: Any
    tokenizer: Any
    pad_id: int
    max_position: int | None
    labels: int


class Shared:
    """One model of the process: its load, and the one thread that loads and runs it."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.pid = os.getpid()
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="referee-model")
        self.loaded: Future[Loaded] = self.executor.submit(_load, spec)

    def submit(self, fn: Any, *args: Any) -> Future[Any]:
        """Run ``fn(loaded, *args)`` on the model's thread, after the load and every job
        submitted before it."""
        return self.executor.submit(lambda: fn(self.loaded.result(), *args))


_shared: dict[ModelSpec, Shared] = {}
_lock = threading.Lock()


def shared(spec: ModelSpec) -> Shared:
    """The process's shared model for `spec`, its load started on first use. A load that
    failed is forgotten once seen, so a later batch tries again."""
    with _lock:
        held = _shared.get(spec)
        if held is not None and held.pid == os.getpid():
            if not (held.loaded.done() and held.loaded.exception() is not None):
                return held
            held.executor.shutdown(wait=False)
        held = _shared[spec] = Shared(spec)
        return held


def clear() -> None:
    """Forget every shared model (tests; a process that is done with its models)."""
    with _lock:
        for held in _shared.values():
            held.executor.shutdown(wait=False)
        _shared.clear()
        _tokenizers.clear()


def _load(spec: ModelSpec) -> Loaded:
    torch = torch_module()
    transformers = transformers_module()
    # Its own tokenizer, not the cached one: a Rust tokenizer used from two threads at once
    # (two models' threads) can fail with "Already borrowed".
    tokenizer = _tokenizer(transformers, spec.tokenizer or spec.path, spec.trust_remote_code)
    config = _config(transformers, spec)
    cls = _model_class(transformers, config, spec)
    try:
        model, info = cls.from_pretrained(
            spec.path,
            dtype=getattr(torch, spec.dtype),
            trust_remote_code=spec.trust_remote_code,
            output_loading_info=True,
        )
    except Exception as exc:
        raise ModelLoadError(f"could not load reward model {spec.path!r}: {exc}") from exc
    missing = [k for k in info.get("missing_keys", ()) if k]
    if missing:
        # A checkpoint without the head (a base LM, or a head under other names) would get a
        # random one: scores that look fine and mean nothing.
        raise ModelLoadError(
            f"reward model {spec.path!r} has no trained {spec.head}-classification head: "
            f"{len(missing)} weights missing ({', '.join(missing[:3])}); give a reward model "
            "checkpoint"
            + ("" if spec.trust_remote_code else ", or set trust_remote_code for one that "
               "ships its own head (Qwen2.5-Math-PRM)")
        )  # fmt: skip
    model.eval()
    model.to(spec.device)
    text_config = model.config.get_text_config()
    # As TRL's GRPOTrainer does: the model reads the last token that is not padding, so it
    # must know the id batches are padded with.
    text_config.pad_token_id = tokenizer.pad_token_id
    labels = int(getattr(model.config, "num_labels", 0) or 0)
    positions = getattr(text_config, "max_position_embeddings", None)
    return Loaded(
        spec=spec,
        model=model,
        tokenizer=tokenizer,
        pad_id=int(tokenizer.pad_token_id),
        max_position=int(positions) if positions else None,
        labels=labels,
    )


def _config(transformers: Any, spec: ModelSpec) -> Any:
    try:
        return transformers.AutoConfig.from_pretrained(
            spec.path, trust_remote_code=spec.trust_remote_code
        )
    except Exception as exc:
        raise ModelLoadError(f"could not load reward model {spec.path!r}: {exc}") from exc


def _model_class(transformers: Any, config: Any, spec: ModelSpec) -> Any:
    """The Auto class to load with: the head's, or ``AutoModel`` for a model whose own code
    defines its head (a process reward model such as ``Qwen2ForProcessRewardModel``)."""
    architectures = list(getattr(config, "architectures", None) or [])
    auto_map = getattr(config, "auto_map", None) or {}
    if spec.head == "sequence":
        return transformers.AutoModelForSequenceClassification
    if (
        spec.trust_remote_code
        and "AutoModel" in auto_map
        and not any(a.endswith("ForTokenClassification") for a in architectures)
    ):
        return transformers.AutoModel
    return transformers.AutoModelForTokenClassification


_tokenizers: dict[tuple[str, bool], Any] = {}


def load_tokenizer(path: str, trust_remote_code: bool = False) -> Any:
    """The tokenizer at `path` (``AutoTokenizer``, as TRL loads a reward model's), loaded once
    per process, for rendering chat templates; its pad token is the EOS where it has none.

    Raises:
        ModelLoadError: It cannot be loaded, or has neither a pad nor an EOS token.
    """
    key = (path, trust_remote_code)
    tokenizer = _tokenizers.get(key)
    if tokenizer is None:
        tokenizer = _tokenizers.setdefault(
            key, _tokenizer(transformers_module(), path, trust_remote_code)
        )
    return tokenizer


def _tokenizer(transformers: Any, path: str, trust_remote_code: bool) -> Any:
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(
            path, trust_remote_code=trust_remote_code
        )
    except Exception as exc:
        raise ModelLoadError(f"could not load the tokenizer of {path!r}: {exc}") from exc
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ModelLoadError(f"the tokenizer of {path!r} has neither a pad nor an EOS token")
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer
