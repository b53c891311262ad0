"""Framing and plain-data encoding shared by the host and the in-sandbox worker.

Standard library only: this file is also imported inside the sandbox, by whatever Python the
sandbox runs. Values cross the boundary as *plain data* only: None, bool, int, float, str,
bytes, complex, list, tuple, dict, set, frozenset, of those exact types. A subclass (an int
whose ``__eq__`` always returns True) or any other object is refused, so what the host
compares is always a fresh builtin value it decoded itself.

A frame's JSON is parsed only once it is known to nest no deeper than `FRAME_DEPTH`, a bound
found without recursion (`_too_deep`): the parser recurses once a level, and a frame that the
other side wrote 100,000 deep would otherwise end in a RecursionError (a failure of whoever
reads it) instead of a `WireError` (a broken frame, which its reader blames on its writer).
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import struct
from array import array
from collections.abc import Callable
from itertools import accumulate
from typing import Any, NoReturn

MAX_FRAME = 64 << 20  # the ceiling of any frame; a channel's own limit is usually far lower
MAX_DEPTH = 200
FRAME_DEPTH = 3 * MAX_DEPTH + 10
"""The deepest a frame's JSON may nest: a value `MAX_DEPTH` deep, each level a dict (three
levels of JSON: ``{"$d": [[k, v]]}``), in a frame's own few."""
_HEADER = struct.Struct(">I")
_ERROR_CHARS = 1000  # a served program's error message, as the host keeps it


class WireError(Exception):
    """A frame or value that does not follow the protocol."""


class FrameTooLarge(WireError):
    """A frame whose header announces more than its channel's limit (refused unread)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"reply over {limit} bytes ({size} announced)")
        self.size = size
        self.limit = limit


def frame_bytes(payload: Any) -> bytes:
    """`payload` as one frame: a 4-byte length, then JSON."""
    data = json.dumps(payload, separators=(",", ":")).encode("utf-8")
    if len(data) > MAX_FRAME:
        raise WireError(f"frame of {len(data)} bytes is over the limit")
    return _HEADER.pack(len(data)) + data


def write_frame(fd: int, payload: Any) -> None:
    view = memoryview(frame_bytes(payload))
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exact(fd: int, n: int) -> bytes:
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError("peer closed the channel")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, limit: int = MAX_FRAME) -> Any:
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size))
    if size > limit:
        raise FrameTooLarge(size, limit)
    return loads(_read_exact(fd, size))


def loads(data: bytes) -> Any:
    """A frame's body as JSON; WireError when it is not UTF-8 JSON, or nests too deep."""
    if _too_deep(data):
        raise WireError(f"malformed frame: nested more than {FRAME_DEPTH} deep")
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # (RecursionError: only from a deep stack)
        raise WireError(f"malformed frame: {exc}") from None


_STRING = re.compile(rb'"[^"]*"?')  # once escapes are gone; to the end when unterminated
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))
_SQUARE = bytes.maketrans(b"{}", b"[]")
_STEP = bytes.maketrans(b"[]", b"\x01\xff")  # +1, -1 as signed bytes


def _too_deep(data: bytes) -> bool:
    """Whether JSON text `data` nests deeper than `FRAME_DEPTH`, found without parsing it.

    Its depth is the most brackets outside its strings are ever open at once: exact for
    JSON, and for other text at least as deep as a parser goes before it fails. Linear time
    whatever the text (no regular expression here can backtrack), and for most frames two
    counts: a frame that opens no more than the limit cannot nest deeper.
    """
    if data.count(b"[") + data.count(b"{") <= FRAME_DEPTH:
        return False
    # Escapes (an escaped backslash, then an escaped quote), then strings, then all but the
    # brackets, of either kind, go: left is the frame's nesting alone.
    text = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    nest = _STRING.sub(b"", text).translate(_SQUARE, _NOT_BRACKETS)
    # One pass over the innermost pairs leaves little of a wide value (a list of pairs), and
    # takes at most one level off the depth.
    inner = nest.replace(b"[]", b"")
    depth = 1 if len(inner) < len(nest) else 0
    if inner.count(b"[") + depth <= FRAME_DEPTH:
        return False
    return depth + max(accumulate(array("b", inner.translate(_STEP)))) > FRAME_DEPTH


