"""A small abstract interpreter of Python, for reading scripts without running them.

It walks a module's statements the way Python would run them, over the values of ``values``: literals
(strings, numbers, lists, dicts) are computed exactly, functions are analysed when they are called with
their arguments bound, imports of the job's own modules (extra .py files, zips) are followed, and
anything else becomes ``Unknown`` carrying the reason. Conditions known before the job runs
(``if __name__ == "__main__"``, a job argument) pick their branch; others analyse both branches and the
variables that differ become unknown. Loops over known values are unrolled.

Libraries are values named by their import path (``Lib``); what their calls and objects mean is left to
a subclass (the Glue and Spark API in ``script``), through the ``*_hook`` methods.

This module holds the statements and the modules; the evaluator is built in layers, each a class over
the one before: ``python_hooks`` (its state and the hooks), ``python_expressions``, ``python_calls``,
and ``PythonEvaluator`` here.
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Sequence

from lakeline.glue_scanner.column_exprs import Problem
from lakeline.glue_scanner.python_calls import CallEvaluator, FunctionReturn
from lakeline.glue_scanner.python_limits import MAX_STEPS, MAX_UNROLLED
from lakeline.glue_scanner.values import Const, Dict, Function, Module, ModuleState, Scope, Unknown, Value, iterate

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


class _OutOfSteps(Exception):
    pass


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class PythonEvaluator(CallEvaluator):
    """Runs nothing: evaluates a module over analysed values. Subclasses give libraries their meaning."""

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
            raise FunctionReturn(self.eval(node.value, scope) if node.value is not None else Const(None))
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

    def if_statement(self, node: ast.If, scope: Scope) -> None:
        truth = self.truth(self.eval(node.test, scope))
        if truth is not None:
            self.block(node.body if truth else node.orelse, scope)
            return
        writes_before = self.effects()
        branches: list[tuple[Scope, FunctionReturn | None]] = []
        for body in (node.body, node.orelse):
            branch = scope.copy()
            returned = None
            try:
                self.block(body, branch)
            except FunctionReturn as signal:
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
            raise FunctionReturn(
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
