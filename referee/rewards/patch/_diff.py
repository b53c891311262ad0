"""Unified diffs in completions: finding one, and reading the file names its headers give.

`extract_diff` takes the diff a completion proposes; `diff_paths` reads the names its file
headers give (``diff --git``, ``---``/``+++``, ``rename``/``copy`` lines), skipping hunk bodies
by their line counts, so a removed line that happens to start with ``--- `` is content, not a
header; `unsafe_path` says whether one of them leaves the repository.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from referee.rewards._extract import fenced_blocks

__all__ = [
    "diff_paths",
    "extract_diff",
    "looks_like_diff",
    "strip_prefix",
    "unsafe_name",
    "unsafe_path",
]

_DIFF_LANGS = frozenset({"diff", "patch", "udiff"})
_HEADER = re.compile(r"^(?:diff --git |--- |Index: )", re.MULTILINE)
_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_NAMED = ("--- ", "+++ ", "rename from ", "rename to ", "copy from ", "copy to ")
_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92, '"': 34}


def looks_like_diff(text: str) -> bool:
    """Whether `text` holds a file header of a unified diff (``diff --git`` or ``---`` then
    ``+++``)."""
    if "diff --git " in text:
        return True
    start = text.find("--- ")
    return start >= 0 and "\n+++ " in text[start:]


def _from_header(text: str) -> str:
    """`text` from its first diff header line on (prose before a diff is dropped)."""
    found = _HEADER.search(text)
    return text[found.start() :] if found else text


def extract_diff(text: str) -> str | None:
    """The diff a completion proposes, ending in a newline; None when it holds none.

    In order: the last block fenced as ``diff`` or ``patch`` (or ``udiff``), or tagged
    ``<patch>``/``<diff>`` (SWE-bench's prompt format); else the last fenced block that holds
    a diff; else the text itself from its first diff header. Prose before the first header
    of the chosen block is dropped.
    """
    blocks = fenced_blocks(text)
    tagged = [(end, body) for end, lang, body in blocks if lang.lower() in _DIFF_LANGS]
    tagged += _tagged(text)
    if tagged:
        chosen = max(tagged, key=lambda block: block[0])[1]  # the one that ends last
    else:
        fenced = [body for _, _, body in blocks if looks_like_diff(body)]
        if fenced:
            chosen = fenced[-1]
        elif looks_like_diff(text):
            chosen = text
        else:
            return None
    diff = _from_header(chosen)
    if not diff.strip():
        return None
    return diff if diff.endswith("\n") else diff + "\n"


def _tagged(text: str) -> list[tuple[int, str]]:
    """(end, body) of every ``<patch>...</patch>`` and ``<diff>...</diff>`` block.

    Scanned with `str.find` rather than a lazy regex, which would rescan the rest of the text
    from every unclosed opening tag (quadratic in hostile text).
    """
    blocks: list[tuple[int, str]] = []
    for tag in ("patch", "diff"):
        opening, closing = f"<{tag}>", f"</{tag}>"
        at = text.find(opening)
        while at >= 0:
            end = text.find(closing, at + len(opening))
            if end < 0:
                break  # no later opening can close either
            blocks.append((end + len(closing), text[at + len(opening) : end]))
            at = text.find(opening, end + len(closing))
    return blocks


def _unquote(name: str) -> str:
    """A file name as git writes it: C-quoted (``"a/t\\303\\251st.py"``) when it holds
    unusual characters."""
    if len(name) < 2 or not (name.startswith('"') and name.endswith('"')):
        return name
    out = bytearray()
    body, i = name[1:-1], 0
    while i < len(body):
        char = body[i]
        if char == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in "01234567" and re.fullmatch(r"[0-7]{3}", body[i + 1 : i + 4]):
                out.append(int(body[i + 1 : i + 4], 8) & 0xFF)
                i += 4
                continue
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
                continue
        out += char.encode("utf-8", "surrogatepass")
        i += 1
    return out.decode("utf-8", "replace")


def _git_names(rest: str) -> list[str]:
    """The two names of a ``diff --git a/X b/Y`` line (X and Y as written, prefixes kept)."""
    if rest.startswith('"'):
        end = rest.find('" ', 1)
        if end > 0:
            return [_unquote(rest[: end + 1]), _unquote(rest[end + 2 :])]
    # Unquoted names may hold spaces: prefer the split whose halves name the same file (only
    # the middle one can), else the first " b/".
    mid = len(rest) // 2
    if len(rest) % 2 and rest[mid : mid + 3] == " b/" and rest[2:mid] == rest[mid + 3 :]:
        return [rest[:mid], rest[mid + 1 :]]
    at = rest.find(" b/")
    if at >= 0:
        return [rest[:at], rest[at + 1 :]]
    return rest.split()


def _header_names(line: str) -> list[str]:
    """The file names a header line gives (none for other lines)."""
    if line.startswith("diff --git "):
        return _git_names(line[len("diff --git ") :])
    for prefix in _NAMED:
        if line.startswith(prefix):
            name = line[len(prefix) :].split("\t")[0].rstrip("\r")
            return [_unquote(name)]
    return []


def diff_paths(diff: str) -> list[str]:
    """Every file name in the diff's headers, as written (with their ``a/``/``b/`` prefixes;
    ``/dev/null`` included), in order of appearance."""
    names: list[str] = []
    old = new = 0
    for line in diff.split("\n"):
        if old > 0 or new > 0:  # inside a hunk: its counts say where it ends
            if line.startswith(" ") or line in ("", "\r"):
                old, new = old - 1, new - 1
                continue
            if line.startswith("-"):
                old -= 1
                continue
            if line.startswith("+"):
                new -= 1
                continue
            if line.startswith("\\"):  # "\ No newline at end of file"
                continue
            old = new = 0  # a short hunk: this line is a header again
        hunk = _HUNK.match(line)
        if hunk:
            old = int(hunk.group(1)) if hunk.group(1) is not None else 1
            new = int(hunk.group(2)) if hunk.group(2) is not None else 1
            continue
        names += _header_names(line)
    return names


def strip_prefix(name: str) -> str | None:
    """A header name as the repository path it patches with ``-p1`` (``a/x.py`` -> ``x.py``);
    None for ``/dev/null``."""
    if name == "/dev/null":
        return None
    return name.split("/", 1)[1] if "/" in name else name


def unsafe_path(diff: str) -> str | None:
    """The first file name in the diff's headers that would reach outside the repository
    (a ``..`` component) or into its git metadata (a ``.git`` component); None if none does.
    """
    return unsafe_name(diff_paths(diff))


def unsafe_name(names: Iterable[str]) -> str | None:
    """`unsafe_path` of names already read from a diff (`diff_paths`)."""
    for name in names:
        parts = name.replace("\\", "/").split("/")
        if ".." in parts or ".git" in parts:
            return name
    return None
