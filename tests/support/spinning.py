"""Users' checks that never return on some inputs, for the hostile-backend tests.

They live in a module of their own that imports only referee: a check that runs in a worker
process is imported there by name, and a worker is started again after each spin is killed;
imported from a test module that imports verl, each start paid verl's import (about 9 s).
"""

from __future__ import annotations

import itertools
import re
import time

import referee
from referee import Rollout

__all__ = ["c_spins", "loops"]


@referee.reward(deadline=0.5)
def loops(rollout: Rollout) -> float:
    """A user's check that never returns on the completion "loop"."""
    while rollout.completion_text == "loop":
        pass
    return 1.0


@referee.reward(deadline=0.5)
def c_spins(rollout: Rollout) -> float:
    """A user's check that spins in C, holding the interpreter lock, on four inputs."""
    text = rollout.completion_text
    if text.endswith("!"):
        re.match(r"^(a+)+$", text)
    elif text == "9**9**9**9":
        eval(text, {"__builtins__": None}, {})  # a countdown reward's check, as recipes write it
    elif text == "sleep":
        time.sleep(60)
    elif text == "spin in C":
        sum(itertools.repeat(1, 10**13))
    return 1.0
