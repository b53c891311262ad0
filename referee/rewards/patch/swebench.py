"""SWE-bench's own harness, called as a library: image names, eval scripts, log parsers, verdicts.

`patch_tests` grades pytest logs with SWE-bench's semantics re-implemented
(`referee.verifiers.testlog`). For a task run in SWE-bench's own image, in any language its
harness knows, this module rewrites nothing: it builds the instance's ``TestSpec`` with
``swebench.harness.utils.make_test_spec``, names the image with
``swebench.image_builder.image_spec.ImageSpec``, parses a log with the parser
``swebench.harness.log_parsers.PARSER_REGISTRY`` holds under the instance's ``log_parser``,
and grades it with ``swebench.harness.grading`` (``get_logs_eval``, ``get_eval_report``,
``get_resolution_status``), so a verdict here is the report ``swebench`` writes for the same
log. It needs ``swebench`` 5 (``pip install 'referee[swebench]'``), imported on first use.

What SWE-bench 5 reads from an instance (a row of its datasets or task repos): ``image``,
``eval_script``, ``log_parser`` and ``eval_type`` are columns of the row; the harness builds
none of them from the repository's name any more. A row from an older dataset without
``log_parser`` gets the parser that ``swebench``'s per-language tables
(``MAP_REPO_TO_PARSER_PY``, ``_JS``, ``_GO``, ``_RUST``, ``_JAVA``, ``_C``, ``_PHP``,
``_RUBY``) name for its ``repo``, and without ``eval_type`` ``fail_only`` for the repositories
in ``FAIL_ONLY_REPOS``, else ``pass_and_fail``; a row without ``eval_script`` has no eval
script here (`eval_script` raises).

The log is hostile: the patched code runs in the tests and prints into it. Three guards,
each a documented difference from ``swebench`` that holds only for logs no honest run writes:

- size: a log longer than ``max_log_chars`` (`MAX_LOG_CHARS`, 8 Mi characters) is not
  parsed; it resolves nothing (a truncated log could hide failures, and under ``fail_only``
  a test missing from the log counts as passing);
- time: the parser runs in a forked child that is killed after ``parse_timeout`` seconds
  (``parse_log_sympy``'s pattern takes time quadratic in a line's length: one 40 000-
  character line costs it seconds, one of a megabyte hours); a parser that raises or runs
  out of time is a `LogParserError` naming it, which `score` turns into 0 with the reason,
  never a pass. The child is forked, where referee's worker pool starts fresh interpreters
  (`referee.workers`): one would import swebench's harness again, seconds per log. It only
  parses and answers in JSON; one that blocks on a lock another thread held at the fork is
  killed at the same deadline and scored as a parser out of time, never a pass;
- markers (``markers="strict"``, the default): ``swebench`` reads the output between the
  first ``>>>>> Start Test Output`` and the first ``>>>>> End Test Output`` after it, takes the
  first ``>>>>> Test Exit Code`` line anywhere, and when the output parses to nothing parses the
  whole log, what follows the end included. Code under test that prints ``PASSED`` lines, an
  end marker and ``>>>>> Test Exit Code: 0`` turns a failing run into a resolved one there.
  Strict reading takes the eval script's shape as given: each marker written once (a traced
  line, or a traced ``echo`` and its output), the exit code line right after the end marker.
  A log with a marker anywhere else (inside the output, or after the end: a process the
  tests left behind) is not a valid account of a run and resolves nothing, the reason naming
  the forged markers; a valid one is graded up to its exit code line (the harness's failure
  markers after it still count) by ``swebench``'s own functions. ``markers="swebench"``
  grades the log as it is.

Code running in the tests can still print ``PASSED`` for every test and exit 0; no reading
of a log tells that apart from a run that passed. The protected paths and plugin autoload
that `patch_tests` enforces keep the patch out of the test files and the runner, not out of
the tested code (`docs/guides/swebench.md`).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import locale
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Literal

from referee.errors import MissingDependency, NotApplicable
from referee.rewards.patch._logs import LogParserError, read_in_child, strict
from referee.scores import Score

__all__ = [
    "DEFAULT_NAMESPACE",
    "MAX_LOG_CHARS",
    "PARSE_TIMEOUT",
    "LogParserError",
    "Markers",
    "Verdict",
    "eval_script",
    "image_name",
    "parse_log",
    "parser_name",
    "score",
    "test_spec",
    "verdict",
]

MAX_LOG_CHARS = 8 << 20
"""The longest log read, in characters (8 Mi, the output `patch_tests`'s sandbox keeps); a
longer one resolves nothing, unparsed."""

PARSE_TIMEOUT = 60.0
"""Seconds a parser may take on one log before it is killed (`LogParserError`)."""

DEFAULT_NAMESPACE = "swebench"
"""The Docker Hub namespace SWE-bench publishes its instance images under."""

Markers = Literal["strict", "swebench"]
"""How the output markers are read: ``strict`` (each where the eval script writes it, once;
a marker anywhere else makes the log invalid; nothing after the exit code line counts but the
harness's failure markers) or ``swebench`` (as its ``get_logs_eval`` reads them, first start
to first end, whole-log fallback)."""

_MIN_VERSION = (5, 0)
_LANGUAGE_TABLES = ("PY", "JS", "GO", "RUST", "JAVA", "C", "PHP", "RUBY")
_LANGUAGE_MODULES = ("python", "javascript", "go", "rust", "java", "c", "php", "ruby")


# --- swebench, imported on first use -----------------------------------------------------------


def _harness() -> SimpleNamespace:
    """The parts of swebench's harness this module calls, imported once.

    Raises:
        MissingDependency: swebench (or one of its own dependencies) is not installed, or is
            older than 5.0.
    """
    cached: SimpleNamespace | None = _CACHE.get("harness")
    if cached is not None:
        return cached
    feature = "SWE-bench's harness (referee.rewards.patch.swebench)"
    try:  # by name: swebench ships no annotations, and may be absent where mypy runs
        swebench = importlib.import_module("swebench")
        constants = importlib.import_module("swebench.harness.constants")
        grading = importlib.import_module("swebench.harness.grading")
        utils = importlib.import_module("swebench.harness.utils")
        parsers = importlib.import_module("swebench.harness.log_parsers").PARSER_REGISTRY
        image_spec = importlib.import_module("swebench.image_builder.image_spec").ImageSpec
    except ImportError as exc:
        name = (exc.name or "swebench").split(".")[0]
        raise MissingDependency(name, "swebench", feature) from None
    version = tuple(int(p) for p in swebench.__version__.split(".")[:2] if p.isdigit())
    if version < _MIN_VERSION:
        raise MissingDependency(
            f"swebench>={'.'.join(map(str, _MIN_VERSION))} (found {swebench.__version__})",
            "swebench",
            feature,
        )
    harness = SimpleNamespace(
        version=swebench.__version__,
        constants=constants,
        grading=grading,
        utils=utils,
        parsers=parsers,
        ImageSpec=image_spec,
    )
    _CACHE["harness"] = harness
    return harness


_CACHE: dict[str, Any] = {}


def _repo_parsers() -> dict[str, str]:
    """Repository -> parser name, from swebench's per-language tables (older rows only)."""
    cached: dict[str, str] | None = _CACHE.get("repo_parsers")
    if cached is not None:
        return cached
    _harness()
    table: dict[str, str] = {}
    for module, suffix in zip(_LANGUAGE_MODULES, _LANGUAGE_TABLES, strict=True):
        mod = importlib.import_module(f"swebench.harness.log_parsers.{module}")
        for repo, parser in getattr(mod, f"MAP_REPO_TO_PARSER_{suffix}", {}).items():
            table[repo] = parser.__name__
    _CACHE["repo_parsers"] = table
    return table


# --- an instance ----------------------------------------------------------------------------


def _instance(instance: Mapping[str, Any] | str) -> dict[str, Any]:
    if isinstance(instance, str):
        return {"repo": instance, "instance_id": instance.replace("/", "__")}
    if not isinstance(instance, Mapping):
        raise NotApplicable(
            f"a SWE-bench instance is a mapping (a dataset row), got {type(instance).__name__}"
        )
    return dict(instance)


def parser_name(instance: Mapping[str, Any] | str) -> str:
    """The name of the parser swebench reads an instance's log with: its ``log_parser``, or
    for a row without one (or a bare ``"owner/repo"``), the one swebench's per-language tables
    name for its ``repo``.

    Raises:
        NotApplicable: Neither names a parser swebench has.
    """
    row = _instance(instance)
    harness = _harness()
    name = row.get("log_parser")
    if not name:
        name = _repo_parsers().get(str(row.get("repo", "")))
        if name is None:
            raise NotApplicable(
                f"swebench has no log parser for repo {row.get('repo')!r} and the instance "
                "names none (give it a log_parser, one of swebench's PARSER_REGISTRY)"
            )
    if name not in harness.parsers:
        raise NotApplicable(
            f"swebench {harness.version} has no log parser {name!r} "
            f"(one of: {', '.join(sorted(harness.parsers)[:8])}, ...)"
        )
    return str(name)


def test_spec(instance: Mapping[str, Any] | str) -> Any:
    """The instance's ``TestSpec``, built by ``swebench.harness.utils.make_test_spec`` (what
    swebench's harness builds from the same row). Missing columns of older rows are filled:
    ``log_parser`` and ``eval_type`` as `parser_name` says, ``image`` by `image_name`,
    ``version`` empty, ``FAIL_TO_PASS``/``PASS_TO_PASS`` empty, ``eval_script`` empty.

    Raises:
        NotApplicable: The row has no ``instance_id``, or no parser can be found for it.
    """
    row = _instance(instance)
    harness = _harness()
    if not row.get("instance_id"):
        raise NotApplicable("a SWE-bench instance needs an instance_id")
    kinds = harness.constants.EvalType
    fail_only = row.get("repo") in harness.constants.FAIL_ONLY_REPOS
    filled = {
        "image": None,
        "version": "",
        "FAIL_TO_PASS": [],
        "PASS_TO_PASS": [],
        "eval_script": "",
        "repo": "",
        **row,
        "log_parser": parser_name(row),
        "eval_type": row.get("eval_type")
        or (kinds.FAIL_ONLY if fail_only else kinds.PASS_AND_FAIL).value,
    }
    if not filled["image"]:
        filled["image"] = image_name(row)
    try:
        return harness.utils.make_test_spec(filled)
    except (KeyError, TypeError, ValueError) as exc:
        raise NotApplicable(
            f"swebench cannot make a TestSpec of {row['instance_id']}: {type(exc).__name__}: {exc}"
        ) from None


def image_name(
    instance: Mapping[str, Any] | str,
    *,
    namespace: str | None = DEFAULT_NAMESPACE,
    tag: str = "latest",
    arch: str = "amd64",
) -> str:
    """The name swebench's image builder gives an instance's image (``ImageSpec.name``):
    ``swebench/sweb.eval.x86_64.django_1776_django-11099:latest`` for ``django__django-11099``
    (``__`` becomes ``_1776_`` under a namespace; no namespace, a local name keeps it).

    What swebench's harness runs is the row's own ``image`` column (``test_spec(row).image``);
    its published images follow this convention.

    Args:
        instance: A row, or its ``instance_id``.
        namespace: The registry namespace; None for a locally built image.
        tag: The image tag.
        arch: ``amd64`` (named ``x86_64``) or ``arm64``.
    """
    instance_id = instance if isinstance(instance, str) else _instance(instance).get("instance_id")
    if not instance_id:
        raise NotApplicable("a SWE-bench instance needs an instance_id to name its image")
    harness = _harness()
    try:
        spec = harness.ImageSpec(
            instance_id=str(instance_id), dockerfile="(unused)", namespace=namespace, tag=tag,
            arch=arch,
        )  # fmt: skip
    except ValueError as exc:
        raise NotApplicable(f"swebench cannot name the image: {exc}") from None
    return str(spec.name)


def eval_script(instance: Mapping[str, Any]) -> str:
    """The script swebench's harness runs in the instance's container, as it builds it
    (``TestSpec.eval_script``: the row's ``eval_script``, with the line that records the test
    command's exit status after the end marker).

    Raises:
        NotApplicable: The row carries no ``eval_script`` (SWE-bench 5's datasets do).
    """
    row = _instance(instance)
    if not str(row.get("eval_script") or "").strip():
        raise NotApplicable(
            f"instance {row.get('instance_id')!r} has no eval_script; SWE-bench 5's datasets "
            "and task repos carry it (eval.sh)"
        )
    return str(test_spec(row).eval_script)


# --- reading a log ----------------------------------------------------------------------------


def _read(spec: Any, path: str) -> dict[str, Any]:
    """swebench's reading of the log at `path` for `spec`: status map, validity, report."""
    harness = _harness()
    try:
        status_map, _ = harness.grading.get_logs_eval(spec, path)
        prediction = {"instance_id": spec.instance_id, "model_patch": "(graded from its log)"}
        report = harness.grading.get_eval_report(spec, prediction, path, True)
    except Exception as exc:  # the parser's own failure on this log: not a verdict
        what = f"{type(exc).__name__}: {exc}"
        raise LogParserError(spec.log_parser, f"raised {what[:300]}") from None
    entry = report[spec.instance_id]
    tests = entry.get("tests_status")
    grading = harness.grading
    return {
        "status": dict(status_map),
        "resolved": bool(entry.get("resolved")),
        "applied": bool(entry.get("patch_successfully_applied")),
        "tests": tests,
        "resolution": grading.get_resolution_status(tests) if tests else "RESOLVED_NO",
        "fail_to_pass": float(grading.compute_fail_to_pass(tests)) if tests else None,
        "pass_to_pass": float(grading.compute_pass_to_pass(tests)) if tests else None,
        "infra_failure": entry.get("infra_failure_reason"),
    }


def _grade(
    row: dict[str, Any], log: str, markers: Markers, timeout: float | None
) -> dict[str, Any]:
    """swebench's reading of `log` for `row` (`_read`), in a forked child killed after
    `timeout` seconds (None, or where there is no fork: in this process)."""
    harness = _harness()
    spec = test_spec(row)
    text, forged = strict(log, harness.constants) if markers == "strict" else (log, "")
    if forged:
        return {"forged": forged, "parser": spec.log_parser, "instance_id": spec.instance_id}
    encoding = locale.getpreferredencoding(False)
    with tempfile.TemporaryDirectory(prefix="referee-swebench-") as folder:
        path = os.path.join(folder, "test_output.txt")
        # swebench's harness writes and reads its test_output.txt with the locale's encoding
        with open(path, "w", encoding=encoding, errors="replace") as f:
            f.write(text)
        if timeout is None or not hasattr(os, "fork"):
            got = _read(spec, path)
        else:
            got = read_in_child(lambda: _read(spec, path), spec.log_parser, timeout)
    got.update(parser=spec.log_parser, eval_type=spec.eval_type, instance_id=spec.instance_id)
    return got


def parse_log(
    instance: Mapping[str, Any] | str,
    log: str,
    *,
    markers: Markers = "strict",
    max_log_chars: int = MAX_LOG_CHARS,
    parse_timeout: float | None = PARSE_TIMEOUT,
) -> dict[str, str]:
    """Test -> status (``PASSED``, ``FAILED``, ``SKIPPED``, ``ERROR``, ``XFAIL``) of a log,
    as swebench's ``get_logs_eval`` reads it with the instance's parser: empty when the log is
    no valid account of a run (a failure marker, no output markers, nothing read and no sign
    the suite ran, a non-zero exit with no failure) or longer than `max_log_chars`.

    Raises:
        LogParserError: The parser raised or ran past `parse_timeout`.
        NotApplicable: The instance names no parser swebench has.
    """
    if len(log) > max_log_chars:
        return {}
    got = _grade(_instance(instance), log, markers, parse_timeout)
    return {} if "forged" in got else dict(got["status"])


@dataclass(frozen=True, slots=True)
class Verdict:
    """swebench's report on one log.

    Attributes:
        instance_id: The instance.
        resolved: swebench's ``resolved``: every ``FAIL_TO_PASS`` test succeeded, every
            ``PASS_TO_PASS`` one was kept.
        resolution: ``RESOLVED_FULL``, ``RESOLVED_PARTIAL`` or ``RESOLVED_NO``
            (``get_resolution_status``; ``RESOLVED_NO`` for an invalid log).
        valid: swebench's ``patch_successfully_applied``: the log is a valid account of a run
            (it is False for a patch that did not apply, and for any log ``get_logs_eval``
            rejects).
        status: The status map swebench read (test -> status).
        fail_to_pass: ``{"success": [...], "failure": [...]}`` for the ``FAIL_TO_PASS`` tests.
        pass_to_pass: The same for ``PASS_TO_PASS``.
        fail_to_pass_share: ``compute_fail_to_pass`` (1.0 with no tests); None when invalid.
        pass_to_pass_share: ``compute_pass_to_pass``; None when invalid.
        parser: The parser's name.
        note: Why the log was not graded (over the cap), or swebench's advisory
            ``infra_failure_reason``; empty otherwise.
    """

    instance_id: str
    resolved: bool
    resolution: str
    valid: bool
    status: Mapping[str, str] = field(default_factory=dict)
    fail_to_pass: Mapping[str, Sequence[str]] = field(default_factory=dict)
    pass_to_pass: Mapping[str, Sequence[str]] = field(default_factory=dict)
    fail_to_pass_share: float | None = None
    pass_to_pass_share: float | None = None
    parser: str = ""
    note: str = ""

    def score(self, scoring: Literal["resolved", "fraction"] = "resolved") -> Score:
        """The verdict as `patch_tests` scores a run: ``resolved`` 1.0 or 0; ``fraction`` the
        share of ``FAIL_TO_PASS`` passing when every ``PASS_TO_PASS`` test is kept, else 0;
        components ``applied``, ``fail_to_pass``, ``pass_to_pass``; an invalid log is 0."""
        if not self.valid:
            value = 0.0
            reason = "RESOLVED_NO: " + (
                self.note
                or "the test log is not a valid account of a run (the patch did not apply, a "
                "failure marker, no test results, or a failing exit status with no failing test)"
            )
        else:
            if scoring == "resolved":
                value = 1.0 if self.resolved else 0.0
            else:
                value = (self.fail_to_pass_share or 0.0) if self.pass_to_pass_share == 1 else 0.0
            reason = self._summary()
        return Score(
            value=value,
            components={
                "applied": 1.0 if self.valid else 0.0,
                "fail_to_pass": self.fail_to_pass_share,
                "pass_to_pass": self.pass_to_pass_share,
            },
            reason=reason,
        )

    def _summary(self) -> str:
        f2p_ok = list(self.fail_to_pass.get("success", ()))
        f2p_bad = list(self.fail_to_pass.get("failure", ()))
        p2p_ok = list(self.pass_to_pass.get("success", ()))
        p2p_bad = list(self.pass_to_pass.get("failure", ()))
        text = (
            f"{self.resolution}: FAIL_TO_PASS {len(f2p_ok)}/{len(f2p_ok) + len(f2p_bad)} pass, "
            f"PASS_TO_PASS {len(p2p_ok)}/{len(p2p_ok) + len(p2p_bad)} still pass"
        )
        if f2p_bad:
            text += f"; failing: {', '.join(f2p_bad[:5])}"
        if p2p_bad:
            text += f"; broken: {', '.join(p2p_bad[:5])}"
        return text


def verdict(
    instance: Mapping[str, Any],
    log: str,
    *,
    markers: Markers = "strict",
    max_log_chars: int = MAX_LOG_CHARS,
    parse_timeout: float | None = PARSE_TIMEOUT,
) -> Verdict:
    """swebench's verdict on `log` for `instance` (a row with ``FAIL_TO_PASS`` and
    ``PASS_TO_PASS``, as lists or JSON text): ``get_eval_report`` with the tests' status, on
    the log as `markers` reads it.

    Raises:
        LogParserError: The parser raised or ran past `parse_timeout`.
        NotApplicable: The row names no parser swebench has, or no ``instance_id``.
    """
    row = _instance(instance)
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        if key not in row:
            raise NotApplicable(f"a SWE-bench instance needs {key} to be graded")
        if isinstance(row[key], str):
            with contextlib.suppress(ValueError):
                row[key] = json.loads(row[key])
    if len(log) > max_log_chars:
        return Verdict(
            instance_id=str(row.get("instance_id")),
            resolved=False,
            resolution="RESOLVED_NO",
            valid=False,
            parser=parser_name(row),
            note=(
                f"the test log is {len(log)} characters, over the {max_log_chars} read: not "
                "graded (a cut log could hide failures)"
            ),
        )
    got = _grade(row, log, markers, parse_timeout)
    if "forged" in got:
        return Verdict(
            instance_id=got["instance_id"],
            resolved=False,
            resolution="RESOLVED_NO",
            valid=False,
            parser=got["parser"],
            note=got["forged"],
        )
    tests = got["tests"] or {}
    return Verdict(
        instance_id=got["instance_id"],
        resolved=got["resolved"],
        resolution=got["resolution"],
        valid=got["applied"],
        status=got["status"],
        fail_to_pass=tests.get("FAIL_TO_PASS", {}),
        pass_to_pass=tests.get("PASS_TO_PASS", {}),
        fail_to_pass_share=got["fail_to_pass"],
        pass_to_pass_share=got["pass_to_pass"],
        parser=got["parser"],
        note=(
            f"swebench flags a likely environment fault: {got['infra_failure']}"
            if got["infra_failure"]
            else ""
        ),
    )


def score(
    instance: Mapping[str, Any],
    log: str,
    *,
    scoring: Literal["resolved", "fraction"] = "resolved",
    markers: Markers = "strict",
    max_log_chars: int = MAX_LOG_CHARS,
    parse_timeout: float | None = PARSE_TIMEOUT,
    where: str = "patch_tests",
) -> Score:
    """`verdict` as a `Score` (`Verdict.score`). A parser that raises or runs out of time on
    the log scores 0 with the reason naming it, never a pass: swebench counts an instance
    whose log it cannot grade as not resolved, and the log is the tests' output, which the
    patch's code writes, so a log made to break the parser must not become a Failure that a
    trainer masks."""
    try:
        found = verdict(
            instance, log, markers=markers, max_log_chars=max_log_chars,
            parse_timeout=parse_timeout,
        )  # fmt: skip
    except LogParserError as exc:
        return Score(
            value=0.0,
            components={"applied": 0.0, "fail_to_pass": None, "pass_to_pass": None},
            reason=f"RESOLVED_NO: {exc}; the log could not be graded, as under swebench",
        )
    return found.score(scoring)


test_spec.__test__ = False  # type: ignore[attr-defined]  # not a pytest test, whatever its name
