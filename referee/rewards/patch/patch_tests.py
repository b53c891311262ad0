"""`patch_tests`: does a patch make a repository's tests pass? SWE-bench's question, as a reward.

The completion proposes a unified diff (`referee.rewards.patch._diff.extract_diff`); the reference
names a repository snapshot and the tests that decide (`PatchReference`). Each rollout gets a
fresh copy of the snapshot in the sandbox, where the patch is applied as SWE-bench's harness
applies it (``git apply --verbose``, then ``git apply --verbose --reject``, then ``patch
--batch --forward --fuzz=5 -p1 -i``, each from a fresh copy; a patch that reverses cleanly
was applied already) and the tests run; the verdict is read here, outside the sandbox, from
the test runner's log with SWE-bench's semantics (`referee.verifiers.testlog`).

What a patch may not touch: the tests and what configures their runner. Every entry that
matches `PROTECTED` (or the reward's ``protected``), every file the test ids name, the
reference's ``test_files`` and the files its ``test_patch`` touches, are compared before and
after the patch, before any code of the repository runs; with ``protected_edits: restore``
(the default) what the patch added there is removed and what it changed or deleted is put
back, so the tests that run are the reference's; with ``reject`` such a patch scores 0.

Why restore by default: SWE-bench's harness (5.0.2) restores too, and only that: its eval
script checks the test files out at the base commit and applies the test patch over what the
model wrote, and never refuses a patch for touching them; conftest.py, plugins and pytest's
configuration it does not guard at all. Restoring grades the patch's code as SWE-bench grades
it (a fix that also edits ``setup.cfg`` still resolves), with the runner's paths as the
snapshot has them: test files and folders, ``conftest.py``, pytest's configuration files
(pytest.ini, tox.ini, setup.cfg, pyproject.toml, ...), interpreter start-up hooks
(``sitecustomize.py``, ``usercustomize.py``, ``*.pth``) and installed-package metadata
(``*.dist-info``, ``*.egg-info``, eggs), whose entry points are how pytest finds plugins.

Past the restore, pytest runs with plugin autoload off (``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``,
for a reference's own ``test_command`` too) and SWE-bench's options (``--no-header -rA
--tb=no -p no:cacheprovider``); the default command loads by name the ``pytest11`` plugins
installed outside the repository, so a plugin the patch brings is never loaded even where the
protected paths are narrowed. What no harness can stop is code the tests import: the patched
modules run in the test process and could rewrite its report from there, as under SWE-bench.

A patch the sandbox cannot apply because its tools cannot start (``git`` or ``patch`` missing,
no file descriptors left) is ``Failure("sandbox")``, not 0: it says nothing of the patch.

A SWE-bench instance row (with its ``eval_script``, and no snapshot) runs in the instance's own
image instead, on a Docker Engine, with the same guarantees (`referee.rewards.patch.images`).
"""

from __future__ import annotations

import contextlib
import json
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from referee.registry import register
from referee.reward import Need
from referee.rewards._sandboxed import SandboxedReward, SandboxFailure
from referee.rewards.patch._diff import extract_diff, unsafe_path
from referee.rewards.patch._snapshot import snapshot_tar
from referee.rewards.patch.reference import PatchReference
from referee.rollout import Rollout
from referee.scores import Score
from referee.trajectory import trajectory
from referee.verifiers.sandbox import Job, Limits, RunResult, SandboxError
from referee.verifiers.testlog import (
    APPLY_PATCH_FAIL,
    END_TEST_OUTPUT,
    START_TEST_OUTPUT,
    TEST_EXIT_CODE,
    TESTS_ERROR,
    TESTS_TIMEOUT,
    TestsReport,
    grade_log,
)

__all__ = ["APPLY_COMMANDS", "PROTECTED", "PatchRun", "PatchTests"]

PatchScoring = Literal["resolved", "fraction"]
"""``resolved``: 1.0 when SWE-bench would call the task resolved, else 0. ``fraction``: the
share of ``FAIL_TO_PASS`` tests that pass, when every ``PASS_TO_PASS`` test still passes
(else 0)."""

