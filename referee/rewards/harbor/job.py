"""The job in the container: the shell that applies the diff, puts the tests in place and runs
them, and the account it prints in marker lines (`referee.verifiers.containers.markers`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from referee.rewards.harbor.files import REWARD_JSON, REWARD_TXT, BadRewardFile
from referee.rewards.harbor.task import HarborTaskSpec
from referee.verifiers.containers import SAY, Marks, Staging, stage

__all__ = [
    "APPLY_SAID",
    "APPLY_SECONDS",
    "HEAD",
    "NO_TOOL",
    "SETUP",
    "STAGE",
    "TEST",
    "TestAccount",
    "setup_account",
    "setup_text",
    "staging",
    "test_account",
]

STAGE = "/tmp/referee-{nonce}"  # inside the container: the diff and the tests, staged
NO_TOOL = 97  # the set-up's status when the image has neither git nor patch
APPLY_SECONDS = 120.0  # the time applying the diff may take, on top of the verifier's
APPLY_SAID = 2000  # bytes of what git apply and patch said that come back (their last)

# Run as root, in one exec with the tests where the verifier's user is the image's, after the
# staging prelude has written the diff and the tests to $stage: apply the diff at the working
# directory ($1) with git apply (atomic), else patch after a dry run, so a
# diff that does not apply leaves the workspace as it was; then throw away what the diff put
# in the verifier's folders and move the staged tests (a folder whose name the diff cannot
# know) to /tests. The marker line says how the diff went, before any of its code runs; the
# line that says the tests are in place says it again, since the engine can lose an exec's
# first output when its attach is late (moby/moby#27289, seen on a loaded machine).
# What git and patch say goes to a file, and only its last APPLY_SAID bytes to the output:
# the diff is the policy's, and their messages about it (one a hunk, some 7 MiB for a 1 MiB
# diff) would otherwise push the markers past what the exec keeps.
HEAD = 'stage="$2"; mark="$3"\n' + SAY
SETUP = r"""
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
STAGE_FAILED = 'echo "cannot write the diff and the tests to $stage"; exit 0'
# The tests, as Harbor runs them (their output to /logs/verifier/test-stdout.txt), then the
# reward files, each after a line naming it and its size, cut at $4 bytes; then the tests'
# exit status and their output's tail.
TEST = r"""
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


def staging(stage_dir: str, task: HarborTaskSpec, diff: bytes | None) -> Staging:
    """The task's tests and the diff, to be staged at `stage_dir`: written by the set-up
    itself where they are small text, else copied in first."""
    files: dict[str, bytes | str | Path] = {f"{stage_dir}/tests": task.test_script.parent}
    if diff is not None:
        files[f"{stage_dir}/agent.diff"] = diff
    return stage(files, on_error=STAGE_FAILED)


def setup_account(output: bytes, nonce: str) -> tuple[dict[str, int], bytes]:
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
class TestAccount:
    """What the test step printed: the reward files' bytes, its exit status, its output's tail."""

    files: dict[str, bytes]
    status: int | None
    tail: bytes


def test_account(output: bytes, nonce: str, max_bytes: int) -> TestAccount | None:
    """The reward files and exit status the test step printed after its marker lines; None
    when it printed no status line (the image lacks the tools it uses).

    Raises:
        BadRewardFile: A reward file is larger than `max_bytes`.
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
            raise BadRewardFile("error", f"{path}: its size could not be read")
        size = int(header.words.strip())
        if size > max_bytes:
            raise BadRewardFile(
                "error", f"{path} is {size} bytes, over max_reward_bytes {max_bytes}"
            )
        files[path] = output[header.after : header.after + size]
    numbers = status_line.numbers()
    status = numbers[0] if numbers is not None and len(numbers) == 1 else None
    return TestAccount(files, status, output[status_line.after :])
