"""patch_tests (local sandbox) against SWE-bench's pipeline run directly: same rollouts, same
verdicts, time per rollout.

Four tasks, each a snapshot of one generated library (20 modules, 100 tests) with a bug in
one module, and eight attempts at each (the fix bare and fenced, a wrong fix, one that breaks
a passing test, one that fixes only half, one that does not apply, one that applies only with
fuzz, one that also rewrites the failing test): 32 rollouts a run. Both sides grade every
rollout the same way: extract the diff, copy the snapshot, apply with SWE-bench's commands
(``git apply --verbose``, ``--reject``, ``patch --fuzz=5``), put the test files back, run
``python3 -m pytest -rA`` on the task's test files, and grade the log with SWE-bench's own
``get_logs_eval`` / ``get_eval_tests_report`` / ``get_resolution_status`` (the baseline) or
referee's reading of the same semantics. The baseline copies the snapshot into a temporary
folder and runs its commands as plain subprocesses of this process: no isolation, no limits,
no protection beyond the test files. referee runs each rollout as one sandbox job: the
snapshot travels as a tar over the worker's channel and is unpacked in the sandbox's tmpfs,
the protected entries are compared before and after the patch, and the worker is wiped
after the job. Same workers on both sides (threads for the baseline, sandbox workers for
referee), best of three runs, the sides alternating.

Target: referee at most 1.2x the baseline's time, and the same verdict on every rollout.

Usage: python benchmarks/bench_patch.py [--workers 2] [--repeat 3]
(needs: pip install --no-deps swebench==5.0.2 unidiff==1.0.1)
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

import referee
from referee.rewards import PatchTests
from referee.rewards.patch import APPLY_COMMANDS, PatchReference
from referee.rewards.patch._diff import extract_diff
from referee.rewards.patch._snapshot import snapshot_tar
from referee.verifiers.sandbox import Job, get_sandbox

MODULES, FUNCTIONS = 20, 5
PYTHON = "/usr/bin/python3"  # the sandbox's interpreter, so both sides run the same pytest
ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
}
GIT_ENV = {**ENV, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}


def swebench_grading() -> Any:
    """swebench.harness.grading without its package __init__ (which imports Modal)."""
    if importlib.util.find_spec("swebench") is None:
        raise SystemExit("needs swebench: pip install --no-deps swebench==5.0.2 unidiff==1.0.1")
    spec = importlib.util.find_spec("swebench.harness")
    assert spec is not None
    assert spec.submodule_search_locations is not None
    stub = types.ModuleType("swebench.harness")
    stub.__path__ = list(spec.submodule_search_locations)
    sys.modules.setdefault("swebench.harness", stub)
    from swebench.harness import grading

    return grading


# --- the tasks ---------------------------------------------------------------------------


def module_source(m: int, bug: bool) -> str:
    out = []
    for f in range(FUNCTIONS):
        op = f"a - b + {f}" if bug and f < 2 else f"a + b + {f}"  # f0 and f1: the bug
        out.append(f"def f{f}(a, b):\n    return {op}\n")
    return "\n\n".join(out)


def test_source(m: int) -> str:
    out = [f"from lib.m{m} import " + ", ".join(f"f{f}" for f in range(FUNCTIONS)) + "\n"]
    for f in range(FUNCTIONS):
        out.append(f"def test_f{f}():\n    assert f{f}(2, 3) == {5 + f}\n")
    return "\n\n".join(out)


def build_snapshot(root: Path, buggy: int) -> Path:
    (root / "lib").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "lib" / "__init__.py").write_text("")
    for m in range(MODULES):
        (root / "lib" / f"m{m}.py").write_text(module_source(m, m == buggy))
        (root / "tests" / f"test_m{m}.py").write_text(test_source(m))
    (root / "setup.cfg").write_text("[tool:pytest]\npython_files = test_*.py\n")
    return root


def make_diff(snapshot: Path, edits: dict[str, str]) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "w"
        shutil.copytree(snapshot, work)
        git = ["git", "-c", "user.name=b", "-c", "user.email=b@b"]
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base"]):
            subprocess.run([*git, *args], cwd=work, env=GIT_ENV, check=True)
        for name, text in edits.items():
            (work / name).write_text(text)
        subprocess.run([*git, "add", "-A"], cwd=work, env=GIT_ENV, check=True)
        done = subprocess.run(
            [*git, "diff", "--cached"], cwd=work, env=GIT_ENV, check=True, capture_output=True
        )
        return done.stdout.decode()


def attempts(snapshot: Path, t: int) -> list[tuple[str, str]]:
    name, test = f"lib/m{t}.py", f"tests/test_m{t}.py"
    buggy = module_source(t, True)
    fixed = module_source(t, False)
    right = make_diff(snapshot, {name: fixed})
    forged = test_source(t).replace("assert f0(2, 3)", "assert True or f0(2, 3)")
    return [
        ("right", right),
        ("right, fenced", f"Here is the fix:\n```diff\n{right}```\n"),
        ("wrong", make_diff(snapshot, {name: buggy.replace("a - b + 0", "a * b + 0")})),
        ("breaks f2", make_diff(snapshot, {name: fixed.replace("a + b + 2", "a - b + 2")})),
        ("half", make_diff(snapshot, {name: buggy.replace("a - b + 0", "a + b + 0")})),
        ("does not apply", right.replace("-    return a - b + 0", "-    return b - a + 0")),
        ("fuzz", right.replace(" def f2(a, b):", " def f2(x, y):")),
        ("fix and forge the test", make_diff(snapshot, {name: fixed, test: forged})),
    ]


# --- the baseline: SWE-bench's pipeline, run directly ---------------------------------------


def run_direct(grading: Any, snapshot: Path, completion: str, ref: PatchReference) -> str:
    """SWE-bench's apply chain and test run in a temporary copy; its resolution status."""
    from swebench.types import TestSpec

    diff = extract_diff(completion)
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        patch = Path(tmp) / "patch.diff"
        patch.write_text(diff or "")
        log_path = Path(tmp) / "test_output.txt"
        applied = False
        for attempt, argv in enumerate(APPLY_COMMANDS):
            if attempt or not repo.exists():
                shutil.rmtree(repo, ignore_errors=True)
                shutil.copytree(snapshot, repo, symlinks=True)
            done = subprocess.run([*argv, str(patch)], cwd=repo, env=GIT_ENV, capture_output=True)
            if done.returncode == 0:
                applied = True
                break
        if not applied:
            check = ["git", "apply", "--check", "--reverse", str(patch)]
            done = subprocess.run(check, cwd=repo, env=GIT_ENV, capture_output=True)
            applied = done.returncode == 0
        if not applied or diff is None:
            log_path.write_text(">>>>> Patch Apply Failed\n")
        else:
            for name in ref.test_files:  # the eval script's `git checkout <base> -- <tests>`
                shutil.copy2(snapshot / name, repo / name)
            argv = [PYTHON, "-m", "pytest", "-rA", "-p", "no:cacheprovider", *ref.test_args]
            done = subprocess.run(
                argv, cwd=repo, env={**ENV, "HOME": tmp}, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, timeout=300,
            )  # fmt: skip
            out = done.stdout.decode("utf-8", "replace")
            log_path.write_text(
                f">>>>> Start Test Output\n{out}\n>>>>> End Test Output\n"
                f">>>>> Test Exit Code: {done.returncode}\n"
            )
        spec = TestSpec(
            instance_id="bench", image="", eval_script_list=[], repo="bench/lib", version="0",
            FAIL_TO_PASS=list(ref.fail_to_pass), PASS_TO_PASS=list(ref.pass_to_pass),
            log_parser="parse_log_pytest", eval_type="pass_and_fail",
        )  # fmt: skip
        status_map, found = grading.get_logs_eval(spec, str(log_path))
        if not found:
            return "RESOLVED_NO"
        gold = {"FAIL_TO_PASS": list(ref.fail_to_pass), "PASS_TO_PASS": list(ref.pass_to_pass)}
        report = grading.get_eval_tests_report(status_map, gold)
        return str(grading.get_resolution_status(report))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3, help="best of N, sides alternating")
    parser.add_argument("--tasks", type=int, default=4)
    args = parser.parse_args()
    grading = swebench_grading()
    root = Path(tempfile.mkdtemp(prefix="referee-bench-patch-"))
    try:
        bench(grading, root, args.workers, args.repeat, args.tasks)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def bench(grading: Any, root: Path, workers: int, repeat: int, tasks: int) -> None:
    rollouts: list[referee.Rollout] = []
    labels: list[str] = []
    for t in range(tasks):
        snapshot = build_snapshot(root / f"task{t}", t)
        ids = [f"tests/test_m{t}.py::test_f{f}" for f in range(FUNCTIONS)]
        neighbour = (t + 1) % MODULES
        p2p = ids[2:] + [f"tests/test_m{neighbour}.py::test_f{f}" for f in range(FUNCTIONS)]
        reference = {"snapshot": str(snapshot), "FAIL_TO_PASS": ids[:2], "PASS_TO_PASS": p2p}
        for label, completion in attempts(snapshot, t):
            rollouts.append(
                referee.Rollout(completion=completion, reference=reference, group=str(t))
            )
            labels.append(label)
    refs = [PatchReference.parse(r.reference) for r in rollouts]
    options = {"workers": workers}
    reward = PatchTests(sandbox=options, timeout=120)
    sandbox = get_sandbox(options)
    print(
        f"patch_tests: {tasks} tasks x {len(rollouts) // tasks} attempts = {len(rollouts)} "
        f"rollouts, {workers} workers, sandbox isolation: {getattr(sandbox, 'mode', '?')}"
    )
    referee.score(reward, rollouts[: workers * 2], concurrency=workers)  # warm the pool

    def direct(i: int) -> str:
        return run_direct(grading, refs[i].snapshot, rollouts[i].completion_text, refs[i])

    t_base = t_ref = float("inf")
    base: list[str] = []
    scores: list[referee.Score] = []
    for _ in range(repeat):
        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            base = list(pool.map(direct, range(len(rollouts))))
        t_base = min(t_base, time.perf_counter() - start)
        start = time.perf_counter()
        scores = referee.score(reward, rollouts, concurrency=workers)
        t_ref = min(t_ref, time.perf_counter() - start)
    ours = [str(s.reason or "").split(":", 1)[0] for s in scores]
    ours = [o if o.startswith("RESOLVED_") else "RESOLVED_NO" for o in ours]
    same = sum(a == b for a, b in zip(base, ours, strict=True))
    n = len(rollouts)
    print(f"  SWE-bench pipeline, direct: {t_base:.2f}s ({t_base / n * 1e3:.0f} ms a rollout)")
    print(f"  referee patch_tests:        {t_ref:.2f}s ({t_ref / n * 1e3:.0f} ms a rollout)")
    print(f"  referee / direct: {t_ref / t_base:.2f}x (target <= 1.2x)")
    print(f"  same verdict: {same}/{n} (target {n}/{n})")
    for label, b, o, s in zip(labels, base, ours, scores, strict=True):
        if b != o or s.failure is not None:
            print(f"    differs on {label!r}: direct {b}, referee {o} ({s.reason}, {s.failure})")
    counts: dict[str, int] = {}
    for label, verdict in zip(labels, ours, strict=True):
        counts[f"{label}: {verdict}"] = counts.get(f"{label}: {verdict}", 0) + 1
    print("  verdicts: " + "; ".join(f"{k} x{v}" for k, v in sorted(counts.items())))
    where_time_goes(refs[0], sandbox)


