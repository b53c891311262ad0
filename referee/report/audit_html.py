"""`referee audit-judge --html`: a judge's audit as a self-contained page, in the report's
style: its gates, then each measure with its interval drawn against the value an unbiased
judge would have."""

from __future__ import annotations

from html import escape

from referee.report.audit import JudgeAudit, measure_rows
from referee.report.html import STYLE, _card, _fmt

__all__ = ["render_audit"]

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
