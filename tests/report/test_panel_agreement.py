"""A judge panel's agreement in the report: Krippendorff's alpha equal to the `krippendorff`
package's at every level with missing values, the panels found from their components, each
judge against human labels, the correlation of their errors, the page's escaping."""

from __future__ import annotations

import math
import random

import krippendorff
import numpy as np
import pytest

from referee.report.diagnostics import ReportRow, build_report
from referee.report.html import render_html
from referee.report.panel import build_panels, panel_member
from referee.report.results import Report
from referee.report.stats import AlphaLevel, krippendorff_alpha


def package_alpha(units: list[list[float | None]], level: AlphaLevel) -> float | None:
    """The `krippendorff` package's alpha of the same table (raters by units, NaN missing);
    None where it refuses or gives NaN (no two values to compare)."""
    data = np.array([[np.nan if v is None else v for v in unit] for unit in units]).T
    try:
        with np.errstate(all="ignore"):
            value = float(krippendorff.alpha(reliability_data=data, level_of_measurement=level))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def random_table(rng: random.Random, scale: list[float] | None) -> list[list[float | None]]:
    units, raters = rng.randint(2, 40), rng.randint(2, 7)
    missing = rng.choice([0.0, 0.2, 0.5])
    return [[None if rng.random() < missing
             else (rng.choice(scale) if scale else round(rng.uniform(0, 1), 3))
             for _ in range(raters)] for _ in range(units)]  # fmt: skip


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
@pytest.mark.parametrize(
    "scale",
    [[0.0, 1.0], [0.0, 0.25, 0.5, 0.75, 1.0], [1.0, 2.0, 3.0, 7.0], None],
    ids=["binary", "five-point", "uneven", "continuous"],
)
def test_alpha_equals_the_krippendorff_package(
    level: AlphaLevel, scale: list[float] | None
) -> None:
    rng = random.Random(f"{level}{scale}")
    compared = 0
    for _ in range(40):
        units = random_table(rng, scale)
        ours, theirs = krippendorff_alpha(units, level), package_alpha(units, level)
        if theirs is None:
            assert ours is None
            continue
        assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-12)
        compared += 1
    assert compared >= 20  # the cases compared are most of them, not the refused ones


def test_alpha_on_krippendorffs_own_example() -> None:
    # The package's docstring example (from Krippendorff's own): nominal 0.691, interval 0.811.
    raters = [[None, None, None, None, None, 3, 4, 1, 2, 1, 1, 3, 3, None, 3],
              [1, None, 2, 1, 3, 3, 4, 3, None, None, None, None, None, None, None],
              [None, None, 2, 1, 3, 4, 4, None, 2, 1, 1, 3, 3, None, 4]]  # fmt: skip
    units: list[list[float | None]] = [list(u) for u in zip(*raters, strict=True)]
    assert krippendorff_alpha(units, "nominal") == pytest.approx(0.691358, abs=1e-6)
    assert krippendorff_alpha(units, "interval") == pytest.approx(0.810845, abs=1e-6)


@pytest.mark.parametrize(
    ("units", "why"),
    [
        ([[1.0, 1.0], [1.0, 1.0]], "one value: no disagreement to expect"),
        ([[1.0, None], [None, 0.0]], "no row with two values"),
        ([], "no rows"),
    ],
)
def test_alpha_is_none_where_undefined(units: list[list[float | None]], why: str) -> None:
    assert krippendorff_alpha(units, "nominal") is None, why


@pytest.mark.parametrize(
    ("component", "found"),
    [
        ("panel.gpt_a", ("panel", "gpt_a")),
        ("panel.gpt_a.cost", None),  # its cost, not its verdict
        ("quality.panel.gpt-4.1", ("quality.panel", "gpt-4.1")),  # a dotted model name
        ("a.b.panel.x", ("a.b.panel", "x")),
        ("panel", None),  # the vote itself
        ("my_panel.x", None),  # "panel" must be a whole segment
        ("answer", None),
    ],
)
def test_panel_members_from_component_names(component: str, found: tuple[str, str] | None) -> None:
    assert panel_member(component) == found


