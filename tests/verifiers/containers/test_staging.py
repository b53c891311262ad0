"""Staging a job's files by its own command (`referee.verifiers.containers.stage`): small text
files come through the environment and a shell prelude writes them; anything else is copied in.

The prelude runs here in a local ``bash`` (at paths under the test's folder): what it writes is
what a container's shell writes.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from referee.verifiers.containers import Staging, stage
from referee.verifiers.containers.staging import INLINE_BYTES, INLINE_TOTAL

FAILED = 'echo "cannot write"; exit 7'


def run(staging: Staging, after: str = "") -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], **staging.env}
    script = staging.prelude + after
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)


def test_small_text_files_are_written_by_the_prelude(tmp_path: Path) -> None:
    tests = tmp_path / "task-tests"
    (tests / "data").mkdir(parents=True)
    (tests / "empty").mkdir()
    (tests / "test.sh").write_text("#!/bin/bash\necho ok\n")
    (tests / "test.sh").chmod(0o755)
    (tests / "data" / "expected.txt").write_text("42\n\n")  # trailing newlines kept
    stage_dir = tmp_path / "stage"
    diff = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a 'quoted' $HOME `x`\n+b \\n\n"
    staging = stage(
        {f"{stage_dir}/tests": tests, f"{stage_dir}/agent.diff": diff.encode()}, on_error=FAILED
    )
    assert staging.by_exec and not staging.upload
    done = run(staging, "env | grep -c REFEREE_STAGE_ || true\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"  # the variables are gone before the job's own code
    assert (stage_dir / "agent.diff").read_text() == diff
    assert (stage_dir / "tests" / "data" / "expected.txt").read_text() == "42\n\n"
    assert (stage_dir / "tests" / "empty").is_dir()
    assert os.access(stage_dir / "tests" / "test.sh", os.X_OK)
    mode = stat.S_IMODE((stage_dir / "agent.diff").stat().st_mode)
    assert not mode & 0o111


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"a\0b", "a NUL cannot be in an environment variable"),
        (b"\xff\xfe", "not UTF-8"),
        (b"x" * (INLINE_BYTES + 1), "over the size of one variable"),
    ],
)
def test_anything_else_is_copied_in_whole(tmp_path: Path, content: bytes, why: str) -> None:
    files = {"/stage/agent.diff": content, "/stage/eval.sh": "echo small\n"}
    staging = stage(files, on_error=FAILED)
    assert not staging.by_exec, why
    assert staging.upload == files and not staging.env and not staging.prelude  # all of them


def test_too_much_in_all_or_a_link_is_copied_in(tmp_path: Path) -> None:
    half = "x" * (INLINE_BYTES - 1)
    many = {f"/stage/f{i}": half for i in range(INLINE_TOTAL // INLINE_BYTES + 1)}
    assert not stage(many, on_error=FAILED).by_exec
    folder = tmp_path / "tests"
    folder.mkdir()
    (folder / "test.sh").write_text("echo\n")
    (folder / "link").symlink_to("/etc/passwd")
    assert not stage({"/stage/tests": folder}, on_error=FAILED).by_exec


def test_a_prelude_that_cannot_write_runs_the_error(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    staging = stage({f"{blocked}/under/it.txt": "text"}, on_error=FAILED)
    done = run(staging, "echo not reached\n")
    assert (done.returncode, done.stdout) == (7, "cannot write\n")


def test_destinations_must_be_absolute() -> None:
    with pytest.raises(ValueError, match="absolute path"):
        stage({"stage/x": "a"}, on_error=FAILED)
    with pytest.raises(ValueError, match="absolute path"):
        stage({"/stage/../etc/x": "a"}, on_error=FAILED)


def test_nothing_to_stage() -> None:
    assert stage({}, on_error=FAILED) == Staging()
