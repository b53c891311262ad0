"""Which tests' calls can be planned (and so pipelined), and which must run live."""

from __future__ import annotations

import ast
import textwrap

import pytest

from referee.rewards.code._plan import plan_calls


def plan(test: str, entry: str = "f") -> object:
    return plan_calls(ast.parse(textwrap.dedent(test)), entry)


@pytest.mark.parametrize(
    ("test", "expected"),
    [
        # straight-line asserts with literal arguments: the calls, in order
        ("def check(c):\n    assert c(1) == 2\n    assert c([1, 2], k='x') == 3\n",
         [([1], {}), ([[1, 2]], {"k": "x"})]),
        ("def check(c):\n    assert abs(c(2.5) - 1.0) < 1e-6\n", [([2.5], {})]),  # a safe builtin
        ("METADATA = {}\n\ndef check(candidate):\n    '''doc'''\n    import math\n"
         "    assert candidate(-1) == 1\n", [([-1], {})]),
        ("assert f(1) == 1\nassert f(2) == 4\n", [([1], {}), ([2], {})]),  # MBPP: by name
        ("def check(c):\n    assert c(c(1)) == 1\n", None),  # an argument that is itself a call
    ],
)  # fmt: skip
def test_plannable(test: str, expected: object) -> None:
    assert plan(test) == expected


@pytest.mark.parametrize(
    "test",
    [
        "def check(c):\n    for i in range(3):\n        assert c(i) == i\n",  # a loop
        "def check(c):\n    if True:\n        assert c(1) == 1\n",  # a branch
        "def check(c):\n    assert c(1) == 1 or c(2) == 2\n",  # short-circuit
        "def check(c):\n    assert c(1) if True else c(2)\n",  # conditional expression
        "def check(c):\n    assert 0 < 1 < c(1)\n",  # a later link of a chained comparison
        "def check(c):\n    assert all(c(i) for i in [1, 2])\n",  # a comprehension
        "def check(c):\n    x = 3\n    assert c(x) == 3\n",  # a variable argument
        "def check(c):\n    assert c(1) == helper(1)\n",  # possibly another program function
        "def check(c):\n    assert c(*[1])\n",  # starred arguments
        "def check(c):\n    assert c(1), c(2)\n",  # the message runs only on failure
        "def check(c):\n    assert True\n",  # no call at all: nothing to plan
        "x = setup()\ndef check(c):\n    assert c(1)\n",  # the module does more than define
    ],
)
def test_unplannable(test: str) -> None:
    assert plan(test) is None
