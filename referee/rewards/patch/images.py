"""`patch_tests` in a task's own image: a SWE-bench instance's tests, run as its harness runs them.

Where a rollout's reference is a SWE-bench instance (a row of SWE-bench 5's datasets, with its
``eval_script`` and ``log_parser``; or any row once the reward names an ``image`` template),
`patch_tests` does not copy a snapshot into its sandbox: it leases a fresh container of the
instance's image from a warm pool (`referee.verifiers.containers`) and, in one command run
as root at the image's working directory (``/testbed`` for SWE-bench's images):

1. saves the protected entries (`PROTECTED`, the reward's ``protected``, the files the row's
   ``test_patch`` touches and those its pytest ids name) with ``find`` and ``tar``;
2. applies the patch with swebench's own commands in its order (`APPLY_COMMANDS`: ``git
   apply --verbose``, ``--3way``, ``--reject``, then ``patch --batch --forward --fuzz=5 -p1
   -i``), resetting the tree between attempts with ``git checkout -- . ; git clean -fd`` as
   swebench does, and accepting a patch that ``git apply --check --reverse`` finds applied;
3. compares the protected entries with what was saved: those added or gone by name, those
   whose status changed since (their ctime, which no tool can set back) by content, mode and
   link target; with ``protected_edits: restore`` what the patch added there is removed and
   what it changed or deleted is put back from the saved copy (not from git: an image's
   ignored files, such as ``*.egg-info``, are not in its history); with ``reject`` the tests
   do not run;
4. runs swebench's eval script (`swebench.eval_script`: the row's ``eval_script`` with the
   exit-code line its harness adds) with ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`` in its
   environment, under the reward's ``timeout``.

Nothing the patch wrote runs before step 4, so the account of steps 1 to 3 (lines marked with a
nonce, printed before the tests start) cannot be forged; everything after is the log, graded by
swebench's own parser and report (`swebench.score`, strict markers).

An engine that does not answer, an image the engine lacks (referee never pulls), a working
directory that is not a git work tree, or an image without ``git``, ``find``, ``tar`` or
``cmp``: ``Failure("sandbox")`` naming it, never a score.
"""

from __future__ import annotations

import json
import secrets
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from referee.errors import MissingDependency, NotApplicable, SandboxError
from referee.rewards._common import short
from referee.rewards._sandboxed import SandboxFailure
from referee.rewards.patch import swebench
from referee.rewards.patch._diff import diff_paths, strip_prefix, unsafe_name
from referee.rollout import Rollout
from referee.scores import Score
from referee.verifiers.containers import (
    SAY,
    ContainerPool,
    FileContent,
    Marks,
    Staging,
    job_pool,
    stage,
)
from referee.verifiers.testlog import APPLY_PATCH_FAIL, TESTS_TIMEOUT

if TYPE_CHECKING:
    from referee.rewards.patch.patch_tests import PatchRun, PatchTests

__all__ = [
    "APPLY_COMMANDS",
    "DEFAULT_WORKDIR",
    "ImageTask",
    "find_expression",
    "grade_in_image",
    "image_task",
    "in_image",
    "job_script",
    "run_in_image",
    "score_image_run",
    "stage_files",
]

APPLY_COMMANDS = (
    "git apply --verbose",
    "git apply --verbose --3way",
    "git apply --verbose --reject",
    "patch --batch --forward --fuzz=5 -p1 -i",
)
"""swebench's ``GIT_APPLY_CMDS`` (``swebench.harness.run_evaluation``, 5.0.2), in its order;
the image's history makes ``--3way`` possible here."""

DEFAULT_WORKDIR = "/testbed"
"""Where SWE-bench's images hold the repository (swebench's ``CONTAINER_WORKDIR``): the working
directory of an image that sets none."""

_APPLY_SECONDS = 120.0  # saving, applying and restoring, on top of the tests' timeout
_OUTPUT_SLACK = 1 << 20  # what the set-up may print before the log starts

