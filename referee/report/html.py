"""The report as one self-contained HTML page: inline SVG plots, no scripts, no network.

The same numbers as the JSON report, which is also embedded in the page (``<script
type="application/json" id="report-data">``) for tools that read it back.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path

from referee.report.diagnostics import AGREEMENT_STATISTICS
from referee.report.results import (
    Distribution,
    GroupRate,
    PanelAgreement,
    PassAtK,
    PassAtKSlice,
    Report,
    Statistic,
)

__all__ = ["render_html"]

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 1100px;
       color: #222; }
h1 { font-size: 1.5rem; }
h2 { font-size: 1.15rem; margin-top: 2rem; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .5rem 0; }
td, th { padding: .25rem .6rem; border-bottom: 1px solid #eee; text-align: right; }
td:first-child, th:first-child { text-align: left; }
.cards { display: flex; gap: 1rem; flex-wrap: wrap; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: .6rem 1rem; min-width: 9rem; }
.card b { display: block; font-size: 1.3rem; }
.warn { color: #b45309; } .muted { color: #777; }
.plots { display: flex; gap: 1.5rem; flex-wrap: wrap; }
svg { background: #fafafa; border: 1px solid #eee; }
"""


def _fmt(value: object, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return escape(str(value))


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def bar_chart(
    bins: Sequence[Sequence[float]], title: str, width: int = 340, height: int = 170
) -> str:
    """A histogram: bins of (low, high, count). Values that are all one number are said in
    words: a single full-width bar labelled "1 ... 1" reads as a range."""
    if not bins:
        return ""
    if bins[0][0] == bins[-1][1]:
        total = int(sum(b[2] for b in bins))
        return (
            f'<p class="constant"><b>{escape(title)}</b>: all {total} values are '
            f"{_fmt(bins[0][0])}</p>"
        )
    pad_l, pad_b, pad_t = 36, 28, 18
    plot_w, plot_h = width - pad_l - 8, height - pad_b - pad_t
    top = max(b[2] for b in bins) or 1
    bar_w = plot_w / len(bins)
    parts = [f'<svg role="img" aria-label="{escape(title)}" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}">',
             f'<text x="{pad_l}" y="13" font-size="12">{escape(title)}</text>']  # fmt: skip
    for i, (lo, hi, count) in enumerate(bins):
        h = plot_h * count / top
        x = pad_l + i * bar_w
        y = pad_t + plot_h - h
        parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(bar_w - 1, 1):.1f}" height="{h:.1f}" '
            f'fill="#4f7cac"><title>{_fmt(lo)} to {_fmt(hi)}: {int(count)}</title></rect>'
        )
    lo, hi = bins[0][0], bins[-1][1]
    base = pad_t + plot_h
    parts += [
        f'<line x1="{pad_l}" y1="{base}" x2="{width - 8}" y2="{base}" stroke="#999"/>',
        f'<text x="{pad_l}" y="{base + 16}" font-size="11">{_fmt(lo, 3)}</text>',
        f'<text x="{width - 8}" y="{base + 16}" font-size="11" text-anchor="end">'
        f"{_fmt(hi, 3)}</text>",
        f'<text x="{pad_l - 4}" y="{pad_t + 8}" font-size="11" text-anchor="end">{int(top)}</text>',
        "</svg>",
    ]
    return "".join(parts)


