"""The trainer side of referee's contract, in one place for every backend.

A trainer backend (TRL, verl, OpenRLHF, the HTTP server, a plugin of your own) has three
things to decide, and they are decided here so that every trainer gets the number
`referee score` prints for the same rollout:

1. **Which reward**: `resolve` takes a `Reward` or a spec (path or mapping).
2. **Where scoring runs**: a `Bridge` scores a batch from the trainer's own thread
   (`Bridge.score`) or from its event loop (`Bridge.score_async`). A sync reward scores in the
   calling thread, or, from a loop, in the bridge's threads so the loop keeps serving; an
   async one (a judge) is awaited on the caller's loop, or, from a thread, on one long-lived
   loop per process, so its connections are pooled across calls.
3. **What numbers reach the trainer**: an `Outlet` says, once per trainer, what a rollout
   with no score is worth (`failure_value`), what a skipped component reads (`skipped`),
   which components are reported (`components`: the top-level ones, the same list for every
   sample), and under which keys (``referee_failed``, ``referee/<component>``,
   ``referee/<component>/skipped``).

- TRL: None for both: TRL masks None out of the advantage and its means.
- verl: `failure_value` (0.0) for no score, None for a skipped component: verl cannot mask a
  sample; its metrics leave None out of their means, where NaN would poison them.
- OpenRLHF: `failure_value` (0.0), and NaN for a skipped component: it makes a tensor of
  every key, and takes neither a missing key nor a null.

4. **What text leaves the server**: where the reference is the server's secret (an ORS task
   set: "the reference never leaves the server"), a score's reason and failure message may
   quote it (``answer 'no idea' != 'SECRET-7731-ALPHA'``, ``sql_match``'s missing gold rows):
   `withheld` is the score as it goes on the wire, its texts withheld and logged here.

5. **What a door can carry**: a door that cannot carry what a spec needs (`referee.reward.Need`:
   a group, a trajectory as chat messages, the response's token count) would score every
   rollout wrong, so it refuses the spec when it loads: `refuse_unfit`, with the `Door` it
   is (what it carries, and what to use instead). The conformance matrix checks each refusal.

`docs/architecture.md` walks through adding a backend with these pieces.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from referee.errors import SpecError
from referee.reward import Need, Reward, is_sync, needs, top_components
from referee.reward import score as score_rollouts
from referee.rollout import Rollout
from referee.rollouts.readers import decode_json_text
from referee.scores import Score
from referee.spec import load

__all__ = [
    "FAILED_KEY",
    "WITHHELD",
    "Bridge",
    "Door",
    "Outlet",
    "components",
    "decode_json_text",
    "refuse_unfit",
    "resolve",
    "withheld",
]

logger = logging.getLogger("referee.server")

FAILED_KEY = "referee_failed"
"""The key, for every sample, that is 1.0 where referee could give no score."""


WITHHELD = "withheld: this task's reference is the server's secret (the server logs the reason)"
"""What a secret task's reason and failure message read on the wire."""


def withheld(score: Score, task_id: str) -> dict[str, Any]:
    """`score` as a dict (`Score.to_dict`) for a client that must not learn the reference:
    every text that could quote it (the reason, the failure's message) withheld, the full
    score logged at INFO on ``referee.server``. Numbers, kinds and blame stay."""
    out = score.to_dict()
    if out.get("reason") or out.get("failure"):
        logger.info("task %s scored %s: %s", task_id, score.value, score.reason)
    if out.get("reason"):
        out["reason"] = WITHHELD
    failure = out.get("failure")
    if failure is not None:
        out["failure"] = {**failure, "message": WITHHELD}
    return out


def resolve(reward_or_spec: Reward | str | Path | Mapping[str, Any]) -> Reward:
    """A Reward as given, or the reward a spec (path or mapping) describes."""
    if isinstance(reward_or_spec, (str, Path, Mapping)):
        return load(reward_or_spec)
    if not isinstance(reward_or_spec, Reward):
        raise TypeError(
            f"expected a referee Reward, a spec path or a spec mapping, got "
            f"{type(reward_or_spec).__name__}"
        )
    return reward_or_spec


@dataclass(frozen=True)
class Door:
    """A trainer's entry point, as `refuse_unfit` sees it.

    Attributes:
        title: What it is, for the error (``verl's compute_score``).
        carries: What of a rollout it can give a reward, of the needs a door may lack:
            ``group`` (whole groups of attempts), ``messages`` (a trajectory), ``tokens``
            (the response's token count). A reference always reaches the reward.
        instead: Per need it lacks, what to use instead (another door, an option).
    """

    title: str
    carries: frozenset[Need] = frozenset()
    instead: Mapping[Need, str] = field(default_factory=dict)


_LACKS: dict[Need, str] = {
    "group": "compares the attempts at one prompt (a group reward), and {door} scores one "
    "rollout at a time: each would be ranked alone",
    "messages": "reads the completion as chat messages (a trajectory: its turns, tool calls "
    "and results), and {door} gives the reward the response as text only",
    "tokens": "counts the response's tokens (metadata.completion_ids or completion_tokens), "
    "and {door} gives the reward no token count",
}


_fits: dict[tuple[int, frozenset[Need]], Reward] = {}


