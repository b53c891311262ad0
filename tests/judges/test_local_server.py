"""`referee.judges.local.LocalServer`'s start and stop around a server that fails: a stand-in
``llama-server`` (a shell script named by REFEREE_LLAMA_SERVER) that exits, or that never
answers. Runs without llama.cpp; tests/judges/test_local_model.py runs the real one."""

from __future__ import annotations

import os
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
