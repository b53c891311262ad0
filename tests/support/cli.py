"""The `referee` command in a test: run through click's runner, and the spec and rows the
CLI's tests score."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from referee.cli import main

# A gate on valid JSON, then the fields: a row's reward says which of the two it passed.
SPEC = """
name: t
components:
  valid: {type: json_valid, weight: 0.5, gate: true}
  fields: {type: field_match, weight: 0.5}
"""


def row(i: int, completion: str, reference: object = None) -> str:
    """A rollout as a JSONL line, ``r{i}``, with `reference` (default ``{"a": 1}``)."""
    return json.dumps({"id": f"r{i}", "completion": completion, "reference": reference or {"a": 1}})


def run(*args: str) -> tuple[int, str]:
    """``referee ARGS...`` in this process: its exit status and its output."""
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def read_out(path: Path) -> list[dict[str, object]]:
    """The rows of a JSONL file `referee score` wrote."""
    return [json.loads(line) for line in path.read_text().splitlines()]


def four_rollouts(tmp_path: Path) -> Path:
    """Four rollouts of `SPEC`'s shape (one not JSON), in ``in.jsonl`` under `tmp_path`."""
    path = tmp_path / "in.jsonl"
    rows = [row(0, '{"a": 1}'), row(1, '{"a": 2}'), row(2, "not json"), row(3, '{"a": 1}')]
    path.write_text("\n".join(rows) + "\n")
    return path
