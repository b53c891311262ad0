"""Planning a test's calls in advance, so they can be pipelined to the sandbox.

A HumanEval-style ``check(candidate)`` is most often a straight line of asserts on calls with
literal arguments: then the exact sequence of calls is known before the test runs, and the
host can send them all at once instead of waiting for each reply in turn. The program still
runs them one by one, in the same order, with the same per-call timeout: the results are
exactly those of live calls. Anything that could change which calls happen (loops, branches,
``and``/``or``, conditional expressions, chained comparisons, comprehensions, calls to the
program's other functions) makes the test unplannable, and it runs with live calls.
"""

from __future__ import annotations

import ast
from typing import Any

__all__ = ["Call", "plan_calls"]

# Builtins a plannable test may call on the host (they never reach the sandbox).
_SAFE = frozenset({
    "abs", "all", "any", "bool", "dict", "float", "int", "isinstance", "len", "list", "max",
    "min", "round", "set", "sorted", "str", "sum", "tuple", "type", "frozenset", "repr",
})  # fmt: skip
_CONDITIONAL = (ast.BoolOp, ast.IfExp, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                ast.GeneratorExp, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)  # fmt: skip

Call = tuple[list[Any], dict[str, Any]]


class _Unplannable(Exception):
    pass


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise _Unplannable from None


def _calls(node: ast.AST, remote: str, out: list[Call], conditional: bool = False) -> None:
    """Append the remote calls under `node` in evaluation order; _Unplannable if any is not
    certain to happen, or has arguments that are not literals."""
    if isinstance(node, ast.Call):
        func = node.func
        for child in (*node.args, *(k.value for k in node.keywords)):
            if not isinstance(func, ast.Name) or func.id != remote:
                _calls(child, remote, out, conditional)
        if isinstance(func, ast.Name):
            if func.id == remote:
                if conditional or any(isinstance(a, ast.Starred) for a in node.args):
                    raise _Unplannable
                if any(k.arg is None for k in node.keywords):
                    raise _Unplannable
                args = [_literal(a) for a in node.args]
                kwargs = {str(k.arg): _literal(k.value) for k in node.keywords}
                out.append((args, kwargs))
                return
            if func.id not in _SAFE:
                raise _Unplannable  # possibly another function of the program
        else:
            _calls(func, remote, out, conditional)
        return
    if isinstance(node, _CONDITIONAL):
        conditional = True
    if isinstance(node, ast.Compare) and len(node.comparators) > 1:
        _calls(node.left, remote, out, conditional)
        _calls(node.comparators[0], remote, out, conditional)
        for later in node.comparators[1:]:  # evaluated only if the earlier comparison held
            _calls(later, remote, out, True)
        return
    for inner in ast.iter_child_nodes(node):
        _calls(inner, remote, out, conditional)


def _statements(body: list[ast.stmt], remote: str, out: list[Call]) -> None:
    for stmt in body:
        if isinstance(stmt, ast.Assert):
            _calls(stmt.test, remote, out)
            if stmt.msg is not None:
                _calls(stmt.msg, remote, out, conditional=True)
        elif isinstance(stmt, ast.Pass | ast.Import | ast.ImportFrom):
            continue
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # a docstring
        else:
            raise _Unplannable


def plan_calls(tree: ast.Module, entry: str) -> list[Call] | None:
    """The remote calls the test will make, in order, or None when that is not certain.

    Args:
        tree: The dataset's test code, parsed (before assert rewriting).
        entry: The entry point's name (for tests that call it by name, MBPP style).
    """
    check = next(
        (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None
    )
    out: list[Call] = []
    try:
        if check is not None:
            if len(check.args.args) != 1 or check.decorator_list:
                return None
            for stmt in tree.body:  # the module itself may only define things
                if stmt is not check and not isinstance(
                    stmt, ast.Import | ast.ImportFrom | ast.Assign | ast.FunctionDef | ast.Expr
                ):
                    return None
                if isinstance(stmt, ast.Assign | ast.Expr) and not isinstance(
                    getattr(stmt, "value", None), ast.Constant | ast.Dict | ast.List
                ):
                    return None
            _statements(check.body, check.args.args[0].arg, out)
        else:
            _statements(tree.body, entry, out)
    except (_Unplannable, RecursionError):
        return None
    return out or None
