"""The `referee` command for many types in one process: the conformance matrix's CLI and
``referee serve`` doors, without a Python start per type.

``python -m tests.support.matrix_cli JOBS.json`` reads ``{"mode": "score" | "serve", "jobs":
[{"name", "argv"}]}`` and runs each job's argv through the command's own entry point
(`referee.cli.main`, click's parsing, the command's code), as ``referee ARGV...`` would:

- ``score``: one job after the other; each job's exit status and error are written as one JSON
  line to stdout (``{"name", "status", "error"}``).
- ``serve``: every job's server in a thread of its own, each on a port chosen here (``--port``
  is added); one JSON line per job once its ``/health`` answers with the job's ``reward`` name
  (``{"name", "url"}``), or once it stopped (``{"name", "error"}``: a spec it refused). The
  servers run until stdin closes.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
import traceback
import urllib.request
from pathlib import Path
from typing import Any

from click.exceptions import ClickException


def _run(argv: list[str]) -> tuple[int, str | None]:
    from referee.cli import main

    try:
        main(argv, standalone_mode=False)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
        return code, None if code == 0 else f"exit status {code}"
    except ClickException as exc:
        return exc.exit_code, exc.format_message()
    except BaseException as exc:
        return 1, "".join(traceback.format_exception(exc))[-3000:]
    return 0, None


def _ports(count: int) -> list[int]:
    """`count` distinct free ports (each held until all are chosen, so none twice)."""
    held = [socket.socket() for _ in range(count)]
    try:
        for s in held:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def _up(url: str, reward: str | None) -> bool:
    """Whether the server at `url` answers, and is the one serving `reward`."""
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as response:
            health = json.loads(response.read())
    except (OSError, ValueError):
        return False
    return reward is None or health.get("reward") == reward


def _say(line: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def _stopped(argv: list[str], box: list[str | None]) -> None:
    """Serve until the process ends; if the command returns (it refused), say why."""
    box.append(_run(argv)[1] or "stopped")


def _serve(jobs: list[dict[str, Any]]) -> None:
    pending: list[tuple[str, str, str | None, threading.Thread, list[str | None]]] = []
    for job, port in zip(jobs, _ports(len(jobs)), strict=True):
        failed: list[str | None] = []
        argv = [*job["argv"], "--port", str(port)]
        thread = threading.Thread(
            target=_stopped, args=(argv, failed), name=f"serve-{job['name']}", daemon=True
        )
        thread.start()
        url = f"http://127.0.0.1:{port}"
        pending.append((job["name"], url, job.get("reward"), thread, failed))
    deadline = time.monotonic() + 300
    while pending and time.monotonic() < deadline:
        for entry in list(pending):
            name, url, reward, _, failed = entry
            if failed:
                _say({"name": name, "error": failed[0]})
                pending.remove(entry)
            elif _up(url, reward):
                _say({"name": name, "url": url})
                pending.remove(entry)
        time.sleep(0.05)
    for name, *_ in pending:
        _say({"name": name, "error": "did not answer /health within 300 s"})
    sys.stdin.read()  # until the test closes it
    os._exit(0)  # the servers' threads are daemons: they go with the process


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    if spec["mode"] == "serve":
        _serve(spec["jobs"])
        return
    for job in spec["jobs"]:
        status, error = _run(job["argv"])
        _say({"name": job["name"], "status": status, "error": error})


if __name__ == "__main__":
    main()
