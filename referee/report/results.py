"""What `build_report` returns: the diagnostics of a scored set, as models.

`Report` is what ``referee report --json`` writes and the HTML page shows; its parts are the
sections of the page. Every model writes the keys the report has always written, in the same
order, and reads them back (`Report.model_validate_json`). `Result` is the base of every result
the report package writes (reports, probes, comparisons); `Statistic` a number with its
bootstrap interval, as any of them reports it.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from referee.report.stats import AlphaLevel, Estimate
from referee.rollouts.scored import Number

__all__ = [
    "Agreement",
    "Bin",
    "ComponentLength",
    "Determinism",
    "Distribution",
    "ErrorCorrelation",
    "GroupRate",
    "GrpoSignal",
    "JudgeUsage",
    "LengthCorrelation",
    "Missing",
    "PanelAgreement",
    "PassAtK",
    "PassAtKSlice",
    "Preferences",
    "Report",
    "Result",
    "Statistic",
    "StepPosition",
    "StepRewards",
]

Bin = tuple[Number, Number, int]
"""A histogram bin: (low, high, count)."""


def _absent(value: object) -> bool:
    return value is None


def _empty(value: object) -> bool:
    return not value


class Result(BaseModel):
    """A result the report package writes as JSON: frozen, and strict about its keys when
    read back, so a file that is not one of these says so."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready dict (tuples as lists), keys in the order they are written."""
        return self.model_dump(mode="json")

    def to_json(self, indent: int | None = None) -> str:
        """The result as JSON, as ``--json`` writes it (NaN refused: JSON cannot carry it).

        Raises:
            ValueError: A value is NaN or infinite.
        """
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)


class Statistic(Result):
    """A statistic with its percentile-bootstrap 95% interval (None where it has none)."""

    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int

    @classmethod
    def of(cls, estimate: Estimate) -> Statistic:
        """The reported form of a bootstrap `Estimate`."""
        return cls(value=estimate.value, ci_low=estimate.low, ci_high=estimate.high, n=estimate.n)


class Distribution(Result):
    """Summary statistics and a histogram of one value (the total or a component); with no
    values, only the counts are written."""

    count: int
    missing: int
    mean: float | None = Field(default=None, exclude_if=_absent)
    std: float | None = Field(default=None, exclude_if=_absent)
    min: Number | None = Field(default=None, exclude_if=_absent)
    p50: float | None = Field(default=None, exclude_if=_absent)
    max: Number | None = Field(default=None, exclude_if=_absent)
    histogram: tuple[Bin, ...] | None = Field(default=None, exclude_if=_absent)


class Missing(Result):
    """A component that gave no value on some rollouts: how many, and why (a reward that
    could not score them: no reference, a reference of the wrong shape, a failed judge)."""

    rows: int
    """Rollouts where the component ran and gave no value."""
    skipped: int
    """Rollouts where it did not run (a gate, or a failure before it, stopped the rollout)."""
    reasons: dict[str, int]
    """Why it gave none, most common first (at most `MISSING_REASONS`, then ``(other)``)."""


class JudgeUsage(Result):
    """What the judges cost: money, latency and tokens, where rows record them."""

    cost_total: Number
    cost_per_row: float
    latency_p50: float | None
    latency_p95: float | None
    tokens_total: int


class GrpoSignal(Result):
    """How much a GRPO trainer learns from the groups: the share whose rewards do not vary,
    and the spread within groups (groups of two or more scored attempts only)."""

    groups: int
    mean_group_size: float
    zero_variance_share: float
    mean_within_group_std: float
    within_group_std_histogram: tuple[Bin, ...]


class ComponentLength(Result):
    """One component against completion length (a reward model's ``raw`` score, whatever
    the total makes of it)."""

    n: int
    pearson: float | None
    spearman: float | None


class LengthCorrelation(Result):
    """Reward against completion length: correlations, and (characters, reward) points; and
    each component's correlations, where rows have components."""

    n: int
    pearson: float | None
    spearman: float | None
    points: tuple[tuple[float, Number], ...]
    components: dict[str, ComponentLength] = Field(default_factory=dict, exclude_if=_empty)


class Agreement(Result):
    """Agreement with human labels; accuracy and Cohen's kappa (at `threshold`) only for
    pass/fail labels."""

    label: str
    n: int
    spearman: Statistic
    kendall_tau: Statistic
    threshold: float | None = Field(default=None, exclude_if=_absent)
    accuracy: Statistic | None = Field(default=None, exclude_if=_absent)
    cohen_kappa: Statistic | None = Field(default=None, exclude_if=_absent)


class Preferences(Result):
    """Pairwise accuracy against human preferences, over the groups that have a pair."""

    key: str
    groups: int
    pairwise_accuracy: Statistic


class StepPosition(Result):
    """The per-step rewards at one position of the trajectories."""

    step: int
    count: int
    mean: float
    min: Number
    max: Number


