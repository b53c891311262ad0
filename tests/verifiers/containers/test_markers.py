"""Marker lines (`referee.verifiers.containers.markers`): what a job's script says with `SAY`
is what `Marks` reads back, and only the first line of a kind counts."""

from __future__ import annotations

import subprocess

from hypothesis import given, settings
from hypothesis import strategies as st

from referee.verifiers.containers import SAY, Mark, Marks

NONCE = "ab" * 16


def said(*lines: str) -> bytes:
    """What a script prints that runs `say` once per line (its words shell-split)."""
    script = f'mark="{NONCE}"\n{SAY}' + "".join(f"say {line}\n" for line in lines)
    return subprocess.run(["bash", "-c", script], capture_output=True, check=True).stdout


def test_what_say_prints_marks_reads() -> None:
    output = b"what git said\n" + said("setup 0", "prepared 0 0") + b"the tests' output\n"
    marks = Marks(output, NONCE)
    setup = marks.first("setup")
    assert setup is not None and setup.words == b"0" and setup.numbers() == [0]
    prepared = marks.first("prepared", start=setup.after)
    assert prepared is not None and prepared.numbers() == [0, 0] and prepared.complete
    assert output[prepared.after :] == b"the tests' output\n"
    assert marks.before("setup") == b"what git said\n"
    assert list(marks.every()) == [("setup", "0"), ("prepared", "0 0")]


def test_only_the_first_line_of_a_kind_counts() -> None:
    # What the policy's code prints after the real marker (a forged one) changes nothing.
    output = said("status 1") + b"tail\n" + said("status 0")
    found = Marks(output, NONCE).first("status")
    assert found is not None and found.numbers() == [1] and found.at == 0


def test_a_kind_is_a_whole_word() -> None:
    output = said("setup_error no git", "setup 3")
    marks = Marks(output, NONCE)
    found = marks.first("setup")
    assert found is not None and found.words == b"3"  # not `setup_error`'s line
    error = marks.first("setup_error")
    assert error is not None and error.words == b"no git"
    bare = Marks(said("tests") + b"log", NONCE).first("tests")
    assert bare == Mark(at=0, after=len(NONCE) + 8, words=b"", complete=True)


def test_an_end_bounds_the_search_and_the_line() -> None:
    output = said("reward.txt 2") + b"1\n" + said("status 0")
    marks = Marks(output, NONCE)
    status = marks.first("status")
    assert status is not None
    header = marks.first("reward.txt", end=status.at)
    assert header is not None and header.numbers() == [2]
    assert output[header.after : header.after + 2] == b"1\n"
    assert marks.first("status", end=status.at) is None
    cut = marks.first("reward.txt", end=header.at + len(NONCE) + 14)  # inside its words
    assert cut is not None and not cut.complete


def test_a_nonce_it_does_not_know_is_no_marker() -> None:
    output = said("setup 0").replace(NONCE.encode(), b"cd" * 16)
    assert Marks(output, NONCE).first("setup") is None
    assert list(Marks(output, NONCE).every()) == []


@settings(max_examples=40, deadline=None)
@given(
    st.from_regex(r"[a-z][a-z_.]{0,11}", fullmatch=True),
    st.lists(st.from_regex(r"[!-~]{1,12}", fullmatch=True), max_size=4),
)
def test_say_and_marks_agree(kind: str, words: list[str]) -> None:
    script = f'mark="{NONCE}"\n{SAY}say "$@"\n'
    out = subprocess.run(
        ["bash", "-c", script, "say", kind, *words], capture_output=True, check=True
    ).stdout
    found = Marks(b"noise" + out, NONCE).first(kind)
    assert found is not None and found.words.decode() == " ".join(words)
    assert found.after == len(out) + 5
