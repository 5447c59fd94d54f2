"""The base of the Python evaluator: what one evaluation holds, and the hooks through which a subclass
(the Glue and Spark API in ``script``) gives libraries their meaning. Apart so that the layers above
(``python_expressions``, ``python_calls``, ``python_eval``) build on one interface: the few methods a
lower layer calls on a higher one are declared here."""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence

from lakeline.glue_scanner.column_exprs import Problem, Site
from lakeline.glue_scanner.job_modules import ModuleSource
from lakeline.glue_scanner.values import Function, Lib, Module, Scope, Seq, Unknown, Value, iterate


class EvaluatorHooks:
    """The state of an evaluation and the hooks' defaults; the walk itself is in the layers above."""

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

    # Given by the layers above: expressions call functions (python_calls), bind names and read modules
    # (python_eval); a called function's body is a block of statements (python_eval).

    def call(self, node: ast.Call, scope: Scope) -> Value:
        raise NotImplementedError

    def assign(self, target: ast.expr, value: Value, scope: Scope, node: ast.AST) -> None:
        raise NotImplementedError

    def module_attribute(self, module: Module, name: str, node: ast.AST) -> Value:
        raise NotImplementedError

    def block(self, statements: Sequence[ast.stmt], scope: Scope) -> None:
        raise NotImplementedError
