"""The monitor's timeline as a page: each figure drawn over the run's steps, the alarms marked
where they fired, and the steps' table under the charts.

A timeline is what the monitor wrote: the JSONL file ``Monitor(timeline=...)`` appends a line
to per step (``{"step", "figures", "alarms"}``), or the JSON ``referee watch --json`` writes
(`Watch`). `read_timeline` reads either; `render_timeline` draws it as one self-contained HTML
page (inline SVG, no scripts, no network) with the same numbers embedded as JSON, and
`timeline_section` as a section of ``referee report``'s page.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path

from pydantic import ValidationError

from referee.errors import RolloutError
from referee.monitor import Alarm, StepFigures, Watch
from referee.report.html import STYLE
from referee.report.html import _fmt as _report_fmt

__all__ = ["line_chart", "read_timeline", "render_timeline", "timeline_section"]

_COLOURS = ("#4f7cac", "#c2410c", "#15803d", "#7c3aed", "#b45309", "#0e7490", "#be185d",
            "#4d7c0f")  # fmt: skip

Series = Sequence[tuple[int, float]]


def read_timeline(path: str | Path) -> Watch:
    """The monitor's timeline at `path`: its JSONL (a line per step) or `referee watch`'s JSON.

    Raises:
        RolloutError: The file is neither; the message names the file and the line at fault.
    """
    source = str(path)
    text = Path(path).read_text(encoding="utf-8")
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None  # JSON lines, read one by one below
    if isinstance(whole, dict) and "steps" in whole:
        try:
            return Watch.model_validate(whole)
        except ValidationError as exc:
            raise RolloutError(f"not the JSON referee watch writes: {_first(exc)}",
                               source=source) from None  # fmt: skip
    steps: list[StepFigures] = []
    alarms: list[Alarm] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RolloutError(f"not JSON ({exc.msg}): a timeline has one JSON object per "
                               "line, as Monitor(timeline=...) writes it", source=source,
                               line=number) from None  # fmt: skip
        if not isinstance(row, dict) or not {"step", "figures"} <= set(row):
            raise RolloutError('not a timeline line: one has "step", "figures" and "alarms" '
                               "(Monitor(timeline=...) writes them)", source=source,
                               line=number)  # fmt: skip
        try:
            steps.append(StepFigures.model_validate(row["figures"]))
            alarms += [Alarm.model_validate(a) for a in row.get("alarms") or ()]
        except ValidationError as exc:
            raise RolloutError(f"not a timeline line: {_first(exc)}", source=source,
                               line=number) from None  # fmt: skip
    if not steps:
        raise RolloutError("no step in this timeline (it is empty)", source=source)
    stopped = next((a.step for a in alarms if a.action == "stop"), None)
    return Watch(steps=tuple(steps), alarms=tuple(alarms), stopped_at=stopped)


def _first(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"]) or "(top)"
    return f"{where}: {error['msg']}"


def _fmt(value: float | None, digits: int = 3) -> str:
    return _report_fmt(value, digits)  # the report page's numbers, to 3 digits here


def line_chart(
    series: Mapping[str, Series],
    title: str,
    alarms: Sequence[Alarm] = (),
    bound: float | None = None,
    span: tuple[float, float] | None = None,
    dashed: Sequence[str] = (),
    width: int = 520,
    height: int = 200,
) -> str:
    """Lines of values over steps, one per named series (a missing step is a gap; the series
    named in `dashed` drawn dashed), a dashed line at `bound`, and a red mark at each alarm's
    step (its message as the tooltip). The y axis spans the values, `bound` and `span`."""
    points = [(s, v) for line in series.values() for s, v in line if math.isfinite(v)]
    if not points:
        return ""
    pad_l, pad_r, pad_b, pad_t = 52, 10, 30, 20
    plot_w, plot_h = width - pad_l - pad_r, height - pad_b - pad_t
    steps = [s for s, _ in points] + [a.step for a in alarms]
    x0, x1 = min(steps), max(steps)
    values: list[float] = [v for _, v in points] + ([bound] if bound is not None else [])
    values += span or ()
    y0, y1 = min(values), max(values)
    if y0 == y1:
        y0, y1 = y0 - 0.5, y1 + 0.5
    sx = plot_w / ((x1 - x0) or 1)
    sy = plot_h / (y1 - y0)

    def x(step: float) -> float:
        return pad_l + (step - x0) * sx if x1 != x0 else pad_l + plot_w / 2

    def y(value: float) -> float:
        return pad_t + plot_h - (value - y0) * sy

    parts = [f'<svg role="img" aria-label="{escape(title)}" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}">',
             f'<text x="{pad_l}" y="13" font-size="12">{escape(title)}</text>']  # fmt: skip
    for alarm in alarms:
        ax = x(alarm.step)
        parts.append(
            f'<line class="alarm" x1="{ax:.1f}" y1="{pad_t}" x2="{ax:.1f}" '
            f'y2="{pad_t + plot_h}" stroke="#dc2626" stroke-width="2">'
            f"<title>step {alarm.step}: {escape(alarm.action)} {escape(alarm.message)}</title>"
            "</line>"
        )
    if bound is not None:
        by = y(bound)
        parts.append(f'<line x1="{pad_l}" y1="{by:.1f}" x2="{width - pad_r}" y2="{by:.1f}" '
                     f'stroke="#dc2626" stroke-dasharray="4 3"><title>bound {_fmt(bound)}'
                     "</title></line>")  # fmt: skip
    legend_x = pad_l + 16 + 7.5 * len(title)
    for i, (name, line) in enumerate(series.items()):
        colour = _COLOURS[i % len(_COLOURS)]
        runs: list[list[tuple[int, float]]] = [[]]
        for s, v in sorted(line):
            if not math.isfinite(v):
                runs.append([])
                continue
            runs[-1].append((s, v))
        for run in runs:
            if len(run) > 1:
                path = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in run)
                dash = ' stroke-dasharray="6 4"' if name in dashed else ""
                parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" '
                             f'stroke-width="2"{dash}/>')  # fmt: skip
            for s, v in run:
                parts.append(
                    f'<circle cx="{x(s):.1f}" cy="{y(v):.1f}" r="3.5" fill="{colour}">'
                    f"<title>{escape(name)}, step {s}: {_fmt(v, 4)}</title></circle>"
                )
        if len(series) > 1:
            parts.append(f'<text x="{legend_x:.0f}" y="13" font-size="11" fill="{colour}">'
                         f"{escape(name)}</text>")  # fmt: skip
            legend_x += 6.5 * len(name) + 14
    base = pad_t + plot_h
    parts += [
        f'<line x1="{pad_l}" y1="{base}" x2="{width - pad_r}" y2="{base}" stroke="#999"/>',
        f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{base}" stroke="#999"/>',
        f'<text x="{pad_l}" y="{base + 14}" font-size="11">step {x0}</text>',
        f'<text x="{width - pad_r}" y="{base + 14}" font-size="11" text-anchor="end">'
        f"step {x1}</text>",
        f'<text x="{pad_l - 4}" y="{base}" font-size="11" text-anchor="end">{_fmt(y0)}</text>',
        f'<text x="{pad_l - 4}" y="{pad_t + 8}" font-size="11" text-anchor="end">{_fmt(y1)}</text>',
        "</svg>",
    ]
    return "".join(parts)


def _series(steps: Sequence[StepFigures], attribute: str) -> list[tuple[int, float]]:
    return [(f.step, float(v)) for f in steps if (v := getattr(f, attribute)) is not None]


def _bound(alarms: Sequence[Alarm], rule: str) -> float | None:
    return next((a.bound for a in alarms if a.rule == rule), None)


def timeline_section(watch: Watch) -> str:
    """The timeline as a section of a page: cards, a chart per figure, the alarms, the steps."""
    steps, alarms = watch.steps, watch.alarms
    by_rule = {rule: [a for a in alarms if a.rule == rule] for rule in {a.rule for a in alarms}}
    gold = any(f.gold is not None for f in steps)
    out = ["<h2>Monitor timeline</h2>", '<div class="cards">',
           f'<div class="card">steps<b>{len(steps)}</b></div>',
           f'<div class="card">alarms<b>{len(alarms)}</b></div>']  # fmt: skip
    if watch.stopped_at is not None:
        out.append(f'<div class="card warn">stopped at<b>step {watch.stopped_at}</b></div>')
    out.append("</div><div class='plots' style='margin-top: 1rem'>")
    reward: dict[str, Series] = {"reward": [(f.step, f.reward.mean) for f in steps
                                            if f.reward.mean is not None]}  # fmt: skip
    if gold:
        reward["gold"] = _series(steps, "gold")
        reward["proxy on gold sample"] = _series(steps, "proxy_on_gold")
    out.append(line_chart(reward, "mean reward", alarms, dashed=["proxy on gold sample"]))
    charts: list[tuple[str, str, tuple[float, float] | None]] = [
        ("gap", "proxy - gold gap", (0.0, 0.0)),
        ("zero_variance", "zero-variance groups (share)", (0.0, 1.0)),
        ("length_correlation", "reward-length Spearman", (-1.0, 1.0)),
        ("held_out_gap", "held-out gap (paid - held-out pass rate)", (0.0, 0.0)),
        ("paying_probes", "probes the proxy pays", (0.0, 0.0)),
        ("min_agreement", "lowest agreement of components (Spearman)", (-1.0, 1.0)),
    ]
    for attribute, title, span in charts:
        line = _series(steps, attribute)
        if line:
            out.append(line_chart({attribute: line}, title, by_rule.get(attribute, ()),
                                  bound=_bound(alarms, attribute), span=span))  # fmt: skip
    names = sorted({n for f in steps for n in f.components})
    if names:
        components = {n: [(f.step, c.mean) for f in steps
                          if (c := f.components.get(n)) is not None and c.mean is not None]
                      for n in names[: len(_COLOURS)]}  # fmt: skip
        out.append(line_chart(components, "component means"))
    failed = [(f.step, float(sum(f.failures.values()))) for f in steps]
    faults = [(f.step, float(sum(f.faults.values()))) for f in steps]
    if any(v for _, v in failed + faults):
        out.append(line_chart({"failed": failed, "policy faults": faults}, "rows per step"))
    if any(f.judge_cost for f in steps):
        out.append(line_chart({"judge cost": [(f.step, f.judge_cost) for f in steps]},
                              "judge cost per step ($)"))  # fmt: skip
    out.append("</div>")
    out.append("<h3>Alarms</h3>")
    if alarms:
        out.append("<table><tr><th>step</th><th>rule</th><th>action</th><th>value</th>"
                   "<th>bound</th><th>message</th></tr>")  # fmt: skip
        for a in alarms:
            cls = " class='warn'" if a.action == "stop" else ""
            out.append(f"<tr{cls}><td>{a.step}</td><td>{escape(a.rule)}</td>"
                       f"<td>{escape(a.action)}</td><td>{_fmt(a.value)}</td>"
                       f"<td>{_fmt(a.bound)}</td><td>{escape(a.message)}</td></tr>")  # fmt: skip
        out.append("</table>")
    else:
        out.append("<p>No rule fired.</p>")
    columns = ["step", "rollouts", "reward", "std", "zero-var", "len rho", "failed"]
    columns += ["gold", "gap"] if gold else []
    out.append("<h3>Steps</h3><table><tr>" + "".join(f"<th>{c}</th>" for c in columns)
               + "<th>alarm</th></tr>")  # fmt: skip
    fired: dict[int, list[str]] = {}
    for a in alarms:
        fired.setdefault(a.step, []).append(f"{a.rule} ({a.action})")
    for f in steps:
        cells = [str(f.step), str(f.rollouts), _fmt(f.reward.mean), _fmt(f.reward.std),
                 _fmt(f.zero_variance), _fmt(f.length_correlation),
                 str(sum(f.failures.values()))]  # fmt: skip
        cells += [_fmt(f.gold), _fmt(f.gap)] if gold else []
        alarm = ", ".join(fired.get(f.step, ()))
        cls = " class='warn'" if alarm else ""
        out.append(f"<tr{cls}>" + "".join(f"<td>{c}</td>" for c in cells)
                   + f"<td>{escape(alarm)}</td></tr>")  # fmt: skip
    out.append("</table>")
    return "".join(out)


def render_timeline(watch: Watch, source: str | None = None,
                    title: str = "referee monitor") -> str:  # fmt: skip
    """The timeline as a self-contained HTML page, its numbers embedded as JSON
    (``<script type="application/json" id="timeline-data">``)."""
    tab = f"{title}: {Path(source).name}" if source else title
    out = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{escape(tab)}"
           f"</title><style>{STYLE}</style></head><body><h1>{escape(title)}</h1>"]  # fmt: skip
    if source:
        out.append(f'<p class="muted">{escape(source)}</p>')
    out.append(timeline_section(watch))
    data = watch.to_json().replace("</", "<\\/")
    out.append(f'<script type="application/json" id="timeline-data">{data}</script>')
    out.append("</body></html>")
    return "".join(out)
