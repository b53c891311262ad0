"""`patch_tests`' program inside the sandbox: unpack, apply the patch, guard the tests, run them.

Standard library only, and no referee import: the host sends this file's source as a Python
job with one line appended, ``main(PLAN)``, and it runs on the sandbox's interpreter (which
may be older than the host's). The job's work dir holds ``snapshot.tar``, ``model.diff`` and
optionally ``test.diff``. Every step before the tests start runs no code of the repository
or of the patch, so what it reports is trusted; the tests' own output is not.

Steps:

1. unpack the snapshot into ``repo/`` and note every protected entry (lstat: type, inode,
   size, modification time);
2. apply the patch with each command of the plan in turn, from a fresh unpack each time,
   until one exits 0; else, if the patch reverses cleanly on a fresh unpack, it was applied
   already;
3. compare the protected entries with step 1: any added, deleted or rewritten one is an
   edit. ``reject``: stop there. ``restore``: remove what the patch added, put back what it
   changed or deleted (a parent it replaced by a link or a file becomes a folder again);
4. apply the reference's test patch, if any;
5. run the test command in ``repo/`` with plugin autoload off (`TEST_ENV`; default: pytest
   with SWE-bench's options, loaded before the repository is put on ``sys.path``, asking by
   name for the plugins installed outside it: `PYTEST_BOOT`), in a session of its own, its
   output (stdout and stderr together) kept up to `HEAD_BYTES` + `TAIL_BYTES`, killed at the
   deadline.

Its account goes to stdout as lines ``\\n<nonce> <kind> <json>\\n``; the tests' output is
framed by ``<nonce> output`` and ``<nonce> end {exit_code, timed_out}`` (bytes dropped from
the middle of the output are marked in it).
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import re
import select
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import time
from typing import TYPE_CHECKING, Any

SNAPSHOT = "snapshot.tar"
MODEL_DIFF = "model.diff"
TEST_DIFF = "test.diff"
REPO = "repo"
HEAD_BYTES = 1 << 20
TAIL_BYTES = 3 << 20
_NOTE_CHARS = 2000
# `python -m pytest`, but with the repository last on sys.path while pytest loads (as an
# editable install puts it): `-m` would put it first, and a patch that adds pytest.py (or
# pluggy.py, _pytest/, ...) at the root would replace the runner. Once pytest is configured
# the root moves to the front, so the repository's packages shadow installed ones, as with -m.
PYTEST_BOOT = """\
import os, sys
if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]
def installed_plugins():
    # The pytest11 entry points pytest would autoload, less any whose metadata lies in the
    # repository: asked before the repository is on sys.path, and filtered by place too.
    try:
        from importlib import metadata
    except ImportError:
        return []
    root = os.path.realpath(os.getcwd())
    found = []
    for dist in metadata.distributions():
        try:
            place = os.path.realpath(str(dist.locate_file("")))
            if place == root or place.startswith(root + os.sep):
                continue
            found += [ep for ep in dist.entry_points if ep.group == "pytest11"]
        except Exception:
            continue
    return found
plugins = installed_plugins()
sys.path.append(os.getcwd())
import pytest
from _pytest.config import PytestPluginManager
try:
    import inspect
    takes = inspect.signature(PytestPluginManager.import_plugin).parameters
    by_name = "consider_entry_points" in takes
except (TypeError, ValueError):
    by_name = False
# Autoload is off (PYTEST_DISABLE_PLUGIN_AUTOLOAD); PYTEST_PLUGINS is read where autoload
# would run. A pytest that finds plugins by entry-point name gets names (so a snapshot's
# `-p no:NAME` still blocks one); an older one gets their modules.
names = [ep.name if by_name else ep.value.split(":")[0] for ep in plugins]
names += [n for n in os.environ.get("PYTEST_PLUGINS", "").split(",") if n.strip()]
if names:
    os.environ["PYTEST_PLUGINS"] = ",".join(dict.fromkeys(names))
class Root:
    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config):
        sys.path.insert(0, os.getcwd())
raise SystemExit(int(pytest.main(sys.argv[1:], plugins=[Root()])))
"""
PYTEST_OPTIONS = ("--no-header", "-rA", "--tb=no", "-p", "no:cacheprovider")
"""SWE-bench's pytest options (its ``TEST_PYTEST``)."""
TEST_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
"""The environment every test command gets on top of the sandbox's: no plugin that pytest
finds by entry point loads unasked (`PYTEST_BOOT` asks for the installed ones)."""
_GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_TERMINAL_PROMPT": "0",
}


class Stop(Exception):
    """The run ends here; its account has been written."""


if TYPE_CHECKING:  # (aliases only for the checker: this runs on Pythons before 3.9 too)
    Signature = tuple[int, int, int, int]
    Edit = list[str]


