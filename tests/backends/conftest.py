from __future__ import annotations

from collections.abc import Iterator

import pytest

from referee.judges.testing import FakeJudgeServer
from tests.support.judges import letter_judge


@pytest.fixture(scope="module")
def judge_server() -> Iterator[FakeJudgeServer]:
    with FakeJudgeServer(letter_judge) as server:
        yield server


@pytest.fixture(scope="session")
def local_ray() -> Iterator[None]:
    """A local Ray for verl's reward loop; started once, it takes seconds."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}})  # fmt: skip
    yield
    ray.shutdown()