def encode(value: Any, depth: int = 0) -> Any:
    """`value` as JSON-ready tagged data; WireError for anything that is not plain data."""
    if depth > MAX_DEPTH:
        raise WireError(f"value nested more than {MAX_DEPTH} deep")
    kind = type(value)
    if value is None or kind is bool or kind is int or kind is str:
        return value
    if kind is float:
        if math.isfinite(value):
            return value
        return {"$f": repr(value)}
    if kind is list:
        return [encode(v, depth + 1) for v in value]
    if kind is tuple:
        return {"$t": [encode(v, depth + 1) for v in value]}
    if kind is dict:
        return {"$d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if kind is set or kind is frozenset:
        return {"$s" if kind is set else "$fs": [encode(v, depth + 1) for v in value]}
    if kind is bytes:
        return {"$b": base64.b64encode(value).decode("ascii")}
    if kind is complex:
        return {"$c": [encode(value.real), encode(value.imag)]}
    raise WireError(f"a value of type {kind.__name__} is not plain data")


_TAGS: dict[str, Callable[[Any, int], Any]] = {
    "$f": lambda v, d: float(v) if v in ("nan", "inf", "-inf") else _bad(v),
    "$t": lambda v, d: tuple(_decode(x, d + 1) for x in _list(v)),
    "$d": lambda v, d: {
        _decode(k, d + 1): _decode(x, d + 1) for k, x in (_pair(p) for p in _list(v))
    },
    "$s": lambda v, d: {_decode(x, d + 1) for x in _list(v)},
    "$fs": lambda v, d: frozenset(_decode(x, d + 1) for x in _list(v)),
    "$b": lambda v, d: (
        base64.b64decode(v.encode("ascii"), validate=True) if type(v) is str else _bad(v)
    ),
    "$c": lambda v, d: complex(*(_decode(x, d + 1) for x in _list(v))),
}


def _bad(value: Any) -> NoReturn:
    raise WireError(f"malformed tagged value {value!r}")


def _list(value: Any) -> list[Any]:
    return value if type(value) is list else _bad(value)


def _pair(value: Any) -> list[Any]:
    return value if type(value) is list and len(value) == 2 else _bad(value)


def decode(value: Any) -> Any:
    """Inverse of `encode`, building only builtin values; WireError for anything else.

    It recurses, as deep as the value (`MAX_DEPTH` at most, a few frames a level); a reader
    on a deep stack of its own that runs out there gets a WireError too, never a
    RecursionError of its own.
    """
    try:
        return _decode(value, 0)
    except RecursionError:
        raise WireError(f"value nested too deep to decode here (at most {MAX_DEPTH})") from None


def _decode(value: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise WireError(f"value nested more than {MAX_DEPTH} deep")
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if kind is list:
        return [_decode(v, depth + 1) for v in value]
    if kind is dict and len(value) == 1:
        ((tag, inner),) = value.items()
        handler = _TAGS.get(tag)
        if handler is not None:
            try:
                return handler(inner, depth)
            except (TypeError, ValueError) as exc:
                raise WireError(f"malformed {tag} value: {exc}") from None
    raise WireError(f"malformed value {value!r}")


def loaded_reply(frame: Any) -> dict[str, Any]:
    """A serving program's "loaded" frame, rebuilt from its names only.

    The frame comes from the program's own process (its code can write anything on that
    pipe), so nothing else in it is kept: a program cannot make its frame say more than
    "these are my functions". WireError when it is not that frame.
    """
    if type(frame) is dict and set(frame) == {"loaded"} and type(frame["loaded"]) is list:
        names = frame["loaded"]
        if all(type(name) is str for name in names):
            return {"loaded": list(names)}
    raise WireError(f"a malformed load reply {_sample(frame)}")


def call_reply(frame: Any) -> dict[str, Any]:
    """A serving program's reply to one call, rebuilt: ``{"ok": value}`` or ``{"error": str}``.

    As with `loaded_reply`, the program wrote it: any other key (a host error, "dead", a
    result of the worker's) is dropped by construction, and anything else is a WireError,
    which its reader makes the program's own failure.
    """
    if type(frame) is dict and len(frame) == 1:
        if "ok" in frame:
            return {"ok": frame["ok"]}
        if type(frame.get("error")) is str:
            return {"error": frame["error"][:_ERROR_CHARS]}
    raise WireError(f"a malformed call reply {_sample(frame)}")


def _sample(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class Channel:
    """Frames from a file descriptor, read with a deadline (select + an internal buffer).

    A frame whose header announces more than `limit` bytes is refused (`FrameTooLarge`)
    before its body is read or stored: the buffer never holds more than a frame under the
    limit plus one read. The reader sets `limit` to what its peer may honestly send.
    """

    def __init__(self, fd: int, limit: int = MAX_FRAME) -> None:
        self.fd = fd
        self.limit = limit
        self.buf = bytearray()
        self.closed = False

    def feed(self) -> bool:
        """Read what is available now; False once the peer has closed."""
        chunk = os.read(self.fd, 1 << 20)
        if not chunk:
            self.closed = True
            return False
        self.absorb(chunk)
        return True

    def absorb(self, data: bytes) -> None:
        """Add bytes read elsewhere (a socket's data with its descriptors)."""
        self.buf += data
        self._check_header()

    def _check_header(self) -> None:
        if len(self.buf) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self.buf)
            if size > self.limit:
                raise FrameTooLarge(size, self.limit)

    def pop(self) -> Any:
        """The next complete frame, or None."""
        if len(self.buf) < _HEADER.size:
            return None
        self._check_header()
        (size,) = _HEADER.unpack_from(self.buf)
        end = _HEADER.size + size
        if len(self.buf) < end:
            return None
        data = bytes(self.buf[_HEADER.size : end])
        del self.buf[:end]
        return loads(data)
