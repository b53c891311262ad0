"""SWE-style instances per minute: `patch_tests` in the instance's image (the warm pool) against
one ``docker run`` per rollout.

One small SWE-bench-style instance (tests/support/images.py: a git work tree of one commit at
``/testbed``; ``ops.sh`` subtracts where it should add; a shell runner prints Go test lines,
graded with swebench's ``parse_log_gotest``), with an eval script in SWE-bench 5's shape (the
test file checked out at the base commit, the test patch applied, the markers around the
runner). Half the rollouts carry the fix (1.0), half a wrong change (0.0); every value is
checked.

- **warm pool**: `patch_tests` scoring the rollouts, sequentially (``workers: 1``, `--warm`
  containers started ahead) and two at a time: each rollout in a fresh container leased from the
  pool, one exec (the files in its environment; save the protected files, apply, compare, run
  the eval script), the log graded by swebench.
- **docker run**: the same script, with the same files, in one ``containers.run`` per rollout
  (the docker SDK, same image, same hardening, sequential; the files in the environment, as
  for the pool), its output graded the same way; the container removed after.

Both sides in the same run, alternating, best of `--repeat`. Prints instances per minute and
the ratios.

Usage: python benchmarks/bench_patch_images.py [--rollouts 12] [--repeat 2] [--warm 2] [--dockerd]
(DOCKER_HOST, the default socket, or --dockerd to start one with the safe flags)
"""

from __future__ import annotations

import argparse
import secrets
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_harbor import engine_url, pooled, rollouts  # noqa: E402
from referee.rewards.patch import images  # noqa: E402
from referee.rewards.patch.patch_tests import PROTECTED, PatchTests  # noqa: E402
from referee.verifiers.containers import CAPS, ContainerEngine  # noqa: E402
from tests.support.images import swebench_instance_image  # noqa: E402

OPS = "add() { echo $(($1 - $2)); }\n"
RUNNER = """\
#!/bin/bash
. ./ops.sh
status=0
check() { r=PASS; [ "$2" = "$3" ] || { r=FAIL; status=1; }; echo "--- $r: $1 (0.00s)"; }
check TestZero "$(add 0 0)" 0
exit $status
"""
TEST_PATCH = """\
diff --git a/run_tests.sh b/run_tests.sh
--- a/run_tests.sh
+++ b/run_tests.sh
@@ -4,3 +4,4 @@
 check() { r=PASS; [ "$2" = "$3" ] || { r=FAIL; status=1; }; echo "--- $r: $1 (0.00s)"; }
 check TestZero "$(add 0 0)" 0
+check TestAdd "$(add 2 3)" 5
 exit $status
"""
FIX = """\
diff --git a/ops.sh b/ops.sh
--- a/ops.sh
+++ b/ops.sh
@@ -1 +1 @@
-add() { echo $(($1 - $2)); }
+add() { echo $(($1 + $2)); }
"""
WRONG = FIX.replace("$1 + $2", "$1 * $2")


def instance(image: str, base: str) -> dict[str, Any]:
    script = "\n".join(
        [
            "#!/bin/bash",
            "set -uxo pipefail",
            "cd /testbed",
            f"git checkout {base} run_tests.sh",
            "git apply -v - <<'EOF_114329324912'",
            TEST_PATCH.rstrip("\n"),
            "EOF_114329324912",
            ": '>>>>> Start Test Output'",
            "./run_tests.sh",
            ": '>>>>> End Test Output'",
            f"git checkout {base} run_tests.sh",
            "",
        ]
    )
    return {
        "instance_id": "acme__ops-1",
        "repo": "acme/ops",
        "image": image,
        "log_parser": "parse_log_gotest",
        "eval_type": "pass_and_fail",
        "test_patch": TEST_PATCH,
        "eval_script": script,
        "FAIL_TO_PASS": ["TestAdd"],
        "PASS_TO_PASS": ["TestZero"],
    }


def docker_runs(engine: ContainerEngine, reward: PatchTests, row: dict[str, Any], n: int) -> float:
    """The same script and files, one ``containers.run`` each, graded the same way."""
    task = images.image_task(row)
    find = images.find_expression(list(PROTECTED), task.test_files)
    started = time.perf_counter()
    for i in range(n):
        nonce, stage = secrets.token_hex(16), f"/tmp/referee-{secrets.token_hex(8)}"
        diff = FIX if i % 2 == 0 else WRONG
        staged = images.stage_files(diff.encode(), task.eval_script, stage)
        assert staged.by_exec
        script = images.job_script(find, staged)
        output = engine.client.containers.run(
            task.image,
            ["bash", "-c", script, "patch_tests", "/testbed", stage, nonce, "restore"],
            environment={
                **staged.env,
                "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            },
            working_dir="/testbed",
            user="0",
            network_mode="none",
            cap_drop=["ALL"],
            cap_add=list(CAPS),
            security_opt=["no-new-privileges"],
            mem_limit=4 << 30,
            pids_limit=1024,
            stdout=True,
            stderr=True,
            remove=True,
        )
        run = images._account(output, nonce, timed_out=False, truncated=False)
        score = images.score_image_run(reward, run, task)
        assert score.value == (1.0 if i % 2 == 0 else 0.0), score
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rollouts", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--warm", type=int, default=2, help="containers kept warm per image")
    parser.add_argument("--dockerd", action="store_true", help="start a dockerd of our own")
    args = parser.parse_args()
    with engine_url(args.dockerd) as url:
        run(url, args.rollouts, args.repeat, args.warm)


def run(url: str | None, n: int, repeat: int, warm: int) -> None:
    engine = ContainerEngine(url, build_network="none")
    root = Path(tempfile.mkdtemp(prefix="referee-bench-patch-images-"))
    files = {"ops.sh": OPS, "run_tests.sh": RUNNER, "nonce.txt": secrets.token_hex(8)}
    started = time.perf_counter()
    image, base = swebench_instance_image(engine, root, "ops-bench", files)
    first = time.perf_counter() - started
    started = time.perf_counter()
    swebench_instance_image(engine, root, "ops-bench", files)
    second = time.perf_counter() - started
    print(f"instance image: first build {first:.2f}s, again (cached) {second * 1000:.1f}ms")

    row = instance(image, base)
    batch, want = rollouts(n, row, FIX, WRONG)
    sandbox = {"backend": "docker", "base_url": engine.url}
    sequential = PatchTests(timeout=60, sandbox={**sandbox, "workers": 1}, warm=warm)
    parallel = PatchTests(timeout=60, sandbox={**sandbox, "workers": 2}, warm=max(warm, 2))
    pooled(sequential, batch[:2], want[:2])  # the pools start, and their first containers
    pooled(parallel, batch[:2], want[:2])
    best: dict[str, float] = {}
    for _ in range(repeat):
        for name, measure in (
            ("docker run", lambda: docker_runs(engine, sequential, row, n)),
            ("warm pool", lambda: pooled(sequential, batch, want)),
            ("warm pool x2", lambda: pooled(parallel, batch, want)),
        ):
            best[name] = min(best.get(name, float("inf")), measure())
    for name, seconds in best.items():
        print(
            f"{name:>13}: {n / seconds * 60:7.1f} instances/min ({seconds / n * 1000:.0f}ms each)"
        )
    ratio = best["docker run"] / best["warm pool"]
    print(f"ratio, warm pool (sequential) / docker run: {ratio:.2f}x")
    ratio = best["docker run"] / best["warm pool x2"]
    print(f"ratio, warm pool (2 at once) / docker run: {ratio:.2f}x")


if __name__ == "__main__":
    main()
