"""Rewards made of rewards: weighted sums, gates, min/max/product, cascades, clip and scale.

Every combinator returns a `Reward`. Components keep their names: the total and every
component (dotted for nesting, ``fields.amount``) are reported on the `Score`.

Components run in declared order, batch by batch. A gate component whose value is below its
threshold sets the total to `floor` and the components after it are not run for that rollout
(they are listed in `Score.skipped`), so an expensive judge is never paid to grade invalid JSON.

A component that gives no value (None, with a Failure) follows the declared `on_none` policy:

- ``"skip"``: leave it out and renormalise the weights of the others (the default);
- ``"fail"``: the total is None, carrying the component's failure;
- ``"value"``: count it as `none_value`.

A gate that gives no value cannot decide, so the total fails, unless `on_none` is ``"value"``.

Every number is finite: a NaN or infinite weight, threshold, floor, scale, offset or clip bound
is refused when the reward is built, and a total (or a per-step value) that still comes out
non-finite (an overflow: ``1e308 * 10``) is ``Failure("invalid_value")`` naming the component
that made it, never a NaN handed to a trainer.

Each component scores under its own deadline. A combination's `timeout` bounds one rollout's
whole scoring through it (all components must be sync: inline scoring is what it bounds);
past it, that rollout's total is ``Failure("timeout")``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias, cast

from referee.deadline import check_timeout, each, run
from referee.errors import VerifierTimeout
from referee.reward import Part, Reward, RewardBase, SyncReward, is_sync
from referee.rollout import Rollout
from referee.score import Failure, Score

__all__ = [
    "CombineMode",
    "Combined",
    "Component",
    "NonePolicy",
    "Transform",
    "cascade",
    "clip",
    "gate",
    "maximum",
    "mean",
    "minimum",
    "product",
    "scale",
    "weighted",
]

CombineMode = Literal["weighted", "mean", "min", "max", "product", "cascade"]
"""How component values become the total.

- weighted: sum of weight * value (weights are taken as given, not normalised);
- mean: weighted mean, sum of weight * value / sum of weights;
- min / max / product: of the values (weights ignored);
- cascade: the first component that gives a value decides; later ones run only where the
  earlier ones gave none (a cheap check first, an expensive judge as fallback).
