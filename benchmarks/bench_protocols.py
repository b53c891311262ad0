"""The ecosystem's protocols, rollouts/s: NeMo Gym's ``/verify`` and ORS's ``call``, against
``/score``'s batched rate in the same run.

Trainers that speak NeMo Gym's resources-server protocol ask for one rollout's reward per
``POST /verify``; those that speak the Open Reward Standard open a session per rollout,
submit the answer through a tool ``call`` (an event stream) and close the session. In one run,
with `referee serve --tasks` in a process of its own and the extraction spec of
`bench_deterministic` (json_schema gate + field_match):

1. The baseline: ``/score`` with 64 rollouts per request, as many requests at once as give the
   same rollouts in flight (concurrency / 64).
2. ``/verify``, one NeMo Gym verify request (a Responses API ``response``, the reference in
   ``expected_answer``) per rollout.
3. ORS, one episode per rollout: ``/create`` (a task by index), ``/{env}/call``
   (``submit_answer``, the stream read to its ``end`` event), ``/delete``: three requests.

Each from a lean aiohttp client (one keep-alive session) at client concurrency 64
(``--concurrency``), as rollouts/s, as a multiple of the baseline, and as the server's CPU
time per rollout (from /proc); every side's rewards are checked equal to the baseline's.
Best of ``--repeat`` runs; the load average is printed, since the client shares the machine.

Usage: python benchmarks/bench_protocols.py [--rollouts 2048] [--concurrency 64]
(needs ``pip install "referee[serve]"``)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from benchmarks.bench_deterministic import SPEC, extraction_rollouts  # noqa: E402
from benchmarks.bench_openrlhf import (  # noqa: E402
    BATCH,
    Run,
    Server,
    bounded,
    measure,
    score_rows,
)

ENV = "extraction"


def workload(n: int) -> list[dict[str, Any]]:
    """The rollouts, as `/score` takes them; their prompts and references are the task file."""
    rows = []
    for r in extraction_rollouts(n, seed=5):
        prompt = f"Extract the funding round as JSON ({r.id})."
        rows.append({"id": str(r.id), "prompt": prompt, "completion": str(r.completion),
                     "reference": r.reference})  # fmt: skip
    return rows


async def score_batches(url: str, data: Any, concurrency: int) -> list[float]:
    return await score_rows(url, data[0], concurrency)


def verify_body(row: dict[str, Any]) -> dict[str, Any]:
    """NeMo Gym's verify request for a rollout: its prompt as the Responses input, its
    completion as the response's assistant message, the reference as a task field."""
    message = {
        "id": f"msg_{row['id']}", "type": "message", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": row["completion"], "annotations": []}],
    }  # fmt: skip
    response = {
        "id": f"resp_{row['id']}", "object": "response", "created_at": 0.0, "model": "policy",
        "output": [message], "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
    }  # fmt: skip
    return {
        "responses_create_params": {"input": [{"role": "user", "content": row["prompt"]}]},
        "response": response,
        "expected_answer": row["reference"],
    }


async def verify(url: str, data: Any, concurrency: int) -> list[float]:
    rows = data[0]
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(i: int) -> list[float]:
            async with session.post(url + "/verify", json=verify_body(rows[i])) as response:
                response.raise_for_status()
                return [(await response.json())["reward"]]

        return await bounded(len(rows), concurrency, one)


async def ors_episodes(url: str, data: Any, concurrency: int) -> list[float]:
    rows = data[0]
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(i: int) -> list[float]:
            headers = {"X-Session-ID": uuid.uuid4().hex}
            create = {"env_name": ENV, "split": "train", "index": i}
            async with session.post(url + "/create", json=create, headers=headers) as response:
                response.raise_for_status()
            call = {"name": "submit_answer", "input": {"answer": rows[i]["completion"]}}
            async with session.post(f"{url}/{ENV}/call", json=call, headers=headers) as response:
                response.raise_for_status()
                result = _stream_result(await response.text())
            async with session.post(url + "/delete", headers=headers) as response:
                response.raise_for_status()
            return [result["output"]["reward"]]

        return await bounded(len(rows), concurrency, one)


def _stream_result(text: str) -> dict[str, Any]:
    """The result of an ORS call's event stream: its ``chunk`` events' data and the ``end``
    event's, joined (keep-alive comments and the ``task_id`` event skipped)."""
    pieces: list[str] = []
    for event in text.replace("\r\n", "\n").split("\n\n"):
        lines = event.split("\n")
        if "event: chunk" in lines or "event: end" in lines:
            pieces.append("\n".join(line[6:] for line in lines if line.startswith("data: ")))
    result: dict[str, Any] = json.loads("".join(pieces))
    if not result.get("ok"):
        raise AssertionError(f"the call failed: {result}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rollouts", type=int, default=2048)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = workload(args.rollouts)
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "spec.json"
        spec.write_text(json.dumps(SPEC))
        tasks = Path(tmp) / "tasks.jsonl"
        tasks.write_text("".join(json.dumps({k: r[k] for k in ("id", "prompt", "reference")})
                                 + "\n" for r in rows))  # fmt: skip
        server = Server(spec, "--tasks", str(tasks), "--env-name", ENV)
        try:
            measure(score_batches, server, (rows[:256],), 64, 1, None)  # warm up
            load = os.getloadavg()[0]
            print(f"{len(rows)} extraction rollouts (json_schema gate + field_match); server in "
                  f"its own process; client concurrency {args.concurrency}; load average "
                  f"{load:.2f} on {os.cpu_count()} CPUs; best of {args.repeat}")  # fmt: skip
            c = args.concurrency
            base, base_cpu, want = measure(score_batches, server, (rows,), c, args.repeat, None)
            print(f"  {'':40s} {'rollouts/s':>10s}  ratio  server CPU/rollout")
            print(f"  {f'/score, {BATCH} rollouts/request':40s} {base:10.0f}  1.00x  "
                  f"{base_cpu:6.0f} us")  # fmt: skip
            sides: list[tuple[str, Run]] = [
                ("NeMo Gym /verify, 1 rollout/request", verify),
                ("ORS create + call (SSE) + delete", ors_episodes),
            ]
            for name, run in sides:
                rate, cpu, _ = measure(run, server, (rows,), c, args.repeat, want)
                print(f"  {name:40s} {rate:10.0f}  {rate / base:.2f}x  {cpu:6.0f} us")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
