"""A scripted OpenAI-compatible server on 127.0.0.1, for testing judges without a paid model.

It speaks the real protocol over real HTTP, so both of referee's transports (its own, and
litellm) reach it exactly as they reach a provider (``api_base=server.url``). A script decides
each reply: a verdict text, or an injected fault (an HTTP error with headers, a hang, a slow
answer).

Asked for ``logprobs`` (and ``top_logprobs``), it answers with them in OpenAI's shape
(``choices[0].logprobs.content[i]``: ``token``, ``logprob``, ``bytes``, ``top_logprobs``). A
reply built with `Reply.of_tokens` says which tokens it is made of and the candidates at each;
any other reply is split into word-like tokens, each certain. ``FakeJudgeServer(...,
logprobs=False)`` is a server that ignores the request, as some do.

Example:
    ```python
    with FakeJudgeServer(lambda request: Reply('{"score": 7}')) as server:
        judge = JudgeClient(model="openai/fake", api_base=server.url)
    ```

``python -m referee.judges.testing --delay 0.05`` serves a fixed reply from a process of its
own (it prints its URL), for benchmarks: in-process, the server shares the client's GIL.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import socket
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from subprocess import DEVNULL, PIPE, Popen
from typing import Any

from referee._loopback import Fault, JsonHandler, LoopbackServer

__all__ = [
    "FakeJudgeServer",
    "Fault",
    "Reply",
    "Script",
    "Token",
    "redis_server",
    "requests_seen",
    "server_process",
]


@dataclass(frozen=True)
class Token:
    """One token of a scripted reply, and the candidates the server reports at its position.

    Attributes:
        text: The token.
        top: Candidate tokens and their probabilities (the token's own included; when it is
            missing, the token gets what the others leave). Empty: the token is certain.
    """

    text: str
    top: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    """A chat completion whose message content is `content`, after `delay` seconds.

    Attributes:
        tokens: The tokens `content` is made of, with their candidates (`of_tokens`); None:
            word-like tokens, each certain.
    """

    content: str
    delay: float = 0.0
    prompt_tokens: int = 50
    completion_tokens: int = 10
    tokens: tuple[Token, ...] | None = None

    @classmethod
    def of_tokens(cls, *parts: str | Token, delay: float = 0.0) -> Reply:
        """A reply spelled by `parts`: plain strings are certain tokens.

        Example: ``Reply.of_tokens('{"score":', Token(" 4", {" 4": 0.6, " 5": 0.4}), "}")``.
        """
        tokens = tuple(p if isinstance(p, Token) else Token(p) for p in parts)
        return cls("".join(t.text for t in tokens), delay=delay, tokens=tokens)


Script = Callable[[dict[str, Any]], Reply | Fault]
"""Maps a request body (the JSON the client sent) to what the server does."""


class FakeJudgeServer(LoopbackServer):
    """A threaded HTTP server answering ``POST /v1/chat/completions`` from a script.

    Attributes:
        url: The base URL to give a client (``api_base``).
        requests: Every request body received, in order.
        headers: Every request's headers (lower-case names), in the same order.
        connections: How many connections clients opened (keep-alive reuses one).
        peak_in_flight: The most requests it held at once, from arrival until it answered
            (a script's delays count).
    """

    def __init__(self, script: Script, *, logprobs: bool = True) -> None:
        self.script = script
        self.logprobs = logprobs
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.connections = 0
        server = self

        class Handler(JsonHandler):
            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server.connections += 1

            def do_GET(self) -> None:
                # How many requests arrived: for a client in another process (benchmarks).
                if self.path.rstrip("/").endswith("/requests"):
                    self.send_json(200, {"count": len(server.requests)}, {})
                else:
                    self.send_json(404, {"error": {"message": "not found"}}, {})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(body)
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                with server._counted():
                    action = server.script(body)
                    if action.delay:
                        server._closing.wait(action.delay)
                if isinstance(action, Fault):
                    if action.status == 0:
                        return  # a hang that ended: drop the connection without an answer
                    self.send_json(action.status,
                                   {"error": {"message": "injected", "type": "fault"}},
                                   action.headers)  # fmt: skip
                    return
                self.send_json(200, _completion(body, action, server.logprobs), {})

        self._serve(Handler, "/v1")


# Word-like pieces, as a BPE tokenizer's pre-tokenizer cuts text: a word or up to three digits
# with the space before it, a run of punctuation, a run of blanks.
_PIECES = re.compile(r"\s?[A-Za-z_]+|\s?[0-9]{1,3}|\s?[^\sA-Za-z_0-9]+|\s+")


def _logprobs(reply: Reply, top: int) -> dict[str, Any]:
    tokens = reply.tokens or tuple(Token(m.group()) for m in _PIECES.finditer(reply.content))
    content = []
    for token in tokens:
        probs = dict(token.top) or {token.text: 1.0}
        if token.text not in probs:
            probs[token.text] = max(1e-9, 1.0 - sum(probs.values()))
        ranked = sorted(probs.items(), key=lambda kv: -kv[1])[:top]
        content.append({
            "token": token.text,
            "logprob": math.log(probs[token.text]),
            "bytes": list(token.text.encode()),
            "top_logprobs": [
                {"token": t, "logprob": math.log(p), "bytes": list(t.encode())} for t, p in ranked
            ],
        })  # fmt: skip
    return {"content": content}


def _completion(body: dict[str, Any], reply: Reply, logprobs: bool) -> dict[str, Any]:
    choice: dict[str, Any] = {
        "index": 0,
        "finish_reason": "stop",
        "message": {"role": "assistant", "content": reply.content},
    }
    if logprobs and body.get("logprobs"):
        choice["logprobs"] = _logprobs(reply, int(body.get("top_logprobs") or 0))
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake"),
        "choices": [choice],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
    }


def main() -> None:
    """Serve one reply from this process until killed (for benchmarks); ``GET {url}/requests``
    says how many requests arrived."""
    parser = argparse.ArgumentParser(description="A scripted OpenAI-compatible judge server.")
    parser.add_argument(
        "--reply",
        default='{"score": 7, "reason": "verdict {n}"}',
        help="the message content; {n} becomes the request's number",
    )
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before answering")
    args = parser.parse_args()
    count = iter(range(1, 1 << 62))
    lock = threading.Lock()

    def script(request: dict[str, Any]) -> Reply:
        with lock:
            n = next(count)
        return Reply(args.reply.replace("{n}", str(n)), delay=args.delay)

    with FakeJudgeServer(script) as server:
        print(server.url, flush=True)
        threading.Event().wait()


def server_process(delay: float = 0.0, reply: str | None = None) -> tuple[Popen[str], str]:
    """This module's server in a process of its own (`main`), for benchmarks: the process and
    its URL. End it with ``terminate()``."""
    command = [sys.executable, "-m", "referee.judges.testing", "--delay", str(delay)]
    server = Popen([*command, *(["--reply", reply] if reply else [])], stdout=PIPE, text=True)
    if server.stdout is None:
        raise RuntimeError("the judge server gave no output")
    return server, server.stdout.readline().strip()


def requests_seen(url: str) -> int:
    """How many requests the server at `url` (`server_process`) has had."""
    with urllib.request.urlopen(f"{url}/requests", timeout=10) as answer:
        return int(json.loads(answer.read())["count"])


def redis_server(directory: str, *options: str) -> tuple[Popen[bytes], int] | None:
    """A ``redis-server`` on a free loopback port, keeping nothing on disk (``--save ''
    --appendonly no``, its files under `directory`), ready when returned: the process and its
    port; None where ``redis-server`` is not installed. For the Redis verdict cache's tests and
    benchmark; end it by its PID.

    Raises:
        RuntimeError: It did not answer within 10 s (it is killed first).
    """
    binary = shutil.which("redis-server")
    if binary is None:
        return None
    import redis

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", directory, *options]  # fmt: skip
    server = Popen(command, stdout=DEVNULL, stderr=DEVNULL)
    client = redis.Redis(port=port, socket_timeout=1)
    try:
        for _ in range(200):
            try:
                client.ping()
                return server, port
            except redis.ConnectionError:
                time.sleep(0.05)
    finally:
        client.close()
    server.kill()
    server.wait(10)
    raise RuntimeError("redis-server did not answer within 10s")


if __name__ == "__main__":
    main()
