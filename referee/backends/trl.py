"""referee rewards as TRL reward functions (`GRPOTrainer(reward_funcs=...)`).

Example:
    ```python
    from trl import GRPOConfig, GRPOTrainer
    from referee.backends.trl import reward_funcs

    funcs = reward_funcs("spec.yaml")               # a list TRL takes as reward_funcs
    args = GRPOConfig(..., reward_weights=funcs.weights)
    trainer = GRPOTrainer(model=..., args=args, reward_funcs=funcs, train_dataset=...)
    ```

How a TRL batch becomes rollouts:

- ``prompt`` and ``completion`` as TRL gives them, text or chat messages;
- ``reference``: the dataset column named by `reference` (``"reference"`` by default), or what
  a function of the row returns;
- ``metadata``: the other dataset columns (those named by `metadata`, or all of them), plus
  ``completion_tokens`` (the completion's token count) and, with ``token_ids=True``,
  ``completion_ids``;
- ``group``: the prompt itself (its canonical JSON), or the column named by `group`. Group
  rewards see whole groups whatever order TRL puts the completions in; on several processes
  the batch is gathered first, scored once on the main process and handed back.

A rollout that gets no score reaches TRL as None, which TRL turns into NaN and masks out of
the group mean. A dataset with no ``reference`` column (or whichever `reference` names) while a
component needs one (``math_answer``, ``field_match``, ...; `referee.reward.needs`) is an error
at the first batch, naming the component and the fix: every rollout would fail, and under
``on_failure: omit`` the other components would be paid alone. Components and failures are
logged through TRL's ``log_metric``:

- ``referee/<component>/mean``: the mean over the rollouts where the component ran and gave a
  value. A skipped component (one that did not run because a gate, or a failure, before it
  stopped the rollout) has no value, which is not a zero: it is left out, so a failed gate
  does not drag the mean of what came after it down;
- ``referee/<component>/skipped``: the share of the batch that skipped it (for each top-level
  component of a combination);
- ``referee/failures``: the share of the batch that failed, and ``referee/failures/<type>`` per
  failure type.

Dense rewards: TRL's GRPO optimises one value per completion, so a reward with per-step
values (``Score.steps``) reaches TRL as its folded total (the reward's ``fold``: sum, mean,
last, discounted, min or product). The steps themselves are logged (``referee/steps/mean``,
the completions table's ``referee_steps`` column) but TRL cannot assign credit to individual
turns; verl's per-turn reward manager can.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from referee._aio import run_sync
from referee.backends.contract import Bridge, Outlet, resolve
from referee.errors import MissingInput, RolloutError
from referee.reward import Need, Reward, needs, needs_groups, top_components
from referee.rollout import Rollout
from referee.rollouts.needs import REFERENCE_GUESSES, describe_missing, guess_column
from referee.scores import Score

TYPE_CHECKING = False
if TYPE_CHECKING:
    from referee.monitor import Monitor

__all__ = ["MonitorCallback", "RewardFuncs", "TRLRewardFunction", "reward_funcs"]

logger = logging.getLogger("referee.backends.trl")

# Keyword arguments TRL passes that are not dataset columns.
_TRL_KWARGS = frozenset(
    {"trainer_state", "log_extra", "log_metric", "environments", "completion_ids", "prompts"}
)

ReferenceMap = str | Callable[[Mapping[str, Any]], Any] | None


class RewardFuncs(list):  # type: ignore[type-arg]
    """The reward functions for ``GRPOTrainer(reward_funcs=...)``, with their ``weights``.

    Pass ``weights`` as ``GRPOConfig(reward_weights=...)``: ``[1.0]`` for the whole reward, or
    the component weights when it was split with ``per_component=True``.
    """

    weights: list[float]


def _jsonable(value: Any) -> bool:
    if value is None or isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(_jsonable(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _jsonable(v) for k, v in value.items())
    return False


def _group_key(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    return json.dumps(prompt, sort_keys=True, ensure_ascii=False, default=str)


@dataclass
class _Scorer:
    """Builds rollouts from TRL's arguments, scores a batch once, and logs its metrics."""

    reward: Reward
    reference: ReferenceMap = "reference"
    metadata: Sequence[str] | None = None
    group: str | None = None
    token_ids: bool = False
    log_metrics: bool = True
    concurrency: int | None = None
    monitor: Monitor | None = None
    _last: tuple[Any, Any] | None = field(default=None, init=False, repr=False)
    _rollouts: list[Rollout] | None = field(default=None, init=False, repr=False)
    _warned: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        self.bridge = Bridge(self.reward, concurrency=self.concurrency)
        self.sync = self.bridge.sync
        self.grouped = needs_groups(self.reward)
        # TRL masks None: a rollout with no score, and a component that did not run, read None.
        self.outlet = Outlet.of(self.reward, failure_value=None, skipped=None)
        self.components = self.outlet.components
        # Who needs a reference: those whose failure fails the total, and the others.
        self.needs_reference = [c for c, n in needs(self.reward) if n == "reference"]
        self.may_use_reference = [
            c for c, n in needs(self.reward, optional=True)
            if n == "reference" and c not in self.needs_reference
        ]  # fmt: skip
        if self.reference is None and self.needs_reference:
            raise self.missing_reference("reward_funcs was given reference=None", [])

    def missing_reference(self, lacking: str, columns: Sequence[str]) -> MissingInput:
        """The error for a dataset that gives no component its reference."""
        column = guess_column(columns, REFERENCE_GUESSES) or "<column>"
        missing: list[tuple[str, Need]] = [(c, "reference") for c in self.needs_reference]
        message = describe_missing(
            missing,
            lacking=lambda _: lacking,
            fix=lambda _: (
                f"reward_funcs(..., reference={column!r}) (the column that holds it, or a "
                f"function of the row; Axolotl: REFEREE_REFERENCE={column})"
            ),
        )
        return MissingInput(f"referee: {message}", missing=missing, keys=columns)

    # --- rollouts ---------------------------------------------------------------------------

    def rollouts(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        completion_ids: Sequence[Sequence[int]] | None,
        kwargs: Mapping[str, Any],
    ) -> list[Rollout]:
        columns = {k: v for k, v in kwargs.items() if k not in _TRL_KWARGS}
        n = len(completions)
        for name, values in columns.items():
            if not isinstance(values, (list, tuple)) or len(values) != n:
                columns = {k: v for k, v in columns.items() if k != name}
        reference_column = self.reference if isinstance(self.reference, str) else None
        if reference_column is not None and reference_column not in columns:
            if reference_column != "reference":
                raise RolloutError(
                    f"the dataset has no column {reference_column!r} for the reference; its "
                    f"columns are {sorted(columns)}; pass reference=<column> to reward_funcs"
                )
            if self.needs_reference:
                # Every rollout would fail (or, omitted, leave the others to pay it alone).
                lacking = f"the dataset has no 'reference' column (columns: {sorted(columns)})"
                raise self.missing_reference(lacking, sorted(columns))
            if self.may_use_reference and not self._warned:
                import warnings

                warnings.warn(
                    "referee: the dataset has no 'reference' column, so "
                    f"{', '.join(self.may_use_reference)} (on_failure: omit or value in the "
                    f"spec) will have no value on any rollout (columns: {sorted(columns)}); "
                    "pass reference=<column> to reward_funcs",
                    stacklevel=3,
                )
                self._warned = True
        if self.metadata is not None:
            missing = [c for c in self.metadata if c not in columns]
            if missing:
                raise RolloutError(
                    f"metadata columns {missing} are not in the dataset "
                    f"(columns: {sorted(columns)})"
                )
            meta_columns = list(self.metadata)
        else:
            meta_columns = [c for c in columns if c != reference_column and c != self.group]
        if self.group is not None and self.group not in columns:
            raise RolloutError(
                f"the dataset has no column {self.group!r} to group by (columns: {sorted(columns)})"
            )

        out = []
        for i in range(n):
            row = {name: values[i] for name, values in columns.items()}
            if callable(self.reference):
                ref = self.reference(row)
            elif reference_column is not None:
                ref = row.get(reference_column)
            else:
                ref = None
            meta: dict[str, Any] = {c: row[c] for c in meta_columns if _jsonable(row[c])}
            if completion_ids is not None:
                ids = completion_ids[i]
                meta["completion_tokens"] = len(ids)
                if self.token_ids:
                    meta["completion_ids"] = [int(t) for t in ids]
            group = row[self.group] if self.group is not None else _group_key(prompts[i])
            rollout_id = row.get("id", i)
            out.append(
                Rollout(
                    id=str(rollout_id),
                    prompt=prompts[i],
                    completion=completions[i],
                    reference=ref if _jsonable(ref) else str(ref),
                    group=str(group),
                    metadata=meta,
                )
            )
        return out

    # --- scoring ----------------------------------------------------------------------------

    def _distributed(self) -> tuple[Any, int, int] | None:
        """torch.distributed, rank and world size, when a group reward runs on several ranks."""
        if not self.grouped:
            return None
        try:
            import torch.distributed as dist
        except ImportError:
            return None
        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
            return None
        return dist, dist.get_rank(), dist.get_world_size()

    def _score_all(self, rollouts: list[Rollout]) -> list[Score]:
        dist_info = self._distributed()
        if dist_info is None:
            return self._score_local(rollouts)
        # Groups span processes: gather every rank's rollouts, score them once on rank 0 (a
        # judge is paid once), hand each rank back its own slice.
        dist, rank, world = dist_info
        gathered: list[list[dict[str, Any]] | None] = [None] * world
        dist.all_gather_object(gathered, [r.model_dump() for r in rollouts])
        sizes = [len(g or []) for g in gathered]
        payload: list[list[dict[str, Any]] | None] = [None]
        if rank == 0:
            everything = [Rollout.model_validate(d) for g in gathered for d in (g or [])]
            payload = [[s.to_dict() for s in self._score_local(everything)]]
        dist.broadcast_object_list(payload, src=0)
        start = sum(sizes[:rank])
        return [Score.from_dict(d) for d in (payload[0] or [])[start : start + sizes[rank]]]

    def _score_local(self, rollouts: list[Rollout]) -> list[Score]:
        return self.bridge.score(rollouts)

    def score(self, completions: Sequence[Any], build: Callable[[], list[Rollout]]) -> list[Score]:
        """The batch's scores, computed once however many functions ask for them."""
        if self._last is not None and self._last[0] is completions:
            result: list[Score] = self._last[1]
            return result
        self._rollouts = build()
        scores = self._score_all(self._rollouts)
        self._last = (completions, scores)
        return scores

    async def score_async(
        self, completions: Sequence[Any], build: Callable[[], list[Rollout]]
    ) -> list[Score]:
        if self._last is not None and self._last[0] is completions:
            pending: asyncio.Future[list[Score]] = self._last[1]
            return await pending
        future: asyncio.Future[list[Score]] = asyncio.get_running_loop().create_future()
        self._last = (completions, future)
        try:
            rollouts = self._rollouts = build()
            if self._distributed() is not None:
                scores = await asyncio.to_thread(self._score_all, rollouts)
            else:
                scores = await self.bridge.score_async(rollouts)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved here, so a lone caller does not log it twice
            raise
        future.set_result(scores)
        return scores

    # --- the monitor ------------------------------------------------------------------------

    async def watch(self, scores: list[Score], kwargs: Mapping[str, Any]) -> None:
        """Give the batch to the monitor, at the trainer's step, and log its figures through
        TRL's ``log_metric`` (``referee/monitor/...``)."""
        if self.monitor is None or self._rollouts is None:
            return
        state = kwargs.get("trainer_state")
        step = getattr(state, "global_step", None)
        step = int(step) if step is not None else len(self.monitor.history)
        await self.monitor.observe(step, self._rollouts, scores, self.reward)
        log_metric = kwargs.get("log_metric")
        if log_metric is not None:
            for key, value in self.monitor.metrics("referee/monitor/").items():
                log_metric(key, value)

    # --- logging ----------------------------------------------------------------------------

    def log(self, scores: list[Score], kwargs: Mapping[str, Any]) -> None:
        """Log a scored batch through the ``log_metric`` and ``log_extra`` TRL passes."""
        if not self.log_metrics:
            return
        log_metric = kwargs.get("log_metric")
        log_extra = kwargs.get("log_extra")
        if log_metric is not None:
            self._log_metrics(scores, log_metric)
        if log_extra is not None:
            log_extra(
                "referee_failure",
                [
                    None if s.failure is None else f"{s.failure.type}: {s.failure.message}"
                    for s in scores
                ],
            )
            log_extra("referee_steps", [None if s.steps is None else list(s.steps) for s in scores])

    def _log_metrics(self, scores: list[Score], log_metric: Callable[[str, float], None]) -> None:
        sums: dict[str, float] = {}
        counts: Counter[str] = Counter()
        failures: Counter[str] = Counter()
        skipped: Counter[str] = Counter()
        for s in scores:
            # A skipped component is absent from `components`: out of its mean, not a 0.
            for name, value in s.components.items():
                if value is not None:
                    sums[name] = sums.get(name, 0.0) + value
                    counts[name] += 1
            skipped.update(s.skipped)
            if s.failure is not None:
                failures[s.failure.type] += 1
        for name in sorted(sums):
            log_metric(f"referee/{name}/mean", sums[name] / counts[name])
        n = max(len(scores), 1)
        for name in self.components:
            log_metric(f"referee/{name}/skipped", skipped[name] / n)
        log_metric("referee/failures", sum(failures.values()) / n)
        for kind, count in sorted(failures.items()):
            log_metric(f"referee/failures/{kind}", count / n)
        step_values = [v for s in scores if s.steps for v in s.steps]
        if step_values:
            # GRPO takes one value per completion (the folded total); the steps are logged.
            log_metric("referee/steps/mean", sum(step_values) / len(step_values))
            log_metric("referee/steps/per_completion", len(step_values) / n)


