"""Harbor tasks per minute: `harbor_task`'s warm pool against one ``docker run`` per rollout.

One small Harbor task (``calc.add`` subtracts; a diff fixes it; ``tests/test.sh`` runs a
python check and writes ``reward.txt``) on an image built ``FROM`` a base imported from host
files (no registry; tests/support/images.py). Half the rollouts carry the fix (1.0), half a
wrong change (0.0); every value is checked.

- **build**: the task's image built once (a fresh build context each run), then asked for
  again (the cached tag: no build).
- **warm pool**: `HarborTask` scoring the rollouts, sequentially (``concurrency: 1``, one
  container warm ahead) and four at a time: each rollout in a fresh container taken from the
  pool (its replacement started in the background), diff applied, tests copied in, run, the
  reward file read.
- **docker run**: the same work with one ``containers.run`` per rollout (the docker SDK,
  same image, same hardening, sequential): the diff and the test script passed in the
  environment, the reward printed and read from the logs; the container removed after.

Both sides in the same run, alternating, best of `--repeat`. Prints tasks per minute and the
ratio (warm pool, sequential / docker run).

Usage: python benchmarks/bench_harbor.py [--rollouts 20] [--repeat 2] [--dockerd]
(DOCKER_HOST, the default socket, or --dockerd to start one with the safe flags)
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import referee  # noqa: E402
from referee.rewards.harbor import HarborTask  # noqa: E402
from referee.verifiers.containers import CAPS, ContainerEngine, close_shared  # noqa: E402
from tests.support.images import HARBOR_FIX, HARBOR_TEST, base_image, harbor_task  # noqa: E402

WRONG = HARBOR_FIX.replace("a + b", "a * b")
_RUN_SCRIPT = r"""
set -e
printf %s "$DIFF_B64" | base64 -d > /tmp/agent.diff
cd /app && git apply /tmp/agent.diff
mkdir -p /tests /logs/verifier
printf %s "$TEST_B64" | base64 -d > /tests/test.sh
bash /tests/test.sh
echo "REWARD=$(cat /logs/verifier/reward.txt)"
"""


def rollouts(
    n: int, reference: Any, fix: str, wrong: str
) -> tuple[list[referee.Rollout], list[float]]:
    """`n` rollouts of `reference`, alternately fixing it (1.0) and not (0.0)."""
    batch, want = [], []
    for i in range(n):
        diff = fix if i % 2 == 0 else wrong
        batch.append(referee.Rollout(completion=f"```diff\n{diff}```", reference=reference))
        want.append(1.0 if i % 2 == 0 else 0.0)
    return batch, want


def pooled(reward: referee.Reward, batch: list[referee.Rollout], want: list[float]) -> float:
    """Seconds to score `batch` through the reward (its warm pool), values checked."""
    started = time.perf_counter()
    scores = referee.score(reward, batch)
    seconds = time.perf_counter() - started
    got = [s.value for s in scores]
    assert got == want, [s.failure or s.reason for s in scores][:4]
    return seconds


@contextlib.contextmanager
def engine_url(dockerd: bool) -> Iterator[str | None]:
    """``DOCKER_HOST``, or a dockerd of our own with the safe flags (``--dockerd``); the
    shared container pools are closed at the end."""
    proc, url = None, os.environ.get("DOCKER_HOST")
    if dockerd:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from bench_sandbox import start_dockerd

        proc, url = start_dockerd()
    try:
        yield url
    finally:
        close_shared()
        if proc is not None:
            proc.terminate()
            proc.wait(30)


def docker_runs(engine: ContainerEngine, image: str, n: int) -> float:
    test_b64 = base64.b64encode(HARBOR_TEST.encode()).decode()
    started = time.perf_counter()
    for i in range(n):
        diff = HARBOR_FIX if i % 2 == 0 else WRONG
        logs = engine.client.containers.run(
            image,
            ["bash", "-c", _RUN_SCRIPT],
            environment={
                "DIFF_B64": base64.b64encode(diff.encode()).decode(),
                "TEST_B64": test_b64,
            },
            network_mode="none",
            cap_drop=["ALL"],
            cap_add=list(CAPS),
            security_opt=["no-new-privileges"],
            mem_limit=4 << 30,
            pids_limit=1024,
            remove=True,
        )
        want = "1" if i % 2 == 0 else "0"
        assert f"REWARD={want}" in logs.decode(), logs[-300:]
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rollouts", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--dockerd", action="store_true", help="start a dockerd of our own")
    args = parser.parse_args()
    with engine_url(args.dockerd) as url:
        run(url, args.rollouts, args.repeat)


def run(url: str | None, n: int, repeat: int) -> None:
    engine = ContainerEngine(url, build_network="none")
    base = base_image(engine.url, extra=["base64"])
    root = Path(tempfile.mkdtemp(prefix="referee-bench-harbor-"))
    task = harbor_task(root, base)
    (task / "environment" / "nonce.txt").write_text(secrets.token_hex(8))  # a real first build
    started = time.perf_counter()
    image = engine.image(name=task.name, context=task / "environment")
    first = time.perf_counter() - started
    started = time.perf_counter()
    engine.image(name=task.name, context=task / "environment")
    second = time.perf_counter() - started
    print(f"image build: first {first:.2f}s, second (cached) {second * 1000:.1f}ms")

    batch, want = rollouts(n, {"task": task.name}, HARBOR_FIX, WRONG)
    common: dict[str, Any] = {"tasks_dir": str(root), "docker_host": engine.url, "warm": 1}
    sequential = HarborTask(concurrency=1, **common)
    parallel = HarborTask(concurrency=4, **{**common, "warm": 4})
    pooled(sequential, batch[:2], want[:2])  # the pools start, and their first containers
    pooled(parallel, batch[:4], want[:4])
    best: dict[str, float] = {}
    for _ in range(repeat):
        for name, measure in (
            ("docker run", lambda: docker_runs(engine, image, n)),
            ("warm pool", lambda: pooled(sequential, batch, want)),
            ("warm pool x4", lambda: pooled(parallel, batch, want)),
        ):
            best[name] = min(best.get(name, float("inf")), measure())
    for name, seconds in best.items():
        print(f"{name:>13}: {n / seconds * 60:7.1f} tasks/min ({seconds / n * 1000:.0f}ms each)")
    print(
        f"ratio, warm pool (sequential) / docker run: {best['docker run'] / best['warm pool']:.2f}x"
    )
    ratio = best["docker run"] / best["warm pool x4"]
    print(f"ratio, warm pool (4 at once) / docker run: {ratio:.2f}x")


if __name__ == "__main__":
    main()
