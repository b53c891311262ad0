"""OpenRLHF's remote reward, rollouts/s: `/get_reward` one query per request, against `/score`.

OpenRLHF 0.11's rollout executor asks for one sample's reward per request, as soon as that
sample is generated (``SingleTurnAgentExecutor``: one query, a new HTTP session each time), so
a step's rollouts reach the reward server as many small concurrent requests. In one run, with
`referee serve` in a process of its own and the extraction spec of `bench_deterministic`
(json_schema gate + field_match) on ChatML queries ending in ``<|im_end|>``:

1. ``/get_reward``, one query per request, at client concurrency 64 and 256 (``--concurrency``),
   from a lean aiohttp client (one keep-alive session), so the server is what is measured.
2. The same through OpenRLHF's own client code (``_fetch_rewards_via_http``: a new session and
   connection per request), where openrlhf is installed: what a trainer gets.
3. The baseline: ``/score`` with 64 rollouts per request, as many requests at once as give the
   same rollouts in flight (concurrency / 64).
4. The ``reward_func`` file form (``referee openrlhf-func``): `RewardFunc` in this process,
   called in threads one query at a time at the same concurrency, as OpenRLHF's executor calls
   it (``asyncio.to_thread``); no HTTP.

Each as rollouts/s, as a multiple of the baseline, and as the server's CPU time per rollout
(from /proc: what one server core can take, whatever the client costs); every answer's rewards
are checked equal to the baseline's. The last line says which form to configure. Best of
``--repeat`` runs. The client shares this machine with the server; the load average is
printed, since on a small shared machine the figures move with it.

Usage: python benchmarks/bench_openrlhf.py [--rollouts 4096] [--concurrency 64 256]
(needs ``pip install "referee[serve]"``; part 2 needs ``pip install --no-deps openrlhf``)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from benchmarks.bench_deterministic import SPEC, extraction_rollouts  # noqa: E402
from referee.backends.openrlhf import RewardFunc  # noqa: E402

PROMPT = (
    "<|im_start|>user\nExtract the funding round as JSON ({i}).<|im_end|>\n<|im_start|>assistant\n"
)
BATCH = 64  # rollouts per /score request: the baseline


def workload(n: int) -> tuple[list[str], list[str], list[str], list[dict[str, Any]]]:
    """OpenRLHF's (queries, prompts, labels), and the same rollouts as /score takes them."""
    rollouts = extraction_rollouts(n, seed=3)
    prompts = [PROMPT.format(i=r.id) for r in rollouts]
    queries = [p + str(r.completion) + "<|im_end|>" for p, r in zip(prompts, rollouts, strict=True)]
    labels = [json.dumps(r.reference) for r in rollouts]
    rows = [{"id": r.id, "prompt": p, "completion": r.completion, "reference": r.reference}
            for p, r in zip(prompts, rollouts, strict=True)]  # fmt: skip
    return queries, prompts, labels, rows


class Server:
    """`referee serve` in its own process (`args`: more of its options)."""

    def __init__(self, spec: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "referee.cli", "serve", "--spec", str(spec), "--port", "0",
             *args],
            stderr=subprocess.PIPE, text=True, cwd=ROOT,
        )  # fmt: skip
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()
        match = re.search(r"on (http://\S+)", line)
        if not match:
            raise RuntimeError(f"referee serve did not start: {line}{self.proc.stderr.read()}")
        self.url = match.group(1)

    def cpu(self) -> float:
        """CPU seconds the server process has used (Linux /proc; 0.0 elsewhere)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


Run = Callable[[str, Any, int], Awaitable[list[float]]]
"""A side under test: given the server's URL, the workload and the concurrency, its rewards."""


async def bounded(
    n: int, concurrency: int, one: Callable[[int], Awaitable[list[float]]]
) -> list[float]:
    """Items 0..n-1 through `one`, `concurrency` at a time (as a trainer's samples arrive)."""
    out: list[list[float]] = [[] for _ in range(n)]
    next_item = iter(range(n))

    async def worker() -> None:
        for i in next_item:
            out[i] = await one(i)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return [v for chunk in out for v in chunk]


async def lean_get_reward(url: str, data: Any, concurrency: int) -> list[float]:
    queries, prompts, labels, _ = data
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(i: int) -> list[float]:
            body = {"query": [queries[i]], "prompts": [prompts[i]], "labels": [labels[i]]}
            async with session.post(url + "/get_reward", json=body) as response:
                response.raise_for_status()
                return list((await response.json())["rewards"])

        return await bounded(len(queries), concurrency, one)


async def openrlhf_get_reward(url: str, data: Any, concurrency: int) -> list[float]:
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    queries, prompts, labels, _ = data
    executor = SingleTurnAgentExecutor(remote_rm_url=url + "/get_reward")

    async def one(i: int) -> list[float]:
        answers = await executor._fetch_rewards_via_http([queries[i]], [prompts[i]], [labels[i]])
        return list(answers[0]["rewards"])

    return await bounded(len(queries), concurrency, one)


