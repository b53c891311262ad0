"""What a reward returns: a `Score`, or a `Failure` carried on one when no score could be given."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

__all__ = ["Blame", "Failure", "FailureType", "PolicyFault", "Score"]

FailureType = Literal[
    "error",  # the reward raised an unexpected exception
    "not_applicable",  # the rollout lacks what the reward needs (e.g. reference of the wrong shape)
    "invalid_input",  # the input row itself is malformed (bad JSON line, missing completion)
    "invalid_value",  # the reward produced NaN, an infinity or a non-number
    "no_score",  # a reward function returned None without saying why
    "timeout",  # a checker ran past its time limit
    "component",  # a component of a composed reward failed and the policy says fail
    "budget",  # a spend cap was reached
    "sandbox",  # the sandbox could not run the code
    "judge",  # a judge call failed after retries
]
FAILURE_TYPES: frozenset[str] = frozenset(get_args(FailureType))

Blame = Literal["data", "infrastructure"]
"""Whose fault a Failure is: the data's (the user's reference, database, spec or reward code)
or the infrastructure's (a judge, engine, sandbox or toolchain that failed; only these are
worth a retry). What the policy's output causes is never a Failure (`PolicyFault`)."""
BLAMES: frozenset[str] = frozenset(get_args(Blame))

_INFRASTRUCTURE: frozenset[str] = frozenset({"timeout", "budget", "sandbox", "judge"})

PolicyFault = Literal["timeout", "limit", "crash", "flood", "frame"]
"""What the policy's output caused, where a Score of 0 is its verdict (`Score.fault`): a check
on it ran past its deadline, it hit a limit, it crashed the process checking it, it flooded
an output, it wrote a frame that cannot be read. Trainers mask a sample with no score, so a
fault the policy can provoke must cost it the rollout, not excuse it (docs/threat-model.md,
"Blame")."""
POLICY_FAULTS: frozenset[str] = frozenset(get_args(PolicyFault))


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a reward gave no score.

    Attributes:
        type: A short category, one of `FailureType`.
        message: What happened, for a person.
        where: Which reward (or file and line) it happened in.
        blame: Whose fault it is (`Blame`); by default the type's: ``timeout`` (a wait that
            ran out: a judge, an engine), ``budget``, ``sandbox`` and ``judge`` are the
            infrastructure's, every other type the data's.
    """

    type: FailureType
    message: str
    where: str | None = None
    blame: Blame = None  # type: ignore[assignment]  # set from `type` in __post_init__

    def __post_init__(self) -> None:
        if self.blame not in BLAMES:
            blame = "infrastructure" if self.type in _INFRASTRUCTURE else "data"
            object.__setattr__(self, "blame", blame)

    @property
    def retryable(self) -> bool:
        """Whether scoring again may succeed: only an infrastructure fault may pass."""
        return self.blame == "infrastructure"

    def to_dict(self) -> dict[str, str | None]:
        return {"type": self.type, "message": self.message, "where": self.where,
                "blame": self.blame}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Failure:
        kind = data.get("type", "error")
        blame = data.get("blame")
        return cls(
            type=kind if kind in FAILURE_TYPES else "error",
            message=str(data.get("message", "")),
            where=data.get("where"),
            blame=blame if blame in BLAMES else None,  # type: ignore[arg-type]
        )


@dataclass(slots=True)
class Score:
    """The result of scoring one rollout.

    Treat a Score as immutable: referee may hand the same instance to several places (every
    member of a failed group). It is not frozen only because a frozen dataclass costs about a
    microsecond more to build, and a deterministic spec builds several per rollout.

    Attributes:
        value: The reward, or None when it could not be computed (then `failure` says why).
            A None is never silently turned into 0: the trainer backend decides, once and
            documented, how it reaches the optimiser.
        components: Named parts of the reward (for a composed reward, every component; for
            `field_match`, every field), dotted for nesting: ``{"fields.amount": 1.0}``.
        reason: Why this value, for a person reading the log.
        failure: Set when `value` is None.
        skipped: Components that were not run because a gate before them failed.
        steps: Dense per-turn rewards, one per assistant turn, where a reward gives them.
        cost: Money spent producing this score (judge calls), in US dollars.
        latency: Seconds spent producing this score, where it was measured.
        tokens: Model tokens (prompt and completion) spent producing it, where a judge was
            called.
        fault: Set where this Score is the policy's verdict for what its output caused
            (`PolicyFault`: a check on it timed out, it hit a limit, ...): the value is 0 and
            `reason` says what happened. Never a Failure: a trainer would mask it.
    """

    value: float | None
    components: Mapping[str, float | None] = field(default_factory=dict)
    reason: str | None = None
    failure: Failure | None = None
    skipped: tuple[str, ...] = ()
    steps: tuple[float, ...] | None = None
    cost: float | None = None
    latency: float | None = None
    tokens: int | None = None
    fault: PolicyFault | None = None

    @property
    def ok(self) -> bool:
        """True when a value was given."""
        return self.value is not None

    @classmethod
    def failed(
        cls, type: FailureType, message: str, where: str | None = None, blame: Blame | None = None
    ) -> Score:
        """A score with no value, carrying the failure that explains it (`blame`: by default
        the type's, see `Failure`)."""
        failure = Failure(type, message, where, blame)  # type: ignore[arg-type]
        return cls(value=None, reason=message, failure=failure)

    @classmethod
    def policy_fault(cls, fault: PolicyFault, message: str) -> Score:
        """The policy's verdict for what its output caused: 0, the reason, and `fault`."""
        return cls(value=0.0, reason=message, fault=fault)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the shape `referee score` writes (under ``reward`` for `value`)."""
        out: dict[str, Any] = {
            "reward": self.value,
            "components": dict(self.components),
            "reason": self.reason,
            "failure": None if self.failure is None else self.failure.to_dict(),
        }
        if self.skipped:
            out["skipped"] = list(self.skipped)
        if self.steps is not None:
            out["steps"] = list(self.steps)
        if self.cost is not None:
            out["cost"] = self.cost
        if self.latency is not None:
            out["latency"] = self.latency
        if self.tokens is not None:
            out["tokens"] = self.tokens
        if self.fault is not None:
            out["fault"] = self.fault
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Score:
        """Inverse of `to_dict`."""
        failure = data.get("failure")
        steps = data.get("steps")
        fault = data.get("fault")
        return cls(
            value=data.get("reward"),
            components=dict(data.get("components") or {}),
            reason=data.get("reason"),
            failure=None if failure is None else Failure.from_dict(failure),
            skipped=tuple(data.get("skipped") or ()),
            steps=None if steps is None else tuple(steps),
            cost=data.get("cost"),
            latency=data.get("latency"),
            tokens=data.get("tokens"),
            fault=fault if fault in POLICY_FAULTS else None,
        )


def check_value(value: float, where: str) -> Score | None:
    """Return a failure Score when `value` is not a finite number, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return Score.failed(
            "invalid_value", f"reward returned {value!r}, expected a float or None", where
        )
    if not math.isfinite(value):
        return Score.failed(
            "invalid_value", f"reward returned {value!r}, not a finite number", where
        )
    return None
