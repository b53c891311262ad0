"""pairwise_tournament: judge calls per group and groups per second, for each pair strategy.

A scripted OpenAI-compatible server runs in a process of its own
(``python -m referee.judges.testing --delay 0.01``: every call answered after 10 ms, the
verdict "A"). Groups of 8 distinct attempts are scored with ``pairs: circular | all_pairs`` and
``swap: false | true``, without a cache; the server counts the calls it saw. Expected calls per
group: circular n = 8 (16 with swap), all_pairs n(n - 1)/2 = 28 (56 with swap), as NeMo Gym's
``genrm_compare`` strategies define them. Both aggregates are timed (``bradley_terry`` fits
each group with choix), after one warm-up run. Groups per second move with the machine's load.
Runs in well under a minute.

Usage: python benchmarks/bench_tournament.py [--groups 40] [--size 8]
(needs ``pip install "referee[judges]"``)
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import referee
from referee.judges import JudgeClient
from referee.judges.testing import requests_seen, server_process
from referee.rewards.judged.tournament import PairwiseTournament

LATENCY = 0.01
REPLY = '{"better": "A", "reasoning": "verdict {n}"}'


def rollouts(groups: int, size: int, tag: str) -> list[referee.Rollout]:
    """`groups` groups of `size` distinct attempts (a fresh `tag` per run: no shared verdicts)."""
    return [
        referee.Rollout(
            prompt=f"Question {g}: explain how a hash map handles collisions.",
            completion=f"{tag} attempt {i}: collisions go to a bucket's chain. " * 4,
            group=f"{tag}-{g}",
        )
        for g in range(groups)
        for i in range(size)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=40)
    parser.add_argument("--size", type=int, default=8)
    args = parser.parse_args()
    n = args.size
    server, url = server_process(LATENCY, REPLY)
    try:
        warm = PairwiseTournament(client=JudgeClient(model="openai/judge", api_base=url,
                                                     structured="prompt", cache=False))  # fmt: skip
        referee.score(warm, rollouts(4, n, "warm-up"))  # imports, connections, choix
        print(f"groups of {n}, {args.groups} groups per run, judge latency {LATENCY * 1000:.0f} ms")
        print(f"{'pairs':<10} {'swap':<6} {'aggregate':<14} {'calls/group':>11} "
              f"{'expected':>8} {'groups/s':>9}")  # fmt: skip
        for pairs in ("circular", "all_pairs"):
            for swap in (False, True):
                base = n if pairs == "circular" else n * (n - 1) // 2
                expected = base * (2 if swap else 1)
                for aggregate in ("win_rate", "bradley_terry"):
                    reward = PairwiseTournament(
                        client=JudgeClient(
                            model="openai/judge", api_base=url, structured="prompt",
                            cache=False, max_in_flight=64,
                        ),
                        pairs=pairs, swap=swap, aggregate=aggregate, concurrency=16,
                    )  # fmt: skip
                    batch = rollouts(args.groups, n, f"{pairs}-{swap}-{aggregate}")
                    before = requests_seen(url)
                    start = time.perf_counter()
                    scores = referee.score(reward, batch)
                    elapsed = time.perf_counter() - start
                    calls = (requests_seen(url) - before) / args.groups
                    failed = sum(s.failure is not None for s in scores)
                    assert failed == 0, f"{failed} attempts failed: {scores[0].reason}"
                    assert calls == expected, f"{calls} calls per group, expected {expected}"
                    print(f"{pairs:<10} {swap!s:<6} {aggregate:<14} {calls:>11.0f} "
                          f"{expected:>8} {args.groups / elapsed:>9.1f}")  # fmt: skip
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
