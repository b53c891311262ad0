from __future__ import annotations

from collections.abc import Iterator

import pytest

from referee.judges.testing import FakeJudgeServer
from tests.support.judges import letter_judge


@pytest.fixture(scope="module")
def judge_server() -> Iterator[FakeJudgeServer]:
    with FakeJudgeServer(letter_judge) as server:
        yield server


@pytest.fixture(scope="module")
def local_ray() -> None:
    """A local Ray for verl's reward loop and the Ray engine; started once for the modules that
    use it (they run one after another on one worker), ended after the last of them
    (`tests/conftest.py`'s `pytest_runtest_teardown`: idle, it costs 5% of a core)."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        # No runtime_env: with one, every actor is a fresh process rather than a worker Ray
        # started ahead (about 3 s of CPU each, not 1). The workers inherit this process's
        # LITELLM_LOCAL_MODEL_COST_MAP (tests/conftest.py) through the local raylet.
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
