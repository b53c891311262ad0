"""`pairwise_tournament`: a judge compares the attempts of a group two at a time, and each
attempt's value is how well it did in those comparisons (NeMo Gym's ``genrm_compare`` style).

The pairs follow NeMo Gym's strategies: ``circular`` compares attempt i with attempt
i + 1 (mod n), n comparisons; ``all_pairs`` compares every pair once, n(n - 1)/2. With
``swap`` (the default) each pair is also shown in the other order, and each order is a
comparison of its own, so a judge that favours a slot gives each side one win: a tie overall.

A comparison the judge does not answer (a failed call, an invalid reply, a timeout) is left out
and reported, never given a default score. The results make values in [0, 1] by win rate, or by
a Bradley-Terry fit (the `choix` package): an attempt's mean predicted chance of beating each
other attempt.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from referee.errors import JudgeError, MissingDependency
from referee.judges.client import Verdict
from referee.judges.options import JudgeOptions
from referee.judges.prompts import as_text, response_text
from referee.registry import register
from referee.reward import GroupRewardBase, RewardResult
from referee.rewards._common import clip_text
from referee.rewards.judged.pairwise import (
    PAIR_VERSION,
    PairwiseJudge,
    _PairVerdict,
    pair_messages,
)
from referee.rollout import Rollout
from referee.scores import Failure, Score

__all__ = ["PairwiseTournament", "tournament_pairs"]

_PAIR_SEED = 0  # the seed of the shuffle that picks the pairs kept under max_comparisons


def tournament_pairs(
    strategy: Literal["circular", "all_pairs"], count: int
) -> list[tuple[int, int]]:
    """The pairs (i, j) of `count` attempts that `strategy` compares, as NeMo Gym's
    ``generate_comparison_pairs`` gives them: ``circular`` (i, i + 1 mod n) for each i;
    ``all_pairs`` every i < j. Two attempts in circular give (0, 1) and (1, 0)."""
    if count < 2:
        return []
    if strategy == "all_pairs":
        return list(itertools.combinations(range(count), 2))
    return [(i, (i + 1) % count) for i in range(count)]


def _calls(pairs: Sequence[tuple[int, int]], swap: bool) -> list[tuple[int, int]]:
    """The ordered comparisons (A, B) the pairs make: each pair, and with `swap` also
    reversed; an order already asked for is asked once."""
    ordered = [o for i, j in pairs for o in (((i, j), (j, i)) if swap else ((i, j),))]
    return list(dict.fromkeys(ordered))


def _keep(pairs: list[tuple[int, int]], room: int) -> list[tuple[int, int]]:
    """`room` of `pairs`, chosen the same way every time: a shuffle seeded with a constant,
    taken first the pairs of two attempts not yet compared, then those that bring in one, then
    the rest, so every attempt takes part while the room allows (with ``all_pairs``, n/2
    pairs, rounded up, cover them all); the kept pairs keep their order in `pairs`."""
    order = list(range(len(pairs)))
    random.Random(_PAIR_SEED).shuffle(order)
    chosen: list[int] = []
    seen: set[int] = set()
    for fresh in (2, 1):
        for k in order:
            i, j = pairs[k]
            if k not in chosen and (i not in seen) + (j not in seen) >= fresh:
                chosen.append(k)
                seen.update((i, j))
    chosen += [k for k in order if k not in chosen]
    return [pairs[k] for k in sorted(chosen[:room])]


def bradley_terry_values(wins: Sequence[Sequence[float]], alpha: float) -> list[float]:
    """Each item's mean predicted chance of beating each other item, under the Bradley-Terry
    strengths `choix.ilsr_pairwise_dense` fits to `wins` (``wins[i][j]``: how often i beat j,
    a tie counting half each way) with regularisation `alpha`.

    Raises:
        MissingDependency: choix is not installed.
    """
    choix = _choix()
    import numpy as np

    count = len(wins)
    theta = choix.ilsr_pairwise_dense(np.asarray(wins, dtype=float), alpha=alpha, max_iter=1000)
    return [
        sum(1.0 / (1.0 + math.exp(theta[j] - theta[i])) for j in range(count) if j != i)
        / (count - 1)
        for i in range(count)
    ]


def _choix() -> Any:
    try:
        import choix
    except ImportError:
        raise MissingDependency("choix", "judges", "pairwise_tournament's bradley_terry") from None
    return choix


@register("pairwise_tournament")
@dataclass(kw_only=True)
class PairwiseTournament(JudgeOptions, GroupRewardBase):
    """A judge compares the attempts of a group pairwise; each gets a value in [0, 1].

    A group reward: the rollouts that share a ``group`` (the attempts at one prompt) are
    compared two at a time by the judge, with the prompt, under `criterion`, with
    `pairwise_judge`'s prompt and verdict (A, B or tie; the attempts fenced off as data).
    Identical attempts are compared once, as one, and share a value; a group whose attempts
    are all the same costs no call and each gets 0.5 (they tie); a group of one attempt is
    ``not_applicable`` (there is nothing to compare it with).

    Each ordered comparison is one observation: A better is a win for A and a loss for B, a
    tie half of each. With `swap`, a pair's two orders are two observations, so orders that
    disagree (a judge that favours a slot) come to one win each: a tie overall.

    A comparison the judge does not answer (a call that fails after the client's retries, an
    invalid reply after the repair call, a timeout) is left out, and the reason says why; the
    components ``comparisons.answered``, ``comparisons.failed`` and ``comparisons.dropped``
    (left out under `max_comparisons`) count the group's. An attempt left with no answered
    comparison is ``Failure("judge")``; the others are valued on the comparisons among them.
    A spend cap reached (`BudgetExceeded`) fails the whole group (``budget``), and the group's
    ``deadline`` (by default the client's worst case for one call, times the rounds of
    ``max_in_flight`` calls that `max_comparisons` needs) fails it with ``timeout``.

    Values: ``win_rate``: (wins + ties / 2) / answered comparisons of the attempt.
    ``bradley_terry``: strengths fitted by ``choix.ilsr_pairwise_dense`` on a matrix of wins
    (a tie adds 0.5 each way) with regularisation `alpha`, so a perfect separation or a
    disconnected set of comparisons still has a finite fit; an attempt's value is its mean
    predicted chance of beating each other attempt, mean_j sigmoid(theta_i - theta_j).

    Each attempt's components are its ``wins``, ``losses``, ``ties`` and ``comparisons``
    (answered); its cost is half the cost of each comparison it took part in, shared among
    its identical copies, so the group's costs add up to what the judge was paid.

    Attributes:
        criterion: What "better" means, for the judge: the question it is asked about the
            two answers (as `pairwise_judge`'s).
        pairs: ``circular``: attempt i against i + 1 (mod n), n comparisons; ``all_pairs``:
            every pair, n(n - 1)/2 (NeMo Gym's ``comparison_strategy``).
        swap: Show each pair in both orders (twice the calls), so slot bias cancels.
        aggregate: ``bradley_terry`` (needs ``choix``: ``pip install "referee[judges]"``) or
            ``win_rate``.
        alpha: The Bradley-Terry regularisation (choix's ``alpha``); above 0.
        max_comparisons: The most judge calls per group (None: no cap). Where the pairs need
            more, whole pairs are kept (both orders with `swap`), chosen the same way every
            time: a seeded shuffle, with pairs that bring in an attempt not yet compared first.
        concurrency: Groups judged at once (the client's ``max_in_flight`` caps the calls).

    Example:
        ```yaml
        type: pairwise_tournament
        model: openai/Qwen/Qwen2.5-7B-Instruct
        api_base: http://127.0.0.1:8000/v1
        criterion: Which answer solves the problem more correctly, then more clearly?
        pairs: all_pairs
        swap: true
        aggregate: bradley_terry
        max_comparisons: 56
        ```

    Scores:
        ```yaml
        needs: [judge]
        judge:
          # Every pair in both orders: the judge prefers the exact answer, then the shorter one.
          - {shown: [x = 4 or x = -4, x = 4], reply: '{"better": "A"}'}
          - {shown: [x = 4, x = 4 or x = -4], reply: '{"better": "B"}'}
          - {shown: [x = 4 or x = -4, x = 16], reply: '{"better": "A"}'}
          - {shown: [x = 16, x = 4 or x = -4], reply: '{"better": "B"}'}
          - {shown: [x = 4, x = 16], reply: '{"better": "A"}'}
          - {shown: [x = 16, x = 4], reply: '{"better": "tie"}'}
        rollouts:
          - prompt: Solve x^2 = 16.
            completion: x = 4 or x = -4
            group: quadratic
            value: 0.8937880405546581
          - prompt: Solve x^2 = 16.
            completion: x = 4
            group: quadratic
            value: 0.41955542972229387
          - prompt: Solve x^2 = 16.
            completion: x = 16
            group: quadratic
            value: 0.186656529723048
        ```
    """

    criterion: str = PairwiseJudge.criterion
    pairs: Literal["circular", "all_pairs"] = "circular"
    swap: bool = True
    aggregate: Literal["bradley_terry", "win_rate"] = "bradley_terry"
    alpha: float = 0.1
    max_comparisons: int | None = None
    name: str = "pairwise_tournament"

    def __post_init__(self) -> None:
        if not self.alpha > 0:
            raise ValueError(
                f"alpha must be above 0 (a finite Bradley-Terry fit), got {self.alpha}"
            )
        least = 2 if self.swap else 1
        if self.max_comparisons is not None and self.max_comparisons < least:
            raise ValueError(
                f"max_comparisons must be at least {least} (one pair"
                f"{', in both orders' if self.swap else ''}), got {self.max_comparisons}"
            )
        if self.aggregate == "bradley_terry":
            _choix()  # fail at load, not at the first group
        super().__post_init__()

    def default_deadline(self) -> float | None:
        """The client's worst case for one call, times the rounds of ``max_in_flight`` calls
        that `max_comparisons` needs (one round when there is no cap)."""
        one = super().default_deadline()
        if one is None or self.max_comparisons is None:
            return one
        return one * math.ceil(self.max_comparisons / max(1, self.client.max_in_flight))

    def plan(self, count: int) -> tuple[list[tuple[int, int]], int]:
        """The ordered comparisons (A, B) for `count` distinct attempts, and how many the
        strategy needed that `max_comparisons` left out."""
        pairs = tournament_pairs(self.pairs, count)
        calls = _calls(pairs, self.swap)
        cap = self.max_comparisons
        if cap is None or len(calls) <= cap:
            return calls, 0
        unordered = list(dict.fromkeys((min(i, j), max(i, j)) for i, j in pairs))
        per_pair = 2 if self.swap else 1
        kept = _keep(unordered, cap // per_pair)
        chosen = _calls(kept, self.swap)
        return chosen, len(calls) - len(chosen)

    async def _compare(self, prompt: str, a: str, b: str) -> Verdict[_PairVerdict] | JudgeError:
        """The judge's verdict on A against B, or why there is none (a `BudgetExceeded`
        propagates: it fails the group)."""
        try:
            return await self.client.judge(
                pair_messages(self.criterion, prompt, a, b), _PairVerdict, version=PAIR_VERSION
            )
        except JudgeError as exc:  # JudgeTimeout included
            return exc

    async def evaluate_group(self, rollouts: Sequence[Rollout]) -> Sequence[RewardResult]:
        if len(rollouts) < 2:
            return [
                Score.failed(
                    "not_applicable",
                    "a pairwise tournament needs at least two attempts in a group; this one has "
                    f"{len(rollouts)} (give the attempts at one prompt the same group)",
                    self.name,
                )
            ] * len(rollouts)
        texts = [response_text(r) for r in rollouts]
        unique = list(dict.fromkeys(texts))
        if len(unique) == 1:
            return [Score(value=0.5, reason="all attempts identical: no call")] * len(rollouts)
        prompt = as_text(rollouts[0].prompt_text)
        calls, dropped = self.plan(len(unique))
        # A BudgetExceeded (or anything but a JudgeError) propagates: it fails the group.
        results = await asyncio.gather(
            *(self._compare(prompt, unique[a], unique[b]) for a, b in calls)
        )
        return self._values(texts, unique, calls, results, dropped)

    def _values(
        self,
        texts: list[str],
        unique: list[str],
        calls: list[tuple[int, int]],
        results: Sequence[Any],
        dropped: int,
    ) -> list[Score]:
        count = len(unique)
        wins = [[0.0] * count for _ in range(count)]
        won, lost, tied, seen = ([0] * count for _ in range(4))
        cost, tokens = [0.0] * count, [0] * count
        errors: list[str] = []
        where = [texts.index(t) + 1 for t in unique]  # each distinct attempt's first rollout
        for (a, b), result in zip(calls, results, strict=True):
            if isinstance(result, JudgeError):
                errors.append(
                    f"attempt {where[a]} (A) vs {where[b]} (B): {clip_text(str(result), 200)}"
                )
                continue
            better = result.value.better
            if better == "tie":
                wins[a][b] += 0.5
                wins[b][a] += 0.5
                tied[a] += 1
                tied[b] += 1
            else:
                winner, loser = (a, b) if better == "A" else (b, a)
                wins[winner][loser] += 1.0
                won[winner] += 1
                lost[loser] += 1
            used = result.prompt_tokens + result.completion_tokens
            for side in (a, b):
                seen[side] += 1
                cost[side] += result.cost / 2
                tokens[side] += used // 2
        answered = [i for i in range(count) if seen[i]]
        values: dict[int, float] = {}
        if len(answered) >= 2:
            if self.aggregate == "win_rate":
                values = {i: (won[i] + tied[i] / 2) / seen[i] for i in answered}
            else:
                sub = [[wins[i][j] for j in answered] for i in answered]
                fitted = bradley_terry_values(sub, self.alpha)
                values = dict(zip(answered, fitted, strict=True))
        group = {
            "comparisons.answered": float(len(calls) - len(errors)),
            "comparisons.failed": float(len(errors)),
            "comparisons.dropped": float(dropped),
        }
        note = ""
        if errors:
            note = f"; {len(errors)} left out: " + "; ".join(errors[:3])
            if len(errors) > 3:
                note += f"; and {len(errors) - 3} more"
        if dropped:
            note += f"; {dropped} comparisons over max_comparisons not made"
        copies = {t: texts.count(t) for t in unique}
        out: dict[str, Score] = {}
        for i, text in enumerate(unique):
            components = {
                "wins": float(won[i]),
                "losses": float(lost[i]),
                "ties": float(tied[i]),
                "comparisons": float(seen[i]),
                **group,
            }
            share = copies[text]
            if i not in values:
                why = f"no comparison of this attempt was answered{note}"
                out[text] = Score(
                    value=None,
                    components=components,
                    reason=why,
                    failure=Failure("judge", why, self.name),
                    cost=cost[i] / share,
                )
                continue
            out[text] = Score(
                value=min(1.0, max(0.0, values[i])),
                components=components,
                reason=f"{self.aggregate} over {seen[i]} comparisons among {count} distinct "
                f"attempts{note}",
                cost=cost[i] / share,
                tokens=tokens[i] // share,
            )
        return [out[t] for t in texts]
