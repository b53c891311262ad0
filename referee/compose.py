"""Rewards made of rewards: weighted sums, gates, min/max/product, cascades, clip and scale.

Every combinator returns a `Reward`. Components keep their names: the total and every
component (dotted for nesting, ``fields.amount``) are reported on the `Score`.

Components run in declared order, batch by batch. A gate component whose value is below its
threshold sets the total to `floor` and the components after it are not run for that rollout
(they are listed in `Score.skipped`), so an expensive judge is never paid to grade invalid JSON.
A component a gate skipped on purpose is not a failure: it is left out of the total.

A component that gives no value (None, with a Failure: no reference, a reference of the wrong
shape, a sandbox or judge failure, a timeout) follows its `on_failure` policy, set per
component or, as the default of its components, per combination:

- ``"fail"`` (the default): the total is None, with a Failure that names the component and
  says what it missed (``answer: rollout has no reference to compare against``), so a
  misnamed dataset column can never be paid by the other components alone;
- ``"omit"``: leave it out and renormalise the weights of the others (an optional judge);
  the Score's reason says it was omitted, and why;
- ``"value"``: count it as `failure_value`.

A gate that gives no value cannot decide, so the total fails, unless its policy is
``"value"``. In a cascade, a component's None hands the rollout to the next one (its designed
fall-through); the policy applies to the last, and a cascade in which no component gives a
value fails. ``on_none`` (``skip`` / ``fail`` / ``value``, with ``none_value``) is the
deprecated spelling of a combination's ``on_failure`` (``omit`` / ``fail`` / ``value``, with
``failure_value``).

Every number is finite: a NaN or infinite weight, threshold, floor, failure value, scale,
offset or clip bound is refused when the reward is built, and a total (or a per-step value)
that still comes out non-finite (an overflow: ``1e308 * 10``) is ``Failure("invalid_value")``
naming the component that made it, never a NaN handed to a trainer.

Each component scores under its own deadline. A combination's `deadline` bounds one rollout's
whole scoring through it (all components must be sync: inline scoring is what it bounds);
past it, that rollout's total is 0 with the reason (`Score.fault` ``timeout``), the policy's
verdict, never a masked Failure (docs/threat-model.md, "Blame").
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Real
from typing import Any, Literal, TypeAlias, cast, get_args

from referee.deadline import check_timeout, each, run
from referee.errors import VerifierTimeout
from referee.reward import Composite, Part, Reward, RewardBase, SyncReward, is_sync
from referee.rollout import Rollout
from referee.scores import Failure, Score

__all__ = [
    "FROM_ON_NONE",
    "NOISE",
    "CombineMode",
    "Combined",
    "Component",
    "FailurePolicy",
    "NonePolicy",
    "Transform",
    "cascade",
    "clip",
    "exact_sum",
    "gate",
    "maximum",
    "mean",
    "minimum",
    "product",
    "scale",
    "tidy",
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

FailurePolicy = Literal["fail", "omit", "value"]
"""What a combination does with a component that gives no value (see the module docstring):
fail the total (the default), omit the component, or count it as `failure_value`."""

NonePolicy = Literal["skip", "fail", "value"]
"""Deprecated: the old spelling of a combination's `FailurePolicy` (``skip`` is ``omit``)."""

