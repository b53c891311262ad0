"""Diagnostics of a scored set of rollouts."""

from referee.report.summary import ComponentStats, Summary

__all__ = ["ComponentStats", "Summary"]