ProtectedEdits = Literal["restore", "reject"]
"""What a patch that changes protected files gets: ``restore``: the files are put back before
the tests run. ``reject``: 0, and the tests do not run."""

PROTECTED = (
    "conftest.py", "test_*.py", "*_test.py", "tests/",
    "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "tox.ini", "setup.cfg",
    "pyproject.toml", "sitecustomize.py", "usercustomize.py", "*.pth",
    "*.dist-info/", "*.egg-info/", "*.egg/", "*.egg", "*.egg-link",
    "__pycache__/", "*.pyc", "*.pyo",
)  # fmt: skip
"""The default protected paths, at any depth: test files and ``tests`` folders (not ``test``:
Django's test framework lives in ``django/test/``), pytest's configuration files (whole
files: a fix needs no packaging change to pass its tests), interpreter start-up hooks,
installed-package metadata (its entry points are how pytest finds plugins), and compiled
bytecode (a ``.pyc`` beside a restored test would replace it). A name is matched against
each file's name, a name ending in ``/`` against every folder on its path, a name
with a ``/`` inside against its whole path (``fnmatch`` patterns)."""

APPLY_COMMANDS = (
    ("git", "apply", "--verbose"),
    ("git", "apply", "--verbose", "--reject"),
    ("patch", "--batch", "--forward", "--fuzz=5", "-p1", "-i"),
)
"""How a patch is applied, in order, each from a fresh copy: SWE-bench's harness's commands
(5.0.2), less ``git apply --3way``, which needs the history a snapshot does not carry."""

Outcome = Literal[
    "no_diff", "too_large", "unsafe_path", "not_applied", "protected", "test_patch", "timeout",
    "error", "tested",
]  # fmt: skip

_DRIVER = (Path(__file__).with_name("_driver.py")).read_text()
_MARGIN = 10.0  # seconds the sandbox gives the driver past its own deadline, to report


@dataclass(frozen=True, slots=True)
class PatchRun:
    """What became of one patch: how far it got, and the log its tests left.

    Attributes:
        outcome: ``tested`` when the tests ran (then `log` is their log); otherwise why not.
        log: The run in SWE-bench's log format (``>>>>> Start Test Output`` ...); a log
            without a run is invalid to SWE-bench's grading too.
        note: What happened, for a person (the apply output when it failed, the error).
        command: The command that applied the patch.
        edits: Protected entries the patch changed, ``(kind, path)`` with kind ``added``,
            ``modified`` or ``deleted``.
    """

    outcome: Outcome
    log: str = ""
    note: str = ""
    command: str | None = None
    edits: tuple[tuple[str, str], ...] = ()


def _patch_bytes(diff: str) -> bytes:
    try:
        return diff.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that no byte stands for
        return diff.encode("utf-8", "replace")


