"""Staging a job's files: small text files written by the job's own command, from its
environment, rather than copied in beforehand.

Copying files into a container (`Container.put`: a tar upload through the engine) costs a
call of its own, about 0.1 s. A job's files are mostly small text (a diff, a script, a task's
tests), and its command is a shell script anyway: `stage` passes each such file in the
command's environment and gives the shell lines (`Staging.prelude`) that write it where it
belongs and drop the variables again. Where any file is not small text (a NUL, bytes that
are not UTF-8, a link, over `INLINE_BYTES`, or more than `INLINE_TOTAL` in all), all of them
are copied in instead (`Staging.upload`), so a job never has half of each.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from referee.verifiers.containers.container import FileContent
from referee.verifiers.sandbox.base import file_bytes

__all__ = ["INLINE_BYTES", "INLINE_TOTAL", "Staging", "stage"]

INLINE_BYTES = 96 << 10
"""The largest file passed in the environment (Linux allows 128 KiB a string)."""

INLINE_TOTAL = 256 << 10
"""The most bytes passed in the environment in all (Linux allows a few MiB with the command)."""

_INLINE_FILES = 64
_VAR = "REFEREE_STAGE_{}"


@dataclass(frozen=True)
class Staging:
    """How a job's files reach its container.

    Attributes:
        env: Variables to add to the job command's environment (the files' contents).
        prelude: Shell lines to run first in the job's script: they write the files from
            `env` and unset its variables ("" where there are none).
        upload: The files to copy in before the command runs (`Container.put`) instead.
    """

    env: dict[str, str] = field(default_factory=dict)
    prelude: str = ""
    upload: dict[str, FileContent] = field(default_factory=dict)

    @property
    def by_exec(self) -> bool:
        """Whether the files are written by the command itself (nothing to copy in)."""
        return not self.upload


def _entries(dest: str, content: FileContent) -> list[tuple[str, bytes | None, bool]] | None:
    """(path in the container, bytes or None for a folder, executable) for `content` at
    `dest`, a host folder walked; None where something in it is not a plain file or folder."""
    if not isinstance(content, Path):
        return [(dest, file_bytes(content), False)]
    if content.is_symlink():
        return None
    if content.is_file():
        return [(dest, content.read_bytes(), os.access(content, os.X_OK))]
    if not content.is_dir():
        return None
    found: list[tuple[str, bytes | None, bool]] = [(dest, None, False)]
    for path in sorted(content.rglob("*")):
        where = f"{dest}/{path.relative_to(content).as_posix()}"
        if path.is_symlink():
            return None
        if path.is_dir():
            found.append((where, None, False))
        elif path.is_file():
            found.append((where, path.read_bytes(), os.access(path, os.X_OK)))
        else:
            return None
    return found


def _text(data: bytes) -> str | None:
    """`data` as text an environment variable can carry (UTF-8, no NUL), or None."""
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def stage(files: Mapping[str, FileContent], *, on_error: str) -> Staging:
    """How to stage `files` (absolute paths in the container -> bytes, text, or a host file
    or folder): by the command, where each is small text, else all copied in.

    `on_error`: the shell to run where the prelude cannot write a file (say so, and stop).

    Raises:
        ValueError: A destination is not an absolute path, or has a ``..`` component.
    """
    for dest in files:
        if not dest.startswith("/") or ".." in dest.split("/"):
            raise ValueError(f"a destination must be an absolute path without '..': {dest!r}")
    entries: list[tuple[str, bytes | None, bool]] = []
    for dest, content in files.items():
        found = _entries(dest, content)
        if found is None:
            return Staging(upload=dict(files))
        entries += found
    written = [(path, data, executable) for path, data, executable in entries if data is not None]
    texts = [_text(data) for _, data, _ in written]
    total = sum(len(data) for _, data, _ in written)
    if (
        len(written) > _INLINE_FILES
        or total > INLINE_TOTAL
        or any(text is None for text in texts)
        or any(len(data) > INLINE_BYTES for _, data, _ in written)
    ):
        return Staging(upload=dict(files))
    if not written:
        return Staging()
    env: dict[str, str] = {}
    steps: list[str] = []
    folders = {path for path, data, _ in entries if data is None}
    folders |= {path.rsplit("/", 1)[0] or "/" for path, _, _ in written}
    steps.append("mkdir -p -- " + " ".join(map(shlex.quote, sorted(folders))))
    executables: list[str] = []
    for i, ((path, _, executable), text) in enumerate(zip(written, texts, strict=True)):
        name = _VAR.format(i)
        env[name] = text or ""
        steps.append(f'printf %s "${name}" > {shlex.quote(path)}')
        if executable:
            executables.append(shlex.quote(path))
    if executables:
        steps.append("chmod 755 -- " + " ".join(executables))
    prelude = (
        "{ " + " && ".join(steps) + "; } 2>/dev/null || { " + on_error.strip().rstrip(";") + "; }\n"
        f"unset {' '.join(env)}\n"
    )
    return Staging(env=env, prelude=prelude)
