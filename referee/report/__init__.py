"""Diagnostics of a scored set of rollouts: the report (`diagnostics`, `html`), reward-hacking
probes (`probes`), comparisons of two rewards (`compare`); their results are models."""

from referee.report.compare import Comparison
from referee.report.diagnostics import ReportRow
from referee.report.probes import ProbeReport, ProbeResult
from referee.report.results import Report
from referee.rollouts.summary import ComponentStats, Summary

__all__ = [
    "Comparison",
    "ComponentStats",
    "ProbeReport",
    "ProbeResult",
    "Report",
    "ReportRow",
    "Summary",
]
