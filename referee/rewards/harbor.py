"""`harbor_task`: grade an agent in its task's own environment, as Harbor grades it.

A Harbor task is a folder: ``instruction.md``, ``task.toml``, ``environment/Dockerfile`` (or
an image named by ``[environment] docker_image``) and ``tests/test.sh``, which writes the
reward to ``/logs/verifier/reward.txt`` (a number) or ``/logs/verifier/reward.json``
(``{"reward": value, other numeric keys: components}``). The rollout names its task and
carries the agent's change to the workspace as a unified diff; referee builds the task's
image once (cached by content, `referee.verifiers.containers`), applies the diff in a fresh
container at the task's working directory, copies the task's ``tests/`` to ``/tests``
*afterwards* (the agent cannot change them), runs the test script under the verifier's
timeout, and reads the reward file as Harbor does.

The task folder is the user's, trusted: its Dockerfile builds with the engine's network, its
``[verifier] env`` is passed in. The diff and everything the container writes are hostile:
the diff is capped and applied as root inside the container only (the agent had root there
too, under Harbor), stale reward files are removed before the tests run, and the reward file
is read capped and parsed strictly.
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from referee.errors import MissingDependency, NotApplicable, RewardError, SandboxError
from referee.registry import register
from referee.reward import Need
from referee.rewards._sandboxed import ThreadedReward
from referee.rewards.patch._diff import extract_diff, unsafe_path
from referee.rollout import Rollout
from referee.scores import Score
from referee.trajectory import trajectory
from referee.verifiers.containers import (
    SAY,
    Container,
    ContainerPool,
    Marks,
    Staging,
    job_pool,
    stage,
)

__all__ = ["HarborTask", "HarborTaskSpec", "read_task"]

TESTS_DIR = "/tests"
VERIFIER_DIR = "/logs/verifier"
REWARD_TXT = f"{VERIFIER_DIR}/reward.txt"
REWARD_JSON = f"{VERIFIER_DIR}/reward.json"
_STAGE = "/tmp/referee-{nonce}"  # inside the container: the diff and the tests, staged
_NO_TOOL = 97  # the set-up's status when the image has neither git nor patch
_APPLY_SECONDS = 120.0  # the time applying the diff may take, on top of the verifier's
_APPLY_SAID = 2000  # bytes of what git apply and patch said that come back (their last)
_ENV_VAR = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}")

# Run as root, in one exec with the tests where the verifier's user is the image's, after the
# staging prelude has written the diff and the tests to $stage: apply the diff at the working
# directory ($1) with git apply (atomic), else patch after a dry run, so a
# diff that does not apply leaves the workspace as it was; then throw away what the diff put
# in the verifier's folders and move the staged tests (a folder whose name the diff cannot
# know) to /tests. The marker line says how the diff went, before any of its code runs; the
# line that says the tests are in place says it again, since the engine can lose an exec's
# first output when its attach is late (moby/moby#27289, seen on a loaded machine).
# What git and patch say goes to a file, and only its last _APPLY_SAID bytes to the output:
# the diff is the policy's, and their messages about it (one a hunk, some 7 MiB for a 1 MiB
# diff) would otherwise push the markers past what the exec keeps.
_HEAD = 'stage="$2"; mark="$3"\n' + SAY
_SETUP = r"""
apply() {
  [ -f "$stage/agent.diff" ] || return 2
  tried=
  if command -v git >/dev/null 2>&1; then
    git apply "$stage/agent.diff" && return 0
    tried=1
  fi
  if command -v patch >/dev/null 2>&1; then
    if patch --batch --forward --dry-run -p1 -i "$stage/agent.diff" >/dev/null 2>&1; then
      patch --batch --forward -p1 -i "$stage/agent.diff" && return 0
    fi
    patch --batch --forward --dry-run -p1 -i "$stage/agent.diff"
    return 1
  fi
  [ -n "$tried" ] && return 1
  return 97
}
said="$stage/apply.log"
if ! cd "$1"; then code=96
elif ! : > "$said"; then code=96
else
  apply > "$said" 2>&1; code=$?
  tail -c "$5" "$said" 2>/dev/null