def scatter(points: Sequence[Sequence[float]], title: str, xlabel: str, ylabel: str,
            width: int = 420, height: int = 260) -> str:  # fmt: skip
    """Points (x, y), axes from their ranges."""
    if not points:
        return ""
    pad_l, pad_b, pad_t = 44, 34, 18
    plot_w, plot_h = width - pad_l - 10, height - pad_b - pad_t
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    sx = plot_w / ((x1 - x0) or 1)
    sy = plot_h / ((y1 - y0) or 1)
    parts = [f'<svg role="img" aria-label="{escape(title)}" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}">',
             f'<text x="{pad_l}" y="13" font-size="12">{escape(title)}</text>']  # fmt: skip
    for x, y in points:
        cx = pad_l + (x - x0) * sx
        cy = pad_t + plot_h - (y - y0) * sy
        parts.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="#4f7cac" opacity=".6" '
            'stroke="#2d5179" stroke-width=".5"/>'
        )
    base = pad_t + plot_h
    parts += [
        f'<line x1="{pad_l}" y1="{base}" x2="{width - 10}" y2="{base}" stroke="#999"/>',
        f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{base}" stroke="#999"/>',
        f'<text x="{pad_l}" y="{base + 14}" font-size="11">{_fmt(x0, 3)}</text>',
        f'<text x="{width - 10}" y="{base + 14}" font-size="11" text-anchor="end">'
        f"{_fmt(x1, 3)}</text>",
        f'<text x="{(pad_l + width) / 2}" y="{base + 28}" font-size="11" text-anchor="middle">'
        f"{escape(xlabel)}</text>",
        f'<text x="{pad_l - 4}" y="{base}" font-size="11" text-anchor="end">{_fmt(y0, 3)}</text>',
        f'<text x="{pad_l - 4}" y="{pad_t + 8}" font-size="11" text-anchor="end">'
        f"{_fmt(y1, 3)}</text>",
        f'<text x="12" y="{(pad_t + base) / 2}" font-size="11" transform="rotate(-90 12 '
        f'{(pad_t + base) / 2})" text-anchor="middle">{escape(ylabel)}</text>',
        "</svg>",
    ]
    return "".join(parts)


def means_chart(points: Sequence[tuple[int, float, int]], title: str, width: int = 420,
                height: int = 170) -> str:  # fmt: skip
    """Bars of a mean per position (step, mean, count), zero line included."""
    if not points:
        return ""
    pad_l, pad_b, pad_t = 40, 26, 18
    plot_w, plot_h = width - pad_l - 8, height - pad_b - pad_t
    lo = min(0.0, min(p[1] for p in points))
    hi = max(0.0, max(p[1] for p in points))
    span = (hi - lo) or 1.0
    bar_w = plot_w / len(points)
    zero = pad_t + plot_h * (hi - 0.0) / span
    parts = [f'<svg role="img" aria-label="{escape(title)}" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}">',
             f'<text x="{pad_l}" y="13" font-size="12">{escape(title)}</text>']  # fmt: skip
    for i, (step, mean, count) in enumerate(points):
        y = pad_t + plot_h * (hi - max(mean, 0.0)) / span
        h = plot_h * abs(mean) / span
        parts.append(
            f'<rect x="{pad_l + i * bar_w:.1f}" y="{y:.1f}" width="{max(bar_w - 1, 1):.1f}" '
            f'height="{h:.1f}" fill="#4f7cac"><title>step {step}: mean {_fmt(mean)} over '
            f"{count}</title></rect>"
        )
    parts += [
        f'<line x1="{pad_l}" y1="{zero:.1f}" x2="{width - 8}" y2="{zero:.1f}" stroke="#999"/>',
        f'<text x="{pad_l - 4}" y="{pad_t + 8}" font-size="11" text-anchor="end">{_fmt(hi, 3)}'
        "</text>",
        f'<text x="{pad_l - 4}" y="{pad_t + plot_h}" font-size="11" text-anchor="end">'
        f"{_fmt(lo, 3)}</text>",
        f'<text x="{pad_l}" y="{height - 8}" font-size="11">step 0</text>',
        "</svg>",
    ]
    return "".join(parts)


def _card(title: str, value: str, extra: str = "") -> str:
    return f'<div class="card">{escape(title)}<b>{value}</b>{extra}</div>'


def _estimate(e: Statistic | None) -> str:
    if e is None:
        return "-"
    ci = ""
    if e.ci_low is not None:
        ci = f' <span class="muted">[{_fmt(e.ci_low, 3)}, {_fmt(e.ci_high, 3)}]</span>'
    return f"{_fmt(e.value, 3)}{ci}"


def _distribution_row(name: str, d: Distribution) -> str:
    return (
        f"<tr><td>{escape(name)}</td><td>{d.count}</td><td>{d.missing}</td>"
        + "".join(f"<td>{_fmt(v)}</td>" for v in (d.mean, d.std, d.min, d.p50, d.max))
        + "</tr>"
    )


