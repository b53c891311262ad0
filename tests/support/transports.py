"""Judge tests run on both transports: referee's own HTTP one and litellm.

A test module takes them with ``from tests.support.transports import each_transport``: the
fixture is autouse, so every test in it runs once per transport, whatever clients it builds
(from Python or from a spec). A client that names its transport keeps it.
"""

from __future__ import annotations

import pytest

from referee.judges import client as client_module
from referee.judges.transport import Transport, route

TRANSPORTS = ("http", "litellm")


@pytest.fixture(autouse=True, params=TRANSPORTS)
def each_transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The transport this run of the test uses (``auto`` is routed to it)."""
    chosen: Transport = request.param

    def forced(model: str, transport: Transport) -> str:
        return route(model, chosen if transport == "auto" else transport)

    monkeypatch.setattr(client_module, "route", forced)
    return chosen
