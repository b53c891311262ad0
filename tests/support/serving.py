"""`referee serve` for tests: in a thread of this process, or as users run it (the CLI in its
own process); and the plain HTTP calls a client makes to it."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import referee
from referee.backends.server import serve as serve_reward

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


SPEC = {
    "name": "answer",
    "combine": "weighted",
    "components": {
        "boxed": {"type": "math_answer", "no_answer": "fail", "weight": 0.8},
        "short": {"type": "length", "unit": "chars", "max_length": 40, "cache_length": 20,
                  "weight": 0.2},
    },
    "on_failure": "fail",
}  # fmt: skip


def request(
    url: str, body: Any = None, *, method: str = "POST", raw: bytes | None = None
) -> tuple[int, Any]:
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"content-type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(req, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


class Server:
    def __init__(self, spec_path: Path, *args: str) -> None:
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "referee.cli", "serve", "--spec", str(spec_path),
             "--port", "0", *args],
            stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()
        match = re.search(r"on (http://\S+)", line)
        assert match, f"the server did not start: {line}{self.proc.stderr.read()}"
        self.url = match.group(1)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


ROLLOUTS = [
    {"id": "a", "prompt": "2+2?", "completion": "\\boxed{4}", "reference": "4"},
    {"id": "b", "prompt": "2+2?", "completion": "It is \\boxed{5}, " + "x" * 40, "reference": "4"},
    {"id": "c", "prompt": "2+2?", "completion": "no idea", "reference": "4"},
]


def post(url: str, body: Any) -> Any:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(req, timeout=HANG) as response:
        return json.loads(response.read())
