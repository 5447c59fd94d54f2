"""A small abstract interpreter of Python, for reading scripts without running them.

It walks a module's statements the way Python would run them, over the values of ``values``: literals
(strings, numbers, lists, dicts) are computed exactly, functions are analysed when they are called with
their arguments bound, imports of the job's own modules (extra .py files, zips) are followed, and
anything else becomes ``Unknown`` carrying the reason. Conditions known before the job runs
(``if __name__ == "__main__"``, a job argument) pick their branch; others analyse both branches and the
variables that differ become unknown. Loops over known values are unrolled.

Libraries are values named by their import path (``Lib``); what their calls and objects mean is left to
a subclass (the Glue and Spark API in ``script``), through the ``*_hook`` methods.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import json
import operator
import re
import string
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakeline.errors import InvalidInputError
from lakeline.glue_scanner.column_exprs import Problem, Site
from lakeline.glue_scanner.values import (
    Const,
    Dict,
    Function,
    Lib,
    Module,
    ModuleState,
    Scope,
    Seq,
    Unknown,
    Value,
    iterate,
)

_CONVERSIONS: dict[int, Callable[[Any], str]] = {ord("s"): str, ord("r"): repr, ord("a"): ascii}
MAX_CALL_DEPTH = 30
MAX_UNROLLED = 200
MAX_STEPS = 100_000
MAX_LITERAL = 100_000
"""Longest string or list computed from literals: a script cannot make the analysis eat memory."""

KNOWN_LIBRARIES = frozenset(
    [
        "awsglue",
        "pyspark",
        "py4j",
        "sys",
        "os",
        "json",
        "re",
        "datetime",
        "time",
        "logging",
        "boto3",
        "botocore",
        "typing",
        "collections",
        "itertools",
        "functools",
        "math",
        "decimal",
        "uuid",
        "urllib",
        "pandas",
        "numpy",
        "dateutil",
        "pytz",
        "argparse",
        "copy",
        "io",
        "csv",
        "random",
        "string",
        "hashlib",
        "base64",
        "traceback",
        "dataclasses",
        "enum",
        "pathlib",
        "textwrap",
        "concurrent",
        "threading",
        "subprocess",
        "shutil",
        "tempfile",
        "gzip",
        "zipfile",
        "awswrangler",
        "requests",
        "builtins",
        "operator",
        "glob",
        "calendar",
        "pprint",
        "warnings",
        "abc",
        "contextlib",
        "signal",
        "socket",
        "struct",
        "platform",
        "getpass",
        "inspect",
        "fnmatch",
        "posixpath",
        "ntpath",
        "yaml",
        "pyarrow",
        "delta",
    ]
)


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


@dataclass(frozen=True)
class ModuleSource:
    """A Python module the script can import: from an extra .py file or inside an extra .zip."""

    name: str
    filename: str
    text: str


def module_sources(files: Iterable[Path]) -> dict[str, ModuleSource]:
    """Modules by import name: ``helpers.py`` is ``helpers``; ``pkg/mod.py`` in a zip is ``pkg.mod``."""
    modules: dict[str, ModuleSource] = {}
    for path in files:
        if path.suffix == ".py":
            modules[path.stem] = ModuleSource(path.stem, path.name, path.read_text(encoding="utf-8"))
            continue
        try:
            with zipfile.ZipFile(path) as archive:
                for member in archive.namelist():
                    if not member.endswith(".py"):
                        continue
                    parts = member[: -len(".py")].split("/")
                    if parts[-1] == "__init__":
                        parts = parts[:-1]
                    if not parts or not all(part.isidentifier() for part in parts):
                        continue
                    name = ".".join(parts)
                    text = archive.read(member).decode("utf-8", errors="replace")
                    modules[name] = ModuleSource(name, f"{path.name}/{member}", text)
        except (zipfile.BadZipFile, OSError) as error:
            raise InvalidInputError(f"cannot read {path} as a zip archive: {error}") from error
    return modules


class _Return(Exception):
    def __init__(self, value: Value) -> None:
        super().__init__()
        self.value = value


class _OutOfSteps(Exception):
    pass


def _too_big(op: ast.operator, a: Any, b: Any) -> bool:
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
        return any(int(n) > _MAX_WIDTH for pair in numbers for n in pair if n)
    return False


_MAX_WIDTH = 1000


def _wide_spec(spec: str) -> bool:
    """A format spec asking for a width or precision beyond what a name needs (or one given at run time)."""
    return "{" in spec or any(int(number) > _MAX_WIDTH for number in re.findall(r"\d+", spec))


def _wide_template(template: str) -> bool:
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError:
        return False  # formatting it fails anyway, and says so
    return any(spec and _wide_spec(spec) for _, _, spec, _ in fields)


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


def const_str(value: Value | None) -> str | None:
    return value.value if isinstance(value, Const) and isinstance(value.value, str) else None


def literal(value: Value) -> tuple[bool, Any]:
    """The plain Python value of a literal value, if it is one."""
    if isinstance(value, Const):
        return True, value.value
    if isinstance(value, Seq):
        items = [literal(item) for item in value.items]
        return all(ok for ok, _ in items), [item for _, item in items]
    if isinstance(value, Dict):
        pairs = [(literal(k), literal(v)) for k, v in value.items]
        if all(k[0] and v[0] for k, v in pairs) and all(
            isinstance(k[1], str | int | float | bool) or k[1] is None for k, _ in pairs
        ):
            return True, {k[1]: v[1] for k, v in pairs}
    return False, None


def from_literal(python: Any) -> Value:
    if isinstance(python, str | int | float | bool | bytes) or python is None:
        return Const(python)
    if isinstance(python, list | tuple | set | frozenset):
        return Seq(tuple(from_literal(item) for item in python))
    if isinstance(python, dict):
        return Dict(tuple((from_literal(k), from_literal(v)) for k, v in python.items()))
    raise TypeError(f"not a literal: {python!r}")


def flatten(values: Iterable[Value]) -> list[Value]:
    """``select("a", "b")`` and ``select(["a", "b"])`` alike."""
    result: list[Value] = []
    for value in values:
        if isinstance(value, Seq):
            result.extend(value.items)
        else:
            result.append(value)
    return result


class PythonEvaluator:
    """Runs nothing: evaluates a module over analysed values. Subclasses give libraries their meaning."""

    def __init__(self, modules: Mapping[str, ModuleSource], libraries: frozenset[str] = frozenset()) -> None:
        self.module_sources = modules
        self.libraries = libraries
        self.problems: list[Problem] = []
        self.modules: dict[str, Module] = {}
        self.depth = 0
        self.pending_returns: list[list[Value]] = []
        self.file = ""
        self.steps = 0

    # Hooks for the libraries' meaning ----------------------------------------------------------

    def effects(self) -> int:
        """How many effects (writes) have happened so far: branches and loops that add some are reported."""
        return 0

    def star_provides(self, library: str, name: str) -> bool:
        """Whether ``from library import *`` defines ``name``."""
        return False

    def attribute_hook(self, receiver: Value, name: str, node: ast.AST) -> Value:
        """An attribute of a library object (or of an ``Unknown``, which stays unknown by default)."""
        return receiver if isinstance(receiver, Unknown) else self.unknown(node, f"attribute {name} is not analysed")

    def subscript_hook(self, receiver: Value, index: Value, node: ast.AST) -> Value | None:
        return None

    def operator_hook(self, symbol: str, operands: Sequence[Value], node: ast.AST) -> Value | None:
        """An operator over library objects (columns); ``None``: leave it to plain Python."""
        return None

    def call_hook(self, callee: Value, args: list[Value], kwargs: dict[str, Value], node: ast.Call) -> Value:
        return self.unknown(node, "a call of this value is not analysed")

    def library_hook(self, path: str, args: list[Value], kwargs: dict[str, Value], node: ast.Call) -> Value:
        return self.unknown(node, f"call to {path} is not analysed")

    def method_hook(
        self, receiver: Value, name: str, args: list[Value], kwargs: dict[str, Value], node: ast.Call
    ) -> Value:
        return receiver if isinstance(receiver, Unknown) else self.unknown(node, f"method {name}() is not analysed")

    def mutation_hook(
        self, receiver: Value, name: str, args: list[Value], kwargs: dict[str, Value], node: ast.Call
    ) -> Value | None:
        """The new state of a library object that ``receiver.name(...)`` changes in place, if it does."""
        return None

    def mutation(
        self, receiver: Value, name: str, args: list[Value], kwargs: dict[str, Value], node: ast.Call
    ) -> Value | None:
        if isinstance(receiver, Seq) and name in ("append", "extend"):
            added = args[:1] if name == "append" else list(iterate(args[0]) or []) if args else []
            return Seq((*receiver.items, *added))
        return self.mutation_hook(receiver, name, args, kwargs, node)

    def set_item_hook(self, receiver: Value, key: Value, value: Value | None, node: ast.AST) -> Value | None:
        """``receiver[key] = value`` (``del receiver[key]`` when ``value`` is ``None``) on a library object."""
        return None

    def library_value(self, path: str) -> Value:
        """A library attribute used as a value (``sys.argv``); by default the library object itself."""
        return Lib(path)

    def decorator_hook(self, decorator: Value, function: Function) -> Value | None:
        """What a decorator makes of a function; ``None``: the function itself."""
        return None

    def site(self, node: ast.AST) -> Site:
        return Site(getattr(node, "lineno", 0), self.file)

    def unknown(self, node: ast.AST, message: str) -> Unknown:
        return Unknown(self.site(node).problem(message))

    def report(self, node: ast.AST, message: str) -> None:
        self.problems.append(self.site(node).problem(message))

    # Modules -----------------------------------------------------------------------------------

    def run_main(self, tree: ast.Module, filename: str) -> None:
        state = ModuleState("__main__", filename)
        state.scope.vars["__name__"] = Const("__main__")
        try:
            self.block(tree.body, state.scope)
        except _OutOfSteps:
            # Loops over long literal lists, nested: what was found so far stands, the rest is reported.
            self.problems.append(Problem(0, f"the analysis stopped after {MAX_STEPS} statements"))

    def is_module(self, name: str) -> bool:
        return name in self.module_sources or any(m.startswith(f"{name}.") for m in self.module_sources)

    def load_module(self, name: str, node: ast.AST) -> Value:
        if name in self.modules:
            return self.modules[name]
        source = self.module_sources.get(name)
        state = ModuleState(name, source.filename if source else name)
        state.scope.vars["__name__"] = Const(name)
        module = Module(state)
        self.modules[name] = module
        if source is None:
            return module  # a package folder without __init__.py
        try:
            tree = ast.parse(source.text, filename=source.filename)
        except SyntaxError as error:
            problem = Problem(error.lineno or 0, f"syntax error: {error.msg}", source.filename)
            self.modules[name] = Module(state)
            self.problems.append(problem)
            return Unknown(problem)
        previous, self.file = self.file, source.filename
        try:
            self.block(tree.body, state.scope)
        finally:
            self.file = previous
        return module

    def module_value(self, name: str, node: ast.AST) -> Value:
        if self.is_module(name):
            return self.load_module(name, node)
        top = name.split(".")[0]
        if top in KNOWN_LIBRARIES or top in self.libraries:
            return self.library_value(name)
        return self.unknown(node, f"module {name!r} is neither a known library nor one of the job's extra files")

    def module_attribute(self, module: Module, name: str, node: ast.AST) -> Value:
        if name in module.state.scope.vars:
            return module.state.scope.vars[name]
        qualified = f"{module.state.name}.{name}"
        if self.is_module(qualified):
            return self.load_module(qualified, node)
        return self.unknown(node, f"{module.state.filename} defines no {name!r}")

    # Statements --------------------------------------------------------------------------------

    def block(self, statements: Sequence[ast.stmt], scope: Scope) -> None:
        for statement in statements:
            self.statement(statement, scope)

    def statement(self, node: ast.stmt, scope: Scope) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise _OutOfSteps
        if isinstance(node, ast.Expr):
            self.eval(node.value, scope)
        elif isinstance(node, ast.Assign):
            value = self.eval(node.value, scope)
            for target in node.targets:
                self.assign(target, value, scope, node)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.assign(node.target, self.eval(node.value, scope), scope, node)
        elif isinstance(node, ast.AugAssign):
            if isinstance(node.target, ast.Name):
                current = self.eval(node.target, scope)
                self.assign(node.target, self.binary(node.op, current, self.eval(node.value, scope), node), scope, node)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    scope.bind(alias.asname, self.module_value(alias.name, node))
                else:
                    if self.is_module(alias.name):
                        self.load_module(alias.name, node)
                    top = alias.name.split(".")[0]
                    scope.bind(top, self.module_value(top, node))
        elif isinstance(node, ast.ImportFrom):
            self.import_from(node, scope)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            scope.bind(node.name, self.define(node, scope))
        elif isinstance(node, ast.ClassDef):
            scope.bind(node.name, self.unknown(node, f"class {node.name} is not analysed"))
        elif isinstance(node, ast.Return):
            raise _Return(self.eval(node.value, scope) if node.value is not None else Const(None))
        elif isinstance(node, ast.If):
            self.if_statement(node, scope)
        elif isinstance(node, ast.For | ast.AsyncFor):
            self.for_statement(node, scope)
        elif isinstance(node, ast.While):
            self.unknown_loop(node, node.body, scope, "a while loop")
        elif isinstance(node, ast.Try | ast.TryStar):
            # Exception handlers are error paths: the lineage is that of the normal run.
            self.block(node.body, scope)
            self.block(node.orelse, scope)
            self.block(node.finalbody, scope)
        elif isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                value = self.eval(item.context_expr, scope)
                if item.optional_vars is not None:
                    self.assign(item.optional_vars, value, scope, node)
            self.block(node.body, scope)
        elif isinstance(node, ast.Global):
            scope.global_names.update(node.names)
        elif isinstance(node, ast.Break):
            raise _Break
        elif isinstance(node, ast.Continue):
            raise _Continue
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                if isinstance(target, ast.Subscript):
                    self.set_item(target, None, scope)
        # pass, assert, raise: no lineage

    def assign(self, target: ast.expr, value: Value, scope: Scope, node: ast.AST) -> None:
        if isinstance(target, ast.Name):
            scope.bind(target.id, value)
        elif isinstance(target, ast.Tuple | ast.List):
            items = iterate(value)
            values = list(items) if items is not None and not isinstance(value, Const) else None
            for index, element in enumerate(target.elts):
                if isinstance(element, ast.Starred):
                    self.assign(element.value, self.unknown(node, "starred assignment is not analysed"), scope, node)
                elif values is not None and len(values) == len(target.elts):
                    self.assign(element, values[index], scope, node)
                else:
                    reason = value if isinstance(value, Unknown) else self.unknown(node, "unpacking is not resolved")
                    self.assign(element, reason, scope, node)
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            self.set_item(target, value, scope)
        # attributes, and subscripts of other objects: not followed

    def set_item(self, target: ast.Subscript, value: Value | None, scope: Scope) -> None:
        """``name[key] = value`` or ``del name[key]``: values are immutable, so ``name`` is rebound."""
        if not isinstance(target.value, ast.Name):
            return
        current = self.eval(target.value, scope)
        key = self.eval(target.slice, scope)
        changed: Value | None = None
        if isinstance(current, Dict) and isinstance(key, Const):
            kept = tuple((k, v) for k, v in current.items if not (isinstance(k, Const) and k.value == key.value))
            changed = Dict(kept if value is None else (*kept, (key, value)))
        elif not isinstance(current, Unknown):
            changed = self.set_item_hook(current, key, value, target)
        if changed is not None:
            scope.bind(target.value.id, changed)

    def import_from(self, node: ast.ImportFrom, scope: Scope) -> None:
        base = node.module or ""
        if node.level:
            current = scope.module.name if scope.module else "__main__"
            package = current.split(".")[: -node.level] if current != "__main__" else []
            base = ".".join([*package, *([node.module] if node.module else [])])
        for alias in node.names:
            if alias.name == "*":
                if self.is_module(base):
                    module = self.load_module(base, node)
                    if isinstance(module, Module):
                        for name, exported in module.state.scope.vars.items():
                            if not name.startswith("_"):
                                scope.bind(name, exported)
                elif scope.module is not None:
                    scope.module.star_libraries.append(base)
                continue
            qualified = f"{base}.{alias.name}"
            value: Value
            if self.is_module(qualified):
                value = self.load_module(qualified, node)
            elif self.is_module(base):
                module = self.load_module(base, node)
                value = self.module_attribute(module, alias.name, node) if isinstance(module, Module) else module
            else:
                value = self.module_value(qualified, node)
            scope.bind(alias.asname or alias.name, value)

    def define(self, node: ast.FunctionDef | ast.AsyncFunctionDef, scope: Scope) -> Value:
        function = Function(node, scope, node.name)
        for decorator in node.decorator_list:
            decorated = self.decorator_hook(self.eval(decorator, scope), function)
            if decorated is not None:
                return decorated
        return function

    def truth(self, value: Value) -> bool | None:
        if isinstance(value, Const):
            return bool(value.value)
        if isinstance(value, Seq | Dict):
            return bool(value.items)
        return None

    def if_statement(self, node: ast.If, scope: Scope) -> None:
        truth = self.truth(self.eval(node.test, scope))
        if truth is not None:
            self.block(node.body if truth else node.orelse, scope)
            return
        writes_before = self.effects()
        branches: list[tuple[Scope, _Return | None]] = []
        for body in (node.body, node.orelse):
            branch = scope.copy()
            returned = None
            try:
                self.block(body, branch)
            except _Return as signal:
                returned = signal
            except (_Break, _Continue):
                pass
            branches.append((branch, returned))
        if self.effects() > writes_before:
            condition = ast.unparse(node.test)[:80]
            self.report(node, f"condition {condition!r} is only known at run time: both branches' writes are included")
        (first, first_return), (second, second_return) = branches
        if first_return and second_return:
            same = first_return.value == second_return.value
            raise _Return(
                first_return.value if same else self.unknown(node, "the returned value depends on a condition")
            )
        for returned in (first_return, second_return):
            if returned is not None and self.pending_returns:
                self.pending_returns[-1].append(returned.value)
        if first_return:
            scope.vars = second.vars
        elif second_return:
            scope.vars = first.vars
        else:
            merged: dict[str, Value] = {}
            for name in {*first.vars, *second.vars}:
                a, b = first.vars.get(name), second.vars.get(name)
                if a is None or b is None or a == b:
                    merged[name] = a if a is not None else b  # type: ignore[assignment]
                else:
                    merged[name] = self.unknown(node, f"{name} is set differently depending on a run-time condition")
            scope.vars = merged

    def for_statement(self, node: ast.For | ast.AsyncFor, scope: Scope) -> None:
        items = iterate(self.eval(node.iter, scope))
        values = list(items) if items is not None else None
        if values is None or len(values) > MAX_UNROLLED:
            self.unknown_loop(node, node.body, scope, "a loop over values not known before the job runs", node.target)
            return
        for item in values:
            self.assign(node.target, item, scope, node)
            try:
                self.block(node.body, scope)
            except _Break:
                return
            except _Continue:
                continue
        self.block(node.orelse, scope)

    def unknown_loop(
        self, node: ast.stmt, body: list[ast.stmt], scope: Scope, what: str, target: ast.expr | None = None
    ) -> None:
        writes_before = self.effects()
        if target is not None:
            self.assign(target, self.unknown(node, f"the variable of {what}"), scope, node)
        with contextlib.suppress(_Break, _Continue):
            self.block(body, scope)
        if self.effects() > writes_before:
            self.report(node, f"{what}: its body is analysed once")

    # Expressions -------------------------------------------------------------------------------

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
            if _wide_spec(spec_text):
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
        if _too_big(op, a, b):
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

    # Calls -------------------------------------------------------------------------------------

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
                except _Return as signal:
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
            if (name == "format" and _wide_template(receiver.value)) or (
                name == "zfill" and any(isinstance(p, int) and p > _MAX_WIDTH for _, p in converted)
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
