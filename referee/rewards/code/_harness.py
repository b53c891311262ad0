"""`python_tests`' host side: the dataset's test code, run here against proxies of the program.

Every ``assert`` of the test code is rewritten to record one case; the entry point, and each
other function of the program that the test calls by a name of its own, is a `Remote` whose
calls run in the sandbox and return plain data.

The test sees only those names of the program. A name the test binds itself, a built-in
(``abs``, ``set``, ``isinstance``), a dunder, or a name of the prompt's helpers stays the
test's own even when the program defines it: a wrong program that also defines ``set =
lambda *a: 1`` must not make ``set(candidate(x)) == set(expected)`` hold.

Calls the test will certainly make are pipelined (`referee.rewards.code._plan`) when the session
can.
"""

from __future__ import annotations

import ast
import builtins
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from referee.errors import NotApplicable, ProgramError
from referee.rewards.code._plan import Call, plan_calls
from referee.verifiers.sandbox import Pipelining, SandboxSession

__all__ = ["Cases", "Remote", "run_tests"]


class _RecordAsserts(ast.NodeTransformer):
    """``assert X`` becomes ``__referee_assert__(lambda: X, line)``: every assert is a case."""

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        self.generic_visit(node)
        at = node.test
        args = ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])
        lam = ast.copy_location(ast.Lambda(args=args, body=at), at)
        name = ast.copy_location(ast.Name("__referee_assert__", ast.Load()), node)
        line = ast.copy_location(ast.Constant(node.lineno), node)
        call = ast.copy_location(ast.Call(func=name, args=[lam, line], keywords=[]), node)
        return ast.copy_location(ast.Expr(call), node)


@dataclass
class Cases:
    """The asserts the test ran: how many, how many held, and the first failures."""

    passed: int = 0
    total: int = 0
    failures: list[str] = field(default_factory=list)

    def check(self, test: Callable[[], object], line: int) -> None:
        """Run one assert's condition and record it."""
        self.total += 1
        try:
            ok = bool(test())
            why = "assertion failed"
        except ProgramError as exc:
            ok, why = False, str(exc)
        except Exception as exc:  # the dataset's own check raised on the returned value
            ok, why = False, f"{type(exc).__name__}: {exc}"
        if ok:
            self.passed += 1
        elif len(self.failures) < 5:
            self.failures.append(f"line {line}: {why[:200]}")


class Remote:
    """A function of the sandboxed program, callable from the test code."""

    def __init__(self, session: SandboxSession, name: str) -> None:
        self._session = session
        self.__name__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._session.call(self.__name__, list(args), kwargs)


_BUILTINS = frozenset(dir(builtins))


def _free_names(tree: ast.AST) -> frozenset[str]:
    """Names the code reads but never binds, built-ins and dunders left out: the only names of
    the program it may be given."""
    read: set[str] = set()
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.Global | ast.Nonlocal):
            bound.update(node.names)
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
    return frozenset(n for n in read - bound - _BUILTINS if not n.startswith("__"))


@functools.lru_cache(maxsize=512)
def _compile_test(test: str, entry: str) -> tuple[Any, list[Call] | None, frozenset[str]]:
    """The test code with every assert recorded, its calls when they can be known in advance
    (see `_plan`), and the names it reads without binding them; compiled once per distinct
    test (a GRPO group shares one)."""
    try:
        tree = ast.parse(test, "<test>")
    except SyntaxError as exc:
        raise NotApplicable(f"the reference test code does not parse: {exc}") from None
    plan = plan_calls(tree, entry)
    free = _free_names(tree)
    return compile(_RecordAsserts().visit(tree), "<test>", "exec"), plan, free


@functools.lru_cache(maxsize=512)
def _compile_prompt(prompt: str) -> Any:
    try:
        return compile(prompt, "<prompt>", "exec")
    except SyntaxError as exc:
        raise NotApplicable(f"the reference prompt does not parse: {exc}") from None


def run_tests(
    session: SandboxSession, test_code: str, entry: str, prompt: str | None
) -> tuple[Cases, str | None]:
    """Run the test code against the program; its cases, and why it stopped early (or None).

    Raises:
        NotApplicable: The test code or the prompt does not parse, or the prompt does not run.
    """
    # Everything up to session.names runs while the sandbox loads the program.
    test, plan, free = _compile_test(test_code, entry)
    cases = Cases()
    namespace: dict[str, Any] = {"__name__": "__referee_test__"}
    if prompt:
        try:  # the prompt's own helpers (trusted dataset code) stay the dataset's
            exec(_compile_prompt(prompt), namespace)
        except Exception as exc:
            raise NotApplicable(f"the reference prompt does not run: {exc}") from None
    for name in free.intersection(session.names):
        if name not in namespace:  # the prompt's own helpers stay the dataset's
            namespace[name] = Remote(session, name)
    if entry not in namespace or not isinstance(namespace[entry], Remote):
        namespace[entry] = Remote(session, entry)
    namespace["candidate"] = namespace[entry]
    namespace["__referee_assert__"] = cases.check
    if plan and isinstance(namespace[entry], Remote) and isinstance(session, Pipelining):
        session.pipeline(entry, plan)  # known calls go out at once; replies come in order
    aborted = None
    try:
        exec(test, namespace)
        check = namespace.get("check")
        if callable(check) and not isinstance(check, Remote):
            check(namespace[entry])
    except ProgramError as exc:
        aborted = str(exc)
    except Exception as exc:
        aborted = f"{type(exc).__name__}: {exc}"
    return cases, aborted