"""

NonePolicy = Literal["skip", "fail", "value"]


@dataclass(kw_only=True)
class Component:
    """One named part of a `Combined` reward.

    Attributes:
        name: Reported name of the component.
        reward: The reward that scores it.
        weight: Its weight in ``weighted`` and ``mean`` totals.
        gate: When true, a value below `threshold` stops the rollout here: the total becomes
            the combination's `floor` and later components are skipped.
        threshold: The least value that passes a gate.
    """

    name: str
    reward: Reward
    weight: float = 1.0
    gate: bool = False
    threshold: float = 1.0

    def __post_init__(self) -> None:
        _finite(f"component {self.name}", weight=self.weight, threshold=self.threshold)


def _finite(owner: str, **numbers: float | None) -> None:
    """Raise ValueError naming `owner` and the option when a number is NaN or infinite."""
    for key, value in numbers.items():
        if value is None:
            continue
        try:
            finite = math.isfinite(value)
        except (TypeError, OverflowError):  # a non-number, or an int past float range
            finite = False
        if not finite:
            raise ValueError(f"{owner}: {key} must be a finite number, got {value!r}")


@dataclass(kw_only=True)
class Combined(RewardBase):
    """A reward computed from named component rewards (see the module docstring).

    Attributes:
        timeout: Seconds one rollout may take through the whole combination (None: each
            component is bounded by its own deadline only).
    """

    components: list[Component]
    mode: CombineMode = "weighted"
    on_none: NonePolicy = "skip"
    none_value: float = 0.0
    floor: float = 0.0
    name: str = "combined"
    timeout: float | None = None

    def __post_init__(self) -> None:
        self.timeout = check_timeout(self.timeout, self.name)
        names = [c.name for c in self.components]
        if not names:
            raise ValueError(f"{self.name}: a combination needs at least one component")
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"{self.name}: component names must be unique, repeated: {dupes}")
        _finite(self.name, none_value=self.none_value, floor=self.floor)
        self._total_weight = sum(c.weight for c in self.components)
        _finite(self.name, **{"the sum of the weights": self._total_weight})
        self._sync = all(is_sync(c.reward) for c in self.components)
        # The components in order, as runs of sync ones and single async ones.
        self._segments: list[tuple[list[Component], bool]] = []
        for comp in self.components:
            sync = is_sync(comp.reward)
            if sync and self._segments and self._segments[-1][1]:
                self._segments[-1][0].append(comp)
            else:
                self._segments.append(([comp], sync))
        if self.mode in ("weighted", "mean") and self._total_weight <= 0:
            raise ValueError(f"{self.name}: the weights of a {self.mode} combination sum to 0")
        if self.timeout is not None and not self._sync:
            slow = [c.name for c in self.components if not is_sync(c.reward)]
            raise ValueError(
                f"{self.name}: a timeout on a combination bounds inline scoring, but "
                f"{', '.join(slow)} cannot score inline; set timeout on the components instead"
            )

    def children(self) -> Sequence[Part]:
        return [Part(c.name, c.reward, c.weight, reported=True) for c in self.components]

    @property
    def is_sync(self) -> bool:
        return self._sync

    @property
    def deadline_seconds(self) -> float | None:
        """`timeout`: the combination's own bound, if any (its components carry theirs)."""
        return self.timeout

    def score_sync(self, rollout: Rollout) -> Score:
        """Score one rollout, component after component (inline when every one is sync)."""
        if not self._sync:
            return super().score_sync(rollout)
        if self.timeout is None:  # `_score_inline`, written out: the fast path of every spec
            per: dict[str, Score] = {}
            return self._total(per, self._check_run(self.components, rollout, per))
        try:
            return run(self._score_inline, rollout, self.timeout, self.name)
        except VerifierTimeout as exc:
            return Score.failed("timeout", str(exc), self.name)

    def _score_inline(self, rollout: Rollout) -> Score:
        per: dict[str, Score] = {}
        return self._total(per, self._check_run(self.components, rollout, per))

    def _check_run(
        self, run: Sequence[Component], rollout: Rollout, per: dict[str, Score]
    ) -> tuple[Component, Score] | None:
        """Score one rollout with sync components in order, into `per`; the (component,
        score) that stopped it, if one did."""
        for comp in run:
            s = cast(SyncReward, comp.reward).score_sync(rollout)
            per[comp.name] = s
            if self._stops(comp, s):
                return comp, s
        return None

    async def score(self, rollout: Rollout) -> Score:
        return (await self.score_batch([rollout]))[0]

    async def score_batch(
        self, rollouts: Sequence[Rollout], *, concurrency: int | None = None
    ) -> list[Score]:
        if self._sync:
            # Rollout by rollout: no per-component lists, and a completion parsed by one
            # component is still in the parse cache when the next one asks for it.
            return each(self.score_sync, rollouts)
        per: list[dict[str, Score]] = [{} for _ in rollouts]
        stopped: list[tuple[Component, Score] | None] = [None] * len(rollouts)
        alive = list(range(len(rollouts)))
        for segment, sync in self._segments:
            if not alive:
                break
            if sync:
                # A run of sync components scores rollout by rollout, as the all-sync path
                # does: each rollout's parse (JSON, trajectory) is shared by the run.
                def run_segment(i: int, segment: list[Component] = segment) -> None:
                    stopped[i] = self._check_run(segment, rollouts[i], per[i])

                each(run_segment, alive)  # one armed scope for the run's deadlines
            else:
                [comp] = segment
                scores = await comp.reward.score_batch(
                    [rollouts[i] for i in alive], concurrency=concurrency
                )
                for i, s in zip(alive, scores, strict=True):
                    per[i][comp.name] = s
                    if self._stops(comp, s):
                        stopped[i] = (comp, s)
            alive = [i for i in alive if stopped[i] is None]
        return [self._total(p, stop) for p, stop in zip(per, stopped, strict=True)]

    def _stops(self, comp: Component, s: Score) -> bool:
        """Whether this component's score ends the evaluation of its rollout."""
        value = s.value
        if value is None:
            if self.on_none == "value":
                value = self.none_value
            else:
                # A gate that cannot decide fails the total, as does any None under "fail".
                return comp.gate or self.on_none == "fail"
        if comp.gate and value < comp.threshold:
            return True
        return self.mode == "cascade"

    def _total(self, per: dict[str, Score], stop: tuple[Component, Score] | None) -> Score:
        """The combined Score, in one pass over the components that ran (in declared order)."""
        components: dict[str, float | None] = {}
        reasons = []
        cost = None
        weighs = self.mode == "weighted" or self.mode == "mean"
        total = present = 0.0  # weighted / mean
        values: list[float] = []  # min / max / product / cascade
        for comp in self.components:
            s = per.get(comp.name)
            if s is None:
                continue
            name, value = comp.name, s.value
            components[name] = value
            if s.components:
                for sub, v in s.components.items():
                    components[f"{name}.{sub}"] = v
            if s.reason:
                reasons.append(f"{name}: {s.reason}")
            if s.cost is not None:
                cost = (cost or 0.0) + s.cost
            if value is None:
                if self.on_none != "value":
                    continue
                value = self.none_value
            if not weighs:
                values.append(value)
            elif comp.weight != 0:
                # A zero-weight component (typically a gate) adds nothing to a weighted total;
                # counting it as present would turn a total with no real value into 0.
                total += comp.weight * value
                present += comp.weight
        skipped = (
            tuple(c.name for c in self.components if c.name not in per)
            if len(per) < len(self.components)
            else ()
        )
        detail = "; ".join(reasons) or None

        result: float | None
        failure: Failure | None = None
        headline: str | None = None
        if stop is not None and stop[1].value is None and self.on_none != "value":
            comp, s = stop
            result, failure = None, _wrap_failure(s, comp.name)
            headline = f"component {comp.name} failed"
        elif stop is not None and stop[0].gate:
            result, headline = self.floor, f"gate {stop[0].name} not passed"
        elif present if weighs else values:
            result = self._combine(total, present, values)
            if not math.isfinite(result):
                culprit = self._culprit(per)
                message = (
                    f"the total is {result!r}, not a finite number: component {culprit} "
                    "overflows it (scale the component's values or weight down)"
                )
                result, failure = None, Failure("invalid_value", message, culprit)
                headline = f"total not finite (component {culprit})"
        else:
            name, first = next(iter(per.items()))
            result, failure = None, _wrap_failure(first, name)
            headline = "no component gave a value"
        if headline is not None:
            detail = f"{headline} ({detail})" if detail else headline
        steps = self._steps(per, stop)
        if steps is not None and failure is None and not all(map(math.isfinite, steps)):
            culprit = self._culprit(per)
            message = f"a per-step value is not finite: component {culprit} overflows it"
            result, failure, steps = None, Failure("invalid_value", message, culprit), None
            detail = f"{message} ({detail})" if detail else message
        return Score(
            value=result,
            components=components,
            reason=detail,
            failure=failure,
            skipped=skipped,
            steps=steps,
            cost=cost,
        )

    def _culprit(self, per: dict[str, Score]) -> str:
        """The component whose weighted value is largest: the one a total overflowed on."""
        largest, name = -1.0, self.components[0].name
        for comp in self.components:
            s = per.get(comp.name)
            value = None if s is None else s.value
            steps = () if s is None or s.steps is None else s.steps
            weight = comp.weight if self.mode in ("weighted", "mean") else 1.0
            for v in (value, *steps):
                if v is None:
                    continue
                size = abs(v * weight)
                if not size <= largest:  # NaN and inf count as the largest
                    largest, name = size, comp.name
                    if not math.isfinite(size):
                        return name
        return name

    def _steps(
        self, per: dict[str, Score], stop: tuple[Component, Score] | None
    ) -> tuple[float, ...] | None:
        """Per-step values of the components that give them, combined step by step as the
        totals are (a cascade takes the deciding component's); None when no component gives
        steps or their counts differ (then they cannot be aligned)."""
        stepped: list[tuple[float, tuple[float, ...]]] = []
        for c in self.components:
            s = per.get(c.name)
            if s is not None and s.steps is not None:
                stepped.append((c.weight, s.steps))
        if not stepped:
            return None
        mode = self.mode
        if mode == "cascade":
            return stop[1].steps if stop is not None else stepped[-1][1]
        if len({len(st) for _, st in stepped}) != 1:
            return None
        if mode == "weighted" or mode == "mean":
            combined = [0.0] * len(stepped[0][1])
            for weight, steps in stepped:
                for t, value in enumerate(steps):
                    combined[t] += weight * value
            if mode == "mean":
                total = sum(w for w, _ in stepped) or 1.0
                return tuple([v / total for v in combined])
            return tuple(combined)
        columns = list(zip(*(st for _, st in stepped), strict=True))
        if mode == "min":
            return tuple(min(col) for col in columns)
        if mode == "max":
            return tuple(max(col) for col in columns)
        return tuple(math.prod(col) for col in columns)

    def _combine(self, total: float, present: float, values: list[float]) -> float:
        mode = self.mode
        if mode == "mean":
            return total / present
        if mode == "weighted":
            if present < self._total_weight:
                # "skip": renormalise so the missing components' weight is spread over the rest.
                total *= self._total_weight / present
            return total
        if mode == "min":
            return min(values)
        if mode == "max":
            return max(values)
        if mode == "product":
            return math.prod(values)
        return values[0]  # cascade: the first component that gave a value


