"""Which isolation a local sandbox gets: namespaces through bubblewrap, else through util-linux
`unshare`, else a refusal that says how to fix it; no isolation only when asked for by name.
The attacks themselves run against every path in test_backends (the `sandbox` fixture)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from referee.verifiers.sandbox import Job, LocalOptions, LocalSandbox, SandboxError
from referee.verifiers.sandbox._isolation import unshare_problem
from referee.verifiers.sandbox.local import isolation_problem

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def no_tools(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A PATH without bubblewrap or unshare (tmp_path/bin, empty until a test adds a tool)."""
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    return tmp_path / "bin"


def test_without_namespaces_the_sandbox_refuses_and_says_how_to_fix_it(no_tools: Path) -> None:
    with pytest.raises(SandboxError) as caught:
        LocalSandbox(workers=1)
    message = str(caught.value)
    assert "bubblewrap (bwrap) is not installed" in message
    assert "unshare is not installed" in message
    for fix in ("apt-get install bubblewrap", "unprivileged_userns_clone", "sandbox: docker"):
        assert fix in message
    assert "isolation: none" in message  # the opt-out is named, never taken
    assert isolation_problem() == message


@pytest.mark.parametrize("isolation", ["bwrap", "unshare"])
def test_a_path_asked_for_by_name_is_that_path_or_an_error(no_tools: Path, isolation: str) -> None:
    with pytest.raises(SandboxError, match=f"isolation '{isolation}' is not available here"):
        LocalSandbox(workers=1, isolation=isolation)  # type: ignore[arg-type]


def test_without_bubblewrap_auto_takes_the_unshare_path(no_tools: Path) -> None:
    unshare = shutil.which("unshare", path="/usr/bin:/bin")
    if unshare is None or unshare_problem(unshare=unshare) is not None:
        pytest.skip(f"the unshare path is unavailable here: {unshare_problem()}")
    (no_tools / "unshare").symlink_to(unshare)
    box = LocalSandbox(workers=1)
    try:
        assert box.mode == "unshare"
        result = box.run(Job(source="import socket\nprint(socket.if_nameindex())"))
        assert result.stdout == b"[(1, 'lo')]\n"  # a network namespace of its own
    finally:
        box.close()


def test_no_isolation_is_never_the_default() -> None:
    assert LocalOptions().isolation == "auto"
    assert LocalOptions(isolation="process") == LocalOptions(isolation="none")  # former name


# --- as a user: the user-namespace variants of both paths -----------------------------------

AS_A_USER = """
import json, os, socket, subprocess, sys, textwrap
from referee.verifiers.sandbox import Job, LocalSandbox
from tests.support.sandboxes import plant, probe

box = LocalSandbox(workers=1, isolation=sys.argv[1])
server = socket.create_server(("127.0.0.1", 0))
server.settimeout(0.5)
victim = subprocess.Popen(["sleep", "30"])  # a host process of the same user
attack = textwrap.dedent(f'''
    import os, socket
    try:
        socket.create_connection(("127.0.0.1", {server.getsockname()[1]}), timeout=1)
        print("connected")
    except OSError:
        print("no network")
    try:
        os.kill({victim.pid}, 9)
        print("killed")
    except OSError:
        print("no host process")
    print(os.getuid())
''')
out = box.run(Job(source=attack)).stdout.decode().splitlines()
try:
    server.accept()
    out.append("the server was reached")
except OSError:
    pass
out.append("victim alive" if victim.poll() is None else "victim dead")
victim.kill()
planted = plant(box)["planted"]
found = probe(box)["found"]
box.close()
print(json.dumps({"out": out, "planted": planted, "found": found}))
"""


@pytest.mark.parametrize("isolation", ["bwrap", "unshare"])
def test_as_a_user_each_path_isolates_and_starts_clean(isolation: str) -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("becoming an unprivileged user takes root and setpriv")
    site = [p for p in sys.path if p.endswith("site-packages")]
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONPATH": ":".join([str(ROOT), *site])}
    python = os.path.realpath(sys.executable)
    argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python]
    if subprocess.run([*argv, "-c", "import referee"], env=env, check=False).returncode:
        python = "/usr/bin/python3"  # ours may sit in root's home; the system's, with our path
        argv[-1] = python
    done = subprocess.run(
        [*argv, "-c", textwrap.dedent(AS_A_USER), isolation],
        env=env, cwd="/", capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if done.returncode and "not available" in done.stderr:
        pytest.skip(f"{isolation} does not work as a user here: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["out"] == ["no network", "no host process", "65534", "victim alive"]
    assert {d for d in report["planted"] if "/.local" not in d} >= {"/tmp", "/var/tmp", "/dev/shm"}
    assert report["found"] == []