# Run as root at the working directory ($1), in one exec with the tests: the protected
# entries' `find` expression (FIND), `_HEAD`, the staging prelude that writes the job's files
# to $stage (where they were not copied in), then `_SCRIPT` (`job_script`). Every marker line
# is printed before any of the repository's code runs; the tests' output follows `tests`.
_HEAD = 'work="$1"; stage="$2"; mark="$3"; mode="$4"\n' + SAY
_STAGE_FAILED = 'say setup_error "cannot write to $stage"; exit 0'
_SCRIPT = r"""
cd "$work" 2>/dev/null || { say setup_error "the image has no working directory $work"; exit 0; }
for tool in git find tar cmp; do
  command -v "$tool" >/dev/null 2>&1 || { say setup_error "the image has no $tool"; exit 0; }
done
git rev-parse --is-inside-work-tree >/dev/null 2>&1 \
  || { say setup_error "$work is not a git work tree"; exit 0; }
protected() { find . -path ./.git -prune -o \( "${FIND[@]}" \) ! -type d -print0; }
fail() { say setup_error "$1: $(tail -c 300 "$stage/err" 2>/dev/null)"; exit 0; }
protected > "$stage/before" && tar --null -T "$stage/before" -cf "$stage/keep.tar" \
  2> "$stage/err" || fail "cannot save the protected files"
declare -A was now
while IFS= read -r -d '' p; do was["$p"]=1; done < "$stage/before"
# What changes from here on has a later ctime, which no user-space tool can set back.
touch -d '2 seconds ago' "$stage/stamp" 2> "$stage/err" || fail "cannot mark the time"
applied=; out=; i=0
while IFS= read -r cmd; do
  [ -n "$cmd" ] || continue
  if [ "$i" -gt 0 ]; then git checkout -- . >/dev/null 2>&1; git clean -fd >/dev/null 2>&1; fi
  out=$($cmd "$stage/model.diff" 2>&1) && { applied="$cmd"; break; }
  i=$((i + 1))
done < "$stage/apply"
if [ -z "$applied" ] && git apply --check --reverse "$stage/model.diff" >/dev/null 2>&1; then
  applied="already applied"
fi
if [ -z "$applied" ]; then printf '%s\n' "$out" | tail -c 3000; say apply_failed; exit 0; fi
say applied "$applied"
same() {
  if [ -L "$1" ] || [ -L "$2" ]; then
    [ -L "$1" ] && [ -L "$2" ] && [ "$(readlink -- "$1")" = "$(readlink -- "$2")" ]; return
  fi
  [ -f "$1" ] && [ -f "$2" ] && [ "$(stat -c %a -- "$1")" = "$(stat -c %a -- "$2")" ] \
    && cmp -s -- "$1" "$2"
}
edit() { edits=$((edits + 1)); say edit "$1" "$(printf '%s' "${2#./}" | tr '\n' '?')"; }
: > "$stage/gone"; : > "$stage/changed"; : > "$stage/touched"; edits=0
protected > "$stage/after" || fail "cannot list the protected files"
while IFS= read -r -d '' p; do
  now["$p"]=1
  [ -n "${was[$p]+x}" ] && continue
  printf '%s\0' "$p" >> "$stage/gone"; edit added "$p"
done < "$stage/after"
while IFS= read -r -d '' p; do
  [ -n "${now[$p]+x}" ] && continue
  printf '%s\0' "$p" >> "$stage/changed"; edit deleted "$p"
done < "$stage/before"
# A folder above a protected file that is no longer a folder (a file, or a link that would
# take the restore outside the tree) is an added entry: removed before the restore.
declare -A above
while IFS= read -r -d '' p; do
  d="${p%/*}"
  while [ "$d" != "." ] && [ "$d" != "$p" ]; do
    if [ -L "$d" ] || { [ -e "$d" ] && [ ! -d "$d" ]; }; then above["$d"]=1; fi
    d="${d%/*}"
  done
done < "$stage/before"
for d in "${!above[@]}"; do printf '%s\0' "$d" >> "$stage/gone"; edit added "$d"; done
find . -path ./.git -prune -o \( "${FIND[@]}" \) ! -type d -cnewer "$stage/stamp" -print0 \
  > "$stage/newer"
while IFS= read -r -d '' p; do
  [ -n "${was[$p]+x}" ] && printf '%s\0' "$p" >> "$stage/touched"
done < "$stage/newer"
if [ -s "$stage/touched" ]; then
  mkdir -p "$stage/orig" && tar -xpf "$stage/keep.tar" -C "$stage/orig" --null \
    -T "$stage/touched" 2> "$stage/err" || fail "cannot read the saved protected files back"
  while IFS= read -r -d '' p; do
    same "$stage/orig/$p" "$p" && continue
    printf '%s\0' "$p" >> "$stage/changed"; edit modified "$p"
  done < "$stage/touched"
fi
if [ "$edits" -gt 0 ] && [ "$mode" = reject ]; then say protected; exit 0; fi
if [ "$edits" -gt 0 ]; then
  while IFS= read -r -d '' p; do rm -rf -- "$p"; done < "$stage/gone"
  while IFS= read -r -d '' p; do rm -rf -- "$p"; done < "$stage/changed"
  if [ -s "$stage/changed" ]; then
    tar -xpf "$stage/keep.tar" --null -T "$stage/changed" 2> "$stage/err" \
      || fail "cannot restore the protected files"
  fi
fi
mv "$stage/eval.sh" "/tmp/eval-$mark.sh" && rm -rf "$stage"
say tests
bash "/tmp/eval-$mark.sh" 2>&1
"""


