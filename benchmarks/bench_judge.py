"""The judge client's throughput against its peers, cache speed, and calls on re-scoring.

A scripted OpenAI-compatible server runs in a process of its own (in-process, it would share
the client's GIL and hide the client's cost) and answers every call after 50 ms. In one run:

1. Throughput at concurrency 64 and 256 (``--concurrency``), the same rubric-judge messages
   for every client: a bare ``litellm.acompletion`` loop, the ``openai`` SDK
   (``AsyncOpenAI``), a bare aiohttp loop, and referee's JudgeClient without a cache (on its
   own HTTP transport, and on litellm). Each as calls/s, as a share of the physical limit
   (concurrency / latency) and as a multiple of bare litellm. Targets at 64: referee at least
   0.8x the limit and at least 4x bare litellm.
2. Cache hits: the same verdicts asked again, in this process (the memory front) and from a
   fresh process (SQLite, every verdict parsed). Target: at least 50,000 verdicts/s.
3. HTTP calls the server saw while a scored set was scored again. Target: 0.
4. The same re-scoring as a user runs it: ``referee.score`` with a ``rubric_judge`` (messages
   built, verdict read into components and a Score) from a fresh process, every verdict
   cached, against the client's own hits (2.) as the baseline.
5. Cache hits from Redis beside SQLite's: the same verdicts, copied from the SQLite file into a
   redis-server started here (loopback, no persistence) under the same keys, asked from a fresh
   process (an empty memory front: every hit goes to Redis), as verdicts/s and as a multiple
   of the SQLite figure of 2. Skipped, saying so, where ``redis-server`` is not installed.

Every measurement starts from a collected heap (``--freeze``: collected and frozen; see
`settle`), the same for every client; the best of ``--repeat`` runs is kept. The machine's
load average is printed: on a small shared machine, the figures move with it.

Usage: python benchmarks/bench_judge.py [--calls 2000] [--concurrency 64 256] [--cache-only]
(needs ``pip install "referee[judges]"``; the openai SDK comes with litellm)
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from pydantic import BaseModel

import referee
from referee.judges import JudgeClient
from referee.judges.testing import redis_server, requests_seen, server_process
from referee.judges.transport import Transport
from referee.rewards import RubricJudge

MODEL = "openai/gpt-4.1-mini"
LATENCY = 0.05


class Grade(BaseModel):
    score: int
    reason: str = ""


_JUDGE = RubricJudge(rubric="helpfulness", client=JudgeClient(model=MODEL))
_ANSWER = "Collisions go to a bucket's chain, or to the next free slot. " * 8


def messages(i: int) -> list[dict[str, Any]]:
    """What a rubric judge sends for rollout `i` (about 2 kB)."""
    prompt = "Explain how a hash map handles collisions, briefly."
    return _JUDGE.messages(referee.Rollout(prompt=prompt, completion=f"Answer {i}: {_ANSWER}"))


Call = Callable[[int, list[dict[str, Any]]], Awaitable[None]]
Close = Callable[[], Awaitable[None]]
Peer = Callable[[str, int], Awaitable[tuple[Call, Close]]]
"""A client under test: given the server's URL and the concurrency, how to make one call."""


FREEZE = False


def settle() -> None:
    """Collect before a measurement; with ``--freeze``, also freeze what survives (as some
    long-running servers do after their imports), so full collections of the import heap
    (400,000 objects once litellm is imported, about 0.2 s each here) stay out of it. Without
    it, a client that allocates more triggers more of them, as it would in a trainer."""
    gc.collect()
    if FREEZE:
        gc.freeze()


async def timed(peer: Peer, url: str, calls: int, concurrency: int) -> float:
    """Seconds for `calls` calls at `concurrency` by `peer` (its setup not counted)."""
    one, close = await peer(url, concurrency)
    semaphore = asyncio.Semaphore(concurrency)
    bodies = [messages(i) for i in range(calls)]

    async def bounded(i: int) -> None:
        async with semaphore:
            await one(i, bodies[i])

    settle()
    start = time.perf_counter()
    await asyncio.gather(*(bounded(i) for i in range(calls)))
    elapsed = time.perf_counter() - start
    await close()
    return elapsed


async def nothing() -> None:
    return None


async def bare_litellm(url: str, concurrency: int) -> tuple[Call, Close]:
    import litellm

    litellm.suppress_debug_info = True

    async def one(i: int, body: list[dict[str, Any]]) -> None:
        r = await litellm.acompletion(
            model=MODEL, api_base=url, api_key="x", messages=body,
            temperature=0.0, max_tokens=1024, timeout=60, max_retries=0,
        )  # fmt: skip
        Grade.model_validate_json(r.choices[0].message.content)

    return one, nothing


async def openai_sdk(url: str, concurrency: int) -> tuple[Call, Close]:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=url, api_key="x", max_retries=0, timeout=60)

    async def one(i: int, body: list[dict[str, Any]]) -> None:
        r = await client.chat.completions.create(
            model="gpt-4.1-mini", messages=body, temperature=0.0, max_tokens=1024,  # type: ignore[arg-type]
        )  # fmt: skip
        Grade.model_validate_json(r.choices[0].message.content or "")

    return one, client.close


