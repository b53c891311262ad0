"""Rollouts and rollout files with just what a test needs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from referee import Rollout


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    """Write `rows` as JSON Lines at `path`; returns the path."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def make(completion: str = "", reference: Any = None, **kw: Any) -> Rollout:
    """A rollout with just what a test needs."""
    return Rollout(completion=completion, reference=reference, **kw)
