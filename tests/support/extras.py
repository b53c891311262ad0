"""Skipping a test module whose extra is not installed, without importing the extra.

`pytest.importorskip` at a module's top imports the package while the module is collected,
and every pytest-xdist worker collects every module: verl's import (torch, tensordict) took
about 6 s of CPU in each worker, most of which never ran a verl test. `needs` asks only
whether the package is installed; the tests import it when they run. A package that is
installed but does not import then fails its tests, as a broken install should, rather than
skipping them.
"""

from __future__ import annotations

import importlib.util

import pytest


def needs(*packages: str, reason: str) -> pytest.MarkDecorator:
    """A module's ``pytestmark``: skip its tests where a top-level package of `packages` is
    not installed."""
    absent = [p for p in packages if importlib.util.find_spec(p) is None]
    return pytest.mark.skipif(bool(absent), reason=f"{reason} ({', '.join(absent)} missing)")


JUDGES = needs(
    "litellm", reason="the judges extra is not installed (pip install 'referee[judges]')"
)
"""The judge modules' mark: litellm is imported by the tests that use it (about 6 s of CPU in
a worker), not by every worker that collects them."""