def _missing_section(report: Report) -> str:
    """Components that gave no value, how often and why: on the first screen, since a
    missing input (no reference) makes every other number on the page misleading."""
    if not report.missing:
        return ""
    out = ["<h2 class='warn'>Components with no value</h2><table><tr><th>component</th>"
           "<th>no value</th><th>skipped</th><th>why</th></tr>"]  # fmt: skip
    for name, m in report.missing.items():
        share = _pct(m.rows / report.rows) if report.rows else "-"
        why = "<br>".join(f"{escape(k)} <span class='muted'>({v})</span>"
                          for k, v in m.reasons.items())  # fmt: skip
        out.append(f"<tr><td>{escape(name)}</td><td>{m.rows} <span class='muted'>({share})"
                   f"</span></td><td>{m.skipped}</td><td style='text-align:left'>{why}</td>"
                   "</tr>")  # fmt: skip
    out.append("</table>")
    return "".join(out)


def _rate(r: GroupRate | None) -> str:
    """A rate over problems: value ± its standard error [95% CI]."""
    if r is None:
        return "-"
    se = "" if r.se is None else f" &plusmn; {_fmt(r.se, 2)}"
    ci = ""
    if r.ci_low is not None:
        ci = f' <span class="muted">[{_fmt(r.ci_low, 3)}, {_fmt(r.ci_high, 3)}]</span>'
    left = f' <span class="muted">({r.excluded} left out)</span>' if r.excluded else ""
    return f"{_fmt(r.value, 3)}{se}{ci}{left}"


def _passk_row(name: str, part: PassAtKSlice, ks: Sequence[int]) -> str:
    attempts = str(part.min_attempts)
    if part.max_attempts != part.min_attempts:
        attempts += f"&ndash;{part.max_attempts}"
    cells = [escape(name), str(part.problems), attempts, str(part.failed)]
    cells += [_rate(part.pass_at.get(str(k))) for k in ks]
    cells += [_rate(part.maj), _rate(part.avg)]
    return "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def _passk_section(passk: PassAtK) -> str:
    """pass@k, maj@n and avg@n per group, overall and per subset, with a plot of pass@k by k."""
    head = "".join(f"<th>pass@{k}</th>" for k in passk.ks)
    out = ["<h2>pass@k, maj@n, avg@n</h2>",
           f"<p>An attempt is correct at reward &ge; {_fmt(passk.threshold)}; a failed attempt "
           f"counts as {escape(passk.failed_as)}. pass@k is the unbiased estimator (Chen et al. "
           "2021) over the problems with at least k attempts; each value &plusmn; its standard "
           "error over problems [bootstrap 95% CI].</p>",
           "<table><tr><th>rows</th><th>problems</th><th>attempts each</th><th>failed</th>"
           f"{head}<th>maj@n</th><th>avg@n</th></tr>",
           _passk_row("all", passk.overall, passk.ks)]  # fmt: skip
    subset = escape(passk.subset_key or "subset")
    for name, part in passk.subsets.items():
        out.append(_passk_row(f"{subset}={name}", part, passk.ks))
    out.append("</table>")
    notes = []
    if passk.answers is None:
        notes.append("maj@n needs each attempt's answer (--answer-key or --math-answers).")
    else:
        notes.append(f"maj@n: the most common answer ({escape(passk.answers)}) among a "
                     "problem's attempts; a tie scores the tied answers' mean.")  # fmt: skip
        if passk.overall.no_answer:
            notes.append(f"{passk.overall.no_answer} problems with no answer score 0.")
    if passk.ungrouped:
        notes.append(f"{passk.ungrouped} rows with no group id are left out.")
    out.append(f"<p class='muted'>{' '.join(notes)}</p>")
    points = [(float(k), r.value) for k, r in passk.overall.pass_at.items() if r.value is not None]
    if len(points) >= 2:
        out.append("<div class='plots'>" + scatter(points, "pass@k by k", "k", "pass@k")
                   + "</div>")  # fmt: skip
    return "".join(out)


