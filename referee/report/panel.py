"""A judge panel's agreement, from the components its rows carry, as `PanelAgreement`s.

A panel judge writes each member's verdict as a component ``panel.<member>`` (a value in
[0, 1], None where the member abstained or its call failed) beside ``panel.<member>.cost``
(ignored here). Inside a composed reward the names carry the reward's path
(``quality.panel.gpt_a``): each panel is reported under its path (``quality.panel``).

- **Inter-judge agreement**: Krippendorff's alpha over the rows (units) and members (raters),
  an abstention being a missing value, as Krippendorff handles them (a row with fewer than
  two values adds nothing). The level of measurement is ``nominal`` when every value is 0
  or 1 (pass/fail verdicts), else ``interval`` (scores on a scale), unless one is given. The
  95% interval resamples rows.
- **Agreement with human labels**, where rows carry them: each member's, as the report's
  `Agreement` (Spearman, Kendall's tau; accuracy and Cohen's kappa for pass/fail labels).
- **Error correlation**: Pearson's r between each two members' errors on the rows where both
  gave a value, and their mean r. An error is value - label; for pass/fail (0/1) labels its
  size, |value - label|, since there the label alone fixes an error's sign, and two judges
  that err independently would show signed errors correlated through the labels (r = 0.2
  for two judges that each flip a fifth of the verdicts at random). Judges whose errors
  correlate add less than their number: the effective number of independent judges is
  n / (1 + (n - 1) * mean r), the design effect of n equally correlated measurements (n for
  uncorrelated errors, 1 for perfectly correlated ones; None where the mean r is so
  negative that the formula breaks).
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from referee.report.results import (
    Agreement,
    ErrorCorrelation,
    PanelAgreement,
    Report,
    Statistic,
)
from referee.report.stats import AlphaLevel, krippendorff_alpha, pearson, quantile

if TYPE_CHECKING:
    from referee.report.rows import ReportRow

__all__ = ["build_panels", "panel_lines", "panel_member"]

AgreeFn = Callable[[Sequence[tuple[float, float]]], Agreement | None]
"""Agreement of (value, label) pairs with the labels, as the report computes it."""

_MEMBER = re.compile(r"^(?:(?P<prefix>.*)\.)?panel\.(?P<member>.+)$")
ALPHA_RESAMPLES = 200
ALPHA_BOOTSTRAP_MAX = 2000  # rows the interval is resampled from, at most (a seeded sample)


def panel_member(component: str) -> tuple[str, str] | None:
    """The panel (its path, e.g. ``quality.panel``) and member a component names, or None
    where it is not a member's verdict (a ``.cost``, or no ``panel.`` in it)."""
    found = _MEMBER.match(component)
    if found is None or component.endswith(".cost"):
        return None
    prefix = found.group("prefix")
    return (f"{prefix}.panel" if prefix else "panel"), found.group("member")


def _alpha(units: list[list[float | None]], level: AlphaLevel) -> Statistic:
    value = krippendorff_alpha(units, level)
    pairable = [u for u in units if sum(v is not None for v in u) >= 2]
    n = len(pairable)
    if value is None or n < 3:
        return Statistic(value=value, ci_low=None, ci_high=None, n=n)
    rng = random.Random(0)
    if len(pairable) > ALPHA_BOOTSTRAP_MAX:
        pairable = rng.sample(pairable, ALPHA_BOOTSTRAP_MAX)
    draws = []
    for _ in range(ALPHA_RESAMPLES):
        v = krippendorff_alpha(rng.choices(pairable, k=len(pairable)), level)
        if v is not None:
            draws.append(v)
    if len(draws) < ALPHA_RESAMPLES // 2:
        return Statistic(value=value, ci_low=None, ci_high=None, n=n)
    draws.sort()
    return Statistic(value=value, ci_low=quantile(draws, 0.025), ci_high=quantile(draws, 0.975),
                     n=n)  # fmt: skip


