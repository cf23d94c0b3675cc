"""The one engine for formulas.yaml: parse a counter expression once, evaluate it per dispatch with nulls kept.

An expression is arithmetic (+ - * /, numbers, parentheses) over pmc_perf.csv counter names and `$sysinfo` values,
as rocprof-compute's analysis configs write them. A missing counter makes the value None (never 0); so does a
division by zero, where rocprof-compute shows inf or NaN.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from perfreport.errors import InputError

SYS_PREFIX = "sys__"  # `$name` becomes a Python name: rocprof-compute's parser does the same with its own prefix
_OPS: dict[type, Callable[[float, float], float]] = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
}
Lookup = Callable[[str], "float | None"]


@dataclass(frozen=True)
class Formula:
    """One parsed expression: its text, tree, counters and sysinfo names."""

    text: str
    tree: ast.expr
    counters: tuple[str, ...]
    sysvars: tuple[str, ...]

    def evaluate(self, counter: Lookup, sysinfo: Mapping[str, float | None]) -> float | None:
        """The value for one dispatch: None where a counter or sysinfo value is missing or a divisor is 0."""
        return _eval(self.tree, counter, sysinfo)

    def mixed_passes(self, pass_of: Mapping[str, int]) -> list[int]:
        """Passes whose counters meet in one subtraction or division: sorted, empty when none do.

        rocprof-compute replays the kernel once per pass; a difference or ratio of counters from two replays can
        come out impossible (negative bytes, a hit rate over 100%), which one replay's counters never do."""
        found: set[int] = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub | ast.Div):
                left, right = _passes(node.left, pass_of), _passes(node.right, pass_of)
                if left and right and left | right != left & right:
                    found |= left | right
        return sorted(found)


def _passes(node: ast.AST, pass_of: Mapping[str, int]) -> set[int]:
    return {pass_of[n.id] for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in pass_of}


@lru_cache(maxsize=512)
def compile_formula(text: str, where: str = "formulas.yaml") -> Formula:
    """Parse `text`, refusing anything but arithmetic over names and numbers (the file is data, not code)."""
    try:
        tree = ast.parse(re.sub(r"\$(?=[A-Za-z_])", SYS_PREFIX, text.strip()), mode="eval").body
    except SyntaxError as exc:
        raise InputError(f"{where}: formula {text!r} does not parse ({exc.msg}); expected arithmetic over counter "
                         f"names, $sysinfo values and numbers.") from None
    allowed = ast.BinOp | ast.UnaryOp | ast.Name | ast.Constant | ast.Load | ast.operator | ast.unaryop
    for node in ast.walk(tree):
        number = not isinstance(node, ast.Constant) or isinstance(node.value, int | float)
        if not isinstance(node, allowed) or not number:
            raise InputError(f"{where}: formula {text!r} holds {type(node).__name__}; expected only + - * /, "
                             f"counter names, $sysinfo values and numbers.")
    names = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name)]
    counters = tuple(dict.fromkeys(n for n in names if not n.startswith(SYS_PREFIX)))
    sysvars = tuple(dict.fromkeys(n[len(SYS_PREFIX):] for n in names if n.startswith(SYS_PREFIX)))
    return Formula(text, tree, counters, sysvars)


def _eval(node: ast.expr, counter: Lookup, sysinfo: Mapping[str, float | None]) -> float | None:
    if isinstance(node, ast.Constant):
        return float(node.value) if isinstance(node.value, int | float) else None
    if isinstance(node, ast.Name):
        if node.id.startswith(SYS_PREFIX):
            return sysinfo.get(node.id[len(SYS_PREFIX):])
        return counter(node.id)
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, counter, sysinfo)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    assert isinstance(node, ast.BinOp)
    a, b = _eval(node.left, counter, sysinfo), _eval(node.right, counter, sysinfo)
    if a is None or b is None:
        return None
    if isinstance(node.op, ast.Div):
        return None if b == 0 else a / b
    op = _OPS.get(type(node.op))
    if op is None:
        raise InputError(f"formula operator {type(node.op).__name__} is not supported; expected + - * /.")
    return op(a, b)