def panel_rows(n: int, flip: list[float], seed: int = 0, *, shared: float = 0.0,
               abstain: float = 0.1, prefix: str = "") -> list[ReportRow]:  # fmt: skip
    """Rows of a panel of judges j0, j1, ... on pass/fail items with human labels: judge i
    flips the truth with probability flip[i]; with probability `shared` all judges make the
    same mistake on a row; each abstains with probability `abstain`."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        truth = float(rng.random() < 0.5)
        common = rng.random() < shared
        components: dict[str, float | None] = {}
        for i, p in enumerate(flip):
            wrong = common or rng.random() < p
            value = None if rng.random() < abstain else (1.0 - truth if wrong else truth)
            components[f"{prefix}panel.j{i}"] = value
            components[f"{prefix}panel.j{i}.cost"] = 0.002
        rows.append(ReportRow(truth, components, label=truth))
    return rows


def test_a_panel_reports_alpha_abstentions_and_agreement_with_labels() -> None:
    rows = panel_rows(300, [0.05, 0.1, 0.4])
    report = build_report(rows, label="label")
    panel = report.panels["panel"]
    assert panel.members == ("j0", "j1", "j2") and panel.level == "nominal"
    assert panel.units == 300 and sum(panel.abstained.values()) > 0
    units = [[r.components[f"panel.j{i}"] for i in range(3)] for r in rows]
    assert panel.alpha.value == pytest.approx(package_alpha(units, "nominal"), rel=1e-9)
    assert panel.alpha.ci_low is not None and panel.alpha.ci_high is not None
    assert panel.alpha.ci_low < panel.alpha.value < panel.alpha.ci_high  # type: ignore[operator]
    # each judge against the labels: the noisy one agrees least
    acc = {m: a.accuracy.value for m, a in panel.agreement.items() if a.accuracy}
    assert acc["j0"] > acc["j1"] > acc["j2"]  # type: ignore[operator]
    assert acc["j0"] == pytest.approx(0.95, abs=0.04)
    assert panel.agreement["j0"].cohen_kappa is not None
    assert Report.model_validate_json(report.to_json()) == report


def test_independent_errors_are_worth_their_number_and_shared_ones_are_not() -> None:
    # (build_panels alone: the error correlation needs no per-judge agreement and its bootstrap)
    panel = build_panels(panel_rows(1200, [0.2] * 4, abstain=0.0), label="label")["panel"]
    assert panel.errors == "absolute" and len(panel.error_correlations) == 6  # 4 choose 2
    assert panel.mean_error_correlation == pytest.approx(0.0, abs=0.05)
    assert panel.effective_judges == pytest.approx(4.0, abs=0.6)
    # the same judges, all wrong together on a third of the rows: far fewer than four
    rows = panel_rows(1200, [0.2] * 4, shared=0.3, abstain=0.0)
    together = build_panels(rows, label="label")["panel"]
    assert together.mean_error_correlation is not None and together.mean_error_correlation > 0.5
    assert together.effective_judges is not None and together.effective_judges < 1.6


def test_error_correlation_of_scores_uses_signed_errors() -> None:
    rng = random.Random(3)
    rows = []
    for _ in range(200):
        label = rng.uniform(0, 1)
        bias = rng.gauss(0, 0.2)  # both judges share this error
        comps = {"panel.a": label + bias + rng.gauss(0, 0.05),
                 "panel.b": label + bias + rng.gauss(0, 0.05)}  # fmt: skip
        rows.append(ReportRow(label, comps, label=label))
    panel = build_report(rows, label="gold").panels["panel"]
    assert panel.level == "interval" and panel.errors == "signed"
    (pair,) = panel.error_correlations
    assert pair.n == 200 and pair.pearson is not None and pair.pearson > 0.8
    assert panel.label == "gold"


def test_panels_by_prefix_and_without_labels() -> None:
    rows = [*panel_rows(50, [0.1, 0.1], prefix="quality."),
            *panel_rows(50, [0.1, 0.3], seed=1, prefix="safety.")]  # fmt: skip
    for r in rows:
        r.label = None
    report = build_report(rows)
    assert set(report.panels) == {"quality.panel", "safety.panel"}
    quality = report.panels["quality.panel"]
    assert quality.units == 50  # rows of the other panel are not units of this one
    assert quality.agreement == {} and quality.error_correlations == ()
    assert quality.effective_judges is None and "label" not in quality.to_dict()
    # a fixed level: ordinal instead of nominal
    fixed = build_panels(rows, level="ordinal")
    assert fixed["quality.panel"].level == "ordinal"
    assert build_report([ReportRow(1.0, {"answer": 1.0})]).panels == {}  # no panel: none
    assert "panels" not in build_report([ReportRow(1.0)]).to_dict()


def test_the_page_shows_the_panel_and_escapes_its_names() -> None:
    hostile = '<script>alert("x")</script>'
    rows = panel_rows(60, [0.1, 0.2], prefix=f"{hostile}.")
    for r in rows:
        r.components = {k.replace("j0", f"j0{hostile}"): v for k, v in r.components.items()}
    page = render_html(build_report(rows, label="label"), title="panel")
    body = page.split('<script type="application/json"')[0]
    assert "Krippendorff" in body and "independent judges" in body
    assert "<script>" not in body and "&lt;script&gt;" in body
    assert "</script>" not in page.split('id="report-data">')[1][: -len("</script></body></html>")]
