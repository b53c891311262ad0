"""OpenRLHF: the number `referee score` gives, from both of OpenRLHF's remote-reward forms.

OpenRLHF (0.11) scores a rollout in its rollout executor
(``openrlhf.utils.agent.SingleTurnAgentExecutor``), one sample per call. It sends the *query*:
the prompt's token ids and the response's, decoded together with ``skip_special_tokens=False``.
So the response ends in the token the model stopped on, the chat template's end-of-turn or
end-of-text marker (``<|im_end|>``, ``<|eot_id|>``, ``</s>``, ...), which no JSON parser or
exact match accepts: scored as sent, a perfect answer would train as 0.0. Two forms, both
named by ``--reward.remote_url`` (0.11's name; ``--remote_rm_url`` in earlier versions):

- ``--reward.remote_url http://host:8000/get_reward``: `referee serve`
  (`referee.backends.server`). Several URLs, comma-separated, share the load. OpenRLHF's
  client (a bare ``aiohttp.ClientSession``) sends no headers of its own, but it sends a URL's
  credentials as basic authentication, which `referee serve` takes as its token:
  ``http://referee:<token>@host:8000/get_reward`` (a URL-safe token with no comma, since
  OpenRLHF splits the option on commas).
- ``--reward.remote_url /abs/path/reward_func.py``: a Python file whose ``reward_func(queries,
  prompts, labels)`` OpenRLHF loads with ``importlib`` (under the module name ``reward_func``)
  and calls in a thread, one sample at a time. ``referee openrlhf-func SPEC -o FILE`` writes
  one; it binds `RewardFunc`, which may also be used in a file of your own.

Both answer alike, ``{"rewards": [...], "scores": [...], "extra_logs": {...}}`` with one value
per query (the shape of `reward_response`), and read a query alike (`rollouts_from`):

1. The completion is the query after its prompt. Where the decoded prompt differs from the
   prompt as sent (a tokenizer that cleans up spaces on decoding, like Llama 3's) it is found
   ignoring whitespace; where OpenRLHF cut the prompt's start off to fit ``max_len``, the
   query starts with the rest of it, and the completion follows that. A query in which its
   prompt cannot be found gets ``Failure("invalid_input")`` (so ``failure_value`` with
   ``referee_failed`` set), never a score of the whole query.
2. The end markers (`EndMarkers`) are stripped from the end of the completion, repeatedly and
   with the whitespace between them (``}<|im_end|><|endoftext|>`` -> ``}``); whitespace the
   model wrote before the first is kept, as in the text the model produced. By default, the
   markers of the common chat templates (`COMMON_END_MARKERS`: ChatML, Llama 3 and 4,
   Mistral/Llama 2, Gemma, Phi-3, DeepSeek, plain EOS, and common pad tokens); or markers you
   name (``--end-marker``); or a model's own, read from its tokenizer (``--tokenizer PATH``:
   its EOS and pad tokens, the EOS ids of its ``generation_config.json``, and the special
   tokens its chat template puts after an assistant turn); or none (``--no-strip-markers``).
   OpenRLHF 0.11 sends no pad tokens (its queries are unpadded); they are stripped for clients
   that pad.

A label that is a JSON object or array as text is decoded (the reference a field comparison
needs). OpenRLHF needs a number for every sample, so a rollout that gets no score is given
``failure_value`` with ``extra_logs["referee_failed"]`` = 1.0; see `extra_logs` for the
components.
"""

from referee.backends.openrlhf.func import RewardFunc, reward_func_source
from referee.backends.openrlhf.markers import (
    COMMON_END_MARKERS,
    BadMarkers,
    EndMarkers,
    choose_markers,
)
from referee.backends.openrlhf.query import completion_of, rollouts_from
from referee.backends.openrlhf.wire import (
    GetReward,
    component_keys,
    extra_logs,
    reward_response,
)

__all__ = [
    "COMMON_END_MARKERS",
    "BadMarkers",
    "EndMarkers",
    "GetReward",
    "RewardFunc",
    "choose_markers",
    "completion_of",
    "component_keys",
    "extra_logs",
    "reward_func_source",
    "reward_response",
    "rollouts_from",
]
