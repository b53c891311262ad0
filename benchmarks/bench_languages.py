"""io_tests per language against compiling and running the same programs with plain subprocesses.

For each compiled language, N right programs (the sum of two integers per line, each a distinct
source: a comment carries its index, as the attempts of a group differ), each with C cases,
are graded two ways in the same run, the sides alternating, with the same number of workers:

- referee: `io_tests` in the local sandbox (the build in a job of its own, every case a clean
  job on that build, compared outside), its build cache cleared before each side's run;
- plain: the same compilers (``/usr/bin``) and flags (Go with a fresh build cache, as every
  sandbox job has), then each case run with ``subprocess.run`` on the host, no isolation and
  no limits (what a hand-written reward does).

Prints rollouts/s of each and the sandbox's overhead as a ratio (referee / plain; 1.0 is
free), best of three. Where the time goes: the build dominates for C++, Rust and Java, the
JVM's start for each Java case.

Usage: python benchmarks/bench_languages.py [--rollouts 8] [--cases 3] [--workers 2]
[--languages c cpp go rust java typescript]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import referee
from referee.rewards import IoTests
from referee.rewards.code import languages
from referee.rollout import Rollout
from tests.rewards.test_languages import SUM

COMMENT = {"python": "#", "typescript": "//", "java": "//", "go": "//", "rust": "//"}


def sources(language: str, n: int) -> list[str]:
    mark = COMMENT.get(language, "//")
    return [f"{SUM[language]}\n{mark} attempt {i}\n" for i in range(n)]


def cases(n: int) -> list[tuple[str, str]]:
    return [(f"{i} {2 * i}\n{i + 7} 5\n", f"{3 * i}\n{i + 12}\n") for i in range(n)]


def plain_one(language: str, source: str, cases_: list[tuple[str, str]]) -> bool:
    """Build with the same compiler and flags on the host, run every case, compare."""
    chain = languages.COMPILED[language]
    with tempfile.TemporaryDirectory() as tmp:
        name, main = languages.java_class(source) if language == "java" else (chain.source, "")
        Path(tmp, name).write_text(source)
        env = {**os.environ, "PATH": "/usr/bin:/bin"}  # the compilers the sandbox has
        if language == "typescript":
            script = f"node -e {shlex.quote(languages._TRANSPILE)} > prog.js"
        else:
            flags = " ".join(shlex.quote(f) for f in chain.flags)
            script = chain.script.format(flags=flags, source=shlex.quote(name))
            script = script.replace("&& cat prog.jar", "").replace("&& cat prog", "")
            script = script.replace("/tmp/.go", f"{tmp}/.go")  # a fresh Go cache, as in a job
        subprocess.run(["sh", "-c", script], cwd=tmp, env=env, check=True, capture_output=True)
        if language == "typescript":
            argv = ["node", "prog.js"]
        elif language == "java":
            argv = ["java", "-Xmx1024m", *languages._JVM, "-cp", "prog.jar", main]
        else:
            argv = ["./prog"]
        ok = True
        for stdin, want in cases_:
            done = subprocess.run(argv, cwd=tmp, env=env, input=stdin.encode(), capture_output=True)
            ok &= done.returncode == 0 and done.stdout.decode().split() == want.split()
        return ok


def run_plain(
    language: str, progs: list[str], cases_: list[tuple[str, str]], workers: int
) -> float:
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(lambda s: plain_one(language, s, cases_), progs))
    elapsed = time.perf_counter() - start
    assert all(results), f"plain {language}: a right program failed"
    return len(progs) / elapsed


def run_referee(
    language: str, progs: list[str], cases_: list[tuple[str, str]], workers: int
) -> float:
    reward = IoTests(language=language, concurrency=workers)  # type: ignore[arg-type]
    ref = {"cases": [{"stdin": i, "stdout": o} for i, o in cases_]}
    rollouts = [
        Rollout(prompt="add", completion=f"```{language}\n{p}```", reference=ref) for p in progs
    ]
    languages.BUILDS.clear()
    start = time.perf_counter()
    scores = referee.score(reward, rollouts, concurrency=workers)
    elapsed = time.perf_counter() - start
    bad = [s.reason for s in scores if s.value != 1.0]
    assert not bad, f"referee {language}: {bad[:2]}"
    return len(progs) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rollouts", type=int, default=8)
    parser.add_argument("--cases", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--languages", nargs="+", default=sorted(SUM))
    args = parser.parse_args()
    cases_ = cases(args.cases)
    print(
        f"io_tests: {args.rollouts} right programs x {args.cases} cases per language, "
        f"{args.workers} workers, best of 3 (rollouts/s)"
    )
    print(f"{'language':<11} {'referee':>9} {'plain':>9} {'ratio':>7}")
    for language in args.languages:
        progs = sources(language, args.rollouts)
        run_referee(language, progs[:1], cases_, 1)  # warm: a worker, the toolchain probe
        ours, theirs = 0.0, 0.0
        for _ in range(3):
            ours = max(ours, run_referee(language, progs, cases_, args.workers))
            theirs = max(theirs, run_plain(language, progs, cases_, args.workers))
        print(f"{language:<11} {ours:>9.2f} {theirs:>9.2f} {ours / theirs:>6.2f}x")


if __name__ == "__main__":
    main()
