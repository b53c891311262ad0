"""Reading logged rollouts (referee's JSONL, verl, TRL, OpenAI chat logs; JSONL or Parquet) and
scoring them into files, resumably."""

from referee._moved import renamed as _renamed
from referee.rollouts.jsonl import RowError, RowOk, rollout_from_row
from referee.rollouts.jsonl import read_jsonl as _read_jsonl
from referee.rollouts.needs import check_rows
from referee.rollouts.readers import (
    FORMATS,
    FileFormat,
    detect_format,
    parse_mapping,
    read_rollouts,
)
from referee.rollouts.run import ScoreRun, score_file, score_to_path
from referee.rollouts.scored import FailureRecord, ScoredRow
from referee.rollouts.summary import Summary

__all__ = [
    "FORMATS",
    "FailureRecord",
    "FileFormat",
    "RowError",
    "RowOk",
    "ScoreRun",
    "ScoredRow",
    "Summary",
    "check_rows",
    "detect_format",
    "parse_mapping",
    "read_rollouts",
    "rollout_from_row",
    "score_file",
    "score_to_path",
]


def __getattr__(name: str) -> object:
    if name == "Format":  # referee.rewards.Format is the format reward
        return _renamed("referee.rollouts", "Format", "FileFormat", FileFormat)
    if name == "read_jsonl":  # a second reader of the same files, stricter than the first
        return _renamed("referee.rollouts", "read_jsonl", "read_rollouts", _read_jsonl)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