async def score_batches(url: str, data: Any, concurrency: int) -> list[float]:
    return await score_rows(url, data[3], concurrency)


async def score_rows(url: str, rows: list[dict[str, Any]], concurrency: int) -> list[float]:
    """The rows' rewards from ``/score``, `BATCH` per request, as many requests at once as
    keep `concurrency` rollouts in flight."""
    batches = [rows[i : i + BATCH] for i in range(0, len(rows), BATCH)]
    async with aiohttp.ClientSession() as session:

        async def one(i: int) -> list[float]:
            async with session.post(url + "/score", json={"rollouts": batches[i]}) as response:
                response.raise_for_status()
                return [s["reward"] for s in (await response.json())["scores"]]

        return await bounded(len(batches), max(1, concurrency // BATCH), one)


def in_process(func: RewardFunc) -> Run:
    async def run(url: str, data: Any, concurrency: int) -> list[float]:
        queries, prompts, labels, _ = data

        async def one(i: int) -> list[float]:
            answer = await asyncio.to_thread(func, [queries[i]], [prompts[i]], [labels[i]])
            return list(answer["rewards"])

        return await bounded(len(queries), concurrency, one)

    return run


def measure(
    run: Run, server: Server, data: Any, concurrency: int, repeat: int, want: list[float] | None
) -> tuple[float, float, list[float]]:
    """Rollouts/s (best of `repeat`), the server's CPU microseconds per rollout in that run,
    and the rewards (checked against `want`)."""
    best, cpu = float("inf"), 0.0
    values: list[float] = []
    for _ in range(repeat):
        cpu_start, start = server.cpu(), time.perf_counter()
        values = asyncio.run(run(server.url, data, concurrency))
        took = time.perf_counter() - start
        if took < best:
            best, cpu = took, server.cpu() - cpu_start
        if want is not None and values != want:
            raise AssertionError("rewards differ from /score's")
    n = len(data[0])
    return n / best, cpu / n * 1e6, values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rollouts", type=int, default=4096)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    data = workload(args.rollouts)
    try:
        import openrlhf.utils.agent  # noqa: F401

        have_openrlhf = True
    except ImportError:
        have_openrlhf = False
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "spec.json"
        spec.write_text(json.dumps(SPEC))
        server = Server(spec)
        func = RewardFunc(spec)
        try:
            # Warm up: the server's first requests, this process's imports.
            measure(score_batches, server, workload(256), 64, 1, None)
            load = os.getloadavg()[0]
            print(f"{args.rollouts} extraction rollouts (json_schema gate + field_match), ChatML "
                  f"queries; server in its own process; load average {load:.2f} on "
                  f"{os.cpu_count()} CPUs; best of {args.repeat}")  # fmt: skip
            for c in args.concurrency:
                base, base_cpu, want = measure(score_batches, server, data, c, args.repeat, None)
                rows: list[tuple[str, float, float]] = []
                sides: list[tuple[str, Any]] = [("/get_reward, 1 query/request", lean_get_reward)]
                if have_openrlhf:
                    sides.append(("/get_reward via OpenRLHF's client", openrlhf_get_reward))
                sides.append(("reward_func file (in-process)", in_process(func)))
                for name, run in sides:
                    rate, cpu, _ = measure(run, server, data, c, args.repeat, want)
                    rows.append((name, rate, cpu))
                print(f"\nconcurrency {c} (baseline: /score, {BATCH}/request, "
                      f"{max(1, c // BATCH)} at once):")  # fmt: skip
                print(f"  {'':36s} {'rollouts/s':>10s}  ratio  server CPU/rollout")
                print(
                    f"  {'/score, 64 rollouts/request':36s} {base:10.0f}  1.00x  {base_cpu:6.0f} us"
                )
                for name, rate, cpu in rows:
                    where = "     - (no server)" if "in-process" in name else f"{cpu:6.0f} us"
                    print(f"  {name:36s} {rate:10.0f}  {rate / base:.2f}x  {where}")
                best_name, best_rate, _ = max(rows, key=lambda r: r[1])
                served = [r for r in rows if r[0].startswith("/get_reward, 1")]
                print(f"  -> configure: {best_name} ({best_rate:.0f} rollouts/s here); "
                      f"/get_reward takes about {1e6 / served[0][2]:.0f} rollouts/s per server "
                      f"core at one query per request")  # fmt: skip
            if not have_openrlhf:
                print("\n(openrlhf not installed: its own client was not measured; "
                      "pip install --no-deps openrlhf)")  # fmt: skip
        finally:
            server.stop()


if __name__ == "__main__":
    main()
