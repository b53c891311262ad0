"""Marker lines: how a job's script tells the host what happened, in the output it shares
with the code it runs.

A script run in a container (`Container.exec`) prints its account as lines of the form
``\\n<nonce> <kind> <words>`` (`SAY`, the shell function that prints one) and the host reads
them back from the output (`Marks`). The nonce is new for each job, and every marker a reader
trusts is printed before any of the policy's code runs: a reader takes the *first* line of
each kind (or the lines before a kind that starts the untrusted part), so whatever the
policy's code prints later, forged markers included, cannot change the account.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["SAY", "Mark", "Marks"]

SAY = r"""say() { printf '\n%s %s\n' "$mark" "$*"; }
"""
"""The shell function that prints one marker line, ``say kind words...``: the script sets
``mark`` to the job's nonce first."""


@dataclass(frozen=True, slots=True)
class Mark:
    """One marker line in an output.

    Attributes:
        at: Where it starts (its leading newline).
        after: Where what follows it starts (past its newline, or the end it was read to).
        words: What follows its kind on the line, the space after the kind not included.
        complete: Its newline was found (before the end it was read to).
    """

    at: int
    after: int
    words: bytes
    complete: bool

    def numbers(self) -> list[int] | None:
        """Its words as whole numbers; None where there are none or one is not a number."""
        try:
            numbers = [int(word) for word in self.words.split()]
        except ValueError:
            return None
        return numbers or None


class Marks:
    """The marker lines (`SAY`) of one job's output, by its nonce."""

    def __init__(self, output: bytes, nonce: str) -> None:
        self.output = output
        self.mark = f"\n{nonce} ".encode()

    def first(self, kind: str, *, start: int = 0, end: int | None = None) -> Mark | None:
        """The first line of `kind` that starts in ``output[start:end]`` (its words read to
        `end` at most); None where there is none."""
        output = self.output
        limit = len(output) if end is None else end
        head = self.mark + kind.encode()
        at = start
        while True:
            at = output.find(head, at, limit)
            if at < 0:
                return None
            past = at + len(head)
            if past >= limit or output[past : past + 1] == b"\n":
                line = b"" if past >= limit else b"\n"
                return Mark(at, min(past + 1, limit), b"", bool(line))
            if output[past : past + 1] == b" ":
                words, newline, _ = output[past + 1 : limit].partition(b"\n")
                after = past + 1 + len(words) + len(newline)
                return Mark(at, after, words, bool(newline))
            at += 1  # a longer kind (`setup_error` for `setup`): not this one

    def before(self, kind: str) -> bytes:
        """The output before the first line of `kind` (all of it where there is none)."""
        found = self.first(kind)
        return self.output if found is None else self.output[: found.at]

    def every(self, end: int | None = None) -> Iterator[tuple[str, str]]:
        """Every marker line in ``output[:end]``, in order: its kind and its words, as text."""
        head = self.output[:end]
        if self.mark not in head:
            return
        for chunk in head.split(self.mark)[1:]:
            line = chunk.partition(b"\n")[0]
            kind, _, words = line.decode("utf-8", "replace").partition(" ")
            yield kind, words
