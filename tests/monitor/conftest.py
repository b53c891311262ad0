"""The monitor's tests' proxy and gold specs: a proxy that pays words beside the answer."""

from __future__ import annotations

from pathlib import Path

import pytest

REWARDS_PY = '''
def verbose(rollout):
    """The proxy's shortcut: a bonus for words, up to 100."""
    return min(len(rollout.completion_text.split()) / 100, 1.0)
'''

PROXY = """\
name: proxy
combine: weighted
components:
  correct: {type: contains, weight: 0.3}
  verbose: {type: python, function: rewards.py:verbose, weight: 0.7}
"""
GOLD = "name: gold\ntype: contains\n"


@pytest.fixture
def specs(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "rewards.py").write_text(REWARDS_PY)
    (tmp_path / "proxy.yaml").write_text(PROXY)
    (tmp_path / "gold.yaml").write_text(GOLD)
    return tmp_path / "proxy.yaml", tmp_path / "gold.yaml"