@register("patch_tests")
@dataclass(kw_only=True)
class PatchTests(SandboxedReward):
    """Whether a patch makes a repository's tests pass, graded as SWE-bench grades it.

    ``rollout.reference`` is ``{"snapshot": path, "FAIL_TO_PASS": [ids], "PASS_TO_PASS":
    [ids]}``, optionally with ``"test_command"``, ``"test_files"`` and ``"test_patch"``
    (`PatchReference`). The completion holds a unified diff, bare, fenced as ``diff`` or in
    ``<patch>`` tags; for a trajectory, its final answer does. A patch that does not apply,
    or a completion without one, scores 0 with the reason.

    Each rollout gets a fresh copy of the snapshot in the sandbox, where the patch is applied
    as SWE-bench's harness applies it (``git apply``, then ``git apply --reject``, then
    ``patch --fuzz=5``) and the tests run, with pytest's plugin autoload off; the verdict is
    read here, outside the sandbox, from the test runner's log with SWE-bench's semantics.
    The tests and what configures their runner are protected: a patch may not change them
    (see `protected_edits`). A patch the sandbox cannot apply because its tools cannot start
    (``git`` or ``patch`` missing) is ``Failure("sandbox")``, not 0.

    Attributes:
        scoring: ``resolved`` (1.0 when every ``FAIL_TO_PASS`` test passes and every
            ``PASS_TO_PASS`` test still passes, else 0) or ``fraction`` (the share of
            ``FAIL_TO_PASS`` passing, 0 unless every ``PASS_TO_PASS`` test still passes).
        protected_edits: ``restore`` the protected files a patch changed before the tests run
            (what it added there is removed, what it changed or deleted is put back, as
            SWE-bench's harness does), or ``reject`` such a patch (0).
        protected: Protected paths, ``fnmatch`` patterns at any depth: a name is matched
            against each file's name, one ending in ``/`` against every folder on its path,
            one with a ``/`` inside against the whole path. The default (`PROTECTED`): test
            files and ``tests/`` folders, ``conftest.py``, pytest's configuration files,
            interpreter start-up hooks, installed-package metadata and bytecode. The files
            the reference's tests name, its ``test_files`` and those its ``test_patch``
            touches are protected whatever this says.
        timeout: Seconds for applying the patch and running the tests.
        memory_mb: Address-space limit of each process, in MiB.
        max_patch_bytes: The longest patch read, in bytes; a longer one scores 0 unread.
        snapshot_root: The folder every reference's snapshot must lie in: a relative path
            starts there; a path with ``..`` or one that resolves outside it (links followed)
            is not applicable. None (the default): a reference may name any path on the host
            (a relative one from the working directory), a power only a trusted reference
            may have (`reference_powers`).
        image: Run each rollout in its task's own image (`referee.rewards.patch.images`): a
            template filled from the reference, a SWE-bench instance row (its string columns,
            ``{swebench_image}``: swebench's published name, ``{instance_key}``: the id as that
            name spells it, ``__`` as ``_1776_``). None (the default): a row without a
            ``snapshot`` that carries ``eval_script`` (or ``image``) runs in its ``image``
            column's image, else swebench's published name; other rows use their snapshot.
        workdir: Where the repository lies in the image; None: the image's ``WORKDIR``
            (``/testbed`` where it sets none).
        warm: Containers kept started per image, ahead of need (image mode).
        per_image: Rollouts at once per image (image mode); None: as many as in total (the
            docker sandbox's ``workers``, else `concurrency`).
        pytest_plugins: Modules installed in the image that pytest loads as plugins
            (``PYTEST_PLUGINS``) in image mode, where plugin autoload is off.

    Example:
        ```yaml
        type: patch_tests
        scoring: resolved
        timeout: 900
        snapshot_root: snapshots
        sandbox: {backend: local, workers: 8}
        ```

        In production, under Docker with gVisor:
        ``sandbox: {backend: docker, runtime: runsc, workers: 8}``. SWE-bench instances in
        their own images (rows with ``eval_script``):

        ```yaml
        type: patch_tests
        timeout: 1800
        sandbox: {backend: docker, workers: 8}
        warm: 1
        per_image: 2
        ```

    Scores:
        ````yaml
        needs: [sandbox]
        files:
          snapshots/calc/calc/__init__.py: |
            from calc.ops import add, mul
          snapshots/calc/calc/ops.py: |
            def add(a, b):
                return a - b


            def mul(a, b):
                return a * b
          snapshots/calc/tests/test_ops.py: |
            from calc import add, mul


            def test_add():
                assert add(2, 3) == 5


            def test_mul():
                assert mul(2, 3) == 6
        rollouts:
          - prompt: "Fix the issue: add(2, 3) returns -1."
            completion: |
              The bug is in `add`:
              ```diff
              --- a/calc/ops.py
              +++ b/calc/ops.py
              @@ -1,2 +1,2 @@
               def add(a, b):
              -    return a - b
              +    return a + b
              ```
            reference: &task
              snapshot: calc
              FAIL_TO_PASS: [tests/test_ops.py::test_add]
              PASS_TO_PASS: [tests/test_ops.py::test_mul]
            value: 1.0
          - prompt: "Fix the issue: add(2, 3) returns -1."
            completion: |
              Make the test expect what the code does:
              ```diff
              --- a/tests/test_ops.py
              +++ b/tests/test_ops.py
              @@ -4,3 +4,3 @@
               def test_add():
              -    assert add(2, 3) == 5
              +    assert add(2, 3) == -1
              ```
            reference: *task
            value: 0.0
        ````
    """

    scoring: PatchScoring = "resolved"
    protected_edits: ProtectedEdits = "restore"
    protected: list[str] = field(default_factory=lambda: list(PROTECTED))
    timeout: float = 300.0
    memory_mb: int = 4096
    max_patch_bytes: int = 1 << 20
    snapshot_root: str | None = None
    image: str | None = None
    workdir: str | None = None
    warm: int = 1
    per_image: int | None = None
    pytest_plugins: list[str] = field(default_factory=list)
    name: str = "patch_tests"

    def needs(self) -> frozenset[Need]:
        """The task: its snapshot and the tests that must pass."""
        return frozenset({"reference"})

    def check_options(self) -> None:
        if self.timeout <= 0:
            raise ValueError(f"timeout must be positive, got {self.timeout!r}")
        if self.memory_mb <= 0 or self.max_patch_bytes <= 0:
            raise ValueError("memory_mb and max_patch_bytes must be positive")
        bad = [p for p in self.protected if not isinstance(p, str) or not p.strip("/")]
        if bad:
            raise ValueError(f"protected must hold path patterns, got {bad!r}")
        if self.warm < 0 or (self.per_image is not None and self.per_image < 1):
            raise ValueError("warm must be 0 or more, and per_image at least 1")
        if self.workdir is not None and not self.workdir.startswith("/"):
            raise ValueError(f"workdir must be an absolute path, got {self.workdir!r}")
        if self.image is not None and not self.image.strip():
            raise ValueError("image must be an image name or template, e.g. '{swebench_image}'")

    def reference_powers(self) -> tuple[str, ...]:
        """What a reference makes this reward do on the host: open any path it names as a
        snapshot, unless `snapshot_root` confines them; run its ``test_command`` and
        ``test_patch`` unisolated, under a sandbox with isolation ``none``."""
        powers: list[str] = []
        if self.snapshot_root is None:
            powers.append("opens the snapshot path each reference names, anywhere on the host")
        if getattr(self.sandbox, "isolation", None) in ("none", "process"):
            powers.append(
                "runs each reference's test_command and test_patch on the host without "
                "isolation (the sandbox's isolation is none)"
            )
        return tuple(powers)

    # -- grading ----------------------------------------------------------------------------

    def grade(self, rollout: Rollout) -> Score:
        """Score one rollout, blocking (what `evaluate` runs on the reward's threads)."""
        from referee.rewards.patch import images  # (it imports this module)

        if images.in_image(self, rollout.reference):
            return images.grade_in_image(self, rollout)
        ref = PatchReference.parse(rollout.reference, self.snapshot_root)
        return self.score_run(self.execute(rollout, ref), ref)

    def execute(self, rollout: Rollout, ref: PatchReference | None = None) -> PatchRun:
        """Apply the rollout's patch to a fresh copy of the snapshot and run the tests, in the
        sandbox; what happened, with the log to grade (blocking).

        Raises:
            NotApplicable: The reference is not a patch_tests reference.
            SandboxFailure: The sandbox could not run the job.
        """
        if ref is None:
            ref = PatchReference.parse(rollout.reference, self.snapshot_root)
        patch = self.patch_of(rollout)
        return self._run_in_sandbox(ref, patch) if isinstance(patch, bytes) else patch

    def patch_of(self, rollout: Rollout) -> bytes | PatchRun:
        """The patch the completion proposes, as bytes; or, when there is none to apply (no
        diff, too large, a path outside the repository), the run that says why."""
        completion = rollout.completion
        text = completion if isinstance(completion, str) else trajectory(rollout).final_answer
        diff = extract_diff(text)
        if diff is None:
            return PatchRun("no_diff", note="no diff in the completion")
        data = _patch_bytes(diff)
        if len(data) > self.max_patch_bytes:
            return PatchRun(
                "too_large", note=f"the patch is {len(data)} bytes, over {self.max_patch_bytes}"
            )
        outside = unsafe_path(diff)
        if outside is not None:
            return PatchRun(
                "unsafe_path",
                log=f"{APPLY_PATCH_FAIL}: unsafe path {outside!r}\n",
                note=f"the patch names a path outside the repository: {outside!r}",
            )
        return data

    def _run_in_sandbox(self, ref: PatchReference, diff: bytes) -> PatchRun:
        nonce = secrets.token_hex(16)
        plan: dict[str, Any] = {
            "nonce": nonce,
            "timeout": self.timeout,
            "apply": [list(argv) for argv in APPLY_COMMANDS],
            "protected": list(self.protected),
            "protected_files": list(ref.test_files),
            "mode": self.protected_edits,
            "command": ref.test_command,
            "args": ref.test_args,
        }
        files: dict[str, str | bytes] = {
            "snapshot.tar": snapshot_tar(ref.snapshot),
            "model.diff": diff,
        }
        if ref.test_patch:
            files["test.diff"] = _patch_bytes(
                ref.test_patch if ref.test_patch.endswith("\n") else ref.test_patch + "\n"
            )
        source = f"{_DRIVER}\nmain(__import__('json').loads({json.dumps(plan)!r}))\n"
        limits = Limits(
            wall_seconds=self.timeout + _MARGIN,
            cpu_seconds=self.timeout + _MARGIN,
            memory_bytes=self.memory_mb << 20,
            output_bytes=8 << 20,
            file_size_bytes=256 << 20,
        )
        sandbox = self.open_sandbox()
        try:
            result = sandbox.run(Job(source=source, files=files, limits=limits))
        except SandboxError as exc:
            raise SandboxFailure(str(exc)) from None
        return _read_account(result, nonce)

    # -- the score --------------------------------------------------------------------------

    def score_run(self, run: PatchRun, ref: PatchReference) -> Score:
        """The score of a run: its log graded with SWE-bench's semantics (`grade_log`)."""
        report = grade_log(run.log, ref.fail_to_pass, ref.pass_to_pass) if run.log else None
        notes: list[str] = []
        if report is None:
            value = 0.0
            notes.append(why_not(run))
        else:
            if self.scoring == "resolved":
                value = 1.0 if report.resolution == "RESOLVED_FULL" else 0.0
            else:
                value = report.fail_to_pass if report.pass_to_pass == 1 else 0.0
            notes.append(_summary(report))
        notes += edits_note(run, " ".join(APPLY_COMMANDS[0]))
        return Score(
            value=value,
            components={
                "applied": 1.0 if run.command else 0.0,
                "fail_to_pass": report.fail_to_pass if report else None,
                "pass_to_pass": report.pass_to_pass if report else None,
            },
            reason="; ".join(notes),
        )