async def bare_aiohttp(url: str, concurrency: int) -> tuple[Call, Close]:
    import aiohttp

    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))

    async def one(i: int, body: list[dict[str, Any]]) -> None:
        payload = {"model": "gpt-4.1-mini", "messages": body, "temperature": 0.0,
                   "max_tokens": 1024}  # fmt: skip
        async with session.post(f"{url}/chat/completions", json=payload,
                                headers={"Authorization": "Bearer x"}) as r:  # fmt: skip
            data = json.loads(await r.read())
        Grade.model_validate_json(data["choices"][0]["message"]["content"])

    return one, session.close


def referee_client(transport: Transport = "auto", cache_path: str | None = None) -> Peer:
    async def peer(url: str, concurrency: int) -> tuple[Call, Close]:
        client = JudgeClient(
            model=MODEL, api_base=url, structured="prompt", max_in_flight=concurrency,
            transport=transport, cache=cache_path is not None, cache_path=cache_path,
        )  # fmt: skip

        async def one(i: int, body: list[dict[str, Any]]) -> None:
            await client.judge(body, Grade)

        return one, nothing

    return peer


RUBRIC_REPLY = (
    '{"criteria": {"addresses_request": 4, "completeness": 3, "actionable": 5, "concise": 2}, '
    '"reasoning": "verdict {n}"}'
)
"""A verdict under the helpfulness rubric (part 4's server replies with it)."""


async def hits(cache_path: str, url: str, calls: int) -> float:
    """Seconds to ask `calls` cached verdicts again (all at once, as a scored log does), from
    the SQLite file `cache_path` or, given a ``redis://`` URL, from Redis."""
    where: dict[str, Any] = (
        {"cache": cache_path} if cache_path.startswith("redis://") else {"cache_path": cache_path}
    )
    client = JudgeClient(model=MODEL, api_base=url, structured="prompt", **where)
    bodies = [messages(i) for i in range(calls)]
    settle()
    start = time.perf_counter()
    verdicts = await asyncio.gather(*(client.judge(b, Grade) for b in bodies))
    elapsed = time.perf_counter() - start
    if not all(v.cached for v in verdicts):
        raise SystemExit("a verdict was not cached")
    return elapsed


def rubric_rollouts(calls: int) -> list[referee.Rollout]:
    prompt = "Explain how a hash map handles collisions, briefly."
    return [referee.Rollout(id=str(i), prompt=prompt, completion=f"Answer {i}: {_ANSWER}")
            for i in range(calls)]  # fmt: skip


def rubric_judge(cache_path: str, url: str) -> RubricJudge:
    client = JudgeClient(model=MODEL, api_base=url, structured="prompt", cache_path=cache_path)
    return RubricJudge(rubric="helpfulness", client=client)


def rescored(cache_path: str, url: str, calls: int) -> float:
    """Seconds for ``referee.score`` to score `calls` rollouts again with a rubric judge whose
    verdicts are all cached."""
    judge, rollouts = rubric_judge(cache_path, url), rubric_rollouts(calls)
    settle()
    start = time.perf_counter()
    scores = referee.score(judge, rollouts)
    elapsed = time.perf_counter() - start
    if any(s.value is None for s in scores):
        raise SystemExit(f"a rollout failed: {next(s for s in scores if s.value is None)}")
    return elapsed


def fresh(flag: str, cache_path: str, url: str, calls: int) -> float:
    """The best of three runs of `flag`'s half in processes of their own (a number each)."""
    return max(
        float(subprocess.run(
            [sys.executable, __file__, "--calls", str(calls), flag, f"{cache_path}|{url}",
             *(["--freeze"] if FREEZE else [])],
            check=True, capture_output=True, text=True,
        ).stdout)
        for _ in range(3)
    )  # fmt: skip


def start_redis(directory: str) -> tuple[subprocess.Popen[bytes], str] | None:
    """A redis-server on a free loopback port keeping nothing on disk, as the tests start one
    (None where it is not installed), and the URL of its database 0."""
    started = redis_server(directory)
    if started is None:
        return None
    server, port = started
    return server, f"redis://127.0.0.1:{port}/0"


def copy_to_redis(cache_path: str, redis_url: str) -> int:
    """Copy every entry of the SQLite cache into Redis under the same key (the namespace
    before it); returns how many."""
    import redis

    from referee.judges.redis_cache import NAMESPACE

    with sqlite3.connect(cache_path) as conn:
        rows = conn.execute("SELECT key, value FROM verdicts").fetchall()
    redis.Redis.from_url(redis_url).mset({NAMESPACE + key: value for key, value in rows})
    return len(rows)


