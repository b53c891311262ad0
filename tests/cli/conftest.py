from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import SPEC


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    """`SPEC` as a file."""
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    return path