class StepRewards(Result):
    """Where in trajectories rewards are earned or lost."""

    rollouts: int
    mean_steps: float
    by_position: tuple[StepPosition, ...]
    histogram: tuple[Bin, ...]


class Determinism(Result):
    """How often a value changed, and a verdict flipped, across repeated scorings."""

    repeats: int
    rollouts: int
    changed_share: float
    verdict_flip_share: float
    threshold: float


class GroupRate(Result):
    """A mean over problems (groups) of a per-problem score: pass@k, maj@n or avg@n, with its
    standard error over problems (the sample standard deviation of the per-problem scores over
    the square root of their number) and a percentile-bootstrap 95% interval that resamples
    problems."""

    value: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    problems: int
    """Problems the mean is over."""
    excluded: int = Field(default=0, exclude_if=_empty)
    """Problems left out: fewer than k attempts (pass@k), or no attempt with a score."""


class PassAtKSlice(Result):
    """pass@k, maj@n and avg@n over one set of problems: all of them, or one subset's."""

    problems: int
    attempts: int
    failed: int
    """Attempts with no reward (a failed scoring): see `PassAtK.failed_as`."""
    min_attempts: int
    max_attempts: int
    pass_at: dict[str, GroupRate]
    """pass@k by k (the key is k as text, as JSON keys are)."""
    avg: GroupRate
    """avg@n: each problem's mean reward over its scored attempts, averaged over problems."""
    maj: GroupRate | None
    """maj@n: whether the most common answer among a problem's n attempts is correct (None
    where the attempts carry no answers)."""
    no_answer: int = Field(default=0, exclude_if=_empty)
    """Problems where no attempt had an answer: maj@n counts them as 0."""


class PassAtK(Result):
    """pass@k, maj@n and avg@n per group of attempts at one prompt, overall and per subset.

    An attempt is correct when its reward is at least `threshold`. A failed attempt (no
    reward) counts as an incorrect attempt (`failed_as` ``incorrect``) or is left out
    (``excluded``); avg@n always leaves it out (it has no reward to average).
    """

    threshold: float
    failed_as: Literal["incorrect", "excluded"]
    ks: tuple[int, ...]
    answers: str | None
    """Where maj@n's answers came from (``metadata.KEY`` or ``math``), None without answers."""
    subset_key: str | None
    ungrouped: int
    """Rows with no group id: left out (a problem needs its group of attempts)."""
    overall: PassAtKSlice
    subsets: dict[str, PassAtKSlice] = Field(default_factory=dict, exclude_if=_empty)


class ErrorCorrelation(Result):
    """Pearson's r between two panel members' errors against the human labels."""

    a: str
    b: str
    n: int
    pearson: float | None


class PanelAgreement(Result):
    """A judge panel's agreement: between its members (Krippendorff's alpha, abstentions
    left out as missing values) and, where human labels exist, each member's with them and
    the correlation of the members' errors."""

    members: tuple[str, ...]
    units: int
    """Rows where at least one member gave a value."""
    pairable: int
    """Rows where two or more members gave a value (the rows alpha is computed from)."""
    abstained: dict[str, int]
    """Rows where the member gave no value, by member."""
    level: AlphaLevel
    alpha: Statistic
    label: str | None = Field(default=None, exclude_if=_absent)
    agreement: dict[str, Agreement] = Field(default_factory=dict, exclude_if=_empty)
    """Each member's agreement with the human labels."""
    errors: Literal["signed", "absolute"] | None = Field(default=None, exclude_if=_absent)
    """The errors correlated: value - label (``signed``), or its size for pass/fail labels
    (``absolute``: there the label alone fixes the sign)."""
    error_correlations: tuple[ErrorCorrelation, ...] = Field(default=(), exclude_if=_empty)
    mean_error_correlation: float | None = Field(default=None, exclude_if=_absent)
    effective_judges: float | None = Field(default=None, exclude_if=_absent)
    """n / (1 + (n - 1) * mean error correlation): how many independent judges the panel's
    errors are worth (None where the mean correlation makes it undefined)."""


class Report(Result):
    """The diagnostics of a scored set of rollouts; a section is None where the rows do not
    have what it needs (no groups, no lengths, no labels, ...)."""

    source: str | None
    rows: int
    scored: int
    failed: int
    reward: Distribution
    components: dict[str, Distribution]
    failures: dict[str, int]
    missing: dict[str, Missing] = Field(default_factory=dict, exclude_if=_empty)
    judge: JudgeUsage | None
    grpo: GrpoSignal | None
    length: LengthCorrelation | None
    agreement: Agreement | None
    preferences: Preferences | None
    steps: StepRewards | None
    determinism: Determinism | None
    passk: PassAtK | None = Field(default=None, exclude_if=_absent)
    panels: dict[str, PanelAgreement] = Field(default_factory=dict, exclude_if=_empty)
    """Judge panels' agreement, by the components' prefix before ``panel.`` ("" for none)."""
