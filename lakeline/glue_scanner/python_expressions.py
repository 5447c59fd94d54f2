"""Expressions in the Python evaluator: names, attributes, subscripts, operators, comprehensions and
f-strings, computed exactly over literals and ``Unknown`` (with the reason) otherwise. Apart from the
calls (``python_calls``) and the statements (``python_eval``), the layers built on it."""

from __future__ import annotations

import ast
import builtins
import operator
from collections.abc import Callable
from typing import Any

from lakeline.glue_scanner.python_hooks import EvaluatorHooks
from lakeline.glue_scanner.python_limits import MAX_UNROLLED, too_big_to_compute, wide_format_spec
from lakeline.glue_scanner.values import (
    Const,
    Dict,
    Function,
    Lib,
    Module,
    Scope,
    Seq,
    Unknown,
    Value,
    from_literal,
    iterate,
    literal,
)

_CONVERSIONS: dict[int, Callable[[Any], str]] = {ord("s"): str, ord("r"): repr, ord("a"): ascii}

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
}
_SYMBOL: dict[type[ast.AST], str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.BitAnd: "and",
    ast.BitOr: "or",
    ast.BitXor: "^",
    ast.Eq: "=",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Is: "is",
    ast.IsNot: "is not",
}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}


class ExpressionEvaluator(EvaluatorHooks):
    """Evaluates expressions to analysed values; calls and statements are the layers above."""

    def truth(self, value: Value) -> bool | None:
        if isinstance(value, Const):
            return bool(value.value)
        if isinstance(value, Seq | Dict):
            return bool(value.items)
        return None

    def eval(self, node: ast.expr, scope: Scope) -> Value:
        if isinstance(node, ast.Constant):
            return Const(node.value) if not isinstance(node.value, type(...)) else Const(None)
        if isinstance(node, ast.Name):
            return self.name(node, scope)
        if isinstance(node, ast.Attribute):
            return self.attribute(self.eval(node.value, scope), node.attr, node)
        if isinstance(node, ast.Call):
            return self.call(node, scope)
        if isinstance(node, ast.Subscript):
            return self.subscript(self.eval(node.value, scope), node.slice, scope, node)
        if isinstance(node, ast.BinOp):
            return self.binary(node.op, self.eval(node.left, scope), self.eval(node.right, scope), node)
        if isinstance(node, ast.UnaryOp):
            return self.unary(node, self.eval(node.operand, scope))
        if isinstance(node, ast.BoolOp):
            return self.bool_op(node, scope)
        if isinstance(node, ast.Compare):
            return self.compare(node, scope)
        if isinstance(node, ast.IfExp):
            test = self.truth(self.eval(node.test, scope))
            if test is not None:
                return self.eval(node.body if test else node.orelse, scope)
            body, orelse = self.eval(node.body, scope), self.eval(node.orelse, scope)
            return body if body == orelse else self.unknown(node, "the value depends on a run-time condition")
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            items: list[Value] = []
            for element in node.elts:
                if isinstance(element, ast.Starred):
                    inner = iterate(self.eval(element.value, scope))
                    if inner is None:
                        return self.unknown(node, "a starred item is not resolved")
                    items.extend(inner)
                else:
                    items.append(self.eval(element, scope))
            return Seq(tuple(items))
        if isinstance(node, ast.Dict):
            pairs: list[tuple[Value, Value]] = []
            for key, value in zip(node.keys, node.values, strict=True):
                if key is None:
                    spread = self.eval(value, scope)
                    if not isinstance(spread, Dict):
                        return self.unknown(node, "a ** item is not resolved")
                    pairs.extend(spread.items)
                else:
                    pairs.append((self.eval(key, scope), self.eval(value, scope)))
            return Dict(tuple(pairs))
        if isinstance(node, ast.JoinedStr):
            return self.f_string(node, scope)
        if isinstance(node, ast.Lambda):
            return Function(node, scope, "<lambda>")
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp):
            results = self.comprehension(node.generators, scope, lambda inner: [self.eval(node.elt, inner)], node)
            return results if isinstance(results, Unknown) else Seq(tuple(results))
        if isinstance(node, ast.DictComp):
            pairs_or_unknown = self.comprehension(
                node.generators,
                scope,
                lambda inner: [Seq((self.eval(node.key, inner), self.eval(node.value, inner)))],
                node,
            )
            if isinstance(pairs_or_unknown, Unknown):
                return pairs_or_unknown
            return Dict(tuple((p.items[0], p.items[1]) for p in pairs_or_unknown if isinstance(p, Seq)))
        if isinstance(node, ast.NamedExpr):
            named = self.eval(node.value, scope)
            self.assign(node.target, named, scope, node)
            return named
        return self.unknown(node, f"{type(node).__name__} expressions are not analysed")

    def comprehension(
        self,
        generators: list[ast.comprehension],
        scope: Scope,
        produce: Callable[[Scope], list[Value]],
        node: ast.AST,
    ) -> list[Value] | Unknown:
        if not generators:
            return produce(scope)
        first, rest = generators[0], generators[1:]
        items = iterate(self.eval(first.iter, scope))
        if items is None:
            return self.unknown(node, "a comprehension over values not known before the job runs")
        results: list[Value] = []
        for item in items:
            inner = Scope(scope)
            self.assign(first.target, item, inner, node)
            keep = True
            for condition in first.ifs:
                truth = self.truth(self.eval(condition, inner))
                if truth is None:
                    return self.unknown(node, "a comprehension condition is only known at run time")
                keep = keep and truth
            if keep:
                produced = self.comprehension(rest, inner, produce, node)
                if isinstance(produced, Unknown):
                    return produced
                results.extend(produced)
            if len(results) > MAX_UNROLLED:
                return self.unknown(node, "a comprehension too long to follow")
        return results

    def f_string(self, node: ast.JoinedStr, scope: Scope) -> Value:
        parts = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                parts.append(str(part.value))
                continue
            if not isinstance(part, ast.FormattedValue):
                return self.unknown(node, "an f-string part is not analysed")
            value = self.eval(part.value, scope)
            if not isinstance(value, Const):
                return value if isinstance(value, Unknown) else self.unknown(node, "an f-string value is not resolved")
            spec = self.eval(part.format_spec, scope) if part.format_spec is not None else Const("")
            text: Any = value.value
            if part.conversion in _CONVERSIONS:
                text = _CONVERSIONS[part.conversion](text)
            spec_text = str(spec.value) if isinstance(spec, Const) else ""
            if wide_format_spec(spec_text):
                return self.unknown(node, "a format this wide is not computed")
            try:
                parts.append(format(text, spec_text))
            except (TypeError, ValueError):
                return self.unknown(node, "an f-string format is not resolved")
        return Const("".join(parts))

    def name(self, node: ast.Name, scope: Scope) -> Value:
        value = scope.lookup(node.id)
        if value is not None:
            return value
        module = scope.module
        if module is not None:
            if node.id in module.scope.vars:
                return module.scope.vars[node.id]
            for library in module.star_libraries:
                if self.star_provides(library, node.id):
                    return Lib(f"{library}.{node.id}")
        if hasattr(builtins, node.id):
            return Lib(f"builtins.{node.id}")
        return self.unknown(node, f"name {node.id!r} is not defined where it is used")

    def attribute(self, receiver: Value, name: str, node: ast.AST) -> Value:
        if isinstance(receiver, Lib):
            return self.library_value(f"{receiver.path}.{name}")
        if isinstance(receiver, Module):
            return self.module_attribute(receiver, name, node)
        return self.attribute_hook(receiver, name, node)

    def subscript(self, receiver: Value, index_node: ast.expr, scope: Scope, node: ast.AST) -> Value:
        if isinstance(index_node, ast.Slice):
            ok, python = literal(receiver)
            parts = [
                self.eval(p, scope) if p is not None else Const(None)
                for p in (index_node.lower, index_node.upper, index_node.step)
            ]
            if ok and all(isinstance(p, Const) for p in parts):
                try:
                    return from_literal(python[slice(*(p.value for p in parts if isinstance(p, Const)))])
                except (TypeError, ValueError):
                    pass
            return self.unknown(node, "a slice is not resolved")
        index = self.eval(index_node, scope)
        if isinstance(receiver, Unknown):
            return receiver
        if isinstance(receiver, Dict):
            if isinstance(index, Const):
                found = receiver.get(index.value)
                if found is not None:
                    return found
            return self.unknown(node, f"key {ast.unparse(index_node)} is not in the dict")
        if isinstance(receiver, Seq | Const) and isinstance(index, Const):
            ok, python = literal(receiver)
            if ok:
                try:
                    return from_literal(python[index.value])
                except (TypeError, IndexError, KeyError):
                    pass
            if (
                isinstance(receiver, Seq)
                and isinstance(index.value, int)
                and -len(receiver.items) <= index.value < len(receiver.items)
            ):
                return receiver.items[index.value]
            return self.unknown(node, "an index is not resolved")
        hooked = self.subscript_hook(receiver, index, node)
        if hooked is not None:
            return hooked
        return self.unknown(node, "a subscript is not analysed")

    def binary(self, op: ast.operator, left: Value, right: Value, node: ast.AST) -> Value:
        hooked = self.operator_hook(_SYMBOL.get(type(op), type(op).__name__), (left, right), node)
        if hooked is not None:
            return hooked
        if isinstance(left, Unknown):
            return left
        if isinstance(right, Unknown):
            return right
        ok_left, a = literal(left)
        ok_right, b = literal(right)
        function = _BINARY.get(type(op))
        if not (ok_left and ok_right) or function is None:
            return self.unknown(node, f"{type(op).__name__} of these values is not analysed")
        if too_big_to_compute(op, a, b):
            return self.unknown(node, "a value this large is not computed")
        try:
            return from_literal(function(a, b))
        except (TypeError, ValueError, ZeroDivisionError, OverflowError):
            return self.unknown(node, f"{type(op).__name__} of these values fails")

    def unary(self, node: ast.UnaryOp, operand: Value) -> Value:
        hooked = self.operator_hook(type(node.op).__name__.lower(), (operand,), node)
        if hooked is not None:
            return hooked
        ok, python = literal(operand)
        if not ok:
            return operand if isinstance(operand, Unknown) else self.unknown(node, "a unary operation is not resolved")
        try:
            if isinstance(node.op, ast.Not):
                return Const(not python)
            if isinstance(node.op, ast.USub):
                return from_literal(-python)
            if isinstance(node.op, ast.UAdd):
                return from_literal(+python)
            return from_literal(~python)
        except TypeError:
            return self.unknown(node, "a unary operation fails")

    def bool_op(self, node: ast.BoolOp, scope: Scope) -> Value:
        values = [self.eval(item, scope) for item in node.values]
        hooked = self.operator_hook("and" if isinstance(node.op, ast.And) else "or", values, node)
        if hooked is not None:
            return hooked
        for value in values:
            truth = self.truth(value)
            if truth is None:
                return (
                    value if isinstance(value, Unknown) else self.unknown(node, "a condition is only known at run time")
                )
            if truth == isinstance(node.op, ast.Or):
                return value
        return values[-1]

    def compare(self, node: ast.Compare, scope: Scope) -> Value:
        left = self.eval(node.left, scope)
        rights = [self.eval(item, scope) for item in node.comparators]
        hooked = self.operator_hook(_SYMBOL.get(type(node.ops[0]), "="), (left, *rights), node)
        if hooked is not None:
            return hooked
        result = True
        current = left
        for op, right in zip(node.ops, rights, strict=True):
            ok_a, a = literal(current)
            ok_b, b = literal(right)
            if not (ok_a and ok_b):
                unknown = current if isinstance(current, Unknown) else right
                return unknown if isinstance(unknown, Unknown) else self.unknown(node, "a comparison is not resolved")
            try:
                result = result and bool(_COMPARE[type(op)](a, b))
            except TypeError:
                return self.unknown(node, "a comparison fails")
            current = right
        return Const(result)
