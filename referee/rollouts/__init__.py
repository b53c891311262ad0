"""Reading logged rollouts (referee's JSONL, verl, TRL, OpenAI chat logs; JSONL or Parquet) and
scoring them into files, resumably."""

from referee.rollouts.jsonl import RowError, RowOk, read_jsonl, rollout_from_row
from referee.rollouts.needs import check_rows
from referee.rollouts.readers import FORMATS, Format, detect_format, parse_mapping, read_rollouts
from referee.rollouts.run import ScoreRun, score_file, score_to_path
from referee.rollouts.scored import FailureRecord, ScoredRow
from referee.rollouts.summary import Summary

__all__ = [
    "FORMATS",
    "FailureRecord",
    "Format",
    "RowError",
    "RowOk",
    "ScoreRun",
    "ScoredRow",
    "Summary",
    "check_rows",
    "detect_format",
    "parse_mapping",
    "read_jsonl",
    "read_rollouts",
    "rollout_from_row",
    "score_file",
    "score_to_path",
]