def _panel_section(name: str, panel: PanelAgreement) -> str:
    """A judge panel's agreement: alpha, and each member's with the human labels."""
    out = [f"<h2>Judge panel {escape(name)}</h2>",
           f"<p>Krippendorff's alpha ({escape(panel.level)}) {_estimate(panel.alpha)} over "
           f"{panel.pairable} rows that two or more of {len(panel.members)} judges scored "
           f"({panel.units} rows in all); an abstention is a missing value.</p>"]  # fmt: skip
    labelled = bool(panel.agreement)
    head = "<th>spearman</th><th>accuracy</th><th>cohen kappa</th>" if labelled else ""
    out.append(f"<table><tr><th>judge</th><th>abstained</th>{head}</tr>")
    for member in panel.members:
        cells = [escape(member), str(panel.abstained.get(member, 0))]
        if labelled:
            a = panel.agreement.get(member)
            cells += [_estimate(None if a is None else getattr(a, k))
                      for k in ("spearman", "accuracy", "cohen_kappa")]  # fmt: skip
        out.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    out.append("</table>")
    if panel.error_correlations:
        label = escape(panel.label or "label")
        error = f"value &minus; {label}"
        error = f"|{error}|" if panel.errors == "absolute" else error
        out.append(f"<p>Correlation of the judges' errors ({error}): mean "
                   f"{_fmt(panel.mean_error_correlation, 3)}; the panel is worth "
                   f"{_fmt(panel.effective_judges, 3)} independent judges (n / (1 + (n &minus; "
                   "1) &times; mean r)).</p><table><tr><th>judges</th><th>n</th>"
                   "<th>Pearson r</th></tr>")  # fmt: skip
        for c in panel.error_correlations:
            out.append(f"<tr><td>{escape(c.a)} / {escape(c.b)}</td><td>{c.n}</td>"
                       f"<td>{_fmt(c.pearson, 3)}</td></tr>")  # fmt: skip
        out.append("</table>")
    return "".join(out)


