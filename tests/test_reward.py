from __future__ import annotations

import asyncio
import math
import pickle
from collections.abc import Sequence

import pytest

import referee
from referee import GroupRewardBase, NotApplicable, Rollout, Score
from tests.support.rollouts import make


@referee.reward(run_in="inline")
def length_reward(rollout: Rollout) -> float:
    return float(len(rollout.completion_text))


@referee.reward(name="async_len")
async def async_length(rollout: Rollout) -> float:
    await asyncio.sleep(0)
    return float(len(rollout.completion_text))


@pytest.mark.parametrize(
    ("returned", "value", "failure"),
    [
        (0.5, 0.5, None),
        (1, 1.0, None),  # ints are numbers
        (True, 1.0, None),  # bools are 1/0
        (False, 0.0, None),
        (None, None, "no_score"),  # None never becomes 0
        (math.nan, None, "invalid_value"),  # NaN would poison a trainer
        (math.inf, None, "invalid_value"),
        ("0.5", None, "invalid_value"),  # strings are not numbers
        (Score(value=0.25, reason="r"), 0.25, None),
        (Score(value=None), None, "no_score"),  # a Score with no value and no failure
        (Score(value=math.nan), None, "invalid_value"),
        (Score(value=-math.inf), None, "invalid_value"),  # the fast path must not let this by
        (Score(value=2), 2, None),  # an int value is a number
    ],
)
def test_function_results_are_coerced(
    returned: object, value: float | None, failure: str | None
) -> None:
    fn = referee.reward(lambda r: returned)
    [s] = referee.score(fn, [make("x")])
    assert s.value == value
    assert (s.failure.type if s.failure else None) == failure


def test_exceptions_become_failures_not_zeros() -> None:
    @referee.reward
    def boom(rollout: Rollout) -> float:
        raise KeyError("answer")

    @referee.reward
    def not_applicable(rollout: Rollout) -> float:
        raise NotApplicable("no reference")

    [a] = referee.score(boom, [make()])
    [b] = referee.score(not_applicable, [make()])
    assert a.value is None and a.failure is not None
    assert (
        a.failure.type == "error" and "KeyError" in a.failure.message and a.failure.where == "boom"
    )
    assert b.value is None and b.failure is not None and b.failure.type == "not_applicable"


def test_async_function_reward() -> None:
    scores = referee.score(async_length, [make("ab"), make("abcd")])
    assert [s.value for s in scores] == [2.0, 4.0]
    assert async_length.name == "async_len"


def test_sync_entry_point_works_inside_a_running_loop() -> None:
    async def main() -> list[Score]:
        return referee.score(async_length, [make("abc")])

    assert asyncio.run(main())[0].value == 3.0


@pytest.mark.parametrize("reward", [length_reward, async_length])
def test_decorated_functions_pickle_by_reference(reward: referee.Reward) -> None:
    clone = pickle.loads(pickle.dumps(reward))
    assert clone is reward
    assert referee.score(clone, [make("abc")])[0].value == 3.0


def test_decorated_function_is_still_callable() -> None:
    assert length_reward(make("abc")) == 3.0


def test_batch_concurrency_is_bounded() -> None:
    running = peak = 0

    class Slow(referee.AsyncReward):
        name = "slow"

        async def evaluate(self, rollout: Rollout) -> float:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.001)
            running -= 1
            return 1.0

    scores = referee.score(Slow(), [make(str(i)) for i in range(40)], concurrency=5)
    assert len(scores) == 40 and all(s.value == 1.0 for s in scores)
    assert peak == 5


class RankInGroup(GroupRewardBase):
    """Scores each attempt by its rank of length inside its group."""

    name = "rank"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def evaluate_group(self, rollouts: Sequence[Rollout]) -> list[float]:
        self.calls.append([r.id for r in rollouts])
        order = sorted(range(len(rollouts)), key=lambda i: len(rollouts[i].completion_text))
        ranks = [0.0] * len(rollouts)
        for rank, i in enumerate(order):
            ranks[i] = rank / max(1, len(rollouts) - 1)
        return ranks


def test_group_reward_sees_whole_groups_by_id_not_position() -> None:
    rollouts = [
        make("aaa", id="1", group="p"),
        make("b", id="2", group="q"),
        make("a", id="3", group="p"),
        make("bbbb", id="4", group="q"),
        make("z", id="5"),  # no group: scored alone
    ]
    reward = RankInGroup()
    scores = referee.score(reward, rollouts)
    assert sorted(map(sorted, reward.calls)) == [["1", "3"], ["2", "4"], ["5"]]
    assert [s.value for s in scores] == [1.0, 0.0, 0.0, 1.0, 0.0]


