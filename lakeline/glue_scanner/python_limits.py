"""The bounds on what the Python evaluator computes, so that a script cannot make its analysis run long
or eat memory. Apart because every layer of the evaluator (``python_expressions``, ``python_calls``,
``python_eval``) keeps to them."""

from __future__ import annotations

import ast
import re
import string
from typing import Any

MAX_CALL_DEPTH = 30
MAX_UNROLLED = 200
MAX_STEPS = 100_000
MAX_LITERAL = 100_000
"""Longest string or list computed from literals: a script cannot make the analysis eat memory."""
MAX_FORMAT_WIDTH = 1000


def too_big_to_compute(op: ast.operator, a: Any, b: Any) -> bool:
    """Whether ``a op b`` gives a value too large to compute: a long string or list, a huge power, a wide %-format."""
    sized = (str, bytes, list)
    if isinstance(op, ast.Mult):
        for seq, count in ((a, b), (b, a)):
            if isinstance(seq, sized) and isinstance(count, int) and len(seq) * count > MAX_LITERAL:
                return True
    if isinstance(op, ast.Add) and isinstance(a, sized) and isinstance(b, sized):
        return len(a) + len(b) > MAX_LITERAL
    if isinstance(op, ast.Pow) and isinstance(b, int):
        return b > 256
    if isinstance(op, ast.Mod) and isinstance(a, str):
        numbers = re.findall(r"%[-+ #0]*(\d*)(?:\.(\d+))?", a)
        return any(int(n) > MAX_FORMAT_WIDTH for pair in numbers for n in pair if n)
    return False


def wide_format_spec(spec: str) -> bool:
    """A format spec asking for a width or precision beyond what a name needs (or one given at run time)."""
    return "{" in spec or any(int(number) > MAX_FORMAT_WIDTH for number in re.findall(r"\d+", spec))


def wide_format_template(template: str) -> bool:
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError:
        return False  # formatting it fails anyway, and says so
    return any(spec and wide_format_spec(spec) for _, _, spec, _ in fields)