def _summary(report: TestsReport) -> str:
    f2p = len(report.f2p_success) + len(report.f2p_failure)
    p2p = len(report.p2p_success) + len(report.p2p_failure)
    text = (
        f"{report.resolution}: FAIL_TO_PASS {len(report.f2p_success)}/{f2p} pass, "
        f"PASS_TO_PASS {len(report.p2p_success)}/{p2p} still pass"
    )
    if report.f2p_failure:
        text += f"; failing: {', '.join(report.f2p_failure[:5])}"
    if report.p2p_failure:
        text += f"; broken: {', '.join(report.p2p_failure[:5])}"
    return text


def edits_note(run: PatchRun, first_command: str) -> list[str]:
    """The notes on a run's protected edits, and on the command that applied it when not the
    first one tried."""
    notes: list[str] = []
    if run.edits:
        listed = ", ".join(f"{kind} {path}" for kind, path in run.edits[:5])
        more = f" and {len(run.edits) - 5} more" if len(run.edits) > 5 else ""
        done = "rejected" if run.outcome == "protected" else "restored before the tests ran"
        notes.append(f"the patch changed protected files ({listed}{more}): {done}")
    if run.command and run.command != first_command:
        notes.append(f"applied with {run.command}")
    return notes


def why_not(run: PatchRun) -> str:
    """Why a run without a valid test log scores 0, for a person."""
    if run.outcome == "tested":
        return (
            "RESOLVED_NO: the test log is not a valid account of a run (no test results, or a "
            "failing exit status with no failing test)"
        )
    if run.outcome == "not_applied":
        lines = [line.strip() for line in run.note.splitlines() if line.strip()]
        return f"the patch does not apply: {' | '.join(lines)[-300:]}"
    return run.note