def _glob_escape(path: str) -> str:
    """`path` as a ``find -path`` pattern that matches only itself."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in path)


def find_expression(patterns: Sequence[str], exact: Sequence[str]) -> list[str]:
    """The ``find`` test that selects the protected entries, with `PROTECTED`'s semantics: a
    name (no ``/``) matches each entry's name, a name ending in ``/`` every folder on its path
    (and an entry of that name that is not a folder), one with a ``/`` inside the whole path;
    `exact` paths match themselves."""
    tests: list[list[str]] = []
    for pattern in patterns:
        if pattern.endswith("/"):
            body = pattern.strip("/")
            if "/" in body:
                tests += [["-path", f"./{body}/*"], ["-path", f"./{body}"]]
            else:
                tests += [["-path", f"*/{body}/*"], ["-name", body]]
        elif "/" in pattern:
            tests.append(["-path", f"./{pattern.lstrip('/')}"])
        else:
            tests.append(["-name", pattern])
    tests += [["-path", f"./{_glob_escape(path)}"] for path in exact]
    expression: list[str] = []
    for test in tests or [["-false"]]:
        expression += (["-o"] if expression else []) + test
    return expression


@dataclass(frozen=True)
class ImageTask:
    """A SWE-bench instance as the image mode runs it.

    Attributes:
        row: The instance (its FAIL_TO_PASS and PASS_TO_PASS read into lists).
        image: The image's name on the engine.
        eval_script: The script swebench's harness runs (`swebench.eval_script`).
        test_files: Files protected whatever the reward's ``protected`` says: those the row's
            ``test_patch`` touches and those its pytest ids name.
    """

    row: Mapping[str, Any]
    image: str
    eval_script: str
    test_files: tuple[str, ...] = ()

    @property
    def instance_id(self) -> str:
        return str(self.row.get("instance_id"))


def in_image(reward: PatchTests, reference: object) -> bool:
    """Whether `reference` is graded in an image: the reward names an ``image`` template, or
    the reference is an instance row without a ``snapshot`` (it has ``eval_script`` or
    ``image``)."""
    if reward.image is not None:
        return True
    return (
        isinstance(reference, Mapping)
        and "snapshot" not in reference
        and ("eval_script" in reference or "image" in reference)
    )


def _image_of(row: Mapping[str, Any], template: str | None) -> str:
    if template is None:
        return str(swebench.test_spec(row).image)  # the row's image, else swebench's name
    published = swebench.image_name(row)
    fields = {str(k): v for k, v in row.items() if isinstance(v, str)}
    fields["swebench_image"] = published
    fields["instance_key"] = published.split("sweb.eval.", 1)[1].split(".", 1)[1].rsplit(":", 1)[0]
    try:
        return template.format_map(fields)
    except (KeyError, IndexError, ValueError) as exc:
        raise NotApplicable(
            f"patch_tests image template {template!r} cannot be filled from instance "
            f"{row.get('instance_id')!r}: {type(exc).__name__}: {exc}"
        ) from None


def _ids(row: Mapping[str, Any], key: str) -> list[str]:
    """The row's test ids under `key`: a list, or JSON text of one (as the datasets store it)."""
    value = row[key]
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise NotApplicable(
            f"instance {key} must be a list of test ids (or JSON text of one), got "
            f"{short(row[key])}"
        )
    return value