class TRLRewardFunction:
    """One TRL reward function: the whole reward, or one of its top-level components."""

    def __init__(self, scorer: _Scorer, name: str, component: str | None, primary: bool) -> None:
        self._scorer = scorer
        self._component = component
        self._primary = primary  # the function that logs the batch's metrics
        self.__name__ = name

    def __repr__(self) -> str:
        return f"<referee reward function {self.__name__}>"

    def _values(self, scores: list[Score], kwargs: Mapping[str, Any]) -> list[float | None]:
        if self._primary:
            self._scorer.log(scores, kwargs)
        outlet = self._scorer.outlet
        if self._component is None:
            return [outlet.total(s) for s in scores]
        return [outlet.component(s, self._component) for s in scores]

    def _build(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        completion_ids: Sequence[Sequence[int]] | None,
        kwargs: Mapping[str, Any],
    ) -> Callable[[], list[Rollout]]:
        return lambda: self._scorer.rollouts(prompts, completions, completion_ids, kwargs)


class _SyncFunction(TRLRewardFunction):
    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        completion_ids: Sequence[Sequence[int]] | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        build = self._build(prompts, completions, completion_ids, kwargs)
        scores = self._scorer.score(completions, build)
        if self._primary and self._scorer.monitor is not None:
            run_sync(self._scorer.watch(scores, kwargs))
        return self._values(scores, kwargs)


