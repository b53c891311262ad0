"""`harbor_task`: the reward type (see `referee.rewards.harbor`)."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from referee.errors import MissingDependency, NotApplicable, RewardError, SandboxError
from referee.registry import register
from referee.reward import Need
from referee.rewards._sandboxed import ThreadedReward
from referee.rewards.harbor.files import (
    REWARD_JSON,
    REWARD_TXT,
    BadRewardFile,
    RewardFile,
    parse_reward_json,
    parse_reward_text,
)
from referee.rewards.harbor.job import (
    APPLY_SAID,
    APPLY_SECONDS,
    HEAD,
    NO_TOOL,
    SETUP,
    STAGE,
    TEST,
    setup_account,
    setup_text,
    staging,
    test_account,
)
from referee.rewards.harbor.task import HarborTaskSpec, read_task
from referee.rewards.patch._diff import extract_diff, unsafe_path
from referee.rollout import Rollout
from referee.scores import Score
from referee.trajectory import trajectory
from referee.verifiers.containers import Container, ContainerPool, job_pool

__all__ = ["HarborTask"]


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
        stage_dir = STAGE.format(nonce=nonce)
        staged = staging(stage_dir, task, diff)
        box.put(staged.upload)  # nothing, where the set-up writes them itself
        args = ["bash", "-c", "", "harbor", workdir, stage_dir, nonce]
        args += [str(self.max_reward_bytes), str(APPLY_SAID)]
        output_bytes = (2 << 20) + 2 * self.max_reward_bytes
        timeout = self.timeout or task.verifier_timeout
        # the tests run as root too (USER root, 0, root:root, 0:0): one exec
        together = user.partition(":")[0] in ("", "root", "0")
        script = HEAD + staged.prelude + SETUP + (TEST if together else "")
        run = box.exec(
            [*args[:2], script, *args[3:]],
            timeout=APPLY_SECONDS + (timeout if together else 0),
            workdir=workdir,
            env={**(task.verifier_env if together else {}), **staged.env},
            user="0",
            output_bytes=output_bytes,
            then=(f"\n{nonce} prepared ".encode(), timeout) if together else None,
        )
        setup, output = setup_account(run.output, nonce)
        if setup.get("setup") == NO_TOOL:
            return self._failed(
                "sandbox", task, "the image has neither git nor patch to apply the diff with"
            )
        if "prepared" not in setup:
            if run.timed_out:  # the tests had not started: their own deadline had not begun
                return self._failed(
                    "timeout",
                    task,
                    f"applying the diff and copying the tests in took over {APPLY_SECONDS:g}s",
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
                [*args[:2], HEAD + TEST, *args[3:]],
                timeout=timeout,
                workdir=workdir,
                env=task.verifier_env,
                user=user,
                output_bytes=output_bytes,
            )
            output = run.output
        if run.timed_out:
            return self._timed_out(task, timeout, applied)
        account = test_account(output, nonce, self.max_reward_bytes)
        try:
            if account is None:  # the image lacks wc, head or tail: read through the engine
                reward = self._read_reward(box)
            elif REWARD_JSON in account.files:
                reward = parse_reward_json(account.files[REWARD_JSON], self.reward_key)
            elif REWARD_TXT in account.files:
                reward = parse_reward_text(account.files[REWARD_TXT])
            else:
                reward = None
        except BadRewardFile as exc:
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

    def _read_reward(self, box: Container) -> RewardFile | None:
        data = box.read(REWARD_JSON, max_bytes=self.max_reward_bytes)
        if data is not None:
            return parse_reward_json(data, self.reward_key)
        data = box.read(REWARD_TXT, max_bytes=self.max_reward_bytes)
        if data is not None:
            return parse_reward_text(data)
        return None
