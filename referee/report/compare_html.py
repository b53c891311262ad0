"""`referee compare --html`: the comparison of two rewards as a self-contained page, in the
report's style: its figures, both distributions, the rollouts' two values against each other,
and the rollouts that moved most with both rewards' reasons (and the completion, where the
rollouts were given) side by side."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

from referee.report.compare import Compared, Comparison
from referee.report.html import STYLE, _card, _fmt, _pct, bar_chart, scatter
from referee.report.stats import histogram

__all__ = ["render_comparison_html"]

_EXTRA_STYLE = """
td.reason, td.text { max-width: 360px; white-space: pre-wrap; word-break: break-word; }
td.text { font-family: ui-monospace, monospace; font-size: 12px; }
.down { color: #a33; } .up { color: #2a7a3a; }
"""


def render_comparison_html(
    result: Comparison,
    pairs: Sequence[Compared],
    *,
    completions: Mapping[str, str] | None = None,
    title: str = "referee compare",
) -> str:
    """The page: `result` (from `compare`), the `pairs` it was computed from (for the charts),
    and each rollout's completion by id where known."""
    a, b = result.names
    sp = result.spearman
    out = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{escape(title)}: {escape(a)} and {escape(b)}</title>",
        f"<style>{STYLE}{_EXTRA_STYLE}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="muted">{escape(a)} (A) against {escape(b)} (B), on {result.rows} rollouts; '
        f"{result.compared} scored by both.</p>",
        '<div class="cards">',
        _card("Spearman", f"{_fmt(sp.value, 3)}"),
        _card(f"verdicts agree (>= {result.threshold:g})", _pct(result.verdict_agreement)),
        _card("flipped", str(result.flipped)),
        _card("moved", str(result.moved)),
        _card("mean B - A", _fmt(result.mean_difference, 3)),
        _card("failed only in A / B", f"{result.failed_only_a} / {result.failed_only_b}"),
        "</div>",
    ]
    both = [(p.a, p.b) for p in pairs if p.a is not None and p.b is not None]
    if both:
        out.append('<div class="charts">')
        out.append(bar_chart(histogram([x for x, _ in both]), f"A: {a}"))
        out.append(bar_chart(histogram([y for _, y in both]), f"B: {b}"))
        out.append(scatter(both, "each rollout", f"A: {a}", f"B: {b}"))
        out.append("</div>")
    if result.top_moved:
        out.append(f"<h2>The {len(result.top_moved)} rollouts that moved most</h2>")
        head = ["id", "group", "A", "B", "B - A", "A's reason", "B's reason"]
        if completions:
            head.append("completion")
        out.append("<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>")
        for m in result.top_moved:
            diff = float(m.b) - float(m.a)
            cells = [
                f"<td>{escape(m.id)}</td>",
                f"<td>{escape(str(m.group or ''))}</td>",
                f"<td>{_fmt(float(m.a))}</td>",
                f"<td>{_fmt(float(m.b))}</td>",
                f'<td class="{"down" if diff < 0 else "up"}">{diff:+.3g}</td>',
                f'<td class="reason">{escape(m.reason_a or "")}</td>',
                f'<td class="reason">{escape(m.reason_b or "")}</td>',
            ]
            if completions:
                cells.append(f'<td class="text">{escape(completions.get(m.id, ""))}</td>')
            out.append("<tr>" + "".join(cells) + "</tr>")
        out.append("</table>")
    else:
        out.append("<p class='muted'>No rollout moved: the two rewards agree on every value.</p>")
    groups = result.within_groups
    if groups is not None:
        out.append(
            f"<h2>Within groups</h2><p>{groups.groups} groups: mean Kendall tau "
            f"{_fmt(groups.mean_within_group_kendall_tau, 3)}; the best attempt changed in "
            f"{_pct(groups.best_attempt_changed_share)}; the advantage's sign differs for "
            f"{_pct(groups.advantage_sign_differs_share)} of rollouts.</p>"
        )
    data = result.to_json().replace("</", "<\\/")  # as the report's page carries its data
    out.append(f'<script type="application/json" id="comparison-data">{data}</script>')
    out.append("</body></html>")
    return "".join(out)