def image_task(reference: object, template: str | None = None) -> ImageTask:
    """Read an instance row (`in_image`) as the image mode runs it.

    Raises:
        NotApplicable: Not a mapping, no ``instance_id``, ``FAIL_TO_PASS`` or ``eval_script``,
            no parser swebench knows, a ``test_patch`` naming a path outside the repository.
        MissingDependency: swebench is not installed.
    """
    if not isinstance(reference, Mapping):
        raise NotApplicable(
            f"patch_tests in an image needs a SWE-bench instance row, got {short(reference)}"
        )
    row = dict(reference)
    for key in ("instance_id", "FAIL_TO_PASS"):
        if key not in row:
            raise NotApplicable(
                f"patch_tests in an image needs a SWE-bench instance row with {key}; got keys "
                f"{sorted(map(str, row))[:12]}"
            )
    row.setdefault("PASS_TO_PASS", [])
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        row[key] = _ids(row, key)
    script = swebench.eval_script(row)
    if swebench.test_spec(row).image_assets:
        # swebench's harness copies these (binary test baselines) into the container and
        # restores them in the eval script; without them the gold patch fails: not a 0
        raise NotApplicable(
            f"instance {row['instance_id']} has image_assets, which patch_tests does not copy "
            "into the container yet; grade it with swebench's harness"
        )
    files: list[str] = []
    test_patch = row.get("test_patch")
    if isinstance(test_patch, str) and test_patch:
        names = diff_paths(test_patch)
        outside = unsafe_name(names)
        if outside is not None:
            raise NotApplicable(f"instance test_patch names a path outside the repo: {outside!r}")
        files += [p for p in map(strip_prefix, names) if p is not None]
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        for test_id in row[key]:
            path = test_id.split("::", 1)[0] if "::" in test_id else ""
            if path and ".." not in path.split("/") and not path.startswith("/"):
                files.append(path)
    return ImageTask(
        row=row,
        image=_image_of(row, template),
        eval_script=script,
        test_files=tuple(dict.fromkeys(files)),
    )


def _pids(options: Any) -> int:
    """The docker sandbox's ``pids`` where the spec sets it; else 1024 (its default, 256, is
    sized for a snippet, not a repository's test suite)."""
    return int(options.pids) if "pids" in options.model_fields_set else 1024


def _pool(reward: PatchTests) -> ContainerPool:
    options = reward.sandbox
    docker = getattr(options, "backend", None) == "docker"
    return job_pool(
        getattr(options, "base_url", None) if docker else None,
        concurrency=(getattr(options, "workers", None) if docker else None) or reward.concurrency,
        per_image=reward.per_image,
        warm=reward.warm,
        memory_mb=reward.memory_mb,
        pids=_pids(options) if docker else 1024,
        runtime=getattr(options, "runtime", None) if docker else None,
    )


def grade_in_image(reward: PatchTests, rollout: Rollout) -> Score:
    """Score one rollout in its instance's image (blocking).

    Raises:
        NotApplicable: The reference is not an instance row (`image_task`).
        SandboxFailure: The engine, the image or its tools failed (``Failure("sandbox")``).
    """
    task, run = run_in_image(reward, rollout)
    return score_image_run(reward, run, task)


def run_in_image(reward: PatchTests, rollout: Rollout) -> tuple[ImageTask, PatchRun]:
    """Apply the rollout's patch in a fresh container of its instance's image and run the eval
    script there: the instance, and what happened with the log to grade (blocking).

    Raises:
        NotApplicable: The reference is not an instance row (`image_task`).
        SandboxFailure: The engine, the image or its tools failed.
    """
    task = image_task(rollout.reference, reward.image)
    patch = reward.patch_of(rollout)
    if not isinstance(patch, bytes):
        return task, patch
    try:
        pool = _pool(reward)
        image = pool.engine.image(name=task.instance_id, tag=task.image)
        workdir = reward.workdir or pool.engine.workdir(image)
        workdir = DEFAULT_WORKDIR if workdir == "/" else workdir
        return task, _run(reward, pool, image, workdir, task, patch)
    except (SandboxError, MissingDependency) as exc:
        raise SandboxFailure(f"patch_tests: instance {task.instance_id}: {exc}") from None


def _run(
    reward: PatchTests, pool: ContainerPool, image: str, workdir: str, task: ImageTask, diff: bytes
) -> PatchRun:
    nonce = secrets.token_hex(16)
    stage_dir = f"/tmp/referee-{secrets.token_hex(8)}"
    env = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    if reward.pytest_plugins:
        env["PYTEST_PLUGINS"] = ",".join(reward.pytest_plugins)
    staged = stage_files(diff, task.eval_script, stage_dir)
    script = job_script(find_expression(reward.protected, task.test_files), staged)
    with pool.lease(image) as box:
        box.put(staged.upload)  # nothing, where the script writes them itself
        result = box.exec(
            [
                "bash",
                "-c",
                script,
                "patch_tests",
                workdir,
                stage_dir,
                nonce,
                reward.protected_edits,
            ],
            timeout=_APPLY_SECONDS + reward.timeout,
            workdir=workdir,
            env={**env, **staged.env},
            user="0",
            output_bytes=swebench.MAX_LOG_CHARS + _OUTPUT_SLACK,
            then=(f"\n{nonce} tests\n".encode(), reward.timeout),
        )
    return _account(result.output, nonce, timed_out=result.timed_out, truncated=result.truncated)


