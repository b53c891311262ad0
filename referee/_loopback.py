"""The scripted HTTP servers' common part: JSON answers, and a server on 127.0.0.1 on its own
thread. `referee.judges.testing.FakeJudgeServer` (OpenAI's chat completions) and
`referee.models.testing.FakeRewardServer` (vLLM's pooling API, OpenRLHF's remote RM) are
built on it; it is here, below both, because units of one layer may not import each other.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

__all__ = ["Fault", "JsonHandler", "LoopbackServer"]


@dataclass(frozen=True)
class Fault:
    """An HTTP error (`status`, with `headers`), or a hang of `delay` seconds (status 0)."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


class JsonHandler(BaseHTTPRequestHandler):
    """A request handler that keeps connections alive and answers JSON, silently."""

    protocol_version = "HTTP/1.1"
    # Headers and body leave in two writes: with Nagle's algorithm the body would wait for
    # the client's delayed ACK of the headers (40 ms on Linux) on every answer.
    disable_nagle_algorithm = True

    def send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        """Answer `payload` as JSON with `status` and any extra `headers`."""
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    # A backlog for hundreds of clients connecting at once (the default, 5, resets them).
    request_queue_size = 1024
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up before its answer (its timeout, a cancelled request) is
        not the server's error: nothing is printed. Any other error is, as socketserver does
        (a script that raised)."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class LoopbackServer:
    """A threaded HTTP server on 127.0.0.1 (a free port), serving on its own thread until
    `close` (or the end of a ``with`` block). Subclasses call `_serve` with their handler.

    `_closing` is set on close: a handler that waits (a scripted delay) waits on it, so a
    closing server does not wait for its scripts. `_lock` guards what handlers record;
    `peak_in_flight` is the most requests held at once (`_counted`).
    """

    url: str
    peak_in_flight: int

    def _serve(self, handler: type[JsonHandler], path: str = "") -> None:
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._in_flight = 0
        self.peak_in_flight = 0
        self._server = _Server(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._server.server_port}{path}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @contextlib.contextmanager
    def _counted(self) -> Iterator[None]:
        """Count a request in flight for the block, which ends before its answer leaves: a
        client that sends its next request on the answer must not find this one counted."""
        with self._lock:
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1

    def close(self) -> None:
        """Stop serving and free the port."""
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
