"""The exceptions referee raises.

Every error referee raises on purpose derives from `RefereeError`, and every one is defined
here, so this tree is the whole of them (the failure type a reward error becomes is on the
right)::

    RefereeError
    ├── SpecError             a spec file or mapping is wrong: file, key path, found, expected
    ├── RolloutError          a rollout row cannot be read: file, line, what is wrong
    │   └── MissingInput      no row has what a component needs (a reference): which, and the fix
    ├── RewardError           raised inside a reward; becomes a `Failure` on its `Score` ("error")
    │   ├── NotApplicable     the rollout lacks what the reward needs    ("not_applicable")
    │   ├── VerifierTimeout   a checker ran past its time limit          ("timeout")
    │   ├── JudgeError        a judge call failed after its retries      ("judge")
    │   │   └── JudgeTimeout  every attempt of a judge call timed out    ("timeout")
    │   ├── BudgetExceeded    the process's judge spend cap is reached   ("budget")
    │   └── ModelLoadError    a reward model could not be loaded, or has no trained head ("error")
    ├── SandboxError          the sandbox could not run a job            (a reward: "sandbox")
    ├── ProgramError          a call into sandboxed code raised, timed out or its program died
    ├── ClusterError          a distributed engine lost the workers it scored on, past its retries
    ├── MonitorStopped        a training monitor's stop rule fired (in a trainer without a callback)
    └── MissingDependency     an optional package is not installed; says which extra to install

A reward never lets an exception escape into a training loop: `RewardError` (and any other
exception) raised while scoring one rollout becomes `Score(value=None, failure=Failure(...))`.
The modules that raise them re-export them (`referee.judges.JudgeError`,
`referee.verifiers.sandbox.SandboxError`, ...).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "BudgetExceeded",
    "ClusterError",
    "JudgeError",
    "JudgeTimeout",
    "MissingDependency",
    "MissingInput",
    "ModelLoadError",
    "MonitorStopped",
    "NotApplicable",
    "ProgramError",
    "RefereeError",
    "RewardError",
    "RolloutError",
    "SandboxError",
    "SpecError",
    "VerifierTimeout",
]


class RefereeError(Exception):
    """Base class of every error referee raises on purpose."""


class SpecError(RefereeError, ValueError):
    """A reward spec is invalid.

    Attributes:
        source: The spec file, or "<mapping>" for a spec given as a Python mapping.
        path: Key path inside the spec, e.g. ("components", "fields", "weight").
        found: The offending value.
        expected: What would be valid there.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str = "<mapping>",
        path: Sequence[str | int] = (),
        found: object = None,
        expected: str | None = None,
    ) -> None:
        self.source = source
        self.path = tuple(path)
        self.found = found
        self.expected = expected
        self.message = message
        super().__init__(self._render())

    def _render(self) -> str:
        where = self.source
        if self.path:
            where += ": " + ".".join(str(p) for p in self.path)
        text = f"{where}: {self.message}"
        if self.found is not None:
            found = repr(self.found)
            if len(found) > 200:
                found = found[:200] + "..."
            text += f"\n  found: {found}"
        if self.expected:
            text += f"\n  expected: {self.expected}"
        return text


class RolloutError(RefereeError, ValueError):
    """A rollout row is malformed.

    Attributes:
        source: File the row came from.
        line: 1-based line number (or row number for columnar files).
    """

    def __init__(self, message: str, *, source: str = "<input>", line: int | None = None) -> None:
        self.source = source
        self.line = line
        self.message = message
        where = source if line is None else f"{source}:{line}"
        super().__init__(f"{where}: {message}")


class MissingInput(RolloutError):
    """The rollouts lack what a component needs on every row checked: scoring them would fail
    every rollout (or, where the component may be left out, pay the others alone).

    Attributes:
        missing: ``(component, need)`` pairs, as `referee.reward.needs` gives them.
        keys: The keys (columns) the rows do have.
    """

    def __init__(
        self,
        message: str,
        *,
        missing: Sequence[tuple[str, str]] = (),
        keys: Sequence[str] = (),
        source: str = "<input>",
    ) -> None:
        self.missing = list(missing)
        self.keys = list(keys)
        super().__init__(message, source=source)


class RewardError(RefereeError):
    """Raised inside a reward to report that it could not score a rollout.

    The reward machinery turns it into a `Failure` whose type is `failure_type`.
    """

    failure_type: str = "error"


class NotApplicable(RewardError):
    """The rollout does not carry what this reward needs (e.g. a reference of the wrong shape)."""

    failure_type = "not_applicable"


class VerifierTimeout(RewardError):
    """A checker ran past its time limit."""

    failure_type = "timeout"


class ModelLoadError(RewardError):
    """A learned model could not be loaded (or is not the kind of model the reward reads).

    Every rollout of the batch gets a ``Failure("error")`` carrying its message.
    """


class JudgeError(RewardError):
    """A judge call failed after its retries, or its reply never fit the verdict's shape."""

    failure_type = "judge"


class JudgeTimeout(JudgeError):
    """Every attempt of a judge call ran past its timeout."""

    failure_type = "timeout"


class BudgetExceeded(RewardError):
    """The process's judge spend cap is reached: no more calls."""

    failure_type = "budget"


class SandboxError(RefereeError):
    """The sandbox itself could not run a job (could not start, broke down).

    A reward turns this into ``Failure("sandbox")``: never a score, since the code was not
    judged. What the code does to itself (crash, timeout, killing its own worker) is a result,
    not a SandboxError.
    """


class ProgramError(RefereeError):
    """A call into sandboxed code failed: it raised, timed out, or the program died.

    Attributes:
        dead: True when the program is gone (no later call can succeed).
    """

    def __init__(self, message: str, *, dead: bool = False) -> None:
        super().__init__(message)
        self.dead = dead


class ClusterError(RefereeError):
    """Scoring on a cluster (``--engine ray``) stopped: rollouts were lost with their workers
    (a node died, an actor crashed) and no live worker could score them within the retries,
    or the cluster could not be joined.

    Nothing already written is lost: `referee score -o OUT` keeps every finished batch, and
    ``--resume`` continues once the cluster is back.

    Attributes:
        address: The cluster's address.
        lost: Ids of the rollouts that could not be scored ("" for a rollout without one).
    """

    def __init__(self, message: str, *, address: str, lost: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.address = address
        self.lost = tuple(lost)


class MonitorStopped(RefereeError):
    """A `referee.monitor.Monitor` stop rule fired, where the trainer has no callback to stop
    on (verl's reward manager raises it): the run ends on its last saved checkpoint.

    Attributes:
        rule: The rule that fired.
        step: The step it fired at.
    """

    def __init__(self, alarm: object) -> None:
        self.rule = str(getattr(alarm, "rule", ""))
        self.step = int(getattr(alarm, "step", -1))
        super().__init__(
            f"referee monitor stopped the run at step {self.step}: rule {self.rule}: "
            f"{getattr(alarm, 'message', '')}"
        )


class MissingDependency(RefereeError, ImportError):
    """An optional dependency is missing; the message gives the exact install command."""

    def __init__(self, package: str, extra: str, feature: str) -> None:
        self.package = package
        self.extra = extra
        super().__init__(
            f"{feature} needs the {package!r} package, which is not installed.\n"
            f'  fix: pip install "referee[{extra}]"'
        )
