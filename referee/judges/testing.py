"""A scripted OpenAI-compatible server on 127.0.0.1, for testing judges without a paid model.

It speaks the real protocol over real HTTP, so litellm reaches it exactly as it reaches a
provider (``api_base=server.url``). A script decides each reply: a verdict text, or an
injected fault (an HTTP error with headers, a hang, a slow answer).

Example:
    ```python
    with FakeJudgeServer(lambda request: Reply('{"score": 7}')) as server:
        judge = JudgeClient(model="openai/fake", api_base=server.url)
    ```
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeJudgeServer", "Fault", "Reply", "Script"]


@dataclass(frozen=True)
class Reply:
    """A chat completion whose message content is `content`, after `delay` seconds."""

    content: str
    delay: float = 0.0
    prompt_tokens: int = 50
    completion_tokens: int = 10


@dataclass(frozen=True)
class Fault:
    """An HTTP error (`status`, with `headers`), or a hang of `delay` seconds (status 0)."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


Script = Callable[[dict[str, Any]], Reply | Fault]
"""Maps a request body (the JSON the client sent) to what the server does."""


class FakeJudgeServer:
    """A threaded HTTP server answering ``POST /v1/chat/completions`` from a script.

    Attributes:
        url: The base URL to give litellm (``api_base``).
        requests: Every request body received, in order.
        peak_in_flight: The most requests it held at once, from arrival until it answered
            (a script's delays count).
    """

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.peak_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._closing = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(body)
                    server._in_flight += 1
                    server.peak_in_flight = max(server.peak_in_flight, server._in_flight)
                try:
                    action = server.script(body)
                    if action.delay:
                        server._closing.wait(action.delay)
                finally:
                    # before the answer leaves: a client that sends its next request on the
                    # answer must not find this one still counted
                    with server._lock:
                        server._in_flight -= 1
                if isinstance(action, Fault):
                    if action.status == 0:
                        return  # a hang that ended: drop the connection without an answer
                    self._send(action.status, {"error": {"message": "injected", "type": "fault"}},
                               action.headers)  # fmt: skip
                    return
                self._send(200, _completion(body, action), {})

            def _send(self, status: int, payload: Any, headers: dict[str, str]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_port}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeJudgeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _completion(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake"),
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": reply.content},
            }
        ],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
    }
