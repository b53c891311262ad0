"""Testing reward models without a hub or a GPU: tiny random models, and a scripted server.

`tiny_model` writes a Llama-shaped model with random weights and a word-level tokenizer built
in-process (ChatML chat template, ``<extra_0>`` as a special token) to a directory, as
``save_pretrained`` writes a real one: ``reward_model`` and ``process_reward_model`` load it as
they load any checkpoint. Its words are ``w0`` ... ``w{vocab-1}`` and a few English ones; any
other word is ``<unk>``.

`FakeRewardServer` answers vLLM's ``/pooling`` and ``/classify`` and OpenRLHF's remote-RM
``POST`` on 127.0.0.1 from a script (a function of each input text), in the real shapes, with
injected faults (an HTTP status with headers, a hang), so the served path is tested over real
HTTP, as `referee.judges.testing.FakeJudgeServer` tests judges.

Example:
    ```python
    tiny_model("/tmp/rm", head="sequence")
    with FakeRewardServer(lambda text: float(len(text))) as server:
        reward = RewardModel(api_base=server.url, model="rm")
    ```
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from referee._loopback import Fault, JsonHandler, LoopbackServer
from referee.models.loading import torch_module, transformers_module

__all__ = ["CHAT_TEMPLATE", "SIZES", "FakeRewardServer", "Fault", "Scorer", "tiny_model", "words"]

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""ChatML, as Qwen's models write it."""

_SPECIAL = ["<pad>", "<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<extra_0>"]
_ENGLISH = ["the", "a", "an", "answer", "is", "so", "step", "then", "we", "get", "and", "of",
            "to", "in", "it", "first", "next", "finally"]  # fmt: skip

SIZES: dict[str, dict[str, int]] = {
    # hidden, layers, heads, kv heads, intermediate, vocabulary
    "tiny": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "intermediate_size": 64, "vocab": 512},
    # Qwen2-0.5B's shape (its vocabulary cut to 32k: the embedding is not what is measured)
    "0.5b": {"hidden_size": 896, "num_hidden_layers": 24, "num_attention_heads": 14,
             "num_key_value_heads": 2, "intermediate_size": 4864, "vocab": 32_000},
}  # fmt: skip
"""Model shapes `tiny_model` builds."""


def words(vocab: int) -> list[str]:
    """The plain words of a tiny model's vocabulary (``w0`` ...), for building texts."""
    return [f"w{i}" for i in range(vocab - len(_SPECIAL) - len(_ENGLISH) - 3)]


def tiny_model(
    path: str | Path,
    *,
    head: Literal["sequence", "token"] = "sequence",
    size: str = "tiny",
    labels: int | None = None,
    max_position: int = 2048,
    seed: int = 0,
) -> Path:
    """Write a random-weight model with one sequence score (``head="sequence"``) or token
    classes (``"token"``, two by default) and its tokenizer to `path`; returns the path."""
    torch = torch_module()
    transformers = transformers_module()
    tokenizers = importlib.import_module("tokenizers")
    shape = dict(SIZES[size])
    vocab_size = shape.pop("vocab")
    vocabulary = [*_SPECIAL, *_ENGLISH, "system", "user", "assistant", *words(vocab_size)]
    ids = {token: i for i, token in enumerate(vocabulary)}
    model = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab=ids, unk_token="<unk>"))
    model.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=model,
        pad_token="<pad>",
        unk_token="<unk>",
        eos_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>", "<|im_end|>", "<extra_0>"],
        chat_template=CHAT_TEMPLATE,
        model_max_length=max_position,
    )
    config = transformers.LlamaConfig(
        vocab_size=len(vocabulary),
        max_position_embeddings=max_position,
        num_labels=labels or (1 if head == "sequence" else 2),
        pad_token_id=ids["<pad>"],
        eos_token_id=ids["<|endoftext|>"],
        **shape,
    )
    torch.manual_seed(seed)
    cls = (
        transformers.AutoModelForSequenceClassification
        if head == "sequence"
        else transformers.AutoModelForTokenClassification
    )
    built = cls.from_config(config)
    out = Path(path)
    built.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


# --- the scripted server ------------------------------------------------------------------------


Scorer = Callable[[str], float | list[list[float]]]
"""A text's score (a sequence model), or its rows of class probabilities (one per step)."""


class FakeRewardServer(LoopbackServer):
    """A threaded server on 127.0.0.1 answering ``POST /pooling``, ``/classify`` (vLLM) and
    ``/get_reward`` (OpenRLHF) by `score`, one value per input text.

    Attributes:
        url: The root URL (``api_base`` for vLLM; OpenRLHF's is ``url + "/get_reward"``).
        requests: Every (path, body) received, in order.
        faults: Faults to answer the next requests with, first to last (then `score`).
        peak_in_flight: The most requests held at once.
    """

    def __init__(self, score: Scorer, *, delay: float = 0.0) -> None:
        self.score = score
        self.delay = delay
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.faults: list[Fault] = []
        server = self

        class Handler(JsonHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                with server._lock:
                    server.requests.append((self.path, body))
                    fault = server.faults.pop(0) if server.faults else None
                with server._counted():
                    wait = fault.delay if fault is not None else server.delay
                    if wait:
                        server._closing.wait(wait)
                if fault is not None:
                    if fault.status:
                        self.send_json(fault.status, {"error": {"message": "injected"}},
                                       fault.headers)  # fmt: skip
                    return
                try:
                    self.send_json(200, server._answer(self.path, body), {})
                except ValueError as exc:
                    self.send_json(400, {"error": {"message": str(exc)}}, {})

        self._serve(Handler)

    def _answer(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path.endswith("/get_reward"):
            queries = body.get("query")
            if not isinstance(queries, list):
                raise ValueError("'query' must be a list")
            return {"rewards": [self.score(q) for q in queries]}
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list):
            raise ValueError("'input' must be a string or a list")
        model = body.get("model") or "fake"
        usage = {"prompt_tokens": 0, "total_tokens": 0, "completion_tokens": 0}
        if path.endswith("/classify"):
            data: list[dict[str, Any]] = [
                {"index": i, "label": "LABEL_0", "probs": [self.score(t)], "num_classes": 1}
                for i, t in enumerate(texts)
            ]
            return {"id": "classify-fake", "object": "list", "created": 0, "model": model,
                    "data": data, "usage": usage}  # fmt: skip
        if path.endswith("/pooling"):
            task = body.get("task")
            data = []
            for i, text in enumerate(texts):
                value = self.score(text)
                pooled = value if task == "token_classify" else [value]
                data.append({"index": i, "object": "pooling", "data": pooled})
            return {"id": "pool-fake", "object": "list", "created": 0, "model": model,
                    "data": data, "usage": usage}  # fmt: skip
        raise ValueError(f"no endpoint {path}")
