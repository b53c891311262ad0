"""A `multi` grader's ``calculate_output``: a formula over its sub-graders' scores, evaluated
without `eval`.

OpenAI's graders guide gives the formula's language: numbers, the sub-graders' names, ``+ - *
/``, ``^`` (power), parentheses, and the functions ``min max abs floor ceil exp sqrt log``.
referee parses it with `ast` (``^`` read as ``**``, with power's precedence) and walks the tree:
a node of any other kind (an attribute, a call of anything else, a subscript, a lambda, a
comprehension, a comparison, a string) is refused when the spec loads, with the formula named.

Every number is a float, so no formula builds a huge integer (``9**9**9`` overflows at once); an
overflow, a division by zero, a domain error (``sqrt(-1)``, ``log(0)``) or a result that is not
finite is a `Failure("invalid_value")` naming the formula, never a number.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Collection, Mapping

from referee.errors import RefereeError, RewardError

__all__ = ["FUNCTIONS", "FormulaError", "InvalidValue", "check_formula", "evaluate_formula"]

MAX_LENGTH = 4096
"""The longest formula accepted (characters)."""


class FormulaError(RefereeError, ValueError):
    """A ``calculate_output`` that is not a formula OpenAI's graders accept."""


class InvalidValue(RewardError):
    """The formula has no finite value for these scores: ``Failure("invalid_value")``."""

    failure_type = "invalid_value"


def _log(x: float, base: float | None = None) -> float:
    return math.log(x) if base is None else math.log(x, base)


FUNCTIONS: Mapping[str, tuple[Callable[..., float], int, int | None]] = {
    # name: (function, fewest arguments, most arguments (None: any number))
    "min": (min, 1, None),
    "max": (max, 1, None),
    "abs": (abs, 1, 1),
    "floor": (lambda x: float(math.floor(x)), 1, 1),
    "ceil": (lambda x: float(math.ceil(x)), 1, 1),
    "exp": (math.exp, 1, 1),
    "sqrt": (math.sqrt, 1, 1),
    "log": (_log, 1, 2),
}
"""The functions a formula may call (OpenAI's graders guide's list)."""

_BINARY: Mapping[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: math.pow,
}
_UNARY: Mapping[type[ast.unaryop], Callable[[float], float]] = {
    ast.USub: lambda a: -a,
    ast.UAdd: lambda a: a,
}


def _parse(formula: str) -> ast.expr:
    if not isinstance(formula, str) or not formula.strip():
        raise FormulaError(f"calculate_output must be a formula, got {formula!r}")
    if len(formula) > MAX_LENGTH:
        raise FormulaError(f"calculate_output is {len(formula)} characters; at most {MAX_LENGTH}")
    try:
        return ast.parse(formula.strip().replace("^", "**"), mode="eval").body
    except (SyntaxError, RecursionError, MemoryError, ValueError) as exc:
        raise FormulaError(f"calculate_output {formula!r} does not parse: {exc}") from None


def _check(node: ast.AST, names: Collection[str], formula: str) -> None:
    def refuse(what: str) -> FormulaError:
        return FormulaError(
            f"calculate_output {formula!r}: {what} is not allowed (a formula has numbers, the "
            f"sub-graders' names ({', '.join(sorted(names))}), + - * / ^, parentheses and "
            f"{', '.join(FUNCTIONS)})"
        )

    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise refuse(f"the constant {node.value!r}")
    elif isinstance(node, ast.Name):
        if node.id not in names:
            raise refuse(f"the name {node.id!r} (no sub-grader has it)")
    elif isinstance(node, ast.BinOp):
        if type(node.op) not in _BINARY:
            raise refuse(f"the operator {type(node.op).__name__}")
        _check(node.left, names, formula)
        _check(node.right, names, formula)
    elif isinstance(node, ast.UnaryOp):
        if type(node.op) not in _UNARY:
            raise refuse(f"the operator {type(node.op).__name__}")
        _check(node.operand, names, formula)
    elif isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            raise refuse(f"calling {ast.unparse(node.func)!r}")
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise refuse(f"keyword or starred arguments to {node.func.id}")
        _, least, most = FUNCTIONS[node.func.id]
        if len(node.args) < least or (most is not None and len(node.args) > most):
            raise refuse(f"{node.func.id} with {len(node.args)} arguments")
        for arg in node.args:
            _check(arg, names, formula)
    else:
        raise refuse(f"{type(node).__name__} ({ast.unparse(node)!r})")


def check_formula(formula: str, names: Collection[str]) -> ast.expr:
    """The parsed `formula`, checked to use only what a formula may.

    Raises:
        FormulaError: It does not parse, or uses anything else (the error names it).
    """
    tree = _parse(formula)
    try:
        _check(tree, names, formula)
    except RecursionError:
        raise FormulaError(f"calculate_output {formula!r} is nested too deeply") from None
    return tree


def _eval(node: ast.expr, scores: Mapping[str, float]) -> float:
    if isinstance(node, ast.Constant):
        assert isinstance(node.value, (int, float))
        return float(node.value)
    if isinstance(node, ast.Name):
        return float(scores[node.id])
    if isinstance(node, ast.BinOp):
        return float(_BINARY[type(node.op)](_eval(node.left, scores), _eval(node.right, scores)))
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_eval(node.operand, scores))
    assert isinstance(node, ast.Call)
    assert isinstance(node.func, ast.Name)
    fn = FUNCTIONS[node.func.id][0]
    return float(fn(*(_eval(a, scores) for a in node.args)))


def evaluate_formula(tree: ast.expr, scores: Mapping[str, float], formula: str) -> float:
    """The formula's value for the sub-graders' `scores` (a tree from `check_formula`).

    Raises:
        InvalidValue: No finite value (overflow, division by zero, a domain error).
    """
    try:
        value = _eval(tree, scores)
    except (OverflowError, ZeroDivisionError, ValueError) as exc:
        raise InvalidValue(f"calculate_output {formula!r}: {exc}") from None
    except RecursionError:
        raise InvalidValue(f"calculate_output {formula!r} is nested too deeply") from None
    if not math.isfinite(value):
        raise InvalidValue(f"calculate_output {formula!r} is {value} for {dict(scores)}")
    return value