_POLICIES: tuple[str, ...] = get_args(FailurePolicy)
_NONE_POLICIES: tuple[str, ...] = get_args(NonePolicy)
FROM_ON_NONE: dict[str, FailurePolicy] = {"skip": "omit", "fail": "fail", "value": "value"}
"""``on_none`` -> ``on_failure``: the deprecated policy names and what they are now."""


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
        on_failure: What the combination does where this component gives no value (`fail`,
            `omit`, `value`); None: the combination's `on_failure`.
        failure_value: The value counted under ``on_failure: value``; None: the
            combination's `failure_value`.
    """

    name: str
    reward: Reward
    weight: float = 1.0
    gate: bool = False
    threshold: float = 1.0
    on_failure: FailurePolicy | None = None
    failure_value: float | None = None

    def __post_init__(self) -> None:
        owner = f"component {self.name}"
        if self.weight is None:
            raise ValueError(f"{owner}: weight must be a number, got None")
        _finite(owner, weight=self.weight, threshold=self.threshold,
                failure_value=self.failure_value)  # fmt: skip
        if self.on_failure is not None and self.on_failure not in _POLICIES:
            raise ValueError(
                f"{owner}: on_failure must be one of {' | '.join(_POLICIES)}, "
                f"got {self.on_failure!r}"
            )
        if self.gate and self.on_failure == "omit":
            raise ValueError(
                f"{owner}: a gate cannot be omitted (with no value it cannot decide, so the "
                "total fails); give it on_failure='value' with a failure_value to decide on, "
                "or leave on_failure unset"
            )
        if self.failure_value is not None and self.on_failure in ("fail", "omit"):
            raise ValueError(
                f"{owner}: failure_value {self.failure_value!r} is counted only under "
                f"on_failure='value', and on_failure is {self.on_failure!r}; drop one"
            )


def _finite(owner: str, **numbers: float | None) -> None:
    """Raise ValueError naming `owner` and the option when a number is NaN or infinite."""
    for key, value in numbers.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, Real):
            # "0.5" or "high" is no weight: YAML refuses it, and so does Python (issue 46)
            raise ValueError(
                f"{owner}: {key} must be a number, got {value!r} ({type(value).__name__})"
            )
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
        components: The components, in the order they run.
        mode: How their values become the total (`CombineMode`).
        on_failure: What to do where a component gives no value, for the components that do
            not say (`FailurePolicy`; ``fail`` by default).
        failure_value: The value counted under ``on_failure: value``, for the components that
            do not say.
        floor: The total where a gate is not passed.
        deadline: Seconds one rollout may take through the whole combination (None: each
            component is bounded by its own deadline only).
        timeout: Deprecated: the old spelling of `deadline`.
        on_none: Deprecated: the old spelling of `on_failure` (``skip`` is ``omit``).
        none_value: Deprecated: the old spelling of `failure_value`.
    """

    components: list[Component]
    mode: CombineMode = "weighted"
    on_failure: FailurePolicy = "fail"
    failure_value: float = 0.0
    floor: float = 0.0
    name: str = "combined"
    deadline: float | None = None
    timeout: float | None = None
    on_none: NonePolicy | None = None
    none_value: float | None = None

    def __post_init__(self) -> None:
        if self.on_none is not None or self.none_value is not None:
            # Called from __init__, called by the user's code: warn there.
            self.on_failure, self.failure_value = _from_on_none(
                self.name, self.on_none, self.none_value, self.on_failure, self.failure_value, 4
            )
            self.on_none = self.none_value = None
        if self.on_failure not in _POLICIES:
            raise ValueError(
                f"{self.name}: on_failure must be one of {' | '.join(_POLICIES)}, "
                f"got {self.on_failure!r}"
            )
        self.deadline = _deadline_of(self, 4)
        names = [c.name for c in self.components]
        if not names:
            raise ValueError(f"{self.name}: a combination needs at least one component")
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"{self.name}: component names must be unique, repeated: {dupes}")
        _finite(self.name, failure_value=self.failure_value, floor=self.floor)
        self._total_weight = exact_sum([c.weight for c in self.components])
        if self.mode in ("weighted", "mean"):  # elsewhere the weights do not enter the total
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
        if self.deadline is not None and not self._sync:
            slow = [c.name for c in self.components if not is_sync(c.reward)]
            raise ValueError(
                f"{self.name}: a deadline on a combination bounds inline scoring, but "
                f"{', '.join(slow)} cannot score inline; set deadline on the components instead"
            )

    def children(self) -> Sequence[Part]:
        return [
            Part(c.name, c.reward, c.weight, reported=True, required=self._required(c))
            for c in self.components
        ]

    def policy(self, comp: Component) -> tuple[FailurePolicy, float]:
        """`comp`'s failure policy and failure value: its own, else the combination's."""
        value = self.failure_value if comp.failure_value is None else comp.failure_value
        return comp.on_failure or self.on_failure, value

    def _falls_through(self, comp: Component) -> bool:
        """Whether a None from `comp` hands the rollout on: a cascade's, but the last's."""
        return self.mode == "cascade" and not comp.gate and comp is not self.components[-1]

    def _required(self, comp: Component) -> bool:
        """Whether the total fails where `comp` gives no value (`Part.required`)."""
        if self._falls_through(comp):
            return False
        policy = self.policy(comp)[0]
        return policy != "value" and (comp.gate or policy == "fail")

    @property
    def is_sync(self) -> bool:
        return self._sync

    def default_deadline(self) -> float | None:
        """None: its components carry their own deadlines."""
        return None

    def score_sync(self, rollout: Rollout) -> Score:
        """Score one rollout, component after component (inline when every one is sync)."""
        if not self._sync:
            return super().score_sync(rollout)
        if self.deadline is None:  # `_score_inline`, written out: the fast path of every spec
            per: dict[str, Score] = {}
            return self._total(per, self._check_run(self.components, rollout, per))
        try:
            return run(self._score_inline, rollout, self.deadline, self.name)
        except VerifierTimeout as exc:  # sync checks on the policy's output: its verdict
            return Score.policy_fault("timeout", str(exc))

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
            if self._falls_through(comp):
                return False
            policy, value = self.policy(comp)
            if policy != "value":
                # A gate that cannot decide fails the total, as does any None under "fail".
                return comp.gate or policy == "fail"
        if comp.gate and value < comp.threshold:
            return True
        return self.mode == "cascade"

    def _total(self, per: dict[str, Score], stop: tuple[Component, Score] | None) -> Score:
        """The combined Score, in one pass over the components that ran (in declared order)."""
        components: dict[str, float | None] = {}
        reasons = []
        cost = None
        weighs = self.mode == "weighted" or self.mode == "mean"
        terms: list[float] = []  # weighted / mean: weight * value, and the weights, summed exactly
        weights: list[float] = []
        values: list[float] = []  # min / max / product / cascade
        omitted: list[str] = []  # no value, left out under "omit"
        valued: list[tuple[str, float]] = []  # no value, counted as their failure_value
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
                if self._falls_through(comp):
                    continue
                policy, value = self.policy(comp)
                if policy != "value":
                    omitted.append(name)
                    continue
                valued.append((name, value))
            if not weighs:
                values.append(value)
            elif comp.weight != 0:
                # A zero-weight component (typically a gate) adds nothing to a weighted total;
                # counting it as present would turn a total with no real value into 0.
                terms.append(comp.weight * value)
                weights.append(comp.weight)
        total, present = exact_sum(terms), exact_sum(weights)
        skipped = (
            tuple(c.name for c in self.components if c.name not in per)
            if len(per) < len(self.components)
            else ()
        )
        detail = "; ".join(reasons) or None

        result: float | None
        failure: Failure | None = None
        headline: str | None = None
        if stop is not None and stop[1].value is None and self.policy(stop[0])[0] != "value":
            comp, s = stop
            result, failure = None, _wrap_failure(s, comp)
            headline = f"component {comp.name} failed"
        elif stop is not None and stop[0].gate:
            result, headline = self.floor, f"gate {stop[0].name} not passed"
        elif present if weighs else values:
            result = self._combine(total, present, values)
            if weighs:
                result = tidy(result)
            notes = [f"{n} omitted (no value; on_failure: omit)" for n in omitted]
            notes += [f"{n} counted as {v!r} (no value; on_failure: value)" for n, v in valued]
            if notes:
                headline = "; ".join(notes)
            if not math.isfinite(result):
                culprit = self._culprit(per)
                message = (
                    f"the total is {result!r}, not a finite number: component {culprit} "
                    "overflows it (scale the component's values or weight down)"
                )
                result, failure = None, Failure("invalid_value", message, culprit)
                headline = f"total not finite (component {culprit})"
        else:
            # Name the first component that gave no value: the first that ran may have given
            # one (a gate of weight 0) and cannot be what failed.
            comp = next(
                (c for c in self.components if c.name in per and per[c.name].value is None),
                next(c for c in self.components if c.name in per),
            )
            result, failure = None, _wrap_failure(per[comp.name], comp)
            headline = "no component gave a value"
            if omitted:
                headline += f" ({', '.join(omitted)} omitted: on_failure: omit)"
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
            combined = [
                exact_sum([weight * steps[t] for weight, steps in stepped])
                for t in range(len(stepped[0][1]))
            ]
            if mode == "mean":
                total = exact_sum([w for w, _ in stepped]) or 1.0
                combined = [v / total for v in combined]
            return tuple(tidy(v) for v in combined)
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


