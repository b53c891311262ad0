"""The trainer side of the contract every backend stands on: `referee.backends.contract`."""

from __future__ import annotations

import ast
import asyncio
import math
import threading
from pathlib import Path

import pytest

import referee
from referee import Rollout
from referee.backends.contract import FAILED_KEY, Bridge, Outlet, components, resolve
from referee.scores import Score

BACKENDS = Path(referee.__file__).parent / "backends"

GATED = {
    "combine": "weighted",
    "components": {
        "valid": {"type": "json_valid", "gate": True, "weight": 0.5},
        "name": {"type": "field_match", "fields": {"name": "exact"}, "weight": 0.5},
    },
}


def _scores() -> tuple[referee.Reward, list[Score]]:
    reward = resolve(GATED)
    rollouts = [
        Rollout(completion='{"name": "Ada"}', reference={"name": "Ada"}),
        Rollout(completion="not json", reference={"name": "Ada"}),  # the gate stops it
    ]
    return reward, referee.score(reward, rollouts)


def test_each_trainer_policy_reads_a_skipped_component_its_own_way() -> None:
    reward, (good, gated) = _scores()
    assert components(reward) == ["valid", "name"]
    assert "name" in gated.skipped
    verl = Outlet.of(reward, failure_value=0.0, skipped=None)
    openrlhf = Outlet.of(reward, failure_value=0.0, skipped=math.nan)
    trl = Outlet.of(reward, failure_value=None, skipped=None)
    assert verl.keys() == [FAILED_KEY, "referee/valid", "referee/valid/skipped",
                           "referee/name", "referee/name/skipped"]  # fmt: skip
    assert verl.row(good) == {FAILED_KEY: 0.0, "referee/valid": 1.0, "referee/valid/skipped": 0.0,
                              "referee/name": 1.0, "referee/name/skipped": 0.0}  # fmt: skip
    assert verl.row(gated)["referee/name"] is None
    assert math.isnan(openrlhf.columns([good, gated])["referee/name"][1])
    assert openrlhf.columns([good, gated])["referee/name/skipped"] == [0.0, 1.0]
    assert trl.component(gated, "name") is None
    assert trl.component(good, reward.name) == good.value  # the reward itself: its total


def test_a_rollout_with_no_score_gets_the_failure_value_or_none() -> None:
    reward, _ = _scores()
    failed = Score.failed("error", "boom", reward.name)
    assert Outlet.of(reward, failure_value=-1.0, skipped=None).total(failed) == -1.0
    assert Outlet.of(reward, failure_value=None, skipped=None).total(failed) is None
    row = Outlet.of(reward, failure_value=-1.0, skipped=None).row(failed)
    assert row[FAILED_KEY] == 1.0 and row["referee/valid"] == -1.0  # ran and failed


@referee.reward
async def slow_len(rollout: Rollout) -> float:
    await asyncio.sleep(0.001)
    return min(1.0, len(str(rollout.completion)) / 10)


@referee.reward(run_in="inline")
def plain_len(rollout: Rollout) -> float:
    return min(1.0, len(str(rollout.completion)) / 10)


ROLLOUTS = [Rollout(completion="x" * i) for i in range(12)]


@pytest.mark.parametrize("reward", [slow_len, plain_len], ids=["async", "sync"])
def test_a_bridge_scores_as_referee_score_does_from_a_thread_and_from_a_loop(
    reward: referee.Reward,
) -> None:
    want = [s.value for s in referee.score(reward, ROLLOUTS)]
    bridge = Bridge(reward)
    assert [s.value for s in bridge.score(ROLLOUTS)] == want
    assert [s.value for s in asyncio.run(bridge.score_async(ROLLOUTS))] == want
    bridge.close()


def test_an_async_reward_called_from_many_threads_runs_on_one_loop() -> None:
    loops: set[int] = set()

    @referee.reward
    async def which_loop(rollout: Rollout) -> float:
        loops.add(id(asyncio.get_running_loop()))
        return 1.0

    bridge = Bridge(which_loop)
    threads = [threading.Thread(target=bridge.score, args=(ROLLOUTS[:2],)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(loops) == 1


def test_a_sync_reward_scored_from_a_loop_leaves_the_loop_free() -> None:
    """A sync batch runs in the bridge's threads: the loop still runs other tasks."""
    started = threading.Event()
    release = threading.Event()

    @referee.reward(run_in="inline")
    def waits(rollout: Rollout) -> float:
        started.set()
        release.wait(5)
        return 1.0

    async def main() -> list[Score]:
        bridge = Bridge(waits)
        batch = asyncio.ensure_future(bridge.score_async(ROLLOUTS[:1]))
        await asyncio.to_thread(started.wait, 5)
        ticked = await asyncio.wait_for(asyncio.sleep(0, result=True), 1)  # the loop answers
        assert ticked
        release.set()
        return await batch

    [score] = asyncio.run(main())
    assert score.value == 1.0


def test_a_bridge_called_on_its_own_loop_does_not_wait_for_itself() -> None:
    """An async reward whose code calls back into a sync bridge on the bridge loop's thread
    (a user's composite) would deadlock waiting on its own loop: it runs on a private one."""
    inner = Bridge(slow_len)

    @referee.reward
    async def calls_back(rollout: Rollout) -> float:
        [score] = inner.score([rollout])
        return score.value or 0.0

    outer = Bridge(calls_back)
    [score] = outer.score([Rollout(completion="x" * 5)])
    assert score.value == 0.5


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize("module", ["service.py", "contract.py", "_guard.py"])
def test_the_generic_modules_import_no_trainer(module: str) -> None:
    trainers = ("trl", "verl", "openrlhf", "axolotl")
    found = [
        name for name in _imports(BACKENDS / module)
        if name.split(".")[0] in trainers or (
            name.startswith("referee.backends.") and name.split(".")[2] in trainers)
    ]  # fmt: skip
    assert not found, f"backends/{module} imports {found}"


def test_every_backend_scores_through_the_bridge() -> None:
    """Nobody but the contract (and the Ray backend, which is a reward) calls the scoring
    functions directly: a backend that did would decide its own threads and loops."""
    for path in sorted(BACKENDS.rglob("*.py")):
        if path.name in ("contract.py", "distributed.py"):
            continue
        text = path.read_text()
        assert "score as score_rollouts" not in text, path
        assert "asyncio.run(" not in text or path.name == "__init__.py", path