def _wrap_failure(s: Score, component: str) -> Failure:
    if s.failure is None:
        return Failure("no_score", f"component {component} gave no value", component)
    return Failure(
        s.failure.type, f"{component}: {s.failure.message}", s.failure.where or component
    )


@dataclass(kw_only=True)
class Transform(RewardBase):
    """A reward's value scaled, shifted and clipped: ``clip(value * scale + offset, low, high)``.

    The inner reward's components are reported unchanged; a None stays None.
    """

    reward: Reward
    scale: float = 1.0
    offset: float = 0.0
    low: float | None = None
    high: float | None = None
    name: str = "transform"

    def children(self) -> Sequence[Part]:
        return [Part(self.reward.name, self.reward)]

    @property
    def deadline_seconds(self) -> float | None:
        """None: the inner reward carries the deadline."""
        return None

    @property
    def is_sync(self) -> bool:
        return is_sync(self.reward)

    def score_sync(self, rollout: Rollout) -> Score:
        inner = self.reward
        if not is_sync(inner):
            return super().score_sync(rollout)
        return self._apply(inner.score_sync(rollout))

    def __post_init__(self) -> None:
        _finite(self.name, scale=self.scale, offset=self.offset, low=self.low, high=self.high)
        if self.low is not None and self.high is not None and self.low > self.high:
            raise ValueError(f"{self.name}: clip low {self.low} is above high {self.high}")

    def _apply(self, s: Score) -> Score:
        if s.value is None:
            return s
        value = s.value * self.scale + self.offset
        if self.low is not None and value < self.low:
            value = self.low
        if self.high is not None and value > self.high:
            value = self.high
        steps = None
        if s.steps is not None:
            steps = tuple(self._clip(v * self.scale + self.offset) for v in s.steps)
        if not math.isfinite(value) or (steps is not None and not all(map(math.isfinite, steps))):
            message = (
                f"{s.value!r} * scale {self.scale!r} + offset {self.offset!r} is not a finite "
                "number (scale the reward down)"
            )
            return Score(
                value=None,
                components=s.components,
                reason=f"{message} ({s.reason})" if s.reason else message,
                failure=Failure("invalid_value", message, self.name),
                skipped=s.skipped,
                cost=s.cost,
                latency=s.latency,
                tokens=s.tokens,
            )
        return Score(
            value=value,
            components=s.components,
            reason=s.reason,
            failure=s.failure,
            skipped=s.skipped,
            steps=steps,
            cost=s.cost,
            latency=s.latency,
            tokens=s.tokens,
        )

    def _clip(self, value: float) -> float:
        if self.low is not None and value < self.low:
            return self.low
        if self.high is not None and value > self.high:
            return self.high
        return value

    async def score(self, rollout: Rollout) -> Score:
        return self._apply(await self.reward.score(rollout))

    async def score_batch(
        self, rollouts: Sequence[Rollout], *, concurrency: int | None = None
    ) -> list[Score]:
        scores = await self.reward.score_batch(rollouts, concurrency=concurrency)
        return [self._apply(s) for s in scores]


