"""Reading and writing logged rollouts, and scoring whole files."""

from referee.rollouts.jsonl import RowError, RowOk, read_jsonl, rollout_from_row
from referee.rollouts.run import ScoreRun, score_file

__all__ = ["RowError", "RowOk", "ScoreRun", "read_jsonl", "rollout_from_row", "score_file"]
