from __future__ import annotations

from typing import Any

import pytest

from referee import Rollout


def make(completion: str = "", reference: Any = None, **kw: Any) -> Rollout:
    """A rollout with just what a test needs."""
    return Rollout(completion=completion, reference=reference, **kw)


@pytest.fixture
def rollout_factory():  # type: ignore[no-untyped-def]
    return make