# --- constructors --------------------------------------------------------------------------

ComponentsArg: TypeAlias = (
    Mapping[str, "Reward | tuple[Reward, float] | Component"] | Sequence["Reward | Component"]
)


def _components(arg: ComponentsArg) -> list[Component]:
    out: list[Component] = []
    if isinstance(arg, Mapping):
        for name, item in arg.items():
            if isinstance(item, Component):
                out.append(item)
            elif isinstance(item, tuple):
                out.append(Component(name=name, reward=item[0], weight=float(item[1])))
            else:
                out.append(Component(name=name, reward=item))
        return out
    for item in arg:
        out.append(item if isinstance(item, Component) else Component(name=item.name, reward=item))
    return out


def weighted(
    components: ComponentsArg,
    *,
    on_none: NonePolicy = "skip",
    none_value: float = 0.0,
    floor: float = 0.0,
    name: str = "weighted",
) -> Combined:
    """Sum of weight * value over named components.

    Example:
        ```python
        total = referee.weighted(
            {"valid": (JsonSchema(schema=s), 0.2), "fields": (FieldMatch(), 0.8)}
        )
        ```
    """
    return Combined(
        components=_components(components),
        mode="weighted",
        on_none=on_none,
        none_value=none_value,
        floor=floor,
        name=name,
    )


