"""Scoring fanned out over Ray: `referee score --engine ray [--address ADDR]`.

`RayReward` wraps any reward: each batch is cut into one chunk per actor (every group whole in
one chunk where the reward compares a group's attempts; else row by row, so a batch of attempts
at one prompt, which a rollout file groups by that prompt, still spreads over the pool), the
chunks go to a pool of Ray actors that each hold a copy of the reward (unpickled once per
actor, so compiled validators, sandboxes and judge clients are built once per worker), and the
scores come back in input order. The values are the reward's own: the same spec scored on the
local engine gives the same numbers.

Actors are placed on the cluster's nodes by their CPUs (one actor per CPU by default, spread
round-robin, none on a node of 0 CPUs), each pinned to its node. Losing a node mid-run (or an
actor's process, or a result stored on a lost node) costs only the chunks in flight there: each
is sent again to the least busy live actor, at most `retries` times, while the lost actors are
replaced in the background on other live nodes. Scoring a chunk twice gives the same scores (a
reward is a function of the rollout), so the output is unchanged. When no actor is left and
none can be started, `ClusterError` names the cluster and the rollouts lost; batches already
returned stay written (``referee score -o`` flushes each; ``--resume`` finishes the run).

A node whose processes die is noticed at once (the connections to its actors break); a node
that falls silent (power, network), when the head's health checks give up on it
(``RAY_health_check_*`` in the head's environment tune them). Losing the head is survived
only in part: the actors left keep scoring, but none can be started, and Ray ends the driver a
minute later (``gcs_rpc_server_reconnect_timeout_s``), or at once when it needs the head's
raylet or object store (seen with chunks over Ray's 100 KB inline limit, which travel through
it); written batches stay, for ``--resume`` on a restarted cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from referee.errors import ClusterError, MissingDependency
from referee.reward import Part, Reward, RewardBase, group_indices, needs_groups
from referee.rollout import Rollout
from referee.scores import Score

__all__ = ["RayReward"]

logger = logging.getLogger("referee.ray")

T = TypeVar("T")


class _Worker:
    """A Ray actor holding one copy of the reward."""

    def __init__(self, reward: Reward) -> None:
        self.reward = reward

    async def score(self, rollouts: list[Rollout], concurrency: int | None = None) -> list[Score]:
        return await self.reward.score_batch(rollouts, concurrency=concurrency)


@dataclass(eq=False)
class _Slot:
    """One actor of the pool, the node it is pinned to, and its chunks in flight."""

    actor: Any
    node: str
    busy: int = 0


def _lost_errors() -> tuple[type[BaseException], ...]:
    """Ray's errors that mean work was lost with a process or a node, not raised by a reward:
    a dead or unreachable actor (ActorDiedError, ActorUnavailableError), a dead node or worker,
    a result lost with its node's object store (OwnerDiedError, ObjectLostError, ...), a task
    killed by Ray's memory monitor, an actor that could not be placed."""
    from ray import exceptions as rx

    return (
        rx.RayActorError,
        rx.ObjectLostError,
        rx.NodeDiedError,
        rx.WorkerCrashedError,
        rx.OutOfMemoryError,
        rx.ActorUnschedulableError,
    )


async def _off_loop(fn: Callable[[], T], timeout: float) -> T:
    """`fn()` in a daemon thread, awaited for at most `timeout` seconds (TimeoutError).

    For calls to the head that block while it is lost: a daemon thread, not the loop's
    executor, which `asyncio.run` joins on its way out, so a stuck call cannot hold up the
    end of a run that the actors left have finished."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)  # type: ignore[arg-type]

    def run() -> None:
        try:
            result, error = fn(), None
        except BaseException as exc:  # handed to the awaiting coroutine
            result, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name="referee-ray-head", daemon=True).start()
    return await asyncio.wait_for(done, timeout)


def _brief(exc: BaseException) -> str:
    """A Ray error in one line: its type, its first line, and whether its node died."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    node = "; its node died" if "node has died" in text or "node died" in text else ""
    return f"{type(exc).__name__}: {first}{node}"