def _errors(
    members: Sequence[str], units: Sequence[Sequence[float | None]], labels: Sequence[float | None]
) -> tuple[tuple[ErrorCorrelation, ...], float | None, float | None]:
    """Each pair of members' error correlation, the mean r, the effective number of judges."""
    binary = {y for y in labels if y is not None} <= {0.0, 1.0}

    def error(value: float, label: float) -> float:
        return abs(value - label) if binary else value - label

    pairs = []
    for (i, a), (j, b) in itertools.combinations(enumerate(members), 2):
        ea, eb = [], []
        for unit, label in zip(units, labels, strict=True):
            va, vb = unit[i], unit[j]
            if label is not None and va is not None and vb is not None:
                ea.append(error(va, label))
                eb.append(error(vb, label))
        r = pearson(ea, eb) if len(ea) >= 3 else None
        pairs.append(ErrorCorrelation(a=a, b=b, n=len(ea), pearson=r))
    rs = [p.pearson for p in pairs if p.pearson is not None]
    if not rs:
        return tuple(pairs), None, None
    mean = sum(rs) / len(rs)
    n = len(members)
    denominator = 1 + (n - 1) * mean
    return tuple(pairs), mean, (n / denominator if denominator > 0 else None)


def _panel(
    members: list[str],
    units: list[list[float | None]],
    labels: list[float | None],
    level: AlphaLevel | None,
    label: str | None,
    agree: AgreeFn | None,
) -> PanelAgreement:
    values = {v for u in units for v in u if v is not None}
    chosen: AlphaLevel = level or ("nominal" if values <= {0.0, 1.0} else "interval")
    agreement = {}
    correlations: tuple[ErrorCorrelation, ...] = ()
    mean_r = effective = None
    if label is not None and any(x is not None for x in labels):
        for i, member in enumerate(members):
            if agree is None:
                break
            pairs = [(u[i], y) for u, y in zip(units, labels, strict=True)
                     if u[i] is not None and y is not None]  # fmt: skip
            found = agree(pairs)  # type: ignore[arg-type]  # (None filtered out above)
            if found is not None:
                agreement[member] = found
        correlations, mean_r, effective = _errors(members, units, labels)
    binary = {y for y in labels if y is not None} <= {0.0, 1.0}
    return PanelAgreement(
        members=tuple(members),
        units=len(units),
        pairable=sum(1 for u in units if sum(v is not None for v in u) >= 2),
        abstained={m: sum(1 for u in units if u[i] is None) for i, m in enumerate(members)},
        level=chosen,
        alpha=_alpha(units, chosen),
        label=label if agreement or correlations else None,
        agreement=agreement,
        errors=("absolute" if binary else "signed") if correlations else None,
        error_correlations=correlations,
        mean_error_correlation=mean_r,
        effective_judges=effective,
    )


def build_panels(
    rows: Iterable[ReportRow],
    *,
    level: AlphaLevel | None = None,
    label: str | None = None,
    agree: AgreeFn | None = None,
) -> dict[str, PanelAgreement]:
    """Each judge panel's agreement in the rows (see the module docstring), by its path; empty
    where no row has a ``panel.<member>`` component. `level` fixes alpha's level of
    measurement (default: by the values). Where rows carry human labels (`label` names them),
    the members' errors are correlated, and `agree` gives each member's agreement with them."""
    found: dict[str, list[str]] = {}
    kept = list(rows)
    for r in kept:
        for name in r.components:
            member = panel_member(name)
            if member is not None and member[1] not in found.setdefault(member[0], []):
                found[member[0]].append(member[1])
    out = {}
    for panel, members in found.items():
        names = [f"{panel}.{m}" for m in members]
        units: list[list[float | None]] = []
        labels: list[float | None] = []
        for r in kept:
            unit = [r.components.get(n) for n in names]
            if any(v is not None for v in unit):
                units.append([None if v is None else float(v) for v in unit])
                labels.append(r.label)
        if units:
            out[panel] = _panel(members, units, labels, level, label, agree)
    return out


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def panel_lines(report: Report) -> list[str]:
    """Each judge panel's agreement in one line, for the terminal."""
    lines = []
    for name, p in report.panels.items():
        abstained = sum(p.abstained.values())
        alpha = _num(p.alpha.value)
        line = (f"{name}: {len(p.members)} judges, Krippendorff's alpha ({p.level}) {alpha} "
                f"over {p.pairable} rows, {abstained} abstentions")  # fmt: skip
        if p.mean_error_correlation is not None:
            line += (f"; error correlation {_num(p.mean_error_correlation)}, worth "
                     f"{_num(p.effective_judges)} independent judges")  # fmt: skip
        lines.append(line)
    return lines
