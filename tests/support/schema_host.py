"""Targets for a schema's ``$ref``: a real HTTP server on 127.0.0.1 that counts its hits, and a
local file; each holds `SECRET`, which must reach no message.

`server` and `secret_file` are fixtures: a test module imports them by name.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SECRET = "TOPSECRET-4f1c9a"


class CountingServer(http.server.ThreadingHTTPServer):
    hits: list[str]


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        assert isinstance(self.server, CountingServer)
        self.server.hits.append(self.path)
        body = json.dumps({"const": SECRET}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[CountingServer]:
    """A schema host on loopback that serves a schema holding the secret, counting hits."""
    srv = CountingServer(("127.0.0.1", 0), _Handler)
    srv.hits = []
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def url_of(srv: CountingServer, path: str = "/schema.json") -> str:
    host, port = srv.server_address[:2]
    return f"http://{host!s}:{port}{path}"


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "secret.json"
    path.write_text(json.dumps({"const": SECRET}))
    return path