def test_group_reward_with_wrong_count_fails_every_member() -> None:
    class Broken(GroupRewardBase):
        name = "broken"

        async def evaluate_group(self, rollouts: Sequence[Rollout]) -> list[float]:
            return [1.0]

    scores = referee.score(Broken(), [make(id="1", group="g"), make(id="2", group="g")])
    assert all(
        s.value is None and s.failure and "returned 1 scores" in s.failure.message for s in scores
    )


# --- the public contract: what a reward of your own gets -------------------------------------


class _PlainSync:
    """A reward that subclasses nothing of referee's: it satisfies `SyncReward` by shape."""

    name = "plain"

    def __init__(self) -> None:
        self.inline = 0
        self.batched = 0

    @property
    def is_sync(self) -> bool:
        return True

    def score_sync(self, rollout: Rollout) -> Score:
        self.inline += 1
        return Score(value=float(len(rollout.completion_text)))

    async def score(self, rollout: Rollout) -> Score:
        return self.score_sync(rollout)

    async def score_batch(
        self, rollouts: Sequence[Rollout], *, concurrency: int | None = None
    ) -> list[Score]:
        self.batched += 1
        return [self.score_sync(r) for r in rollouts]


def test_a_protocol_reward_gets_the_inline_fast_path_of_a_builtin() -> None:
    plain = _PlainSync()
    assert isinstance(plain, referee.SyncReward)
    combined = referee.weighted({"plain": plain, "len": length_reward})
    assert combined.is_sync  # it was false for anything not derived from a private base
    scores = referee.score(combined, [make("ab"), make("abc")])
    assert [s.value for s in scores] == [4.0, 6.0]
    assert (plain.inline, plain.batched) == (2, 0)  # inline, no batch call, no event loop


class _Pair:
    """A user composite: two rewards, reported under their own names."""

    name = "pair"

    def __init__(self, first: referee.Reward, second: referee.Reward) -> None:
        self.first, self.second = first, second

    def children(self) -> list[referee.Part]:
        return [referee.Part("first", self.first, 2.0, reported=True),
                referee.Part("second", self.second, reported=True)]  # fmt: skip

    async def score(self, rollout: Rollout) -> Score:
        return (await self.score_batch([rollout]))[0]

    async def score_batch(
        self, rollouts: Sequence[Rollout], *, concurrency: int | None = None
    ) -> list[Score]:
        raise NotImplementedError  # only walked here


class _Ranked(GroupRewardBase):
    name = "ranked"

    async def evaluate_group(self, rollouts: Sequence[Rollout]) -> list[float]:
        return [float(i) for i, _ in enumerate(rollouts)]


@pytest.mark.parametrize(
    ("tree", "grouped"),
    [
        (length_reward, False),
        (_Ranked(), True),
        (referee.scale(_Ranked(), 2.0), True),  # through a transform
        (referee.weighted({"a": length_reward, "b": _Ranked()}), True),  # through a combination
        (_Pair(length_reward, referee.clip(_Ranked(), 0, 1)), True),  # through a user composite
        (_Pair(length_reward, async_length), False),
    ],
)
def test_needs_groups_walks_every_composite(tree: referee.Reward, grouped: bool) -> None:
    from referee.reward import needs_groups

    assert needs_groups(tree) is grouped


def test_top_components_come_from_children_any_composite() -> None:
    from referee.reward import top_components

    assert top_components(_Pair(length_reward, async_length)) == [("first", 2.0), ("second", 1.0)]
    scaled = referee.scale(length_reward, 2.0)  # a transform reports no components of its own
    assert top_components(scaled) == [(scaled.name, 1.0)]
    combined = referee.weighted({"a": (length_reward, 0.3), "b": (async_length, 0.7)})
    assert top_components(combined) == [("a", 0.3), ("b", 0.7)]
    assert top_components(length_reward) == [("length_reward", 1.0)]


def test_sync_and_async_names_pair_up() -> None:
    rollouts = [make("ab"), make("abc")]
    for r in (length_reward, async_length, referee.weighted({"x": length_reward})):
        assert r.score_sync(rollouts[0]).value == 2.0  # type: ignore[attr-defined]
        with pytest.warns(DeprecationWarning, match=r"call referee\.score\(reward"):
            assert [s.value for s in r.score_batch_sync(rollouts)] == [2.0, 3.0]  # type: ignore[attr-defined]
        assert [s.value for s in referee.score(r, rollouts)] == [2.0, 3.0]
        assert [s.value for s in asyncio.run(r.score_batch(rollouts))] == [2.0, 3.0]


def test_reference_powers_are_found_anywhere_in_the_tree() -> None:
    from referee.reward import reference_powers
    from referee.rewards import JsonValid, PythonTests

    assert reference_powers(JsonValid()) == []
    tree = referee.weighted({"json": (JsonValid(), 0.5), "tests": (PythonTests(), 0.5)})
    [(name, what)] = reference_powers(tree)
    assert name == "python_tests"
    assert "unsandboxed" in what
