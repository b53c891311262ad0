"""Repository snapshots as the sandbox receives them: one uncompressed tar, built once.

A snapshot is a directory or an archive (``.tar``, ``.tar.gz``/``.tgz``, ``.tar.bz2``,
``.tar.xz``, ``.zip``) on this machine. It is packed into a tar of its regular files,
directories and symbolic links (modes kept; owners, devices and hard links dropped), without
version-control and cache folders (`EXCLUDED`). An archive whose entries all sit under one
top folder (as GitHub's source archives do) has that folder stripped. Entries with absolute
names or ``..`` components are dropped.

Limits hold while packing, never after: the packed tar stops at `MAX_SNAPSHOT_BYTES` and
`MAX_SNAPSHOT_ENTRIES`, every file is read in chunks against what room is left, and a
compressed archive is decompressed through a guard that refuses to read past
`MAX_ARCHIVE_SCAN_BYTES` (entries left out are read through too) or to hand tarfile one
header larger than `_MAX_READ`. A small archive that expands to gigabytes (a gzip bomb, a zip
of overlapping entries, a tar of hard links to one large file) is refused having written at
most the limit.

The tar is cached per process, keyed by the snapshot's path and what its metadata says of
its content (every file's size, mode and modification time for a directory; the archive's
own for an archive), so an edited snapshot is packed again.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import lzma
import os
import stat
import tarfile
import threading
import zipfile
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Protocol, TypeVar

from referee.errors import NotApplicable

__all__ = [
    "ARCHIVE_SUFFIXES",
    "EXCLUDED",
    "MAX_ARCHIVE_SCAN_BYTES",
    "MAX_SNAPSHOT_BYTES",
    "MAX_SNAPSHOT_ENTRIES",
    "snapshot_tar",
]

EXCLUDED = frozenset(
    {".git", ".hg", ".svn", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache",
     ".tox", ".nox", ".venv"}
)  # fmt: skip
"""Folders left out of a snapshot, at any depth: history, caches, virtual environments."""

ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".zip")

MAX_SNAPSHOT_BYTES = 44 << 20
"""The largest packed snapshot: the sandbox's wire frames (64 MiB) carry it base64-encoded."""

MAX_SNAPSHOT_ENTRIES = 200_000
"""The most entries a snapshot may hold (an archive's dropped entries count too): every entry
costs memory before its bytes do."""

MAX_ARCHIVE_SCAN_BYTES = 1 << 30
"""The most bytes read out of a compressed archive's stream, the entries left out included."""

_MAX_READ = 1 << 20  # the largest single read tarfile may ask of a stream (a header's size)
_MAX_NAMES = 64 << 20  # the most bytes of names, link targets and PAX headers kept
_CHUNK = 256 << 10
_LINK_MAX = 4096  # a symbolic link's target


class _TooLarge(Exception):
    """A limit was reached while packing (the message says which)."""


class _Stream(Protocol):
    """A readable, seekable byte stream (a file, a decompressor)."""

    def read(self, size: int = -1, /) -> bytes: ...
    def seek(self, offset: int, whence: int = 0, /) -> int: ...
    def tell(self) -> int: ...


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
        try:
            key = (real, _tree_signature(real))
        except _TooLarge as exc:
            raise NotApplicable(
                f"reference snapshot {str(path)!r} is too large for the sandbox: {exc}"
            ) from None
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
        try:
            data = _pack(real)
        except _TooLarge as exc:
            raise NotApplicable(
                f"reference snapshot {str(path)!r} is too large for the sandbox: {exc}; it was "
                f"refused while packing. Give a smaller snapshot (without data or history "
                f"folders)"
            ) from None
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
                if len(out) > MAX_SNAPSHOT_ENTRIES:
                    raise _TooLarge(f"it holds over {MAX_SNAPSHOT_ENTRIES} entries")
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
    """An uncompressed tar being written in memory, never past `MAX_SNAPSHOT_BYTES` or
    `MAX_SNAPSHOT_ENTRIES`."""

    def __init__(self) -> None:
        self.buf = io.BytesIO()
        self.tar = tarfile.open(  # noqa: SIM115 - closed by `close`
            fileobj=self.buf, mode="w", format=tarfile.PAX_FORMAT
        )
        self.entries = 0

    def room(self) -> int:
        """Bytes of content the next entry may still have (its header counted)."""
        return MAX_SNAPSHOT_BYTES - self.buf.tell() - 3 * tarfile.BLOCKSIZE

    def read(self, source: _Stream, size_hint: int = 0) -> bytes:
        """All of `source`, read in chunks; refused once it passes the room left."""
        room = self.room()
        if size_hint > room:
            raise _TooLarge(self._over(size_hint))
        chunks, total = [], 0
        while chunk := source.read(_CHUNK):
            total += len(chunk)
            if total > room:
                raise _TooLarge(self._over(total))
            chunks.append(chunk)
        return b"".join(chunks)

    def _over(self, size: int) -> str:
        return (
            f"it packs into more than {MAX_SNAPSHOT_BYTES >> 20} MiB (an entry of {size} bytes "
            f"with {max(0, self.room())} bytes left)"
        )

    def add(self, name: str, kind: bytes, mode: int, mtime: float, data: bytes = b"") -> None:
        self.entries += 1
        if self.entries > MAX_SNAPSHOT_ENTRIES:
            raise _TooLarge(f"it holds over {MAX_SNAPSHOT_ENTRIES} entries")
        if len(data) + len(name) > self.room():
            raise _TooLarge(self._over(len(data)))
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
                data = out.read(fh, st.st_size)
            out.add(name, tarfile.REGTYPE, st.st_mode, st.st_mtime, data)
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


