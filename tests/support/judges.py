"""Scripted judges for `FakeJudgeServer`, whose grades are pure functions of what they are shown.

`letter_judge` grades one response (any process asking gets the same grade); `relative` ranks the
attempts of a group by length within what it was shown (a group split in two would get other
scores). Specs that point a judge at such a server come with them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from referee.judges.testing import FakeJudgeServer, Reply


def letter_judge(request: dict[str, Any]) -> Reply:
    """A scripted judge whose grade is a pure function of the fenced response: 1 + (the number
    of letters 'e' in it) mod 5, for every criterion. Any process asking gets the same grade."""
    system, user = (m["content"] for m in request["messages"][:2])
    fence = re.search(r"<<([0-9a-f]{24})>>", system).group(1)  # type: ignore[union-attr]
    inside = re.findall(rf"RESPONSE:\n<<{fence}>>\n(.*?)\n<</{fence}>>", user, re.DOTALL)[0]
    grade = 1 + inside.count("e") % 5
    ids = re.findall(r"^- (\w+) \(", user, re.MULTILINE)
    return Reply(json.dumps({"criteria": dict.fromkeys(ids, grade), "reasoning": f"{grade}"}))


def spec_with_judge(server: FakeJudgeServer, cache: Path | None) -> dict[str, Any]:
    """JSON validity plus an async rubric judge on the loopback server."""
    judge: dict[str, Any] = {
        "type": "rubric_judge",
        "rubric": "helpfulness",
        "model": "openai/judge",
        "api_base": server.url,
        "structured": "prompt",
        "weight": 0.7,
    }
    if cache is None:
        judge["cache"] = False
    else:
        judge["cache_path"] = str(cache)
    return {
        "name": "graded",
        "combine": "weighted",
        "components": {"valid": {"type": "json_valid", "weight": 0.3}, "judge": judge},
    }


def attempts(request: dict[str, Any]) -> list[str]:
    system, user = (m["content"] for m in request["messages"][:2])
    fence = re.search(r"<<([0-9a-f]{24})>>", system).group(1)  # type: ignore[union-attr]
    return re.findall(rf"ATTEMPT \d+:\n<<{fence}>>\n(.*?)\n<</{fence}>>", user, re.DOTALL)


def relative(request: dict[str, Any]) -> Reply:
    """Scores each attempt by its rank by length within what it was shown: a group split in
    two would get different scores than the whole group."""
    shown = attempts(request)
    order = sorted(shown, key=len)
    n = max(len(shown) - 1, 1)
    return Reply(json.dumps({"scores": [order.index(a) / n for a in shown]}))


def rank_spec(server: FakeJudgeServer) -> dict[str, Any]:
    return {"name": "ranked", "type": "group_rank", "model": "openai/j", "api_base": server.url,
            "cache": False, "structured": "prompt", "orders": 1}  # fmt: skip


GROUPED = [  # three groups of three, their members interleaved in the batch
    ("Q1", "a", "g1"), ("Q2", "bb", "g2"), ("Q1", "aaaa", "g1"), ("Q3", "c", "g3"),
    ("Q2", "b", "g2"), ("Q1", "aa", "g1"), ("Q3", "ccc", "g3"), ("Q2", "bbbbb", "g2"),
    ("Q3", "cc", "g3"),
]  # fmt: skip
GROUPED_WANT = [0.0, 0.5, 1.0, 0.0, 0.0, 0.5, 1.0, 1.0, 0.5]