def exact_sum(values: list[float]) -> float:
    """`math.fsum`, where it has a finite answer; else the plain sum's inf or NaN (fsum raises
    on an overflow or inf - inf), which the total's finiteness check reports."""
    try:
        return math.fsum(values)
    except (OverflowError, ValueError):
        return sum(values)


NOISE = 1e-12
"""How far from a whole number a weighted total may be and still be that number (`tidy`)."""


def tidy(value: float) -> float:
    """A weighted total with the float noise of its sum taken off: within `NOISE` of a whole
    number, that number (``0.9999999999999999`` from weights 0.1 + 0.2 + 0.7 is 1.0, and
    ``2.2e-17`` is 0.0). The weighted sum itself is exact (`math.fsum`); this is the rounding
    of the products, which no ordering removes."""
    nearest = round(value) if math.isfinite(value) else value
    return float(nearest) if abs(value - nearest) < NOISE else value


def _deadline_of(reward: Any, stacklevel: int) -> float | None:
    """A combination's (or final_answer's) `deadline`, from its deprecated `timeout` where that
    is the one given (with a DeprecationWarning at the caller's line)."""
    if reward.timeout is not None:
        if reward.deadline is not None:
            raise ValueError(f"{reward.name}: give deadline alone (timeout is its old spelling)")
        warnings.warn(
            f"{reward.name}: timeout is deprecated here; name it deadline (the same behaviour)",
            DeprecationWarning,
            stacklevel=stacklevel,
        )
        reward.deadline, reward.timeout = reward.timeout, None
    return check_timeout(reward.deadline, reward.name)


