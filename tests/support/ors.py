"""The ``openreward`` SDK's own environment client, for driving `referee serve --tasks` as its
users do; and the task rows the ORS tests serve.

``import openreward`` runs the SDK's top-level ``__init__``, which also imports its environment
*server* stack (FastAPI, uvicorn, an OpenTelemetry gRPC exporter, office-document toolsets):
none of it is the client's. `sdk` loads the client modules (``openreward.api``) without that
``__init__``, so the tests need only the client's own imports (`PIP`).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

import pytest

OPENREWARD_PIN = "openreward==0.1.167"
PIP = (
    f"pip install --no-deps {OPENREWARD_PIN} structlog==26.1.0 tenacity==9.2.1 "
    "anthropic==2.14.0 docstring-parser==0.18.0 google-genai==3.6.1 websockets==17.4"
)


def sdk() -> Any:
    """``openreward.api.environments.client`` (its `EnvironmentsAPI`, `ToolCallError`, ...),
    or a skip that says what to install."""
    loaded = sys.modules.get("openreward.api.environments.client")
    if loaded is not None:
        return loaded
    spec = importlib.util.find_spec("openreward")
    if spec is None or spec.submodule_search_locations is None:
        pytest.skip(f"the openreward SDK is not installed ({PIP})")
    if "openreward" not in sys.modules:
        package = types.ModuleType("openreward")
        package.__path__ = list(spec.submodule_search_locations)
        package.__spec__ = spec
        sys.modules["openreward"] = package
    try:
        # The rollout API first: the SDK's modules import each other in the order its own
        # __init__ does, and otherwise meet a half-initialised openreward.models.
        importlib.import_module("openreward.api.rollouts")
        return importlib.import_module("openreward.api.environments.client")
    except ImportError as exc:
        pytest.skip(f"the openreward SDK's client cannot be imported ({exc}): {PIP}")


TASKS: list[dict[str, Any]] = [
    {"id": "add", "prompt": "What is 2+2? Answer in \\boxed{}.", "reference": "4"},
    {"id": "mul", "prompt": [{"role": "system", "content": "Be brief."},
                             {"role": "user", "content": "What is 3*3?"}], "reference": "9"},
    {"id": 7, "prompt": "What is 10-3?", "reference": "7"},
    {"id": "t1", "prompt": "What is 1+1?", "reference": "2", "split": "test"},
]  # fmt: skip
"""Three training tasks (text, chat messages, an integer id) and one test task."""


def http(
    url: str,
    method: str,
    path: str,
    body: Any = None,
    *,
    headers: dict[str, str] | None = None,
    raw: bytes | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One request as a hostile client sends it, redirects not followed: (status, headers,
    body)."""
    import http.client
    import json
    from urllib.parse import urlsplit

    where = urlsplit(url)
    connection = http.client.HTTPConnection(where.hostname or "", where.port, timeout=60)
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    try:
        sent = {"content-type": "application/json", **(headers or {})}
        connection.request(method, path, body=data, headers=sent)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def events(stream: bytes) -> list[tuple[str, str]]:
    """The (event, data) pairs of a server-sent event stream, comments skipped."""
    out: list[tuple[str, str]] = []
    event: str | None = None
    data: list[str] = []
    for line in stream.decode().split("\r\n"):
        if not line:
            if event is not None:
                out.append((event, "\n".join(data)))
            event, data = None, []
        elif not line.startswith(":"):
            field, _, value = line.partition(":")
            if field == "event":
                event = value.strip()
            elif field == "data":
                data.append(value.lstrip())
    return out
