"""The judge client's overhead, cache speed, and calls on re-scoring, against a loopback server.

1. Throughput at concurrency 64 against a scripted OpenAI-compatible server answering after
   50 ms: referee's JudgeClient (no cache) against a bare ``litellm.acompletion`` loop at the
   same concurrency, the same requests, in the same run. Target: at least 0.9x.
2. Cache-hit throughput: the same verdicts asked again, answered from the SQLite cache.
   Target: at least 20,000 verdicts/s.
3. HTTP calls when an already scored set is scored again. Target: 0.

Usage: python benchmarks/bench_judge.py [--calls 1000]   (needs: pip install "referee[judges]")
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from pydantic import BaseModel

from referee.judges import JudgeClient
from referee.judges.testing import FakeJudgeServer, Reply

MODEL = "openai/gpt-4.1-mini"
CONCURRENCY = 64


class Grade(BaseModel):
    score: int


def messages(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Grade answer number {i}: 42"}]


async def bare(url: str, calls: int) -> float:
    import litellm

    semaphore = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int) -> None:
        async with semaphore:
            r = await litellm.acompletion(
                model=MODEL, api_base=url, api_key="x", messages=messages(i),
                temperature=0.0, max_tokens=1024, timeout=30, max_retries=0,
            )  # fmt: skip
            Grade.model_validate_json(r.choices[0].message.content)

    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(calls)))
    return time.perf_counter() - start


async def with_client(client: JudgeClient, calls: int, offset: int = 0) -> float:
    start = time.perf_counter()
    await asyncio.gather(*(client.judge(messages(offset + i), Grade) for i in range(calls)))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    with FakeJudgeServer(lambda r: Reply('{"score": 7}', delay=0.05)) as server:
        plain = JudgeClient(model=MODEL, api_base=server.url, cache=False,
                            concurrency=CONCURRENCY, structured="prompt")  # fmt: skip
        asyncio.run(bare(server.url, 64))  # warm both paths (imports, connections)
        asyncio.run(with_client(plain, 64))
        t_bare = t_ref = float("inf")
        for _ in range(2):  # alternating, best of each
            t_bare = min(t_bare, asyncio.run(bare(server.url, args.calls)))
            t_ref = min(t_ref, asyncio.run(with_client(plain, args.calls)))
        print(f"judge throughput, {args.calls} calls at concurrency {CONCURRENCY}, 50 ms latency")
        print(f"  bare litellm.acompletion loop: {args.calls / t_bare:,.0f} calls/s")
        print(f"  referee JudgeClient:           {args.calls / t_ref:,.0f} calls/s")
        print(f"  ratio referee/bare: {t_bare / t_ref:.2f}x (target >= 0.9x)")

        with tempfile.TemporaryDirectory() as tmp:
            cached = JudgeClient(model=MODEL, api_base=server.url, max_in_flight=CONCURRENCY,
                                 cache_path=f"{tmp}/cache.sqlite", structured="prompt")  # fmt: skip
            asyncio.run(with_client(cached, args.calls, offset=10**6))  # the first scoring
            before = len(server.requests)
            t_hits = min(
                asyncio.run(with_client(cached, args.calls, offset=10**6)) for _ in range(3)
            )
            calls_again = len(server.requests) - before
        print(f"cache hits: {args.calls / t_hits:,.0f} verdicts/s (target >= 20,000/s)")
        print(f"HTTP calls when the scored set is scored again: {calls_again} (target 0)")


if __name__ == "__main__":
    main()