class _Guarded:
    """A decompressed stream as tarfile reads it, refused past `limit` bytes (seeks
    included: skipping an entry decompresses it too) or in one read over `_MAX_READ`."""

    def __init__(self, raw: _Stream, limit: int) -> None:
        self.raw, self.limit = raw, limit

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0 or size > _MAX_READ:
            raise _TooLarge(f"an archive header asks to read {size} bytes at once")
        self._check(self.raw.tell() + size)
        return self.raw.read(size)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_CUR:
            offset += self.raw.tell()
        elif whence != os.SEEK_SET:
            raise _TooLarge("tarfile asked to seek from the end of a stream")
        self._check(offset)
        return self.raw.seek(offset)

    def tell(self) -> int:
        return self.raw.tell()

    def _check(self, end: int) -> None:
        if end > self.limit:
            raise _TooLarge(
                f"its compressed stream expands past {self.limit >> 20} MiB "
                f"(MAX_ARCHIVE_SCAN_BYTES) before its end"
            )


def _open_stream(fh: IO[bytes]) -> tuple[_Stream, int]:
    """The archive's decompressed stream and how far it may be read."""
    magic = fh.read(6)
    fh.seek(0)
    if magic.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=fh), MAX_ARCHIVE_SCAN_BYTES
    if magic.startswith(b"BZh"):
        return bz2.BZ2File(fh), MAX_ARCHIVE_SCAN_BYTES
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(fh), MAX_ARCHIVE_SCAN_BYTES
    return fh, os.fstat(fh.fileno()).st_size  # a plain tar: skipping costs nothing


def _members(tar: tarfile.TarFile) -> list[tuple[tarfile.TarInfo, str | None]]:
    """Every entry of the archive with its clean name, read header by header, within
    `MAX_SNAPSHOT_ENTRIES` and `_MAX_NAMES`."""
    entries: list[tuple[tarfile.TarInfo, str | None]] = []
    names = 0
    for member in tar:
        names += len(member.name) + len(member.linkname)
        names += sum(len(k) + len(v) for k, v in member.pax_headers.items())
        if len(entries) >= MAX_SNAPSHOT_ENTRIES:
            raise _TooLarge(f"it holds over {MAX_SNAPSHOT_ENTRIES} entries")
        if names > _MAX_NAMES:
            raise _TooLarge(f"its names and headers pass {_MAX_NAMES >> 20} MiB")
        entries.append((member, _clean(member.name)))
    return entries


def _pack_tar(path: str) -> bytes:
    out = _Tar()
    with open(path, "rb") as raw:
        stream, limit = _open_stream(raw)
        guarded: Any = _Guarded(stream, limit)  # (tarfile reads it as a file)
        with tarfile.open(fileobj=guarded, mode="r:") as tar:
            entries = _members(tar)
            # A hard link is packed as a copy of its target, kept from when the target was
            # read: reading the target again would seek back through the whole stream.
            targets = {m.linkname for m, _ in entries if m.islnk()}
            kept: dict[str, bytes] = {}
            for member, rel in _relative(entries):
                if member.isdir():
                    out.add(rel, tarfile.DIRTYPE, member.mode, member.mtime)
                elif member.issym():  # (a target that is not UTF-8 arrives surrogate-escaped)
                    link = os.fsencode(member.linkname)[:_LINK_MAX]
                    out.add(rel, tarfile.SYMTYPE, 0o777, member.mtime, link)
                elif member.isfile():
                    fh = tar.extractfile(member)
                    data = out.read(fh, member.size) if fh is not None else b""
                    if member.name in targets:
                        kept[member.name] = data
                    out.add(rel, tarfile.REGTYPE, member.mode, member.mtime, data)
                elif member.islnk() and member.linkname in kept:
                    data = kept[member.linkname]
                    out.add(rel, tarfile.REGTYPE, member.mode, member.mtime, data)
    return out.close()


def _pack_zip(path: str) -> bytes:
    out = _Tar()
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
        if len(infos) > MAX_SNAPSHOT_ENTRIES:
            raise _TooLarge(f"it holds {len(infos)} entries, over {MAX_SNAPSHOT_ENTRIES}")
        for info, rel in _relative([(i, _clean(i.filename)) for i in infos]):
            mode = info.external_attr >> 16
            mtime = _zip_mtime(info)
            if info.is_dir():
                out.add(rel, tarfile.DIRTYPE, mode or 0o755, mtime)
                continue
            with archive.open(info) as fh:
                if stat.S_ISLNK(mode):
                    out.add(rel, tarfile.SYMTYPE, 0o777, mtime, fh.read(_LINK_MAX))
                else:
                    data = out.read(fh, info.file_size)
                    out.add(rel, tarfile.REGTYPE, mode or 0o644, mtime, data)
    return out.close()


def _zip_mtime(info: zipfile.ZipInfo) -> float:
    import time

    try:
        return time.mktime((*info.date_time, 0, 0, -1))
    except (OverflowError, ValueError):
        return 0.0