class Driver:
    """One run of the plan."""

    def __init__(self, plan: dict[str, Any]) -> None:
        self.plan = plan
        self.nonce = plan["nonce"]
        self.deadline = time.monotonic() + float(plan["timeout"])
        self.here = os.getcwd()
        self.repo = os.path.join(self.here, REPO)
        self.env = dict(os.environ, **_GIT_ENV)
        patterns = plan["protected"]
        self.exact = set(plan["protected_files"])
        self.names = _regex([p for p in patterns if "/" not in p])
        self.dirs = _regex([p[:-1] for p in patterns if p.endswith("/") and "/" not in p[:-1]])
        self.dir_paths = _regex([p[:-1] for p in patterns if p.endswith("/") and "/" in p[:-1]])
        self.paths = _regex([p for p in patterns if "/" in p and not p.endswith("/")])

    # -- the account ------------------------------------------------------------------------

    def emit(self, kind: str, payload: object) -> None:
        line = f"\n{self.nonce} {kind} {json.dumps(payload)}\n"
        os.write(1, line.encode("utf-8", "backslashreplace"))

    def left(self) -> float:
        return self.deadline - time.monotonic()

    # -- protected entries ------------------------------------------------------------------

    def scan(self) -> dict[str, Signature]:
        """Protected entry -> its lstat signature (folders are walked, not recorded; a folder
        that matches a folder pattern protects everything under it, and itself as an entry
        when it is not a real folder)."""
        found: dict[str, Signature] = {}
        stack = [("", False)]
        while stack:
            rel, inside = stack.pop()
            try:
                entries = list(os.scandir(os.path.join(self.repo, rel) if rel else self.repo))
            except OSError:
                continue
            for entry in entries:
                name = rel + "/" + entry.name if rel else entry.name
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                mine = inside or _hit(self.dirs, entry.name) or _hit(self.dir_paths, name)
                if stat.S_ISDIR(st.st_mode):
                    stack.append((name, mine))
                elif (
                    mine
                    or name in self.exact
                    or _hit(self.names, entry.name)
                    or _hit(self.paths, name)
                ):
                    found[name] = (st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns)
        return found

    # -- steps ------------------------------------------------------------------------------

    def unpack(self) -> dict[str, Signature]:
        if os.path.lexists(self.repo):
            shutil.rmtree(self.repo)
        os.mkdir(self.repo)
        try:
            with tarfile.open(SNAPSHOT) as tar:
                if hasattr(tarfile, "fully_trusted_filter"):  # the snapshot is the dataset's
                    tar.extractall(self.repo, filter="fully_trusted")
                else:
                    tar.extractall(self.repo)
        except Exception as exc:
            self.emit("setup_error", {"error": f"cannot unpack the snapshot: {exc}"})
            raise Stop() from None
        return self.scan()

    def command(self, argv: list[str], input_path: str) -> tuple[int | None, str]:
        left = self.left()
        if left <= 0:
            return None, "no time left"
        try:
            done = subprocess.run(
                [*argv, input_path],
                cwd=self.repo,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=left,
            )
        except subprocess.TimeoutExpired:
            return None, f"{argv[0]} timed out"
        except OSError as exc:
            # The tool is missing or cannot be started (EMFILE, ENOMEM): the sandbox could not
            # grade, which is no verdict on the patch.
            self.emit("setup_error", {"error": f"cannot run {argv[0]!r}: {exc}"})
            raise Stop() from None
        text = done.stdout.decode("utf-8", "replace")
        return done.returncode, text[-_NOTE_CHARS:]

    def apply(self) -> tuple[str, dict[str, Signature]]:
        diff = os.path.join(self.here, MODEL_DIFF)
        before: dict[str, Signature] = {}
        output = ""
        for argv in self.plan["apply"]:
            before = self.unpack()  # each attempt from a fresh tree: a failed one leaves debris
            code, output = self.command(list(argv), diff)
            if code == 0:
                return " ".join(argv), before
            if self.left() <= 0:
                self.emit("timeout", {"stage": "applying the patch"})
                raise Stop()
        # Already in the snapshot? Asked of a fresh tree: the last attempt may have applied
        # part of the patch, and a half-applied tree reverses as well as a whole one.
        before = self.unpack()
        code, _ = self.command(["git", "apply", "--check", "--reverse"], diff)
        if code == 0:
            return "already applied", before
        self.emit("apply_failed", {"output": output})
        raise Stop()

    def guard(self, before: dict[str, Signature], command: str) -> list[Edit]:
        after = self.scan()
        edits: list[Edit] = []
        for name in sorted(set(before) | set(after)):
            if name not in after:
                edits.append(["deleted", name])
            elif name not in before:
                edits.append(["added", name])
            elif before[name] != after[name]:
                edits.append(["modified", name])
        if edits and self.plan["mode"] == "reject":
            self.emit("protected", {"edits": edits, "command": command})
            raise Stop()
        if edits:
            self.restore(edits)
        return edits

    def restore(self, edits: list[Edit]) -> None:
        for kind, name in edits:
            if kind == "added":
                _remove(os.path.join(self.repo, name))
        with tarfile.open(SNAPSHOT) as tar:
            for kind, name in edits:
                if kind == "added":
                    continue
                member = tar.getmember(name)
                target = self._real_parents(name)
                _remove(target)
                if member.issym():
                    os.symlink(member.linkname, target)
                    continue
                source = tar.extractfile(member)
                data = source.read() if source is not None else b""
                with open(target, "xb") as fh:
                    fh.write(data)
                os.chmod(target, member.mode & 0o7777)

    def _real_parents(self, name: str) -> str:
        """The path of `name` in the repo, every parent a real folder (a link or a file the
        patch left in a parent's place is removed first)."""
        path = self.repo
        for part in name.split("/")[:-1]:
            path = os.path.join(path, part)
            if os.path.islink(path) or (os.path.lexists(path) and not os.path.isdir(path)):
                os.unlink(path)
            if not os.path.lexists(path):
                os.mkdir(path, 0o755)
        return os.path.join(self.repo, name)

    def test_patch(self) -> None:
        path = os.path.join(self.here, TEST_DIFF)
        if not os.path.exists(path):
            return
        code, output = self.command(["git", "apply", "--verbose"], path)
        if code != 0:
            self.emit("test_patch_failed", {"output": output})
            raise Stop()

    def run_tests(self) -> None:
        if self.plan["command"]:
            argv = ["/bin/sh", "-c", self.plan["command"]]
        else:
            argv = [sys.executable, "-c", PYTEST_BOOT, *PYTEST_OPTIONS, *self.plan["args"]]
        try:
            proc = subprocess.Popen(
                argv,
                cwd=self.repo,
                env=dict(os.environ, **TEST_ENV),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:  # the sandbox's, not the patch's: no interpreter, no fds
            self.emit("setup_error", {"error": f"cannot start the tests ({argv[0]}): {exc}"})
            raise Stop() from None
        head, tail, dropped, timed_out = self._read(proc)
        if timed_out:
            _kill(proc)
        try:
            code = proc.wait(timeout=max(0.5, self.left()))
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill(proc)
            code = proc.wait()
        _kill(proc)  # whatever the tests left running
        os.write(1, (f"\n{self.nonce} output\n").encode())
        _write_all(bytes(head))
        if dropped:
            _write_all(b"\n[... %d bytes of output dropped ...]\n" % dropped)
        _write_all(bytes(tail))
        status = code if code >= 0 else 128 - code  # a signal, as a shell reports it
        self.emit("end", {"exit_code": status, "timed_out": timed_out})

    def _read(self, proc: subprocess.Popen[bytes]) -> tuple[bytearray, bytearray, int, bool]:
        """The tests' output (head, tail, bytes dropped between) and whether time ran out."""
        fd = proc.stdout.fileno() if proc.stdout is not None else -1
        head, tail = bytearray(), bytearray()
        dropped = 0
        while True:
            left = self.left()
            if left <= 0:
                return head, tail, dropped, True
            ready, _, _ = select.select([fd], [], [], min(left, 0.2))
            if not ready:
                if proc.poll() is not None:
                    break  # it ended, and something it started holds the pipe open
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            room = HEAD_BYTES - len(head)
            if room > 0:
                head += chunk[:room]
                chunk = chunk[room:]
            tail += chunk
            if len(tail) > TAIL_BYTES:
                dropped += len(tail) - TAIL_BYTES
                del tail[: len(tail) - TAIL_BYTES]
        return head, tail, dropped, False


def _regex(patterns: list[str]) -> re.Pattern[str] | None:
    """One regex for `fnmatch` patterns (case-sensitive, as `fnmatch.fnmatchcase`)."""
    if not patterns:
        return None
    return re.compile("|".join(fnmatch.translate(p) for p in patterns))


def _hit(pattern: re.Pattern[str] | None, text: str) -> bool:
    return pattern is not None and pattern.match(text) is not None


def _remove(path: str) -> None:
    if os.path.islink(path) or (os.path.lexists(path) and not os.path.isdir(path)):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)


def _write_all(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(1, view) :]


def main(plan: dict[str, Any]) -> None:
    """Run the plan the host sent (see the module docstring)."""
    driver = Driver(plan)
    try:
        command, before = driver.apply()
        edits = driver.guard(before, command)
        driver.test_patch()
        driver.emit("applied", {"command": command, "edits": edits})
        driver.run_tests()
    except Stop:
        pass
    except Exception as exc:  # after the patch: the tree it left could not be made ready
        driver.emit("error", {"error": f"{type(exc).__name__}: {exc}"})
    sys.stdout.flush()
