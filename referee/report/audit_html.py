"""How a judge's audit is shown: its measures as rows (`measure_rows`, for the terminal and the
page), and `referee audit-judge --html`'s self-contained page in the report's style: its gates,
then each measure with its interval drawn against the value an unbiased judge would have."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from referee.report.audit import JudgeAudit
from referee.report.html import STYLE, _card, _fmt
from referee.report.results import Statistic

__all__ = ["MeasureRow", "measure_rows", "render_audit"]


@dataclass(frozen=True)
class MeasureRow:
    """One line of the audit's table: a measure, its value and interval, AlpacaEval's name
    for it (where it has one), and the value an unbiased judge would have."""

    name: str
    value: float | None
    statistic: Statistic | None
    alpaca: str | None
    ideal: str


def measure_rows(audit: JudgeAudit) -> list[MeasureRow]:
    """The audit's measures as rows, in the order the terminal and the page show them."""
    rows = []
    if audit.position is not None:
        p = audit.position
        rows += [
            MeasureRow(
                "P(prefer first)", p.prefer_first.value, p.prefer_first, "Proba. prefer 1", "0.5"
            ),
            MeasureRow("flip rate under swap", p.flip_rate.value, p.flip_rate, None, "0"),
        ]
    for name, statistic, alpaca, ideal in (
        ("P(prefer longer)", audit.prefer_longer, "Proba. prefer longer", "0.5"),
        ("value per 100 characters of padding", audit.per_100_chars, None, "0"),
        ("P(prefer lists)", audit.prefer_lists, "Proba. prefer lists", "0.5"),
        ("injection success rate", audit.injection, None, "0"),
    ):
        if statistic is not None:
            rows.append(MeasureRow(name, statistic.value, statistic, alpaca, ideal))
    if audit.consistency is not None:
        c = audit.consistency
        rows += [
            MeasureRow(
                f"verdicts changed over {c.repeats} seeds",
                c.inconsistent.value,
                c.inconsistent,
                "Variance",
                "0",
            ),
            MeasureRow("mean variance of the value", c.mean_variance, None, None, "0"),
        ]
    if audit.agreement is not None:
        a = audit.agreement
        if a.accuracy is not None:
            rows.append(MeasureRow(f"accuracy vs {a.label}", a.accuracy.value, a.accuracy,
                                   "Human agreement", "1"))  # fmt: skip
        if a.cohen_kappa is not None:
            rows.append(MeasureRow("Cohen's kappa", a.cohen_kappa.value, a.cohen_kappa, None,
                                   "1"))  # fmt: skip
        rows.append(MeasureRow(f"Spearman vs {a.label}", a.spearman.value, a.spearman, None,
                               "1"))  # fmt: skip
    if audit.krippendorff_alpha is not None:
        rows.append(MeasureRow("Krippendorff's alpha", audit.krippendorff_alpha, None, None,
                               "1"))  # fmt: skip
    if audit.pairwise_accuracy is not None:
        rows.append(MeasureRow("pairwise accuracy vs preferences",
                               audit.pairwise_accuracy.value, audit.pairwise_accuracy,
                               "Human agreement", "1"))  # fmt: skip
    if audit.systems is not None:
        s = audit.systems
        rows += [
            MeasureRow(
                f"Spearman over {s.systems} systems", s.spearman, None, "Spearman corr.", "1"
            ),
            MeasureRow(f"Pearson over {s.systems} systems", s.pearson, None, "Pearson corr.", "1"),
        ]
    rows += [MeasureRow("$ per 1000 verdicts", audit.cost_per_1000, None,
                        "Price [$/1000 examples]", "-"),
             MeasureRow("seconds per 1000 verdicts", audit.seconds_per_1000, None,
                        "Time [seconds/1000 examples]", "-")]  # fmt: skip
    return rows


_EXTRA_STYLE = """
.pass { color: #2a7a3a; } .fail { color: #a33; font-weight: 600; }
svg.ci { vertical-align: middle; }
"""