def gate(
    check: Reward, then: Reward, *, threshold: float = 1.0, floor: float = 0.0, name: str = "gate"
) -> Combined:
    """`then`'s value where `check` reaches `threshold`; `floor` (and `then` not run) elsewhere."""
    return Combined(
        components=[
            Component(name=check.name, reward=check, weight=0.0, gate=True, threshold=threshold),
            Component(name=then.name, reward=then, weight=1.0),
        ],
        mode="weighted",
        floor=floor,
        name=name,
    )


def _simple(
    mode: CombineMode, components: ComponentsArg, on_none: NonePolicy, name: str
) -> Combined:
    return Combined(components=_components(components), mode=mode, on_none=on_none, name=name)


def mean(
    components: ComponentsArg, *, on_none: NonePolicy = "skip", name: str = "mean"
) -> Combined:
    """Weighted mean of the components' values."""
    return _simple("mean", components, on_none, name)


def minimum(
    components: ComponentsArg, *, on_none: NonePolicy = "skip", name: str = "min"
) -> Combined:
    """The least of the components' values (every criterion must hold)."""
    return _simple("min", components, on_none, name)


def maximum(
    components: ComponentsArg, *, on_none: NonePolicy = "skip", name: str = "max"
) -> Combined:
    """The greatest of the components' values."""
    return _simple("max", components, on_none, name)


def product(
    components: ComponentsArg, *, on_none: NonePolicy = "skip", name: str = "product"
) -> Combined:
    """The product of the components' values."""
    return _simple("product", components, on_none, name)


def cascade(*rewards: Reward, name: str = "cascade") -> Combined:
    """The first reward that gives a value decides; later ones run only where earlier gave none."""
    return Combined(components=_components(list(rewards)), mode="cascade", name=name)


def clip(reward: Reward, low: float | None = None, high: float | None = None) -> Transform:
    """`reward`'s value clipped to ``[low, high]``."""
    return Transform(reward=reward, low=low, high=high, name=reward.name)


def scale(reward: Reward, factor: float, offset: float = 0.0) -> Transform:
    """`reward`'s value times `factor`, plus `offset`."""
    return Transform(reward=reward, scale=factor, offset=offset, name=reward.name)
