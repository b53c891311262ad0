"""Repository snapshots as the sandbox receives them: one uncompressed tar, built once.

A snapshot is a directory or an archive (``.tar``, ``.tar.gz``/``.tgz``, ``.tar.bz2``,
``.tar.xz``, ``.zip``) on this machine. It is packed into a tar of its regular files,
directories and symbolic links (modes kept; owners, devices and hard links dropped), without
version-control and cache folders (`EXCLUDED`). An archive whose entries all sit under one
top folder (as GitHub's source archives do) has that folder stripped. Entries with absolute
names or ``..`` components are dropped.

The tar is cached per process, keyed by the snapshot's path and what its metadata says of
its content (every file's size, mode and modification time for a directory; the archive's
own for an archive), so an edited snapshot is packed again.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import tarfile
import threading
import zipfile
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

from referee.errors import NotApplicable

__all__ = ["ARCHIVE_SUFFIXES", "EXCLUDED", "MAX_SNAPSHOT_BYTES", "snapshot_tar"]

EXCLUDED = frozenset(
    {".git", ".hg", ".svn", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache",
     ".tox", ".nox", ".venv"}
)  # fmt: skip
"""Folders left out of a snapshot, at any depth: history, caches, virtual environments."""

ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".zip")

MAX_SNAPSHOT_BYTES = 44 << 20
"""The largest packed snapshot: the sandbox's wire frames (64 MiB) carry it base64-encoded."""

_CACHE_ENTRIES = 8
_cache: OrderedDict[tuple[str, str], bytes] = OrderedDict()
_lock = threading.Lock()


def snapshot_tar(path: Path) -> bytes:
    """The snapshot at `path` as an uncompressed tar (cached while it does not change).

    Raises:
        NotApplicable: It is neither a directory nor a readable archive of a known kind, or
            it is too large for the sandbox (`MAX_SNAPSHOT_BYTES` packed).
    """
    real = os.path.realpath(path)
    if os.path.isdir(real):
        key = (real, _tree_signature(real))
    else:
        if not real.endswith(ARCHIVE_SUFFIXES):
            raise NotApplicable(
                f"reference snapshot {str(path)!r} is neither a directory nor an archive "
                f"({', '.join(ARCHIVE_SUFFIXES)})"
            )
        st = os.stat(real)
        key = (real, f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}")
    with _lock:  # one packing per snapshot, however many rollouts of it arrive at once
        data = _cache.get(key)
        if data is not None:
            _cache.move_to_end(key)
            return data
        data = _pack(real)
        if len(data) > MAX_SNAPSHOT_BYTES:
            raise NotApplicable(
                f"reference snapshot {str(path)!r} packs into {len(data) >> 20} MiB; the "
                f"sandbox takes snapshots up to {MAX_SNAPSHOT_BYTES >> 20} MiB"
            )
        _cache[key] = data
        while len(_cache) > _CACHE_ENTRIES:
            _cache.popitem(last=False)
        return data


def _walk(root: str) -> list[tuple[str, os.stat_result]]:
    """(relative path, lstat) of every entry under `root` but the excluded, sorted."""
    out: list[tuple[str, os.stat_result]] = []
    stack = [""]
    while stack:
        rel = stack.pop()
        with os.scandir(os.path.join(root, rel) if rel else root) as entries:
            for entry in entries:
                if entry.name in EXCLUDED:
                    continue
                name = f"{rel}/{entry.name}" if rel else entry.name
                st = entry.stat(follow_symlinks=False)
                out.append((name, st))
                if stat.S_ISDIR(st.st_mode):
                    stack.append(name)
    out.sort(key=lambda item: item[0])
    return out


