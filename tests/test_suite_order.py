"""The suite's own order (tests/conftest.py): the modules that take longest run first, so the
xdist workers finish together, and each module's tests stay together, as its module-scoped
fixtures and the Ray modules' one local Ray need."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import conftest

ROOT = Path(__file__).resolve().parents[1]


def test_every_timed_module_and_ray_module_exists() -> None:
    missing = [m for m in (*conftest._SECONDS, *conftest._RAY_MODULES) if not (ROOT / m).is_file()]
    assert not missing, f"renamed or removed: mend tests/conftest.py: {missing}"


def test_the_session_runs_each_module_together_longest_first(
    request: pytest.FixtureRequest,
) -> None:
    scopes = [conftest._scope(item.nodeid.split("::", 1)[0]) for item in request.session.items]
    runs = [s for i, s in enumerate(scopes) if i == 0 or scopes[i - 1] != s]
    assert len(runs) == len(set(runs)), "a module's tests are split apart"
    seconds = {}
    for module, took in conftest._SECONDS.items():
        scope = conftest._scope(module)
        seconds[scope] = seconds.get(scope, 0) + took
    timed = [seconds.get(s, 0) for s in runs]
    assert timed == sorted(timed, reverse=True)
