"""`python` graders: the spec's ``grade(sample, item) -> float``, run in referee's sandbox.

The source is the user's (it comes with the spec), but it reads the policy's completion, which
is hostile, so it runs where code runs in referee: in the sandbox (`referee.verifiers.sandbox`,
bubblewrap namespaces by default), one job per rollout, under the reward's ``python_timeout``
and ``python_memory_mb``, without network. OpenAI's graders guide ("Technical constraints")
gives its own limits as: the code "must be less than `256kB` and will not have network access",
"The grading execution itself is limited to 2 minutes", "2Gb of memory and 1Gb of disk space",
"a limit of 2 CPU cores". The reward's defaults are the same time (120 s) and memory (2048 MiB);
the 256kB limit is checked when the spec loads; disk and CPU are the sandbox's own.

The job reads ``{"sample": ..., "item": ...}`` as JSON on stdin, runs the source as a module,
calls ``grade(sample, item)`` and prints the value after a marker line that changes per job
(the grader may print what it likes; a completion cannot forge the marker). The value must be a
finite number (a bool counts as 0 or 1): anything else, an exception, a timeout or a crash
raises here, naming it.

OpenAI marks any result other than a float (an exception, an invalid value) "invalid" and
grades it 0; the reward does the same by default and keeps the reason (``invalid_grade: zero``),
or makes it a Failure (``invalid_grade: fail``).

``image_tag`` (OpenAI's choice of container image; its ``2025-05-08`` image had numpy, scipy,
sympy, pandas, rapidfuzz, scikit-learn, rouge-score, deepdiff, jsonschema, pydantic, pyyaml,
nltk, sqlparse, rdkit, scikit-bio and ast-grep-py) has no meaning here: the sandbox's own
``python3`` runs the source, with the packages installed there.
"""

from __future__ import annotations

import json
import math
import secrets
from typing import Any

from referee.errors import RewardError, VerifierTimeout
from referee.verifiers.sandbox import Job, Limits, Sandbox, SandboxError

__all__ = ["RUNNER", "run_grader"]

RUNNER = r"""
import json, math, sys, traceback
data = json.loads(sys.stdin.read())
marker = data.pop("marker")
namespace = {"__name__": "grader"}
def report(kind, value):
    sys.stdout.flush()
    sys.stdout.write("\n" + marker + "\n" + json.dumps({kind: value}) + "\n")
    sys.stdout.flush()
try:
    exec(compile(data["source"], "grader.py", "exec"), namespace)
    grade = namespace.get("grade")
    if not callable(grade):
        report("error", "the source defines no function grade(sample, item)")
        sys.exit(0)
    result = grade(data["sample"], data["item"])
except BaseException as exc:
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    report("error", "".join(tb[-3:])[-1500:])
    sys.exit(0)
if isinstance(result, (bool, int, float)):
    try:
        value = float(result)
    except OverflowError:
        report("invalid", "an int too large for a float")
    else:
        if math.isfinite(value):
            report("value", value)
        else:
            report("invalid", repr(value))
else:
    report("invalid", type(result).__name__ + " " + repr(result)[:200])
"""


class GraderRaised(RewardError):
    """The grader's source raised, or returned no finite number."""

    failure_type = "error"


class InvalidGrade(RewardError):
    """grade() returned NaN, an infinity or a non-number: ``Failure("invalid_value")``."""

    failure_type = "invalid_value"


class PythonSandboxFailure(RewardError):
    """The sandbox could not run the grader: ``Failure("sandbox")``."""

    failure_type = "sandbox"


def run_grader(
    sandbox: Sandbox,
    name: str,
    source: str,
    sample: dict[str, Any],
    item: Any,
    timeout: float,
    memory_mb: int,
) -> float:
    """The value ``grade(sample, item)`` returns, run in `sandbox` (blocking).

    Raises:
        VerifierTimeout: It ran past `timeout`.
        GraderRaised, InvalidGrade, PythonSandboxFailure: No value (a Failure names why).
    """
    marker = f"@@referee-grade-{secrets.token_hex(16)}@@"
    payload = json.dumps({"marker": marker, "source": source, "sample": sample, "item": item})
    limits = Limits(wall_seconds=timeout, cpu_seconds=timeout, memory_bytes=memory_mb << 20)
    job = Job(source=RUNNER, stdin=payload.encode(), limits=limits)
    try:
        result = sandbox.run(job)
    except SandboxError as exc:
        raise PythonSandboxFailure(f"python grader {name!r}: {exc}") from None
    if result.over_time:
        raise VerifierTimeout(f"python grader {name!r} ran past {timeout:g}s")
    out = result.stdout.decode("utf-8", "replace")
    _, found, tail = out.rpartition("\n" + marker + "\n")
    if not found:
        why = result.describe() if not result.ok else "it printed no result"
        err = result.stderr.decode("utf-8", "replace")[-500:]
        raise GraderRaised(f"python grader {name!r} failed: {why}" + (f": {err}" if err else ""))
    try:
        reply = json.loads(tail.strip().splitlines()[0])
    except (ValueError, IndexError):
        raise GraderRaised(f"python grader {name!r}: unreadable result {tail[:100]!r}") from None
    if "error" in reply:
        raise GraderRaised(f"python grader {name!r} raised: {reply['error']}")
    if "invalid" in reply:
        raise InvalidGrade(
            f"python grader {name!r}: grade() returned {reply['invalid']}, not a finite number"
        )
    value = float(reply["value"])
    if not math.isfinite(value):  # pragma: no cover - the runner checked
        raise InvalidGrade(f"python grader {name!r}: grade() returned {value}")
    return value