def _interval(low: float | None, value: float | None, high: float | None) -> str:
    """A 0..1 axis with the value as a dot and its interval as a line (empty off that axis)."""
    if value is None or not 0 <= value <= 1:
        return ""
    width, pad = 160, 6

    def x(v: float) -> float:
        return pad + max(0.0, min(1.0, v)) * (width - 2 * pad)

    line = ""
    if low is not None and high is not None:
        line = (f'<line x1="{x(low):.1f}" x2="{x(high):.1f}" y1="9" y2="9" stroke="#4a6fa5" '
                'stroke-width="3"/>')  # fmt: skip
    return (f'<svg class="ci" width="{width}" height="18" role="img"><line x1="{pad}" '
            f'x2="{width - pad}" y1="9" y2="9" stroke="#ddd"/><line x1="{x(0.5):.1f}" '
            f'x2="{x(0.5):.1f}" y1="3" y2="15" stroke="#bbb"/>{line}<circle cx="{x(value):.1f}" '
            'cy="9" r="4" fill="#1f3b63"/></svg>')  # fmt: skip


def render_audit(audit: JudgeAudit, title: str = "referee audit-judge") -> str:
    """The page of `audit`, its JSON embedded as the report's page carries its data."""
    failed = sum(audit.failed.values())
    out = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{escape(title)}: {escape(audit.judge)}</title>",
        f"<style>{STYLE}{_EXTRA_STYLE}</style></head><body>",
        f"<h1>{escape(title)}: {escape(audit.judge)}</h1>",
        f'<p class="muted">A {audit.kind} judge, asked {audit.verdicts} times about '
        f"{audit.pairs} pairs built from {audit.rollouts} rollouts.</p>",
        '<div class="cards">',
        _card("rollouts", str(audit.rollouts)),
        _card("verdicts", str(audit.verdicts)),
        _card("no value", str(failed)),
        _card("$ / 1000 verdicts", _fmt(audit.cost_per_1000, 3)),
        _card("s / 1000 verdicts", _fmt(audit.seconds_per_1000, 3)),
        "</div>",
    ]
    for kind, message in sorted(audit.failure_examples.items()):
        said = escape(message[:500])
        out.append(f'<p class="muted">{audit.failed.get(kind, 0)} verdicts failed as '
                   f"<code>{escape(kind)}</code>; the first: {said}</p>")  # fmt: skip
    if audit.gates:
        out.append("<h2>Gates</h2><table><tr><th>gate</th><th>measure</th><th>value</th>"
                   "<th>bound</th><th></th></tr>")  # fmt: skip
        for g in audit.gates:
            verdict = (
                '<span class="pass">pass</span>' if g.passed else '<span class="fail">FAIL</span>'
            )
            note = f" ({escape(g.note)})" if g.note else ""
            out.append(f"<tr><td>{escape(g.name)}</td><td>{escape(g.measure)}</td>"
                       f"<td>{_fmt(g.value, 3)}</td><td>{g.bound:g}</td><td>{verdict}{note}"
                       "</td></tr>")  # fmt: skip
        out.append("</table>")
    out.append("<h2>Measures</h2><table><tr><th>measure</th><th>value</th><th>95% CI</th>"
               "<th></th><th>n</th><th>AlpacaEval's column</th><th>unbiased</th></tr>")  # fmt: skip
    for row in measure_rows(audit):
        s = row.statistic
        low, high = (s.ci_low, s.ci_high) if s is not None else (None, None)
        ci = f"[{_fmt(low, 3)}, {_fmt(high, 3)}]" if low is not None else "-"
        out.append(f"<tr><td>{escape(row.name)}</td><td>{_fmt(row.value, 3)}</td><td>{ci}</td>"
                   f"<td>{_interval(low, row.value, high)}</td>"
                   f"<td>{'-' if s is None else s.n}</td><td>{escape(row.alpaca or '')}</td>"
                   f"<td>{escape(row.ideal)}</td></tr>")  # fmt: skip
    out.append("</table>")
    data = audit.to_json().replace("</", "<\\/")
    out.append(f'<script type="application/json" id="audit-data">{data}</script>')
    out.append("</body></html>")
    return "".join(out)