def refuse_unfit(reward: Reward, door: Door) -> Reward:
    """`reward`, if `door` carries all its required parts need (`referee.reward.needs`).
    A reward that fits is remembered by what the door carries: a door that asks per sample
    or per request (verl's `compute_score`, ``/get_reward``) walks the tree once.

    Raises:
        SpecError: A part needs what the door cannot carry; the message names the part, the
            need, the door and what to use instead.
    """
    key = (id(reward), door.carries)
    if _fits.get(key) is reward:
        return reward
    missing = [(part, need) for part, need in needs(reward)
               if need in _LACKS and need not in door.carries]  # fmt: skip
    if not missing:
        _fits[key] = reward
        return reward
    lines = []
    for need in dict.fromkeys(n for _, n in missing):
        parts = ", ".join(repr(p) for p, n in missing if n == need)
        said = f"{reward.name}: {parts} " + _LACKS[need].format(door=door.title)
        fix = door.instead.get(need)
        lines.append(said + (f"; use {fix}" if fix else ""))
    lines.append("(or, where a part may go without it, on_failure: omit on it in the spec)")
    raise SpecError("\n".join(lines))


def components(reward: Reward) -> list[str]:
    """The components a trainer reports for `reward`: its top-level ones, itself left out."""
    return [name for name, _ in top_components(reward) if name != reward.name]


# --- what numbers reach the trainer ------------------------------------------------------------


@dataclass(frozen=True)
class Outlet:
    """How one trainer takes referee's scores (the table in the module docstring).

    Attributes:
        components: The components reported, the same for every sample (`components`).
        failure_value: What a rollout with no score is worth to the trainer, and what a
            component that ran and failed reads; None hands the trainer None (it masks it).
        skipped: What a component that did not run reads (a gate, or a failure, before it
            stopped the rollout): no value, which is not a zero.
        whole: The reward's own name: asked for as a component, it is the total.
    """

    components: tuple[str, ...]
    failure_value: float | None
    skipped: float | None
    whole: str | None = None

    @classmethod
    def of(cls, reward: Reward, *, failure_value: float | None, skipped: float | None) -> Outlet:
        """The outlet of `reward`'s scores: its top-level components, under this policy."""
        return cls(tuple(components(reward)), failure_value, skipped, reward.name)

    def total(self, score: Score) -> float | None:
        """The number the trainer optimises for a rollout."""
        return self.failure_value if score.value is None else score.value

    def component(self, score: Score, name: str) -> float | None:
        """A component's value on a score; the total when `name` is the reward itself."""
        if name == self.whole:
            return self.total(score)
        if name in score.skipped:
            return self.skipped
        value = score.components.get(name)
        return self.failure_value if value is None else value

    def keys(self) -> list[str]:
        """The keys of `row` and `columns`, the same for every sample of the reward."""
        per = ((f"referee/{n}", f"referee/{n}/skipped") for n in self.components)
        return [FAILED_KEY, *(key for pair in per for key in pair)]

    def row(self, score: Score) -> dict[str, float | None]:
        """One sample's logged values under `keys` (verl's per-sample dict)."""
        out: dict[str, float | None] = {FAILED_KEY: 0.0 if score.value is not None else 1.0}
        for name in self.components:
            out[f"referee/{name}"] = self.component(score, name)
            out[f"referee/{name}/skipped"] = 1.0 if name in score.skipped else 0.0
        return out

    def columns(self, scores: Sequence[Score]) -> dict[str, list[float | None]]:
        """A batch's logged values under `keys`, one list per key (OpenRLHF's extra_logs)."""
        out: dict[str, list[float | None]] = {key: [] for key in self.keys()}
        for score in scores:
            for key, value in self.row(score).items():
                out[key].append(value)
        return out


# --- where scoring runs ---------------------------------------------------------------------------


class _SharedLoop:
    """One event loop per process, in a daemon thread, for async rewards called from threads.

    A judge's client keeps its connections per loop: one loop for every call pools them, where
    a loop per call would open new ones each time. Made on first use, and again in a child
    after a fork (the thread does not survive it).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0

    def get(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="referee-bridge", daemon=True
                )
                thread.start()
                self._loop, self._thread, self._pid = loop, thread, os.getpid()
            return self._loop

    def is_current(self) -> bool:
        """Whether the caller runs on the shared loop's own thread."""
        return self._thread is threading.current_thread()


_SHARED = _SharedLoop()


class Bridge:
    """Scores a batch for a trainer, from its thread or from its event loop.

    Args:
        reward: The reward.
        concurrency: How many rollouts an async reward scores at once within a batch.
        threads: How many batches of a sync reward may score at once from an event loop
            (`score_async`), each in a thread of the bridge's own (made on first use).
    """

    def __init__(self, reward: Reward, *, concurrency: int | None = None, threads: int = 8) -> None:
        self.reward = reward
        self.concurrency = concurrency
        self.sync = is_sync(reward)
        self._threads = threads
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def score(self, rollouts: Sequence[Rollout]) -> list[Score]:
        """Score a batch from plain synchronous code (a trainer's thread), blocking."""
        if self.sync or _SHARED.is_current():
            return score_rollouts(self.reward, rollouts, concurrency=self.concurrency)
        coro = self.reward.score_batch(rollouts, concurrency=self.concurrency)
        return asyncio.run_coroutine_threadsafe(coro, _SHARED.get()).result()

    async def score_async(self, rollouts: Sequence[Rollout]) -> list[Score]:
        """Score a batch from a running event loop; a sync reward runs off the loop."""
        if not self.sync:
            return await self.reward.score_batch(rollouts, concurrency=self.concurrency)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool(), self.score, rollouts)

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    self._threads, thread_name_prefix="referee-bridge"
                )
            return self._executor

    def close(self) -> None:
        """Let the bridge's threads go (after the last batch)."""
        with self._lock:
            if self._executor is not None:
                self._executor.shutdown(wait=False)
                self._executor = None