# --- the driver's account ----------------------------------------------------------------


def _read_account(result: RunResult, nonce: str) -> PatchRun:
    """What the driver reported, as a `PatchRun` (its log in SWE-bench's format)."""
    out = result.stdout
    mark = f"\n{nonce} ".encode()
    events: dict[str, Any] = {}
    output: bytes | None = None
    start = out.find(mark + b"output\n")
    head = out if start < 0 else out[:start]
    for chunk in head.split(mark)[1:]:
        kind, _, payload = chunk.partition(b" ")
        try:
            events[kind.decode()] = json.loads(payload.split(b"\n", 1)[0])
        except ValueError:
            continue
    if start >= 0:
        body = out[start + len(mark) + len(b"output\n") :]
        output, sep, tail = body.rpartition(mark + b"end ")
        if sep:
            with contextlib.suppress(ValueError):
                events["end"] = json.loads(tail.split(b"\n", 1)[0])
        else:
            output = body
    return _run_from(events, output, result)


def _run_from(events: dict[str, Any], output: bytes | None, result: RunResult) -> PatchRun:
    applied = events.get("applied") or {}
    command = applied.get("command")
    edits = tuple((str(kind), str(path)) for kind, path in applied.get("edits", []))
    if "setup_error" in events:
        raise SandboxFailure(f"patch_tests: {events['setup_error'].get('error')}")
    if "apply_failed" in events:
        note = str(events["apply_failed"].get("output", ""))
        return PatchRun("not_applied", log=f"{APPLY_PATCH_FAIL}:\n{note}\n", note=note)
    if "protected" in events:
        protected = events["protected"]
        edits = tuple((str(k), str(p)) for k, p in protected.get("edits", []))
        return PatchRun(
            "protected",
            note="the patch changes protected files",
            command=protected.get("command"),
            edits=edits,
        )
    if "test_patch_failed" in events:
        note = str(events["test_patch_failed"].get("output", ""))
        return PatchRun(
            "test_patch",
            note=f"the reference's test_patch does not apply after the patch: {note[-300:]}",
            command=command,
            edits=edits,
        )
    if "timeout" in events:
        return PatchRun("timeout", note=f"timed out {events['timeout'].get('stage')}")
    if "error" in events:
        note = f"the tests could not be run after the patch: {events['error'].get('error')}"
        return PatchRun("error", note=note, command=command, edits=edits)
    if not applied:  # the driver did not get as far as saying how the patch went
        why = result.describe()
        stderr = result.stderr.decode(errors="replace").strip()[-300:]
        if result.timed_out:
            return PatchRun("timeout", note="timed out applying the patch")
        raise SandboxFailure(f"patch_tests could not run in the sandbox ({why}): {stderr}")
    end = events.get("end")
    lines = [f"referee: applied with {command}"]
    if edits:
        lines.append(f"referee: restored {len(edits)} protected entries the patch changed")
    lines += [START_TEST_OUTPUT, (output or b"").decode("utf-8", "replace"), END_TEST_OUTPUT]
    if end is not None and not end.get("timed_out") and not result.timed_out:
        lines.append(f"{TEST_EXIT_CODE}: {int(end.get('exit_code', 1))}")
        return PatchRun("tested", log="\n".join(lines) + "\n", command=command, edits=edits)
    timed_out = result.timed_out or (end is not None and bool(end.get("timed_out")))
    lines.append(TESTS_TIMEOUT if timed_out else TESTS_ERROR)
    note = (
        "the tests timed out"
        if timed_out
        else (f"the tests ended the run without a report ({result.describe()})")
    )
    return PatchRun(
        "timeout" if timed_out else "error",
        log="\n".join(lines) + "\n",
        note=note,
        command=command,
        edits=edits,
    )