def render_html(report: Report, title: str = "referee report", sections: Sequence[str] = ()) -> str:
    """The report (from `build_report`) as a self-contained HTML page: `title` as its heading,
    the rows' source under it once (the browser's tab names the file), and `sections` (HTML,
    such as the monitor's timeline) after the report's own."""
    reward = report.reward
    tab = f"{title}: {Path(report.source).name}" if report.source else title
    out = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{escape(tab)}"
           f"</title><style>{STYLE}</style></head><body>",
           f"<h1>{escape(title)}</h1>"]  # fmt: skip
    if report.source:
        out.append(f'<p class="muted">{escape(report.source)}</p>')
    grpo = report.grpo
    out.append('<div class="cards">')
    out.append(_card("rollouts", str(report.rows)))
    out.append(_card("mean reward", _fmt(reward.mean)))
    failed_share = report.failed / report.rows if report.rows else None
    muted = f'<span class="muted">{_pct(failed_share)}</span>'
    out.append(_card("failed", str(report.failed), muted))
    if grpo is not None:
        out.append(_card("zero-variance groups", _pct(grpo.zero_variance_share)))
    if report.passk is not None:
        out.append(_card("pass@1", _fmt(report.passk.overall.pass_at["1"].value, 3))
                   if "1" in report.passk.overall.pass_at else "")  # fmt: skip
    length = report.length
    if length is not None:
        out.append(_card("reward vs length (Spearman)", _fmt(length.spearman, 3)))
    out.append("</div>")
    out.append(_missing_section(report))

    out.append("<h2>Reward</h2><div class='plots'>")
    out.append(bar_chart(reward.histogram or (), "total reward"))
    out.append("</div><table><tr><th>component</th><th>count</th><th>missing</th><th>mean</th>"
               "<th>std</th><th>min</th><th>p50</th><th>max</th></tr>")  # fmt: skip
    for name, d in [("reward", reward), *report.components.items()]:
        out.append(_distribution_row(name, d))
    out.append("</table><div class='plots'>")
    for name, d in report.components.items():
        out.append(bar_chart(d.histogram or (), name, width=260, height=140))
    out.append("</div>")

    out.append("<h2>Failures</h2>")
    if report.failures:
        out.append("<table><tr><th>type</th><th>count</th></tr>")
        out += [f"<tr><td>{escape(k)}</td><td>{v}</td></tr>" for k, v in report.failures.items()]
        out.append("</table>")
    else:
        out.append("<p>None: every rollout got a score.</p>")

    judge = report.judge
    if judge is not None:
        out.append("<h2>Judge cost and latency</h2><table>")
        for key, value in judge:
            out.append(f"<tr><td>{key.replace('_', ' ')}</td><td>{_fmt(value)}</td></tr>")
        out.append("</table>")

    out.append("<h2>GRPO signal</h2>")
    if grpo is not None:
        warn = " class='warn'" if grpo.zero_variance_share > 0.5 else ""
        out.append(
            f"<p{warn}>{_pct(grpo.zero_variance_share)} of {grpo.groups} groups have the "
            "same reward for every attempt: the trainer learns nothing from them.</p>"
            f"<p>Mean group size {_fmt(grpo.mean_group_size, 3)}, mean within-group std "
            f"{_fmt(grpo.mean_within_group_std, 3)}.</p><div class='plots'>"
            + bar_chart(grpo.within_group_std_histogram, "within-group std")
            + "</div>"
        )
    else:
        out.append("<p class='muted'>No groups of two or more attempts in these rows.</p>")

    out.append("<h2>Reward against completion length</h2>")
    if length is not None:
        rho = length.spearman
        warn = " class='warn'" if rho is not None and rho > 0.5 else ""
        out.append(f"<p{warn}>Pearson {_fmt(length.pearson, 3)}, Spearman "
                   f"{_fmt(rho, 3)} over {length.n} rollouts. A reward that grows with "
                   "length is a common sign of hacking.</p>")  # fmt: skip
        out.append(scatter(length.points, "reward by completion length", "characters",
                           "reward"))  # fmt: skip
        if length.components:
            out.append("<table><tr><th>component</th><th>n</th><th>Pearson</th>"
                       "<th>Spearman</th></tr>")  # fmt: skip
            for name, c in length.components.items():
                flag = " class='warn'" if c.spearman is not None and c.spearman > 0.5 else ""
                cells = [escape(name), str(c.n), _fmt(c.pearson, 3), _fmt(c.spearman, 3)]
                out.append(f"<tr{flag}>" + "".join(f"<td>{x}</td>" for x in cells) + "</tr>")
            out.append("</table>")
    else:
        out.append("<p class='muted'>No completion lengths (pass the rollouts).</p>")

    agreement = report.agreement
    if agreement is not None:
        out.append(f"<h2>Agreement with human labels ({escape(agreement.label)})</h2>"
                   "<table><tr><th>statistic</th><th>value [95% CI]</th></tr>")  # fmt: skip
        for key in AGREEMENT_STATISTICS:
            statistic = getattr(agreement, key)
            if statistic is not None:
                out.append(f"<tr><td>{key}</td><td>{_estimate(statistic)}</td></tr>")
        out.append(f"</table><p class='muted'>{agreement.n} labelled rollouts.</p>")

    for name, panel in report.panels.items():
        out.append(_panel_section(name, panel))

    if report.passk is not None:
        out.append(_passk_section(report.passk))

    steps = report.steps
    if steps is not None:
        out.append(
            f"<h2>Per-step rewards</h2><p>{steps.rollouts} trajectories, "
            f"{_fmt(steps.mean_steps, 3)} steps each on average. Mean reward by step "
            "(where in the trajectory reward is earned or lost):</p><div class='plots'>"
        )
        out.append(means_chart([(p.step, p.mean, p.count) for p in steps.by_position],
                               "mean reward by step"))  # fmt: skip
        out.append(bar_chart(steps.histogram, "step values"))
        out.append("</div>")

    prefs = report.preferences
    if prefs is not None:
        out.append(f"<h2>Agreement with human preferences ({escape(prefs.key)})</h2>"
                   f"<p>Pairwise accuracy {_estimate(prefs.pairwise_accuracy)} over "
                   f"{prefs.pairwise_accuracy.n} (preferred, not preferred) pairs in "
                   f"{prefs.groups} groups; a tie counts half.</p>")  # fmt: skip

    det = report.determinism
    if det is not None:
        out.append(f"<h2>Determinism ({det.repeats} scorings)</h2>"
                   f"<p>Value changed: {_pct(det.changed_share)}; verdict (reward &ge; "
                   f"{_fmt(det.threshold)}) flipped: {_pct(det.verdict_flip_share)} of "
                   f"{det.rollouts} rollouts.</p>")  # fmt: skip

    out += sections
    data = report.to_json().replace("</", "<\\/")
    out.append(f'<script type="application/json" id="report-data">{data}</script>')
    out.append("</body></html>")
    return "".join(out)
