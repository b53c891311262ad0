"""Reading a hostile SWE-bench log: its markers where the eval script writes them, and its
parser in a forked child killed at its deadline (see `referee.rewards.patch.swebench`)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import time
from collections.abc import Callable
from typing import Any

from referee.errors import RewardError

__all__ = ["LogParserError", "read_in_child", "strict"]


class LogParserError(RewardError):
    """SWE-bench's parser for a log raised or ran past its time: the log, not the patch, is
    what cannot be read. `score` scores it 0 with the reason (never a pass, never a Failure
    a trainer masks: the log is the tests' output, which the patch writes).

    Attributes:
        parser: The parser's name in ``PARSER_REGISTRY`` (``parse_log_sympy``).
    """

    def __init__(self, parser: str, message: str, *, timed_out: bool = False) -> None:
        self.parser = parser
        self.detail = message
        self.timed_out = timed_out
        super().__init__(f"swebench's log parser {parser} {message}")


def _marker_groups(lines: list[str], marker: str) -> list[list[int]]:
    """The runs of consecutive lines that hold `marker`, as lists of line numbers."""
    groups: list[list[int]] = []
    for n, line in enumerate(lines):
        if marker in line:
            if groups and groups[-1][-1] == n - 1:
                groups[-1].append(n)
            else:
                groups.append([n])
    return groups


def strict(log: str, constants: Any) -> tuple[str, str]:
    """`log` as strict reading sees it, and what is wrong with its markers ("" when nothing).

    SWE-bench's eval script writes each marker once, as a traced line (``+ : '>>>>> End Test
    Output'``) or a traced ``echo`` and its output (two lines in a row), and the exit code
    line right after the end marker. A log that holds a marker anywhere else was written to
    by the code under test, or by a process it left behind (a forged end marker and exit code
    make swebench's own reading grade forged results): it is no valid account of a run. A
    valid one is kept up to its exit code line, plus any failure marker the harness wrote
    after it (tests errored or timed out); what follows is dropped, since swebench parses
    the whole log, tail included, where the marked output yields nothing. A log without both
    markers is returned as it is (swebench calls it invalid)."""
    start, end, code = (
        constants.START_TEST_OUTPUT,
        constants.END_TEST_OUTPUT,
        constants.TEST_EXIT_CODE,
    )
    if start not in log or end not in log:
        return log, ""
    lines = log.split("\n")
    starts, ends, codes = (_marker_groups(lines, m) for m in (start, end, code))
    problems = []
    if len(starts) != 1 or len(starts[0]) > 2:
        problems.append(f"{start!r} written {sum(map(len, starts))} times")
    if len(ends) != 1 or len(ends[0]) > 2:
        problems.append(f"{end!r} written {sum(map(len, ends))} times")
    if not problems and ends[0][0] < starts[0][-1]:
        problems.append("the end marker before the start marker")
    if (
        codes
        and not problems
        and (len(codes) != 1 or len(codes[0]) > 2 or codes[0][0] != ends[0][-1] + 1)
    ):
        problems.append(f"{code!r} written elsewhere than right after the end marker")
    if problems:
        return log, "the output markers are forged (" + "; ".join(problems) + ")"
    last = (codes[0] if codes else ends[0])[-1]
    after = "\n".join(lines[last + 1 :])
    # what the harness writes after the run (tests errored, timed out) still counts
    failures = (constants.APPLY_PATCH_FAIL, constants.RESET_FAILED, constants.TESTS_ERROR,
                constants.TESTS_TIMEOUT)  # fmt: skip
    kept = "".join(f"{marker}\n" for marker in failures if marker in after)
    return "\n".join(lines[: last + 1]) + "\n" + kept, ""


def read_in_child(
    read: Callable[[], dict[str, Any]], parser: str, timeout: float
) -> dict[str, Any]:
    """`read()` (a log parser named `parser` at work) in a forked child, killed after `timeout`
    seconds; its answer comes back as JSON through a pipe.

    Raises:
        LogParserError: It raised one, ran past `timeout`, or died.
        RewardError: It raised anything else.
    """
    into, out = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer, then leave without running the parent's exit hooks
        code = 0
        try:
            os.close(into)
            try:
                answer: list[Any] = ["ok", read()]
            except LogParserError as exc:
                answer = ["parser", exc.detail]
            except BaseException as exc:
                answer = ["error", f"{type(exc).__name__}: {exc}"[:500]]
            data = json.dumps(answer).encode()
            while data:
                data = data[os.write(out, data) :]
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(out)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    waiting = select.poll()  # poll, not select: a trainer's descriptors pass 1024
    waiting.register(into, select.POLLIN | select.POLLHUP)
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not waiting.poll(left * 1000):
                raise LogParserError(parser, f"ran past {timeout:g} s on this log", timed_out=True)
            chunk = os.read(into, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(into)
        # a child that has not exited (past its deadline, or the parent interrupted) is
        # killed before it is waited for: never a wait on a parser that does not end
        with contextlib.suppress(ProcessLookupError):
            if os.waitpid(pid, os.WNOHANG) == (0, 0):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
    try:
        kind, payload = json.loads(b"".join(chunks))
    except ValueError:
        raise LogParserError(parser, "died on this log") from None
    if kind == "parser":
        raise LogParserError(parser, str(payload))
    if kind == "error":
        raise RewardError(f"grading a SWE-bench log failed: {payload}")
    return dict(payload)
