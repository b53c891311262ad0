"""Scoring over Ray gives what the local engine gives, groups whole, in order."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="ray is not installed (pip install 'referee[ray]')")

import referee
from referee import AsyncReward, Rollout, Score
from referee.backends.distributed import RayReward
from referee.judges.testing import FakeJudgeServer
from tests.support.judges import GROUPED, GROUPED_WANT, rank_spec, relative
from tests.support.ray_cluster import score_on_ray
from tests.support.rollouts import write_jsonl


def test_ray_scores_equal_local_scores_and_keep_groups_whole(local_ray: None) -> None:
    with FakeJudgeServer(relative) as server:
        short = {"type": "length", "unit": "chars", "max_length": 5, "cache_length": 3}
        spec = {"combine": "weighted", "components": {"ranked": rank_spec(server), "short": short}}
        rollouts = [Rollout(id=str(i), prompt=q, completion=r, group=g)
                    for i, (q, r, g) in enumerate(GROUPED)]  # fmt: skip
        local = referee.score(referee.load(spec), rollouts)
        remote = score_on_ray(referee.load(spec), rollouts, workers=3)
    assert [s.to_dict() for s in remote] == [s.to_dict() for s in local]
    assert [s.components["ranked"] for s in remote] == GROUPED_WANT


def test_the_tests_ray_workers_are_not_niced(local_ray: None) -> None:
    # Ray's default niceness (15) starved its actors behind the other pytest workers: verl's
    # reward loop took over 180 s to start in CI (tests/conftest.py sets it to 0).
    import os

    import ray

    @ray.remote
    def niceness() -> int:
        return os.nice(0)

    assert ray.get(niceness.remote(), timeout=120) == 0


@pytest.mark.slow
def test_score_command_with_the_ray_engine(tmp_path: Path) -> None:
    rows = [{"id": str(i), "completion": f"\\boxed{{{i % 7}}}", "reference": str(i % 5)}
            for i in range(300)]  # fmt: skip
    source = tmp_path / "in.jsonl"
    write_jsonl(source, rows)
    spec = tmp_path / "spec.yaml"
    spec.write_text("type: math_answer\n")
    outputs = []
    for engine in ("local", "ray"):
        out = tmp_path / f"{engine}.jsonl"
        subprocess.run(
            [sys.executable, "-m", "referee.cli", "score", str(source), "--spec", str(spec),
             "-o", str(out), "-q", "--engine", engine, "--workers", "2", "--batch-size", "64"],
            check=True, timeout=300,
        )  # fmt: skip
        outputs.append(out.read_text())
    assert outputs[0] == outputs[1] and len(outputs[0].splitlines()) == 300


@pytest.mark.parametrize(
    ("nodes", "count", "want"),
    [
        # one actor per CPU, round-robin: every node holds one before any holds two
        ({"a": 1, "b": 1, "c": 1}, 3, ["a", "b", "c"]),
        ({"a": 2, "b": 1}, 3, ["a", "b", "a"]),
        ({"head": 1, "a": 2, "b": 2}, 4, ["a", "b", "head", "a"]),
        # more actors than CPUs wrap around the same order
        ({"a": 1, "b": 1}, 5, ["a", "b", "a", "b", "a"]),
        # fewer actors than nodes still spread, in node id order
        ({"c": 4, "a": 4, "b": 4}, 2, ["a", "b"]),
        # a node with half a CPU takes one actor a round, like one with one
        ({"a": 0.5, "b": 2}, 3, ["a", "b", "b"]),
    ],
)
def test_actors_are_spread_over_nodes_by_their_cpus(
    nodes: dict[str, float], count: int, want: list[str]
) -> None:
    assert RayReward._spread(nodes, count) == want


def test_a_batch_of_one_prompt_spreads_over_the_actors_unless_the_reward_ranks_it() -> None:
    """A rollout file groups rows by their prompt: a batch of attempts at one prompt went to
    one actor whole, the others idle (and a lost node had lost nothing), even for a reward
    that scores each rollout alone. Only a group reward keeps a group in one chunk."""
    rollouts = [Rollout(id=str(i), completion="x", group="prompt:same") for i in range(6)]
    pool = object.__new__(RayReward)  # the cutting alone: no cluster
    pool._target = 2
    pool._grouped = False
    assert pool._chunks(rollouts) == [[0, 2, 4], [1, 3, 5]]
    pool._grouped = True
    assert pool._chunks(rollouts) == [[0, 1, 2, 3, 4, 5]]
    mixed = [*rollouts[:3], *(Rollout(id=f"o{i}", completion="x", group="other") for i in range(3))]
    assert sorted(map(len, pool._chunks(mixed))) == [3, 3]


@dataclasses.dataclass(kw_only=True)
class _SaysConcurrency(AsyncReward):
    """Scores each rollout with the concurrency its batch was asked to use."""

    name: str = "says"

    async def evaluate(self, rollout: Rollout) -> Score:
        return Score(0.0)

    async def score_batch(
        self, rollouts: Sequence[Rollout], *, concurrency: int | None = None
    ) -> list[Score]:
        return [Score(float(concurrency or 0)) for _ in rollouts]


def test_the_asked_concurrency_reaches_each_actor(local_ray: None) -> None:
    """`referee score --engine ray --concurrency N` dropped N on the way to the actors."""
    ray_reward = RayReward(_SaysConcurrency(), workers=2)
    try:
        scores = referee.score(
            ray_reward, [Rollout(id=str(i), completion="x") for i in range(4)], concurrency=7
        )
    finally:
        ray_reward.close()
    assert [s.value for s in scores] == [7.0] * 4
