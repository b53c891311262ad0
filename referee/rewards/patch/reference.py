"""The reference `patch_tests` grades against: a repository snapshot and the tests that decide.

A SWE-bench row works as it is once it names a snapshot: its ``FAIL_TO_PASS`` and
``PASS_TO_PASS`` (lists, or JSON text of lists, as the datasets store them) and its
``test_patch`` are read; its other keys (``repo``, ``base_commit``, ...) are ignored.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from referee.errors import NotApplicable
from referee.rewards._common import short
from referee.rewards.patch._diff import diff_paths, strip_prefix, unsafe_name

__all__ = ["PatchReference"]

_SHAPE = (
    '{"snapshot": path, "FAIL_TO_PASS": [test ids], "PASS_TO_PASS": [test ids]}, optionally '
    'with "test_command", "test_files" and "test_patch"'
)


def _ids(reference: dict[str, Any], key: str, required: bool) -> tuple[str, ...]:
    """A list of strings under `key` (also as JSON text of one, as SWE-bench stores it)."""
    if key not in reference:
        if required:
            raise NotApplicable(f"patch_tests reference has no {key}; it needs {_SHAPE}")
        return ()
    value = reference[key]
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise NotApplicable(
                f"reference {key} must be a list of test ids (or JSON text of one), got "
                f"{short(reference[key])}"
            ) from None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise NotApplicable(
            f"reference {key} must be a list of test ids (non-empty strings), got "
            f"{short(reference[key])}"
        )
    return tuple(value)


def _test_file(test_id: str) -> str | None:
    """The file a pytest node id names (``tests/test_x.py::test_y`` -> ``tests/test_x.py``)."""
    path = test_id.split("::", 1)[0] if "::" in test_id else None
    return path if path and ".." not in path.split("/") and not path.startswith("/") else None


@dataclass(frozen=True, slots=True)
class PatchReference:
    """A repository task: the snapshot to patch and the tests that decide.

    Attributes:
        snapshot: The repository before the patch: a directory, or an archive (``.tar``,
            ``.tar.gz``/``.tgz``, ``.tar.bz2``, ``.tar.xz``, ``.zip``).
        fail_to_pass: Tests that must go from failing to passing.
        pass_to_pass: Tests that must keep passing.
        test_command: A shell command that runs the tests in the repository's root and
            prints pytest's ``-rA`` summary; None: pytest on the files the test ids name.
        test_files: Files the patch must not change: the files the test ids name, those the
            reference's ``test_files`` lists, and those its ``test_patch`` touches.
        test_patch: A diff applied after the patch (SWE-bench's gold tests), or None.
    """

    snapshot: Path
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...] = ()
    test_command: str | None = None
    test_files: tuple[str, ...] = ()
    test_patch: str | None = None

    @property
    def test_args(self) -> list[str]:
        """The test files pytest runs by default: those the test ids name, in order; none
        (pytest's own discovery) when an id names no file."""
        files = [_test_file(test_id) for test_id in (*self.fail_to_pass, *self.pass_to_pass)]
        if not files or any(f is None for f in files):
            return []
        return list(dict.fromkeys(f for f in files if f is not None))

    @classmethod
    def parse(cls, reference: object, root: str | None = None) -> PatchReference:
        """Read a rollout's reference. With a `root`, the snapshot must lie in it: a relative
        path starts there, and a path with ``..`` or one that resolves outside it (through a
        symbolic link too) is refused; without one, a relative path starts at the working
        directory and any path on the host is opened.

        Raises:
            NotApplicable: A key is missing or of the wrong type (the message names it), the
                snapshot does not exist, or it lies outside `root`.
        """
        if not isinstance(reference, dict):
            raise NotApplicable(f"patch_tests needs a reference {_SHAPE}, got {short(reference)}")
        snapshot = reference.get("snapshot")
        if snapshot is None and "image" in reference:
            raise NotApplicable(
                f"reference image {short(reference['image'])}: a snapshot reference has no "
                f"image; patch_tests runs a SWE-bench instance row (with its eval_script) in its "
                f"image, or a snapshot (the repository's directory or archive) in its sandbox"
            )
        if snapshot is None:
            raise NotApplicable(
                f"patch_tests reference has no snapshot (the repository's directory or "
                f"archive); it needs {_SHAPE}; got keys {sorted(map(str, reference))}"
            )
        if not isinstance(snapshot, str) or not snapshot:
            raise NotApplicable(
                f"reference snapshot must be a path (a directory or an archive), got "
                f"{short(snapshot)}"
            )
        path = Path(os.path.expanduser(snapshot)) if root is None else _confined(snapshot, root)
        if not path.exists():
            raise NotApplicable(
                f"reference snapshot {snapshot!r}: no such directory or archive ({path})"
            )
        command = reference.get("test_command")
        if command is not None and (not isinstance(command, str) or not command.strip()):
            raise NotApplicable(
                f"reference test_command must be a shell command, got {short(command)}"
            )
        test_patch = reference.get("test_patch")
        if test_patch is not None and not isinstance(test_patch, str):
            raise NotApplicable(f"reference test_patch must be a diff, got {short(test_patch)}")
        f2p = _ids(reference, "FAIL_TO_PASS", required=True)
        p2p = _ids(reference, "PASS_TO_PASS", required=False)
        files = list(_ids(reference, "test_files", required=False))
        files += [f for f in map(_test_file, (*f2p, *p2p)) if f is not None]
        if test_patch:
            names = diff_paths(test_patch)
            outside = unsafe_name(names)
            if outside is not None:
                raise NotApplicable(
                    f"reference test_patch names a path outside the repository: {outside!r}"
                )
            files += [p for p in map(strip_prefix, names) if p is not None]
        return cls(
            snapshot=path,
            fail_to_pass=f2p,
            pass_to_pass=p2p,
            test_command=command,
            test_files=_unique(files),
            test_patch=test_patch or None,
        )


def _confined(snapshot: str, root: str) -> Path:
    """The real path of `snapshot` (relative to `root`, or absolute), which must lie in
    `root`'s real path; NotApplicable if not."""
    if ".." in snapshot.replace("\\", "/").split("/"):
        raise NotApplicable(
            f"reference snapshot {snapshot!r} has a '..' component; snapshots must lie in "
            f"snapshot_root {root!r}: name one relative to it, without '..'"
        )
    base = os.path.realpath(root)
    real = os.path.realpath(os.path.join(base, snapshot))  # (an absolute snapshot stays)
    if real != base and os.path.commonpath([real, base]) != base:
        raise NotApplicable(
            f"reference snapshot {snapshot!r} resolves to {real!r}, outside snapshot_root "
            f"{root!r} ({base!r}); snapshots must lie in it (links are followed)"
        )
    return Path(real)


def _unique(items: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(item.strip("/") for item in items if item.strip("/")))
