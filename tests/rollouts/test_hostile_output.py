"""Output files: referee writes only to a regular file or a new path, never through a link,
into a device or a FIFO, or over one (``referee score -o X`` and every other option that names
an output file)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from referee.cli import main
from referee.rollouts.output import check_output, open_output, write_output

SPEC = "type: json_valid\n"
OUTSIDE = "the user's own file, which no output may touch\n"


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, Path]:
    """(a rollouts file, a spec)."""
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": "a", "completion": "{}"}) + "\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    return src, spec


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file outside the output folder, that a link points at."""
    path = tmp_path / "elsewhere" / "precious.txt"
    path.parent.mkdir()
    path.write_text(OUTSIDE)
    return path


def _link(tmp_path: Path, target: Path) -> Path:
    link = tmp_path / "out.jsonl"
    link.symlink_to(target)
    return link


def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "out.jsonl"
    os.mkfifo(path)
    return path


def _device(tmp_path: Path) -> Path:
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    path = tmp_path / "out.jsonl"
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # what /dev/null is
    return path


def _score(src: Path, spec: Path, out: Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["score", str(src), "--spec", str(spec), "-o", str(out)])
    return result.exit_code, result.output


def test_score_refuses_a_symlink_to_a_file_outside(
    tmp_path: Path, inputs: tuple[Path, Path], outside: Path
) -> None:
    out = _link(tmp_path, outside)
    code, output = _score(*inputs, out)
    assert code != 0 and str(out) in output and "symbolic link" in output
    assert "regular file" in output  # the fix
    assert out.is_symlink() and outside.read_text() == OUTSIDE


def test_score_refuses_a_symlinked_partial_file(
    tmp_path: Path, inputs: tuple[Path, Path], outside: Path
) -> None:
    partial = tmp_path / "out.jsonl.partial"
    partial.symlink_to(outside)
    code, output = _score(*inputs, tmp_path / "out.jsonl")
    assert code != 0 and str(partial) in output
    assert partial.is_symlink() and outside.read_text() == OUTSIDE


@pytest.mark.parametrize(
    ("make", "kind", "is_kind"),
    [
        (_fifo, "FIFO", stat.S_ISFIFO),  # a reader elsewhere would get the rows
        (_device, "character device", stat.S_ISCHR),  # /dev/null would become a regular file
    ],
)
def test_score_refuses_a_special_file_and_leaves_it_be(
    tmp_path: Path,
    inputs: tuple[Path, Path],
    make: Callable[[Path], Path],
    kind: str,
    is_kind: Callable[[int], bool],
) -> None:
    out = make(tmp_path)
    code, output = _score(*inputs, out)
    assert code != 0 and kind in output and str(out) in output
    assert is_kind(os.lstat(out).st_mode)  # still what it was, not replaced by a file


def test_score_still_writes_a_new_file_and_over_a_regular_one(
    tmp_path: Path, inputs: tuple[Path, Path]
) -> None:
    out = tmp_path / "out.jsonl"
    for _ in range(2):  # new, then over the regular file the first run left
        code, output = _score(*inputs, out)
        assert code == 0, output
        assert [json.loads(line)["reward"] for line in out.read_text().splitlines()] == [1.0]


@pytest.mark.parametrize(
    "command",
    [
        ["report", "{scored}", "--json", "{out}"],
        ["report", "{scored}", "--html", "{out}"],
        ["compare", "{scored}", "{scored}", "--json", "{out}"],
        ["openrlhf-func", "{spec}", "-o", "{out_py}"],
    ],
)
def test_every_output_option_refuses_a_symlink(
    tmp_path: Path, inputs: tuple[Path, Path], outside: Path, command: list[str]
) -> None:
    scored = tmp_path / "scored.jsonl"
    scored.write_text(json.dumps({"id": "a", "line": 1, "reward": 1.0}) + "\n")
    out, out_py = tmp_path / "out.json", tmp_path / "reward.py"
    out.symlink_to(outside)
    out_py.symlink_to(outside)
    names = {"scored": scored, "spec": inputs[1], "out": out, "out_py": out_py}
    args = [part.format(**names) for part in command]
    result = CliRunner().invoke(main, args)
    assert result.exit_code != 0 and "symbolic link" in result.output, result.output
    assert outside.read_text() == OUTSIDE


def test_open_output_never_waits_on_a_fifo(tmp_path: Path) -> None:
    fifo = _fifo(tmp_path)
    with pytest.raises(OSError, match="FIFO"):
        open_output(fifo)


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="directory"):
        check_output(tmp_path)


def test_write_output_replaces_a_regular_files_content(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text("a much longer old content")
    write_output(path, "new")
    assert path.read_text() == "new"
