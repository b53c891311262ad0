"""LLM judges: the client every judge call goes through (`client`), how its calls travel
(`transport`: referee's own HTTP transport for OpenAI-compatible servers, `via_litellm` for
every other provider), its cache, the process-wide limits it shares (`limits`), scores from
logprobs (`logprobs`), what a judge is shown (`prompts`), what every judge reward holds
(`options`), rubrics, and a scripted fake server for tests (`referee.judges.testing`). Needs
``pip install "referee[judges]"``."""

import os as _os

# Offline cost map: litellm fetches one from the internet at import otherwise. Set here, before
# referee could import litellm, unless the user chose otherwise.
_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from referee.judges.cache import (
    VerdictCache,
    VerdictStore,
    cache_key,
    default_cache_path,
)
from referee.judges.client import (
    BudgetExceeded,
    JudgeClient,
    JudgeError,
    JudgeTimeout,
    Verdict,
    set_spend_cap,
    spent,
)
from referee.judges.options import JudgeOptions, PanelOptions
from referee.judges.prompts import fence_for, judge_messages, verdict_model
from referee.judges.redis_cache import RedisVerdictCache
from referee.judges.rubric import Criterion, Rubric, Scale, available_rubrics, load_rubric
from referee.judges.stores import shared_cache

__all__ = [
    "BudgetExceeded",
    "Criterion",
    "JudgeClient",
    "JudgeError",
    "JudgeOptions",
    "JudgeTimeout",
    "PanelOptions",
    "RedisVerdictCache",
    "Rubric",
    "Scale",
    "Verdict",
    "VerdictCache",
    "VerdictStore",
    "available_rubrics",
    "cache_key",
    "default_cache_path",
    "fence_for",
    "judge_messages",
    "load_rubric",
    "set_spend_cap",
    "shared_cache",
    "spent",
    "verdict_model",
]