fi
say setup "$code"
[ "$code" = 97 ] || [ "$code" = 96 ] && exit 0
rm -rf /tests /logs/verifier && mkdir -p /logs/verifier /logs/agent \
  && chmod 777 /logs/verifier && mv "$stage/tests" /tests && chmod +x /tests/test.sh \
  && rm -rf "$stage" || { say prepared 1 "$code"; exit 0; }
say prepared 0 "$code"
"""
# Where the staged files cannot be written (a full disk, a read-only /tmp): no marker, so the
# set-up is a Failure saying this.
_STAGE_FAILED = 'echo "cannot write the diff and the tests to $stage"; exit 0'
# The tests, as Harbor runs them (their output to /logs/verifier/test-stdout.txt), then the
# reward files, each after a line naming it and its size, cut at $4 bytes; then the tests'
# exit status and their output's tail.
_TEST = r"""
cd "$1" || exit 96
/tests/test.sh > /logs/verifier/test-stdout.txt 2>&1
status=$?
for name in reward.json reward.txt; do
  file="/logs/verifier/$name"
  if [ -f "$file" ] && [ ! -L "$file" ]; then
    say "$name" "$(wc -c < "$file")"
    head -c "$4" "$file"
  fi
done
say status "$status"
tail -c 600 /logs/verifier/test-stdout.txt
"""


@dataclass(frozen=True)
class HarborTaskSpec:
    """A Harbor task as referee reads it (the fields of Harbor's ``TaskConfig`` it uses).

    Attributes:
        name: ``[task] name``, else the folder's name.
        path: The task folder.
        context: The build context (``environment/``), when it has a Dockerfile.
        docker_image: ``[environment] docker_image``: a prebuilt image (wins over the
            Dockerfile, as in Harbor).
        workdir: ``[environment] workdir``; None: the image's ``WORKDIR``.
        verifier_timeout: ``[verifier] timeout_sec`` (Harbor's default: 600).
        verifier_env: ``[verifier] env``, ``${VAR}`` and ``${VAR:-default}`` resolved here.
        verifier_user: ``[verifier] user``; None: the image's user.
        build_timeout: ``[environment] build_timeout_sec`` (default 600).
        memory_mb: ``[environment] memory_mb``, a container limit where set.
        cpus: ``[environment] cpus``, a container limit where set.
        test_script: The test script, ``tests/test.sh``.
    """

    name: str
    path: Path
    context: Path | None
    docker_image: str | None
    workdir: str | None
    verifier_timeout: float
    verifier_env: Mapping[str, str]
    verifier_user: str | None
    build_timeout: float
    memory_mb: int | None
    cpus: float | None
    test_script: Path


def _table(config: Mapping[str, Any], key: str, where: Path) -> Mapping[str, Any]:
    value = config.get(key, {})
    if not isinstance(value, Mapping):
        raise RewardError(f"{where}: [{key}] must be a table, got {type(value).__name__}")
    return value


def _number(table: Mapping[str, Any], key: str, default: float | None, where: str) -> Any:
    value = table.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise RewardError(f"{where}.{key} must be a positive number, got {value!r}")
    return value


def _resolve(value: str) -> str:
    return _ENV_VAR.sub(lambda m: str(os.environ.get(m.group(1), m.group(2) or "")), value)


def read_task(path: str | Path) -> HarborTaskSpec:
    """Read the Harbor task in folder `path`.

    Raises:
        NotApplicable: `path` is not a task folder (no ``task.toml``, or no test script).
        RewardError: ``task.toml`` does not parse, or a field has the wrong type.
    """
    root = Path(path)
    config_path = root / "task.toml"
    if not config_path.is_file():
        raise NotApplicable(f"{root} is not a Harbor task: it has no task.toml")
    try:
        config = tomllib.loads(config_path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise RewardError(f"{config_path}: {exc}") from None
    task = _table(config, "task", config_path)
    env = _table(config, "environment", config_path)
    verifier = _table(config, "verifier", config_path)
    where = f"{config_path}: "
    name = task.get("name") or root.resolve().name
    image = env.get("docker_image")
    workdir = env.get("workdir")
    for key, value in (("environment.docker_image", image), ("environment.workdir", workdir)):
        if value is not None and not isinstance(value, str):
            raise RewardError(f"{where}{key} must be a string, got {value!r}")
    if workdir is not None and not workdir.startswith("/"):
        raise RewardError(f"{where}environment.workdir must be an absolute path: {workdir!r}")
    raw_env = verifier.get("env", {})
    if not isinstance(raw_env, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw_env.items()
    ):
        raise RewardError(f"{where}verifier.env must map names to strings, got {raw_env!r}")
    user = verifier.get("user")
    context = root / "environment"
    has_dockerfile = (context / "Dockerfile").is_file()
    if image is None and not has_dockerfile:
        raise NotApplicable(
            f"{root}: neither environment/Dockerfile nor [environment] docker_image in task.toml"
        )
    script = root / "tests" / "test.sh"
    if not script.is_file():
        raise NotApplicable(f"{root}: no tests/test.sh")
    return HarborTaskSpec(
        name=str(name),
        path=root,
        context=context if has_dockerfile else None,
        docker_image=image,
        workdir=workdir,
        verifier_timeout=float(_number(verifier, "timeout_sec", 600.0, where + "verifier")),
        verifier_env={k: _resolve(v) for k, v in raw_env.items()},
        verifier_user=None if user is None else str(user),
        build_timeout=float(_number(env, "build_timeout_sec", 600.0, where + "environment")),
        memory_mb=_number(env, "memory_mb", None, where + "environment"),
        cpus=_number(env, "cpus", None, where + "environment"),
        test_script=script,
    )


@dataclass(frozen=True)
class _Reward:
    value: float
    components: dict[str, float]
    source: str


class _BadReward(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def parse_reward_json(data: bytes, reward_key: str = "reward") -> _Reward:
    """``reward.json`` as Harbor's verifier reads it: JSON whose values are all finite
    numbers (``true``/``false`` count, as they do in Python); then `reward_key`'s value is
    the reward and the other keys are components.

    Where referee differs (documented): Harbor takes a file without a ``reward`` key as
    metrics with no reward; a reward needs one value, so that is a Failure naming the keys
    and `reward_key`. More than 64 keys is a Failure (a cap on hostile files)."""
    if not data:
        raise _BadReward("error", f"{REWARD_JSON} is empty")
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _BadReward("error", f"{REWARD_JSON} is not JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise _BadReward("error", f"{REWARD_JSON} must be an object, got {type(parsed).__name__}")
    if len(parsed) > 64:
        raise _BadReward("error", f"{REWARD_JSON} has {len(parsed)} keys, over 64")
    values: dict[str, float] = {}
    for key, value in parsed.items():
        if not isinstance(value, int | float):
            raise _BadReward(
                "invalid_value", f"{REWARD_JSON}: {key[:80]!r} is not a number: {value!r:.80}"
            )
        number = float(value)
        if not math.isfinite(number):
            raise _BadReward("invalid_value", f"{REWARD_JSON}: {key[:80]!r} is {value!r}")
        values[key] = number
    if reward_key not in values:
        raise _BadReward(
            "error",
            f"{REWARD_JSON} has no {reward_key[:80]!r} key (its keys: "
            f"{', '.join(k[:40] for k in list(values)[:10])}); set the reward's reward_key to "
            "the metric that is the reward",
        )
    value = values.pop(reward_key)
    return _Reward(value, {k[:80]: v for k, v in values.items()}, REWARD_JSON)


def parse_reward_text(data: bytes) -> _Reward:
    """``reward.txt`` as Harbor's verifier reads it: Python's ``float`` of the text (blanks
    around it allowed), finite; an empty file is an error."""
    if not data:
        raise _BadReward("error", f"{REWARD_TXT} is empty")
    try:
        value = float(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        shown = data[:80].decode("utf-8", "replace")
        raise _BadReward("invalid_value", f"{REWARD_TXT} is not a number: {shown!r}") from None
    if not math.isfinite(value):
        raise _BadReward("invalid_value", f"{REWARD_TXT} is not finite: {value!r}")
    return _Reward(value, {}, REWARD_TXT)


@register("harbor_task")
@dataclass(kw_only=True)
class HarborTask(ThreadedReward):
    """The reward a Harbor task's own tests give the agent's workspace change, run in the
    task's own image.

    ``rollout.reference`` names the task: ``{"task_dir": path}``, or ``{"task": name}`` (or
    the bare name) under `tasks_dir`. The completion (for a trajectory, its final answer)
    carries the agent's change as a unified diff, bare, fenced as ``diff`` or in ``<patch>``
    tags. The diff is applied in a fresh container of the task's image at its working
    directory (``[environment] workdir``, else the image's ``WORKDIR``) with ``git apply``,
    else ``patch``; the task's ``tests/`` are copied to ``/tests`` afterwards, and
    ``/tests/test.sh`` runs from ``bash`` (as Harbor runs it: made executable, its output to
    ``/logs/verifier/test-stdout.txt``) under ``[verifier] timeout_sec``. The value is
    ``/logs/verifier/reward.json``'s ``reward`` (its other numeric keys are components),
    else ``/logs/verifier/reward.txt``'s number.

    No diff, or a diff that does not apply (or names a path outside the workspace): the
    unchanged workspace is graded, as Harbor would, and the reason says so. A missing or
    malformed reward file, a verifier timeout, an image that does not build, an engine that
    does not answer: a Failure naming what failed, never a value.

    Attributes:
        tasks_dir: The folder the tasks named by ``task`` lie in; with it, a reference may
            not name a folder elsewhere. None: references give ``task_dir`` paths (a power
            only trusted references may have).
        docker_host: The Docker Engine's address; default ``DOCKER_HOST``, else the local
            socket.
        timeout: Seconds the test script may run; None: the task's ``[verifier]
            timeout_sec``.
        memory_mb: Each container's memory limit (a task's ``memory_mb`` wins).
        pids: Each container's process limit.
        runtime: A container runtime, e.g. ``runsc`` (gVisor); it must be installed.
        warm: Containers kept started per task image, ahead of need.
        concurrency: Rollouts graded at once (each in its own container).
        build_network: The network a Dockerfile's ``RUN`` steps get (``none``, ``host``);
            None: the engine's default.
        max_diff_bytes: The longest diff applied; a longer one is not (the unchanged
            workspace is graded).
        max_reward_bytes: The largest reward file read; a larger one is a Failure.
        reward_key: The key of ``reward.json`` that is the reward (Harbor's is ``reward``;
            a multi-metric file names its own). A file without it is a Failure.

    Example:
        ```yaml
        type: harbor_task
        tasks_dir: harbor/tasks
        warm: 2
        concurrency: 8
        memory_mb: 4096
        ```

    Scores:
        ````yaml
        needs: [docker]
        files:
          harbor/tasks/calc-add/instruction.md: |
            calc.add subtracts; make it add.
          harbor/tasks/calc-add/task.toml: |
            version = "1.0"
            [verifier]
            timeout_sec = 60
          harbor/tasks/calc-add/environment/Dockerfile: |
            FROM referee-example-base:1
            WORKDIR /app
            COPY calc.py /app/calc.py
          harbor/tasks/calc-add/environment/calc.py: |
            def add(a, b):
                return a - b
          harbor/tasks/calc-add/tests/test.sh: |
            #!/bin/bash
            if python3 -c 'import calc; assert calc.add(2, 3) == 5'; then r=1; else r=0; fi
            echo $r > /logs/verifier/reward.txt
        rollouts:
          - prompt: calc.add subtracts; make it add.
            completion: |
              ```diff
              --- a/calc.py
              +++ b/calc.py
              @@ -1,2 +1,2 @@
               def add(a, b):
              -    return a - b
              +    return a + b
              ```
            reference: {task: calc-add}
            value: 1.0
          - prompt: calc.add subtracts; make it add.
            completion: I looked at calc.py; it seems fine to me.
            reference: {task: calc-add}
            value: 0.0
        ````
    """

    tasks_dir: str | None = None
    docker_host: str | None = None
    timeout: float | None = None
    memory_mb: int = 4096
    pids: int = 1024
    runtime: str | None = None
    warm: int = 1
    concurrency: int = 8
    build_network: str | None = None
    max_diff_bytes: int = 1 << 20
    max_reward_bytes: int = 64 << 10
    reward_key: str = "reward"
    name: str = "harbor_task"

    def __post_init__(self) -> None:
        if self.timeout is not None and not self.timeout > 0:
            raise ValueError(f"timeout must be positive, got {self.timeout!r}")
        for key in ("memory_mb", "pids", "concurrency", "max_diff_bytes", "max_reward_bytes"):
            if getattr(self, key) < 1:
                raise ValueError(f"{key} must be at least 1, got {getattr(self, key)!r}")
        if self.warm < 0:
            raise ValueError(f"warm must be 0 or more, got {self.warm!r}")

    def needs(self) -> frozenset[Need]:
        """The task the rollout was run on."""
        return frozenset({"reference"})

    def reference_powers(self) -> tuple[str, ...]:
        """Without `tasks_dir`, a reference names any folder on the host as its task, whose
        Dockerfile is built and whose tests run (in a container)."""
        if self.tasks_dir is None:
            return ("builds and runs the task folder each reference names, anywhere on the host",)
        return ()

    def default_deadline(self) -> float | None:
        """A backstop behind the verifier's timeout and a first build."""
        return self.backstop((self.timeout or 600.0) + 600.0)

    # -- grading ------------------------------------------------------------------------------

    def task_of(self, rollout: Rollout) -> HarborTaskSpec:
        """The task the rollout's reference names.

        Raises:
            NotApplicable: The reference names no task, or one outside `tasks_dir`.
        """
        ref = rollout.reference
        if isinstance(ref, str):
            ref = {"task": ref} if self.tasks_dir is not None else {"task_dir": ref}
        if not isinstance(ref, Mapping):
            raise NotApplicable(
                'harbor_task needs a reference {"task_dir": path} or {"task": name} (with '
                f"tasks_dir), got {type(ref).__name__}"
            )
        if self.tasks_dir is not None:
            task = ref.get("task")
            if not isinstance(task, str) or not task or "/" in task or task in (".", ".."):
                raise NotApplicable(
                    f"harbor_task: the reference must name a task folder in {self.tasks_dir} "
                    f'as {{"task": name}} (one path component), got {ref.get("task")!r}'
                )
            return read_task(Path(self.tasks_dir) / task)
        task_dir = ref.get("task_dir")
        if not isinstance(task_dir, str) or not task_dir:
            raise NotApplicable(
                'harbor_task needs {"task_dir": path} in the reference (or a tasks_dir option '
                f'and {{"task": name}}), got keys {sorted(map(str, ref))[:10]}'
            )
        return read_task(task_dir)

    def diff_of(self, rollout: Rollout) -> tuple[bytes | None, str]:
        """The diff to apply, or None with why not (then the workspace is graded unchanged)."""
        completion = rollout.completion
        text = completion if isinstance(completion, str) else trajectory(rollout).final_answer
        diff = extract_diff(text or "")
        if diff is None:
            return None, "no diff in the completion"
        data = diff.encode("utf-8", "surrogateescape")
        if len(data) > self.max_diff_bytes:
            return None, f"the diff is {len(data)} bytes, over max_diff_bytes {self.max_diff_bytes}"
        outside = unsafe_path(diff)
        if outside is not None:
            return None, f"the diff names a path outside the workspace: {outside[:200]!r}"
        return data, ""

    def pool(self, task: HarborTaskSpec) -> ContainerPool:
        """This process's container pool for the options (and the task's limits)."""
        return job_pool(
            self.docker_host,
            concurrency=self.concurrency,
            warm=self.warm,
            memory_mb=task.memory_mb or self.memory_mb,
            pids=self.pids,
            cpus=task.cpus,
            runtime=self.runtime,
            build_network=self.build_network,
        )

    def grade(self, rollout: Rollout) -> Score:
        """Score one rollout, blocking."""
        try:
            task = self.task_of(rollout)
        except RewardError as exc:
            return Score.failed(exc.failure_type, str(exc), self.name)  # type: ignore[arg-type]
        diff, why_not = self.diff_of(rollout)
        try:
            pool = self.pool(task)
            engine = pool.engine
            if task.docker_image is not None:
                image = engine.image(name=task.name, tag=task.docker_image)
            else:
                image = engine.image(
                    name=task.name, context=task.context, build_timeout=task.build_timeout
                )
            workdir = task.workdir or engine.workdir(image)
            # as Harbor: the tests run as [verifier] user, else as the image's USER
            user = task.verifier_user if task.verifier_user is not None else engine.user(image)
            with pool.lease(image) as box:
                return self._run(box, task, workdir, user, diff, why_not)
        except (SandboxError, MissingDependency) as exc:
            return Score.failed("sandbox", f"{task.name}: {exc}", self.name)

    def _run(
        self,
        box: Container,
        task: HarborTaskSpec,
        workdir: str,
        user: str,
        diff: bytes | None,
        why_not: str,
    ) -> Score:
        nonce = secrets.token_hex(16)
        stage_dir = _STAGE.format(nonce=nonce)
        staged = _staging(stage_dir, task, diff)
        box.put(staged.upload)  # nothing, where the set-up writes them itself
        args = ["bash", "-c", "", "harbor", workdir, stage_dir, nonce]
        args += [str(self.max_reward_bytes), str(_APPLY_SAID)]
        output_bytes = (2 << 20) + 2 * self.max_reward_bytes
        timeout = self.timeout or task.verifier_timeout
        # the tests run as root too (USER root, 0, root:root, 0:0): one exec
        together = user.partition(":")[0] in ("", "root", "0")
        script = _HEAD + staged.prelude + _SETUP + (_TEST if together else "")
        run = box.exec(
            [*args[:2], script, *args[3:]],
            timeout=_APPLY_SECONDS + (timeout if together else 0),
            workdir=workdir,
            env={**(task.verifier_env if together else {}), **staged.env},
            user="0",
            output_bytes=output_bytes,
            then=(f"\n{nonce} prepared ".encode(), timeout) if together else None,
        )
        setup, output = _setup_account(run.output, nonce)
        if setup.get("setup") == _NO_TOOL:
            return self._failed(
                "sandbox", task, "the image has neither git nor patch to apply the diff with"
            )
        if "prepared" not in setup:
            if run.timed_out:  # the tests had not started: their own deadline had not begun
                return self._failed(
                    "timeout",
                    task,
                    f"applying the diff and copying the tests in took over {_APPLY_SECONDS:g}s",
                )
            return self._failed(
                "sandbox", task, f"cannot set up the tests: {run.text(300).strip()}"
            )  # a working directory that is not there, no bash, a full disk
        if setup["prepared"] != 0:
            return self._failed("sandbox", task, f"cannot copy the tests in: {run.text(300)}")
        applied = diff is not None and setup.get("setup") == 0
        notes: list[str] = []
        if diff is not None and not applied:
            lines = [line.strip() for line in setup_text(run.output, nonce).splitlines()]
            why_not = f"the diff does not apply ({' | '.join(x for x in lines if x)[-300:]})"
        if not applied:
            notes.append(f"{why_not}: graded the unchanged workspace")
        if not together:  # as Harbor: the tests run as the verifier's user
            run = box.exec(
                [*args[:2], _HEAD + _TEST, *args[3:]],
                timeout=timeout,
                workdir=workdir,
                env=task.verifier_env,
                user=user,
                output_bytes=output_bytes,
            )
            output = run.output
        if run.timed_out:
            return self._timed_out(task, timeout, applied)
        account = _test_account(output, nonce, self.max_reward_bytes)
        try:
            if account is None:  # the image lacks wc, head or tail: read through the engine
                reward = self._read_reward(box)
            elif REWARD_JSON in account.files:
                reward = parse_reward_json(account.files[REWARD_JSON], self.reward_key)
            elif REWARD_TXT in account.files:
                reward = parse_reward_text(account.files[REWARD_TXT])
            else:
                reward = None
        except _BadReward as exc:
            return Score.failed(exc.kind, f"{task.name}: {exc}", self.name)  # type: ignore[arg-type]
        except SandboxError as exc:
            return self._failed("error", task, f"the reward file: {exc}")
        if reward is None:
            tail = (account.tail if account else output).decode("utf-8", "replace")[-400:]
            tail = tail.strip().replace("\n", " | ")
            status = f"; exit status {account.status}" if account else ""
            said = (
                f"tests/test.sh wrote no reward ({REWARD_TXT} or {REWARD_JSON}){status}; "
                f"output: {tail or '(none)'}"
            )
            if applied:  # the tests ran the policy's code, which stopped them short
                return Score.policy_fault("crash", f"{task.name}: {said}")
            return self._failed("error", task, said)
        notes.insert(0, f"reward {reward.value:g} from {reward.source}")
        return Score(
            value=reward.value,
            components={**reward.components, "diff_applied": 1.0 if applied else 0.0},
            reason="; ".join(notes),
        )

    def _failed(self, kind: str, task: HarborTaskSpec, message: str) -> Score:
        return Score.failed(kind, f"{task.name}: {message}", self.name)  # type: ignore[arg-type]

    def _timed_out(self, task: HarborTaskSpec, timeout: float, applied: bool) -> Score:
        """Past the verifier's timeout: the policy's verdict where its diff changed what the
        tests run (its code hung them), the task's Failure where they ran the workspace as
        the task ships it."""
        said = (
            f"tests/test.sh ran past the verifier timeout of {timeout:g}s (the container was "
            "killed)"
        )
        if applied:
            return Score.policy_fault("timeout", f"{task.name}: {said}")
        return Score.failed("timeout", f"{task.name}: {said}", self.name, blame="data")

    def _read_reward(self, box: Container) -> _Reward | None:
        data = box.read(REWARD_JSON, max_bytes=self.max_reward_bytes)
        if data is not None:
            return parse_reward_json(data, self.reward_key)
        data = box.read(REWARD_TXT, max_bytes=self.max_reward_bytes)
        if data is not None:
            return parse_reward_text(data)
        return None


def _staging(stage_dir: str, task: HarborTaskSpec, diff: bytes | None) -> Staging:
    """The task's tests and the diff, to be staged at `stage_dir`: written by the set-up
    itself where they are small text, else copied in first."""
    files: dict[str, bytes | str | Path] = {f"{stage_dir}/tests": task.test_script.parent}
    if diff is not None:
        files[f"{stage_dir}/agent.diff"] = diff
    return stage(files, on_error=_STAGE_FAILED)


def _setup_account(output: bytes, nonce: str) -> tuple[dict[str, int], bytes]:
    """The set-up's marker lines (``setup``: how the diff went, ``prepared``: the tests were
    copied in, with the diff's code again) and the output after them (the tests'). Only the
    first of each counts: what the tests print comes after, and cannot change them."""
    marks = Marks(output, nonce)
    events: dict[str, int] = {}
    rest = 0
    setup = marks.first("setup")
    if setup is not None:  # else lost with the exec's first output: the prepared line repeats it
        rest = setup.after
        numbers = setup.numbers()
        if numbers is None:
            return events, output[rest:]
        events["setup"] = numbers[0]
    prepared = marks.first("prepared", start=rest)
    if prepared is None:
        return events, output[rest:]
    rest = prepared.after
    numbers = prepared.numbers()
    if numbers is not None:
        events["prepared"] = numbers[0]
        if len(numbers) > 1:
            events.setdefault("setup", numbers[1])
    return events, output[rest:]


def setup_text(output: bytes, nonce: str) -> str:
    """What applying the diff printed (before the set-up's first marker)."""
    return Marks(output, nonce).before("setup").decode("utf-8", "replace")[-600:]


@dataclass(frozen=True)
class _TestAccount:
    files: dict[str, bytes]
    status: int | None
    tail: bytes


def _test_account(output: bytes, nonce: str, max_bytes: int) -> _TestAccount | None:
    """The reward files and exit status the test step printed after its marker lines; None
    when it printed no status line (the image lacks the tools it uses).

    Raises:
        _BadReward: A reward file is larger than `max_bytes`.
    """
    marks = Marks(output, nonce)
    # the first status line: the test output's tail printed after it can hold forged ones
    status_line = marks.first("status")
    if status_line is None:
        return None
    files: dict[str, bytes] = {}
    for path in (REWARD_JSON, REWARD_TXT):
        header = marks.first(path.rsplit("/", 1)[1], end=status_line.at)
        if header is None:
            continue
        if not header.complete or not header.words.strip().isdigit():
            raise _BadReward("error", f"{path}: its size could not be read")
        size = int(header.words.strip())
        if size > max_bytes:
            raise _BadReward("error", f"{path} is {size} bytes, over max_reward_bytes {max_bytes}")
        files[path] = output[header.after : header.after + size]
    numbers = status_line.numbers()
    status = numbers[0] if numbers is not None and len(numbers) == 1 else None
    return _TestAccount(files, status, output[status_line.after :])