def redis_hits(cache_path: str, url: str, calls: int, directory: str) -> float | None:
    """Part 5: verdicts/s from Redis in a fresh process, the SQLite cache copied there."""
    started = start_redis(directory)
    if started is None:
        return None
    server, redis_url = started
    try:
        copy_to_redis(cache_path, redis_url)
        return fresh("--hits-from", redis_url, url, calls)
    finally:
        server.kill()  # it keeps nothing: no shutdown to wait for
        server.wait(10)


PEERS: dict[str, Peer] = {
    "bare litellm.acompletion": bare_litellm,
    "openai SDK (AsyncOpenAI)": openai_sdk,
    "bare aiohttp loop": bare_aiohttp,
    "referee JudgeClient (http)": referee_client(),
    "referee JudgeClient (litellm)": referee_client("litellm"),
}


def throughput(url: str, calls: int, concurrency: int, repeat: int, only: str) -> None:
    limit = concurrency / LATENCY
    rates: dict[str, float] = {}
    for name, peer in PEERS.items():
        if only not in name and name != "bare litellm.acompletion":
            continue
        asyncio.run(timed(peer, url, min(calls, 4 * concurrency), concurrency))  # warm: imports
        best = min(asyncio.run(timed(peer, url, calls, concurrency)) for _ in range(repeat))
        rates[name] = calls / best
    litellm_rate = rates["bare litellm.acompletion"]
    print(f"\n{calls} calls at concurrency {concurrency}, {LATENCY * 1000:.0f} ms latency "
          f"(physical limit {limit:,.0f} calls/s)")  # fmt: skip
    for name, rate in rates.items():
        print(f"  {name:31} {rate:7,.0f} calls/s  {rate / limit:5.2f}x limit  "
              f"{rate / litellm_rate:5.1f}x litellm")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--repeat", type=int, default=2, help="runs per client; best is kept")
    parser.add_argument("--only", default="", help="only the clients whose name has this")
    parser.add_argument("--freeze", action="store_true", help="gc.freeze() before each run")
    parser.add_argument("--cache-only", action="store_true", help="skip the throughput part")
    parser.add_argument("--hits-from", help=argparse.SUPPRESS)  # the fresh-process half of 2
    parser.add_argument("--rescore-from", help=argparse.SUPPRESS)  # part 4
    args = parser.parse_args()
    global FREEZE
    FREEZE = args.freeze
    if args.hits_from:
        cache_path, url = args.hits_from.split("|")
        print(args.calls / asyncio.run(hits(cache_path, url, args.calls)))
        return
    if args.rescore_from:
        cache_path, url = args.rescore_from.split("|")
        print(args.calls / rescored(cache_path, url, args.calls))
        return
    import litellm  # before the runs: it configures its logger on import

    litellm.suppress_debug_info = True
    logging.getLogger("LiteLLM").setLevel(logging.ERROR)  # its per-loop logging-worker notes
    server, url = server_process(LATENCY)
    try:
        print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
              f"heap {'frozen' if FREEZE else 'collected'} before each run")  # fmt: skip
        for concurrency in [] if args.cache_only else args.concurrency:
            throughput(url, args.calls, concurrency, args.repeat, args.only)
        with tempfile.TemporaryDirectory() as tmp:
            cache_path = f"{tmp}/cache.sqlite"
            # the first scoring, through the server
            asyncio.run(timed(referee_client(cache_path=cache_path), url, args.calls, 256))
            before = requests_seen(url)
            warm = min(asyncio.run(hits(cache_path, url, args.calls)) for _ in range(3))
            fresh_hits = fresh("--hits-from", cache_path, url, args.calls)
            from_redis = redis_hits(cache_path, url, args.calls, tmp)
            again = requests_seen(url) - before
            rubric_server, rubric_url = server_process(LATENCY, RUBRIC_REPLY)
            try:
                rubric_cache = f"{tmp}/rubric.sqlite"
                rescored(rubric_cache, rubric_url, args.calls)  # the first scoring
                before = requests_seen(rubric_url)
                fresh_rescore = fresh("--rescore-from", rubric_cache, rubric_url, args.calls)
                again += requests_seen(rubric_url) - before
            finally:
                rubric_server.terminate()
                rubric_server.wait(10)
        print(f"\ncache hits, {args.calls} verdicts (target >= 50,000/s)")
        print(f"  same process (memory front):   {args.calls / warm:9,.0f} verdicts/s")
        print(f"  fresh process (SQLite, parsed): {fresh_hits:9,.0f} verdicts/s")
        if from_redis is None:
            print("  fresh process (Redis): skipped, redis-server is not installed")
        else:
            print(f"  fresh process (Redis, parsed):  {from_redis:9,.0f} verdicts/s  "
                  f"({from_redis / fresh_hits:.2f}x SQLite's)")  # fmt: skip
        print(f"HTTP calls while the scored sets were scored again: {again} (target 0)")
        print(f"re-scoring {args.calls} rollouts with referee.score and a rubric_judge, fresh "
              f"process: {fresh_rescore:,.0f} rollouts/s "
              f"({fresh_rescore / fresh_hits:.2f}x the client's own hits)")  # fmt: skip
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
