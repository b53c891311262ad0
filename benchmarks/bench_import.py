"""What ``import referee`` and ``referee --help`` cost, in fresh interpreters, after issue 45's
lazy types.

Each side runs in a fresh ``python`` (``-c`` or ``-m referee --help``), timed from the parent
wall clock, best of N, the sides alternating run by run:

1. ``import referee``, against the eager baseline: ``import referee, referee.rewards`` and every
   built-in type's module (`referee.registry.BUILTIN`), the spec loader and every name of
   `referee.rewards` (what ``import referee`` imported before this issue).
2. ``python -m referee --help``, against the same eager imports followed by the same command in
   the same interpreter.
3. For scale, not a ratio's side: the interpreter alone (``-c pass``), the first use of the core
   (``referee.Rollout``: pydantic), and a one-type spec loaded (``referee.load`` of a ``regex``
   spec: that type's module alone).

Before this issue (recorded, issue 45): ``import referee`` 1.3 s, ``referee --help`` 1.8 s.
Targets: ``import referee`` under 0.3 s.

Usage: python benchmarks/bench_import.py [--tries 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from referee.registry import BUILTIN  # noqa: E402

RECORDED = {"import referee": 1.3, "referee --help": 1.8}  # issue 45, before the lazy types

_MODULES = sorted({where.partition(":")[0] for where in BUILTIN.values()})
EAGER = (
    "import importlib, referee, referee.rewards, referee.spec\n"
    f"for _m in {_MODULES!r}: importlib.import_module(_m)\n"
    "for _n in referee.rewards.__all__: getattr(referee.rewards, _n)\n"
)
HELP = (
    "import runpy, sys\n"
    "sys.argv = ['referee', '--help']\n"
    "runpy.run_module('referee', run_name='__main__')\n"
)
HEAVY = (
    "pydantic",
    "jsonschema",
    "rich",
    "math_verify",
    "yaml",
    "referee.spec",
    "referee.rewards.",
)
REGEX = "import referee; referee.load({'type': 'regex', 'regex': 'a'})"


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}


def run(args: list[str]) -> float:
    """Seconds one fresh interpreter takes to run `args` (after ``python``), to its exit."""
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], env=_env(), check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def best(sides: dict[str, list[str]], tries: int) -> dict[str, float]:
    """Best of `tries` for each side, the sides taking turns."""
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(tries):
        for name, args in sides.items():
            times[name].append(run(args))
    return {name: min(ts) for name, ts in times.items()}


def check_lazy() -> None:
    """``import referee`` imports nothing heavy: else the figure would not mean what it says."""
    code = "import json, sys, referee; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], env=_env(), check=True,
                         capture_output=True, text=True).stdout  # fmt: skip
    heavy = [m for m in json.loads(out) if m.startswith(HEAVY)]
    assert not heavy, f"import referee imported {heavy}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=5)
    args = parser.parse_args()
    check_lazy()
    times = best(
        {
            "python": ["-c", "pass"],
            "import referee": ["-c", "import referee"],
            "import referee (eager)": ["-c", EAGER],
            "referee --help": ["-m", "referee", "--help"],
            "referee --help (eager)": ["-c", EAGER + HELP],
            "referee.Rollout": ["-c", "import referee; referee.Rollout"],
            "referee.load(regex)": ["-c", REGEX],
        },
        args.tries,
    )  # fmt: skip
    alone = times["python"]
    print(f"fresh interpreters, best of {args.tries}; the interpreter alone: {alone:.3f} s")
    print(f"{'':<16} {'lazy':>8} {'eager':>8} {'ratio':>7} {'recorded before':>16}")
    for name in ("import referee", "referee --help"):
        lazy, eager = times[name], times[f"{name} (eager)"]
        print(f"{name:<16} {lazy:>7.3f}s {eager:>7.3f}s {lazy / eager:>6.2f}x "
              f"{RECORDED[name]:>15.1f}s")  # fmt: skip
    print(f"first use of the core (referee.Rollout): {times['referee.Rollout']:.3f} s")
    print(f"a one-type spec loaded (regex): {times['referee.load(regex)']:.3f} s")


if __name__ == "__main__":
    main()