class RayReward(RewardBase):
    """A reward scored by a pool of Ray actors, surviving the loss of nodes (see the module
    docstring).

    Args:
        reward: The reward to fan out.
        address: A Ray cluster's address; None starts (or joins) a local Ray.
        workers: How many actors; by default one per CPU Ray reports.
        retries: How many times a chunk lost with its actor or node is sent again.
        start_timeout: Seconds an actor may take to start (place, import, unpickle the reward).

    Raises:
        MissingDependency: Ray is not installed.
        ClusterError: The cluster cannot be joined, or has no live node with CPUs, or the
            actors do not start within `start_timeout`.
    """

    def __init__(
        self,
        reward: Reward,
        *,
        address: str | None = None,
        workers: int | None = None,
        retries: int = 3,
        start_timeout: float = 120.0,
    ) -> None:
        try:
            import ray
        except ImportError as exc:
            raise MissingDependency("ray", "ray", "--engine ray") from exc
        self.reward = reward
        self.name = reward.name
        self._grouped = needs_groups(reward)  # chunks keep groups whole (`_chunks`)
        self.retries = retries
        self.start_timeout = start_timeout
        self.address = address or "a local Ray"  # until joined: then the head's own address
        if not ray.is_initialized():
            # No job-wide runtime_env: with one, Ray cannot hand an actor a worker it started
            # ahead, and each actor costs a fresh process (about 3 s of CPU, not 1). Judges in
            # the workers keep litellm's cost map offline anyway: `referee.judges` sets
            # LITELLM_LOCAL_MODEL_COST_MAP when the reward's unpickling imports it.
            try:
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
            except (ConnectionError, TimeoutError, ray.exceptions.RayError) as exc:
                raise ClusterError(
                    f"cannot join the Ray cluster at {self.address}: {exc}", address=self.address
                ) from None
        self.address = address or ray.get_runtime_context().gcs_address
        self._shared = ray.put(reward)
        self._slots: list[_Slot] = []
        self._refilling: asyncio.Future[None] | None = None  # replacing lost actors
        self._failed_nodes: set[str] = set()  # nodes an actor could not be started on
        self._lost_on: set[str] = set()  # nodes an actor was lost on
        nodes = self._nodes()
        self._live = len(nodes)  # live nodes with CPUs, when last asked
        if not nodes:
            raise ClusterError(f"the Ray cluster at {self.address} has no live node with CPUs",
                               address=self.address)  # fmt: skip
        self._target = workers or int(sum(nodes.values())) or 1
        slots = [self._spawn(node) for node in self._spread(nodes, self._target)]
        not_started: tuple[type[BaseException], ...] = (
            ray.exceptions.GetTimeoutError,
            *_lost_errors(),
        )
        try:
            ray.get([s.actor.__ray_ready__.remote() for s in slots], timeout=start_timeout)
        except not_started as exc:
            for slot in slots:
                ray.kill(slot.actor, no_restart=True)
            raise ClusterError(
                f"{self._target} Ray actors did not start on the cluster at {self.address}: "
                f"{_brief(exc)}",
                address=self.address,
            ) from None
        self._slots = slots

    # --- the pool -------------------------------------------------------------------------

    def _nodes(self) -> dict[str, float]:
        """Live nodes with CPUs (their id -> CPUs), less those an actor failed to start on."""
        import ray

        return {
            n["NodeID"]: n["Resources"]["CPU"]
            for n in ray.nodes()
            if n["Alive"] and n["Resources"].get("CPU", 0) > 0
            and n["NodeID"] not in self._failed_nodes
        }  # fmt: skip

    @staticmethod
    def _spread(nodes: dict[str, float], count: int) -> list[str]:
        """`count` placements: round-robin over the nodes, each taking up to its CPUs a round
        (so 4 actors on a head of 1 CPU and two nodes of 2 go head, a, b, a... not all on one)."""
        order = sorted(nodes)
        rounds = max(1, int(max(nodes.values())))
        slots = [n for r in range(rounds) for n in order if nodes[n] > r]
        return [slots[i % len(slots)] for i in range(count)]

    def _spawn(self, node: str) -> _Slot:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        # Pinned to its node (soft affinity lets Ray pile actors onto the head); no restarts:
        # a lost actor is replaced here, so every loss counts against `retries`.
        actor = ray.remote(_Worker).options(
            num_cpus=0, max_concurrency=4, max_restarts=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
        ).remote(self._shared)  # fmt: skip
        return _Slot(actor, node)

    def _retire(self, slot: _Slot) -> None:
        import ray

        if slot in self._slots:
            self._slots.remove(slot)
            ray.kill(slot.actor, no_restart=True)

    async def _refill(self) -> None:
        """Start actors until the pool is whole again, each on a live node (the fewest actors
        per CPU, nodes that lost none first); a node an actor cannot start on is not tried
        again. The calls to the
        head run in a thread under `start_timeout`: a lost head blocks them (for a minute, after
        which Ray ends the process), and the actors left keep scoring meanwhile."""
        import ray

        not_started: tuple[type[BaseException], ...] = (TimeoutError, *_lost_errors())
        while len(self._slots) < self._target:
            try:
                nodes = await _off_loop(self._nodes, self.start_timeout)
            except (TimeoutError, ConnectionError, ray.exceptions.RayError):
                logger.warning(
                    "ray: the head at %s does not answer; no actor replaced", self.address
                )
                return
            self._live = len(nodes)
            if not nodes:
                return
            load = dict.fromkeys(nodes, 0)
            for slot in self._slots:
                if slot.node in load:
                    load[slot.node] += 1
            # A node that lost an actor may be dying unnoticed yet (Ray's health checks take
            # seconds): others first, then the fewest actors per CPU.
            node = min(sorted(nodes), key=lambda n: (n in self._lost_on, load[n] / nodes[n]))
            try:
                slot = await _off_loop(functools.partial(self._spawn, node), self.start_timeout)
            except TimeoutError:
                logger.warning(
                    "ray: the head at %s does not answer; no actor replaced", self.address
                )
                return
            try:
                await asyncio.wait_for(slot.actor.__ray_ready__.remote(), self.start_timeout)
            except not_started as exc:
                logger.warning("ray: no actor could start on node %s: %s", node[:12], _brief(exc))
                ray.kill(slot.actor, no_restart=True)
                self._failed_nodes.add(node)
                continue
            except asyncio.CancelledError:
                ray.kill(slot.actor, no_restart=True)  # its run ended: not left behind
                raise
            self._slots.append(slot)

    async def _slot(self) -> _Slot | None:
        """The live actor with the fewest chunks in flight, while lost ones are replaced in the
        background; None when no actor is left and none could be started."""
        refill = self._refilling
        if len(self._slots) < self._target and (
            refill is None or refill.done() or refill.get_loop() is not asyncio.get_running_loop()
        ):
            # (a refill of an earlier event loop was cancelled when that loop ended)
            self._refilling = refill = asyncio.ensure_future(self._refill())
        if not self._slots and refill is not None:
            await asyncio.shield(refill)
        return min(self._slots, key=lambda s: s.busy) if self._slots else None

    # --- scoring --------------------------------------------------------------------------

    def children(self) -> Sequence[Part]:
        return [Part(self.reward.name, self.reward)]

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError("a RayReward holds live actors; pickle the reward it wraps instead")

    def _chunks(self, rollouts: Sequence[Rollout]) -> list[list[int]]:
        """Positions cut into one chunk per actor: every group whole in one chunk where the
        reward compares a group's attempts, else rollout by rollout (a reward that scores each
        alone gains nothing from a group kept together, and a batch that is one group, the
        attempts at one prompt, would keep every actor but one idle)."""
        chunks: list[list[int]] = [[] for _ in range(self._target)]
        sizes = [0] * len(chunks)
        units = group_indices(rollouts) if self._grouped else [[i] for i in range(len(rollouts))]
        for group in sorted(units, key=len, reverse=True):
            smallest = sizes.index(min(sizes))
            chunks[smallest].extend(group)
            sizes[smallest] += len(group)
        return [sorted(c) for c in chunks if c]

    async def _score_chunk(
        self, chunk: list[Rollout], concurrency: int | None = None
    ) -> list[Score]:
        """Score one chunk on the pool, sending it again when it is lost with its actor."""
        lost = _lost_errors()
        reasons: list[str] = []
        for attempt in range(self.retries + 1):
            slot = await self._slot()
            if slot is None:
                break
            slot.busy += 1
            try:
                scores: list[Score] = await slot.actor.score.remote(chunk, concurrency)
                return scores
            except lost as exc:
                reasons.append(_brief(exc))
                self._retire(slot)
                self._lost_on.add(slot.node)
                if attempt < self.retries:
                    logger.warning(
                        "ray: %d rollouts lost on node %s (%s); sent again (retry %d of %d)",
                        len(chunk), slot.node[:12], reasons[-1], attempt + 1, self.retries,
                    )  # fmt: skip
            finally:
                slot.busy -= 1
        ids = [r.id or "" for r in chunk]
        if slot is None:
            why = f"no live actor is left ({self._live} live nodes with CPUs)"
        else:
            why = f"it was lost {len(reasons)} times"
        raise ClusterError(
            f"the Ray cluster at {self.address} lost {len(chunk)} rollouts (ids {ids[0]!r} .. "
            f"{ids[-1]!r}) and {why}; last error: {reasons[-1] if reasons else 'none'}",
            address=self.address,
            lost=ids,
        )

    async def score(self, rollout: Rollout) -> Score:
        return (await self.score_batch([rollout]))[0]

    async def score_batch(
        self, rollouts: Sequence[Rollout], *, concurrency: int | None = None
    ) -> list[Score]:
        chunks = self._chunks(rollouts)
        # `concurrency` goes to each actor: rollouts scored at once there, as in one process
        tasks = [
            asyncio.ensure_future(self._score_chunk([rollouts[i] for i in c], concurrency))
            for c in chunks
        ]
        try:
            results = await asyncio.gather(*tasks)
        except BaseException:
            # One chunk cannot be scored: the batch will not be written, so the others stop.
            pending: list[asyncio.Future[Any]] = [*tasks]
            if self._refilling is not None:
                pending.append(self._refilling)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            raise
        out: list[Score | None] = [None] * len(rollouts)
        for chunk, scores in zip(chunks, results, strict=True):
            for i, s in zip(chunk, scores, strict=True):
                out[i] = s
        return out  # type: ignore[return-value]

    def close(self) -> None:
        import ray

        for slot in self._slots:
            ray.kill(slot.actor, no_restart=True)
        self._slots = []