def stage_files(diff: bytes, script: str, stage_dir: str) -> Staging:
    """The job's files (the patch, the eval script, the apply commands) in `stage_dir`:
    written by the job's script from its environment where each is small text (saves a copy
    call, ~0.1 s), else copied in (`referee.verifiers.containers.stage`)."""
    apply = "\n".join(APPLY_COMMANDS) + "\n"
    files: dict[str, FileContent] = {
        f"{stage_dir}/model.diff": diff,
        f"{stage_dir}/eval.sh": script,
        f"{stage_dir}/apply": apply,
    }
    return stage(files, on_error=_STAGE_FAILED)


def job_script(find: Sequence[str], staged: Staging) -> str:
    """The job's shell script: the protected entries' `find` expression, the staging prelude,
    then saving, applying, comparing and the tests (see the module's docstring)."""
    return f"FIND=({' '.join(map(shlex.quote, find))})\n{_HEAD}{staged.prelude}{_SCRIPT}"


def _account(output: bytes, nonce: str, *, timed_out: bool, truncated: bool) -> PatchRun:
    """What the set-up's marker lines say (each before any of the repository's code ran), and
    the tests' log after them."""
    from referee.rewards.patch.patch_tests import PatchRun  # (patch_tests dispatches here)

    marks = Marks(output, nonce)
    tests_mark = marks.first("tests")
    started = tests_mark is not None
    end = len(output) if tests_mark is None else tests_mark.at
    events: dict[str, list[str]] = {}
    before = ""
    for kind, value in marks.every(end):
        events.setdefault(kind, []).append(value)
        if kind == "apply_failed":
            failed = marks.first("apply_failed", end=end)
            said = output[: failed.at if failed else end].rsplit(marks.mark, 1)[-1]
            before = said.decode("utf-8", "replace").strip()
            break
    if "setup_error" in events:
        raise SandboxFailure(f"patch_tests: {events['setup_error'][0]}")
    command = events["applied"][0] if events.get("applied") else None
    edits = tuple(
        (kind, path) for kind, _, path in (e.partition(" ") for e in events.get("edit", []))
    )
    if "apply_failed" in events:
        return PatchRun("not_applied", log=f"{APPLY_PATCH_FAIL}:\n{before}\n", note=before)
    if "protected" in events:
        return PatchRun(
            "protected", note="the patch changes protected files", command=command, edits=edits
        )
    if not started:
        if timed_out:
            return PatchRun("timeout", note="timed out applying the patch")
        tail = output.decode("utf-8", "replace").strip()[-300:]
        raise SandboxFailure(f"patch_tests could not set up the tests in the image: {tail}")
    text = output[tests_mark.after :].decode("utf-8", "replace") if tests_mark else ""
    if timed_out:
        return PatchRun(
            "timeout",
            log=f"{text}\n{TESTS_TIMEOUT}\n",
            note="the tests timed out",
            command=command,
            edits=edits,
        )
    if truncated or len(text) > swebench.MAX_LOG_CHARS:
        note = f"the test log is over the {swebench.MAX_LOG_CHARS} characters read: not graded"
        return PatchRun("error", note=note, command=command, edits=edits)
    return PatchRun("tested", log=text, command=command, edits=edits)


def score_image_run(reward: PatchTests, run: PatchRun, task: ImageTask) -> Score:
    """The score of a run in an image: a tested run's log is swebench's verdict
    (`swebench.score`); any other outcome is 0 with the reason, as `patch_tests` scores it."""
    from referee.rewards.patch.patch_tests import edits_note, why_not

    if run.outcome == "tested":
        graded = swebench.score(task.row, run.log, scoring=reward.scoring, where=reward.name)
        if graded.failure is not None:
            return graded
        value, components = graded.value, dict(graded.components)
        notes = [graded.reason or ""]
    else:
        value = 0.0
        components = {
            "applied": 1.0 if run.command else 0.0,
            "fail_to_pass": None,
            "pass_to_pass": None,
        }
        notes = [why_not(run)]
    notes += edits_note(run, APPLY_COMMANDS[0])
    return Score(value=value, components=components, reason="; ".join(n for n in notes if n))