class _AsyncFunction(TRLRewardFunction):
    async def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        completion_ids: Sequence[Sequence[int]] | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        build = self._build(prompts, completions, completion_ids, kwargs)
        scores = await self._scorer.score_async(completions, build)
        if self._primary:
            await self._scorer.watch(scores, kwargs)
        return self._values(scores, kwargs)


def reward_funcs(
    reward_or_spec: Reward | str | Path | Mapping[str, Any],
    *,
    reference: ReferenceMap = "reference",
    metadata: Sequence[str] | None = None,
    group: str | None = None,
    per_component: bool = False,
    token_ids: bool = False,
    log_metrics: bool = True,
    concurrency: int | None = None,
    monitor: Monitor | None = None,
) -> RewardFuncs:
    """TRL reward functions for a referee reward or spec.

    Args:
        reward_or_spec: A `Reward`, or a spec file path or mapping.
        reference: The dataset column that holds the ground truth, or a function of the row
            (a dict of the row's columns) that returns it. Where a component needs one and
            the dataset has no such column, the first call raises `MissingInput`.
        metadata: The dataset columns copied into ``Rollout.metadata``; all others by default.
        group: A dataset column whose value identifies a group; by default the prompt itself.
        per_component: One function per top-level component of a combination, weighted by
            its weight, for TRL's own aggregation (``multi_objective_aggregation=
            "normalize_then_sum"``). The spec is still scored once per batch. Gates and
            ``on_none`` policies then no longer apply to the total: TRL sums the components.
        token_ids: Also copy the completion's token ids into ``metadata.completion_ids``.
        log_metrics: Log components and failures through TRL's ``log_metric``.
        concurrency: How many rollouts an async reward scores at once.
        monitor: A `referee.monitor.Monitor` given every batch at the trainer's step; its
            figures are logged as ``referee/monitor/...``. Pass `MonitorCallback` of it to
            the trainer's ``callbacks`` so that a ``stop`` rule stops the run.

    Returns:
        A list of reward functions, async where the reward waits on something (judges,
        sandboxes), with the matching TRL ``reward_weights`` as its ``weights`` attribute.

    Raises:
        MissingInput: `reference` is None while a component needs a reference.
    """
    reward = resolve(reward_or_spec)
    scorer = _Scorer(
        reward,
        reference=reference,
        metadata=metadata,
        group=group,
        token_ids=token_ids,
        log_metrics=log_metrics,
        concurrency=concurrency,
        monitor=monitor,
    )
    cls = _SyncFunction if scorer.sync else _AsyncFunction
    funcs = RewardFuncs()
    if per_component:
        parts = top_components(reward)
        for i, (name, _) in enumerate(parts):
            funcs.append(cls(scorer, name, component=name, primary=i == 0))
        funcs.weights = [w for _, w in parts]
    else:
        funcs.append(cls(scorer, reward.name, component=None, primary=True))
        funcs.weights = [1.0]
    return funcs


def MonitorCallback(monitor: Monitor) -> Any:
    """A ``transformers.TrainerCallback`` that stops the run where `monitor` fired a ``stop``
    rule: at the end of that step it asks the trainer to save a checkpoint and stop, and logs
    which rule fired at which step. Give `monitor` to `reward_funcs` too (``monitor=``)::

        monitor = Monitor(gold=referee.load("strict.yaml"))
        trainer = GRPOTrainer(..., reward_funcs=reward_funcs("loose.yaml", monitor=monitor),
                              callbacks=[MonitorCallback(monitor)])
    """
    from transformers import TrainerCallback

    class _MonitorCallback(TrainerCallback):  # type: ignore[misc,unused-ignore]
        def __init__(self) -> None:
            self.monitor = monitor
            self.stopped_at: int | None = None

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            alarm = self.monitor.stopped
            if alarm is not None and self.stopped_at is None:
                self.stopped_at = int(state.global_step)
                control.should_save = True
                control.should_training_stop = True
                logger.warning(
                    "referee monitor: stopping at step %d: %s (rule %s, step %d)",
                    state.global_step, alarm.message, alarm.rule, alarm.step,
                )  # fmt: skip
            return control

    return _MonitorCallback()
