from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import referee
from referee.backends.server import serve as serve_reward
from referee.judges.testing import FakeJudgeServer, Reply

HANG = 60.0
"""Seconds a test waits for what should take a fraction of one."""


@contextmanager
def running(reward: referee.Reward, **options: Any) -> Iterator[str]:
    """`serve(reward)` in a thread of this process (so caplog sees what it logs); yields its
    base URL, and stops it (draining requests in flight) on leaving."""
    urls: list[str] = []
    started = threading.Event()
    box: dict[str, Any] = {}

    async def main() -> None:
        box["loop"], box["stop"] = asyncio.get_running_loop(), asyncio.Event()
        await serve_reward(reward, port=0, ready=lambda url: (urls.append(url), started.set()),
                           stop=box["stop"], shutdown_timeout=5, **options)  # fmt: skip

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    assert started.wait(timeout=HANG)
    try:
        yield urls[0]
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(timeout=HANG)


def letter_judge(request: dict[str, Any]) -> Reply:
    """A scripted judge whose grade is a pure function of the fenced response: 1 + (the number
    of letters 'e' in it) mod 5, for every criterion. Any process asking gets the same grade."""
    system, user = (m["content"] for m in request["messages"][:2])
    fence = re.search(r"<<([0-9a-f]{24})>>", system).group(1)  # type: ignore[union-attr]
    inside = re.findall(rf"RESPONSE:\n<<{fence}>>\n(.*?)\n<</{fence}>>", user, re.DOTALL)[0]
    grade = 1 + inside.count("e") % 5
    ids = re.findall(r"^- (\w+) \(", user, re.MULTILINE)
    return Reply(json.dumps({"criteria": dict.fromkeys(ids, grade), "reasoning": f"{grade}"}))


@pytest.fixture(scope="module")
def judge_server() -> Iterator[FakeJudgeServer]:
    with FakeJudgeServer(letter_judge) as server:
        yield server


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


@pytest.fixture(scope="session")
def local_ray() -> Iterator[None]:
    """A local Ray for verl's reward loop; started once, it takes seconds."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}})  # fmt: skip
    yield
    ray.shutdown()