def _wrap_failure(s: Score, comp: Component) -> Failure:
    """The total's Failure for a component that gave no value: the component's own type and
    message, prefixed by its name, and `where` naming the component (dotted where the failure
    came from a component of a nested combination)."""
    name = comp.name
    if s.failure is None or s.value is not None:
        return Failure("no_score", f"component {name} gave no value", name)
    where = s.failure.where
    inner = where.split(".", 1)[0] if where else None
    nested = inner is not None and inner in _reported_names(comp.reward)
    return Failure(
        s.failure.type,
        f"{name}: {s.failure.message}",
        f"{name}.{where}" if nested else name,
        s.failure.blame,  # whose fault it is does not change on the way up
    )


def _reported_names(reward: Reward) -> set[str]:
    """The component names a reward reports (through transforms), for dotted paths."""
    names: set[str] = set()
    if isinstance(reward, Composite):
        for part in reward.children():
            if part.reported:
                names.add(part.name)
            else:
                names |= _reported_names(part.reward)
    return names


def _from_on_none(
    owner: str,
    on_none: str | None,
    none_value: float | None,
    on_failure: FailurePolicy,
    failure_value: float,
    stacklevel: int,
) -> tuple[FailurePolicy, float]:
    """The (on_failure, failure_value) that the deprecated (on_none, none_value) spell, with
    a DeprecationWarning at the caller's line."""
    if on_none is not None and on_none not in _NONE_POLICIES:
        raise ValueError(
            f"{owner}: on_none must be one of {' | '.join(_NONE_POLICIES)}, got {on_none!r} "
            "(on_none is deprecated: use on_failure, one of fail | omit | value)"
        )
    if on_none is not None and on_failure != "fail":
        raise ValueError(
            f"{owner}: give on_failure={on_failure!r} alone; on_none={on_none!r} is its "
            "deprecated spelling"
        )
    new = [f"on_failure={FROM_ON_NONE[on_none]!r}"] if on_none is not None else []
    if none_value is not None:
        new.append(f"failure_value={none_value!r}")
    old = [f"{k}={v!r}" for k, v in (("on_none", on_none), ("none_value", none_value))
           if v is not None]  # fmt: skip
    warnings.warn(
        f"{owner}: {', '.join(old)} is deprecated; write {', '.join(new)} (the default is now "
        "on_failure='fail': a component with no value fails the total)",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
    policy = FROM_ON_NONE[on_none] if on_none is not None else on_failure
    return policy, failure_value if none_value is None else none_value


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

    def default_deadline(self) -> float | None:
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
                if len(item) != 2:
                    raise ValueError(
                        f"component {name}: give (reward, weight), got a tuple of {len(item)}"
                    )
                out.append(Component(name=name, reward=item[0], weight=item[1]))
            else:
                out.append(Component(name=name, reward=item))
        return out
    for item in arg:
        out.append(item if isinstance(item, Component) else Component(name=item.name, reward=item))
    return out


def _policy_args(
    owner: str,
    on_failure: FailurePolicy,
    failure_value: float,
    on_none: NonePolicy | None,
    none_value: float | None,
    stacklevel: int = 4,
) -> tuple[FailurePolicy, float]:
    """A constructor's on_failure and failure_value, from the deprecated spelling where given
    (warning at the constructor's caller, `stacklevel` frames up from the warning)."""
    if on_none is None and none_value is None:
        return on_failure, failure_value
    return _from_on_none(owner, on_none, none_value, on_failure, failure_value, stacklevel)


def weighted(
    components: ComponentsArg,
    *,
    on_failure: FailurePolicy = "fail",
    failure_value: float = 0.0,
    floor: float = 0.0,
    name: str = "weighted",
    on_none: NonePolicy | None = None,
    none_value: float | None = None,
) -> Combined:
    """Sum of weight * value over named components.

    Args:
        components: ``{name: reward}``, ``{name: (reward, weight)}``, ``{name: Component}``,
            or a list of rewards (named by their names) or Components.
        on_failure: What to do where a component gives no value, for the components that do
            not say (``fail``: the total fails; ``omit``: left out, the weights of the others
            renormalised; ``value``: counted as `failure_value`).
        failure_value: The value counted under ``on_failure="value"``.
        floor: The total where a gate is not passed.
        name: The reward's name.
        on_none: Deprecated spelling of `on_failure` (``skip`` is ``omit``).
        none_value: Deprecated spelling of `failure_value`.

    Example:
        ```python
        total = referee.weighted(
            {"valid": (JsonSchema(schema=s), 0.2), "fields": (FieldMatch(), 0.8)}
        )
        ```
    """
    policy, value = _policy_args(name, on_failure, failure_value, on_none, none_value)
    return Combined(
        components=_components(components),
        mode="weighted",
        on_failure=policy,
        failure_value=value,
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
    mode: CombineMode,
    components: ComponentsArg,
    name: str,
    on_failure: FailurePolicy,
    failure_value: float,
    on_none: NonePolicy | None,
    none_value: float | None,
) -> Combined:
    policy, value = _policy_args(name, on_failure, failure_value, on_none, none_value, 5)
    return Combined(
        components=_components(components),
        mode=mode,
        on_failure=policy,
        failure_value=value,
        name=name,
    )


def mean(
    components: ComponentsArg,
    *,
    on_failure: FailurePolicy = "fail",
    failure_value: float = 0.0,
    name: str = "mean",
    on_none: NonePolicy | None = None,
    none_value: float | None = None,
) -> Combined:
    """Weighted mean of the components' values (options as `weighted`'s)."""
    return _simple("mean", components, name, on_failure, failure_value, on_none, none_value)


def minimum(
    components: ComponentsArg,
    *,
    on_failure: FailurePolicy = "fail",
    failure_value: float = 0.0,
    name: str = "min",
    on_none: NonePolicy | None = None,
    none_value: float | None = None,
) -> Combined:
    """The least of the components' values: every criterion must hold (options as
    `weighted`'s)."""
    return _simple("min", components, name, on_failure, failure_value, on_none, none_value)


def maximum(
    components: ComponentsArg,
    *,
    on_failure: FailurePolicy = "fail",
    failure_value: float = 0.0,
    name: str = "max",
    on_none: NonePolicy | None = None,
    none_value: float | None = None,
) -> Combined:
    """The greatest of the components' values (options as `weighted`'s)."""
    return _simple("max", components, name, on_failure, failure_value, on_none, none_value)


def product(
    components: ComponentsArg,
    *,
    on_failure: FailurePolicy = "fail",
    failure_value: float = 0.0,
    name: str = "product",
    on_none: NonePolicy | None = None,
    none_value: float | None = None,
) -> Combined:
    """The product of the components' values (options as `weighted`'s)."""
    return _simple("product", components, name, on_failure, failure_value, on_none, none_value)


def cascade(
    *rewards: Reward,
    on_failure: FailurePolicy = "fail",
    failure_value: float = 0.0,
    name: str = "cascade",
) -> Combined:
    """The first reward that gives a value decides; later ones run only where earlier gave
    none. Where none gives a value the total fails, unless `on_failure` (which applies to the
    last reward: the others' None is the cascade's fall-through) says otherwise."""
    return Combined(
        components=_components(list(rewards)),
        mode="cascade",
        on_failure=on_failure,
        failure_value=failure_value,
        name=name,
    )


def clip(reward: Reward, low: float | None = None, high: float | None = None) -> Transform:
    """`reward`'s value clipped to ``[low, high]``."""
    return Transform(reward=reward, low=low, high=high, name=reward.name)


def scale(reward: Reward, factor: float, offset: float = 0.0) -> Transform:
    """`reward`'s value times `factor`, plus `offset`."""
    return Transform(reward=reward, scale=factor, offset=offset, name=reward.name)
