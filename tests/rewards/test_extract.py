"""`fenced_blocks`: the fences code and patch rewards read, found as the regex finds them, in
linear time."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from referee.rewards._extract import fenced_blocks
from referee.rewards._sandboxed import extract_code
from referee.rewards.patch._diff import extract_diff
from tests.support.hostile import guarded

# What code and patch rewards matched fences with before: quadratic on unclosed fences.
FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)
PIECES = st.sampled_from(["`", "``", "```", "\n", " ", "\t", "py", "diff", "x", "-", "é", "a b"])


@settings(max_examples=3000, deadline=None)
@given(st.lists(PIECES, max_size=40).map("".join))
def test_fenced_blocks_finds_what_the_regex_finds(text: str) -> None:
    assert fenced_blocks(text) == [(m.end(), m[1], m[2]) for m in FENCE.finditer(text)]


def test_unclosed_fences_are_read_in_one_pass() -> None:
    # 600 kB of backticks: the regex rescanned the rest from each, about 200 s here, past the
    # hang guard; one pass now.
    hostile = "`" * 600_000
    assert guarded(lambda: fenced_blocks(hostile)) == []
    assert guarded(lambda: extract_diff(hostile)) is None
    assert guarded(lambda: extract_code(hostile)) == hostile
    assert extract_code("```python\nprint(1)\n```\n" + hostile) == "print(1)\n"
