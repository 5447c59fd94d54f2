"""Calls in the Python evaluator: a function's body analysed with its arguments bound, builtins and str
methods computed over literals, library calls handed to the hooks. Apart from the expressions it builds
on and the statements (``python_eval``) that build on it."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lakeline.glue_scanner.python_expressions import ExpressionEvaluator
from lakeline.glue_scanner.python_limits import MAX_CALL_DEPTH, MAX_FORMAT_WIDTH, MAX_UNROLLED, wide_format_template
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
    const_str,
    from_literal,
    iterate,
    literal,
)

_STRING_METHODS = frozenset(
    [
        "format",
        "join",
        "lower",
        "upper",
        "strip",
        "lstrip",
        "rstrip",
        "replace",
        "split",
        "rsplit",
        "startswith",
        "endswith",
        "title",
        "capitalize",
        "removeprefix",
        "removesuffix",
        "zfill",
    ]
)


class FunctionReturn(Exception):
    def __init__(self, value: Value) -> None:
        super().__init__()
        self.value = value


class CallEvaluator(ExpressionEvaluator):
    """Evaluates calls: of the script's functions, of builtins, of methods, of libraries (the hooks)."""

    def arguments(self, node: ast.Call, scope: Scope) -> tuple[list[Value], dict[str, Value]]:
        args: list[Value] = []
        for item in node.args:
            if isinstance(item, ast.Starred):
                spread = iterate(self.eval(item.value, scope))
                if spread is None:
                    args.append(self.unknown(node, "*arguments are not resolved"))
                else:
                    args.extend(spread)
            else:
                args.append(self.eval(item, scope))
        kwargs: dict[str, Value] = {}
        for keyword in node.keywords:
            value = self.eval(keyword.value, scope)
            if keyword.arg is not None:
                kwargs[keyword.arg] = value
            elif isinstance(value, Dict):
                for key, item_value in value.items:
                    if isinstance(key, Const) and isinstance(key.value, str):
                        kwargs[key.value] = item_value
        return args, kwargs

    def call(self, node: ast.Call, scope: Scope) -> Value:
        args, kwargs = self.arguments(node, scope)
        if isinstance(node.func, ast.Attribute):
            receiver = self.eval(node.func.value, scope)
            name = node.func.attr
            if isinstance(node.func.value, ast.Name):
                # Values are immutable here: a method that changes its object rebinds the variable.
                changed = self.mutation(receiver, name, args, kwargs, node)
                if changed is not None:
                    scope.bind(node.func.value.id, changed)
                    return Const(None)
            return self.method(receiver, name, args, kwargs, node)
        return self.call_value(self.eval(node.func, scope), args, kwargs, node)

    def call_value(self, callee: Value, args: list[Value], kwargs: dict[str, Value], node: ast.Call) -> Value:
        if isinstance(callee, Function):
            return self.call_function(callee, args, kwargs, node)
        if isinstance(callee, Lib):
            return self.library_call(callee.path, args, kwargs, node)
        if isinstance(callee, Unknown):
            return callee
        return self.call_hook(callee, args, kwargs, node)

    def call_function(self, function: Function, args: list[Value], kwargs: dict[str, Value], node: ast.AST) -> Value:
        if self.depth >= MAX_CALL_DEPTH:
            return self.unknown(node, f"calls nest deeper than {MAX_CALL_DEPTH} (recursion?)")
        scope = Scope(function.scope)
        spec = function.node.args
        positional = [*spec.posonlyargs, *spec.args]
        defaults = dict(
            zip([p.arg for p in positional][len(positional) - len(spec.defaults) :], spec.defaults, strict=True)
        )
        for parameter, value in zip(positional, args, strict=False):
            scope.vars[parameter.arg] = value
        if spec.vararg is not None:
            scope.vars[spec.vararg.arg] = Seq(tuple(args[len(positional) :]))
        extra: list[tuple[Value, Value]] = []
        names = {p.arg for p in (*positional, *spec.kwonlyargs)}
        for key, value in kwargs.items():
            if key in names:
                scope.vars[key] = value
            else:
                extra.append((Const(key), value))
        if spec.kwarg is not None:
            scope.vars[spec.kwarg.arg] = Dict(tuple(extra))
        kw_defaults = {p.arg: d for p, d in zip(spec.kwonlyargs, spec.kw_defaults, strict=True) if d is not None}
        for parameter in (*positional, *spec.kwonlyargs):
            if parameter.arg not in scope.vars:
                default = defaults.get(parameter.arg) or kw_defaults.get(parameter.arg)
                scope.vars[parameter.arg] = (
                    self.eval(default, function.scope)
                    if default is not None
                    else self.unknown(node, f"{function.name}() is called without {parameter.arg}")
                )
        module = function.scope.module
        previous = self.file
        self.file = module.filename if module is not None and module.name != "__main__" else ""
        self.depth += 1
        self.pending_returns.append([])
        try:
            if isinstance(function.node, ast.Lambda):
                result = self.eval(function.node.body, scope)
            else:
                try:
                    self.block(function.node.body, scope)
                    result = Const(None)
                except FunctionReturn as signal:
                    result = signal.value
        finally:
            self.depth -= 1
            pending = self.pending_returns.pop()
            self.file = previous
        if pending and any(value != result for value in pending):
            return self.unknown(node, f"what {function.name}() returns depends on a run-time condition")
        return result

    def library_call(self, path: str, args: list[Value], kwargs: dict[str, Value], node: ast.Call) -> Value:
        parts = path.split(".")
        if parts[0] == "builtins":
            return self.builtin(parts[-1], args, kwargs, node)
        if path in ("os.path.join", "posixpath.join"):
            texts = [const_str(a) for a in args]
            if all(t is not None for t in texts):
                joined = [t.strip("/") if i else t.rstrip("/") for i, t in enumerate(texts) if t is not None]
                return Const("/".join(joined))
            return self.unknown(node, "a path join is not resolved")
        if path == "json.loads" and args and (text := const_str(args[0])) is not None:
            try:
                return from_literal(json.loads(text))
            except (ValueError, TypeError):
                return self.unknown(node, "json.loads() of text that is not JSON")
        return self.library_hook(path, args, kwargs, node)

    def bind(self, parameters: Sequence[str], args: Sequence[Value], kwargs: Mapping[str, Value]) -> dict[str, Value]:
        bound = dict(zip(parameters, args, strict=False))
        bound.update(kwargs)
        return bound

    def builtin(self, name: str, args: list[Value], kwargs: dict[str, Value], node: ast.Call) -> Value:
        if name == "print":
            return Const(None)
        if name in ("list", "tuple", "set", "sorted", "reversed"):
            if not args:
                return Seq(())
            items = iterate(args[0])
            if items is None:
                return args[0] if isinstance(args[0], Unknown) else self.unknown(node, f"{name}() of unknown values")
            values = list(items)
            if name in ("sorted", "reversed"):
                ok, python = literal(Seq(tuple(values)))
                if not ok:
                    return self.unknown(node, f"{name}() of values not resolved")
                try:
                    return from_literal(sorted(python) if name == "sorted" else list(reversed(python)))
                except TypeError:
                    return self.unknown(node, f"{name}() fails")
            return Seq(tuple(values))
        if name == "dict":
            pairs = list(args[0].items) if args and isinstance(args[0], Dict) else []
            pairs.extend((Const(k), v) for k, v in kwargs.items())
            return Dict(tuple(pairs))
        if name == "enumerate" and args:
            items = iterate(args[0])
            if items is None:
                return self.unknown(node, "enumerate() of unknown values")
            return Seq(tuple(Seq((Const(i), v)) for i, v in enumerate(items)))
        if name == "zip":
            iterables = [iterate(a) for a in args]
            if any(i is None for i in iterables):
                return self.unknown(node, "zip() of unknown values")
            return Seq(
                tuple(Seq(tuple(group)) for group in zip(*(i for i in iterables if i is not None), strict=False))
            )
        simple: dict[str, Callable[..., Any]] = {
            "str": str,
            "int": int,
            "float": float,
            "bool": bool,
            "len": len,
            "repr": repr,
            "abs": abs,
            "min": min,
            "max": max,
            "sum": sum,
            "any": any,
            "all": all,
            "range": lambda *a: list(range(*a)) if len(range(*a)) <= MAX_UNROLLED else None,
        }
        if name in simple:
            converted = [literal(a) for a in args]
            if all(ok for ok, _ in converted) and not kwargs:
                try:
                    result = simple[name](*(python for _, python in converted))
                    if result is not None:
                        return from_literal(result)
                except (TypeError, ValueError):
                    pass
        given = next((a for a in args if isinstance(a, Unknown)), None)
        return given or self.unknown(node, f"{name}() of these values is not resolved")

    def method(self, receiver: Value, name: str, args: list[Value], kwargs: dict[str, Value], node: ast.Call) -> Value:
        if isinstance(receiver, Lib):
            return self.library_call(f"{receiver.path}.{name}", args, kwargs, node)
        if isinstance(receiver, Module):
            return self.call_value(self.module_attribute(receiver, name, node), args, kwargs, node)
        if isinstance(receiver, Dict) and name == "get":
            key = args[0] if args else None
            found = receiver.get(key.value) if isinstance(key, Const) else None
            if found is not None:
                return found
            return args[1] if len(args) > 1 else Const(None)
        if isinstance(receiver, Dict) and name in ("items", "keys", "values"):
            if name == "items":
                return Seq(tuple(Seq((k, v)) for k, v in receiver.items))
            return Seq(tuple(k if name == "keys" else v for k, v in receiver.items))
        if isinstance(receiver, Const) and isinstance(receiver.value, str) and name in _STRING_METHODS:
            converted = [literal(a) for a in args]
            converted_kwargs = {k: literal(v) for k, v in kwargs.items()}
            if (name == "format" and wide_format_template(receiver.value)) or (
                name == "zfill" and any(isinstance(p, int) and p > MAX_FORMAT_WIDTH for _, p in converted)
            ):
                return self.unknown(node, f"str.{name}() this wide is not computed")
            if all(ok for ok, _ in converted) and all(ok for ok, _ in converted_kwargs.values()):
                try:
                    result = getattr(receiver.value, name)(
                        *(p for _, p in converted), **{k: p for k, (_, p) in converted_kwargs.items()}
                    )
                    return from_literal(result)
                except (TypeError, ValueError, KeyError, IndexError):
                    return self.unknown(node, f"str.{name}() fails on these values")
            unknown = next((a for a in [*args, *kwargs.values()] if isinstance(a, Unknown)), None)
            return unknown or self.unknown(node, f"str.{name}() of values not resolved")
        return self.method_hook(receiver, name, args, kwargs, node)