def _tree_signature(root: str) -> str:
    digest = hashlib.blake2b(digest_size=16)
    for name, st in _walk(root):
        digest.update(f"{name}\0{st.st_mode}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


class _Tar:
    """An uncompressed tar being written in memory."""

    def __init__(self) -> None:
        self.buf = io.BytesIO()
        self.tar = tarfile.open(  # noqa: SIM115 - closed by `close`
            fileobj=self.buf, mode="w", format=tarfile.PAX_FORMAT
        )

    def add(self, name: str, kind: bytes, mode: int, mtime: float, data: bytes = b"") -> None:
        info = tarfile.TarInfo(name)
        info.type, info.mode, info.mtime = kind, mode & 0o7777, int(mtime)
        if kind == tarfile.SYMTYPE:
            info.linkname = data.decode("utf-8", "surrogateescape")
            self.tar.addfile(info)
        elif kind == tarfile.REGTYPE:
            info.size = len(data)
            self.tar.addfile(info, io.BytesIO(data))
        else:
            self.tar.addfile(info)

    def close(self) -> bytes:
        self.tar.close()
        return self.buf.getvalue()


def _pack(path: str) -> bytes:
    try:
        if os.path.isdir(path):
            return _pack_dir(path)
        if path.endswith(".zip"):
            return _pack_zip(path)
        return _pack_tar(path)
    except (OSError, tarfile.TarError, zipfile.BadZipFile, EOFError) as exc:
        raise NotApplicable(f"reference snapshot {path!r} cannot be read: {exc}") from None


def _pack_dir(root: str) -> bytes:
    out = _Tar()
    for name, st in _walk(root):
        full = os.path.join(root, name)
        if stat.S_ISDIR(st.st_mode):
            out.add(name, tarfile.DIRTYPE, st.st_mode, st.st_mtime)
        elif stat.S_ISLNK(st.st_mode):
            out.add(name, tarfile.SYMTYPE, 0o777, st.st_mtime, os.fsencode(os.readlink(full)))
        elif stat.S_ISREG(st.st_mode):
            with open(full, "rb") as fh:
                out.add(name, tarfile.REGTYPE, st.st_mode, st.st_mtime, fh.read())
    return out.close()


def _clean(name: str) -> str | None:
    """An archive entry's name, relative and inside the snapshot; None to drop it."""
    parts = [part for part in name.replace("\\", "/").split("/") if part not in ("", ".")]
    if not parts or name.startswith("/") or ".." in parts or EXCLUDED.intersection(parts):
        return None
    return "/".join(parts)


def _strip_top(names: list[str]) -> int:
    """How many characters of a single top folder to strip from every name (0: none)."""
    tops = {name.split("/", 1)[0] for name in names}
    if len(tops) != 1 or not any("/" in name for name in names):
        return 0
    top = tops.pop()
    return len(top) + 1 if all(name == top or name.startswith(top + "/") for name in names) else 0


E = TypeVar("E")


def _relative(entries: list[tuple[E, str | None]]) -> Iterator[tuple[E, str]]:
    """The archive entries kept (a clean name), each with its name under a single top folder
    (stripped); the top folder itself is dropped."""
    kept = [(entry, name) for entry, name in entries if name is not None]
    cut = _strip_top([name for _, name in kept])
    for entry, name in kept:
        if name[cut:]:
            yield entry, name[cut:]


def _pack_tar(path: str) -> bytes:
    out = _Tar()
    with tarfile.open(path, "r:*") as tar:
        for member, rel in _relative([(m, _clean(m.name)) for m in tar.getmembers()]):
            if member.isdir():
                out.add(rel, tarfile.DIRTYPE, member.mode, member.mtime)
            elif member.issym():  # (a target that is not UTF-8 arrives surrogate-escaped)
                out.add(rel, tarfile.SYMTYPE, 0o777, member.mtime, os.fsencode(member.linkname))
            elif member.isfile() or member.islnk():
                fh = tar.extractfile(member)
                data = fh.read() if fh is not None else b""
                out.add(rel, tarfile.REGTYPE, member.mode, member.mtime, data)
    return out.close()


def _pack_zip(path: str) -> bytes:
    out = _Tar()
    with zipfile.ZipFile(path) as archive:
        for info, rel in _relative([(i, _clean(i.filename)) for i in archive.infolist()]):
            mode = info.external_attr >> 16
            mtime = _zip_mtime(info)
            if info.is_dir():
                out.add(rel, tarfile.DIRTYPE, mode or 0o755, mtime)
            elif stat.S_ISLNK(mode):
                out.add(rel, tarfile.SYMTYPE, 0o777, mtime, archive.read(info))
            else:
                out.add(rel, tarfile.REGTYPE, mode or 0o644, mtime, archive.read(info))
    return out.close()


def _zip_mtime(info: zipfile.ZipInfo) -> float:
    import time

    try:
        return time.mktime((*info.date_time, 0, 0, -1))
    except (OverflowError, ValueError):
        return 0.0
