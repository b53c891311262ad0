"""LLM judges: the client every judge call goes through, its cache, and a scripted fake server
for tests (`referee.judges.testing`). Needs ``pip install "referee[judges]"``."""

from referee.judges.cache import VerdictCache, cache_key, default_cache_path
from referee.judges.client import (
    BudgetExceeded,
    JudgeClient,
    JudgeError,
    JudgeTimeout,
    Verdict,
    set_spend_cap,
    spent,
)

__all__ = [
    "BudgetExceeded",
    "JudgeClient",
    "JudgeError",
    "JudgeTimeout",
    "Verdict",
    "VerdictCache",
    "cache_key",
    "default_cache_path",
    "set_spend_cap",
    "spent",
]