def where_time_goes(ref: PatchReference, sandbox: Any) -> None:
    """The sandbox's own costs: packing the snapshot (once), an empty job, a job that carries
    the snapshot and unpacks it."""
    start = time.perf_counter()
    data = snapshot_tar(ref.snapshot)
    cached = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(20):
        sandbox.run(Job(source="pass"))
    empty = (time.perf_counter() - start) / 20
    unpack = "import tarfile\nwith tarfile.open('snapshot.tar') as t:\n    t.extractall('repo')\n"
    start = time.perf_counter()
    for _ in range(20):
        sandbox.run(Job(source=unpack, files={"snapshot.tar": data}))
    carried = (time.perf_counter() - start) / 20
    start = time.perf_counter()
    for _ in range(20):
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(ref.snapshot, Path(tmp) / "repo")
    copied = (time.perf_counter() - start) / 20
    print(
        f"  where the sandbox's time goes: the snapshot ({len(data) >> 10} KiB tar) checked "
        f"for changes and taken from the cache in {cached * 1e3:.1f} ms; an empty job "
        f"{empty * 1e3:.1f} ms; a job that receives and unpacks the snapshot "
        f"{carried * 1e3:.1f} ms (the baseline's copytree: {copied * 1e3:.1f} ms)"
    )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    main()
