"""The values a script's variables can hold while it is analysed (never run).

Plain Python values (strings, numbers, lists, dicts) are followed as far as they are literal or built
from literals and job arguments. Spark and Glue objects are modelled by kind: a frame, a column
expression, a reader or writer being configured, the Glue context. Anything else is ``Unknown``, which
carries the problem that made it unknown, so the report can say why when it matters. ``literal`` and
``from_literal`` turn values into plain Python values and back.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from lakeline.glue_scanner.column_exprs import ColExpr, Problem
from lakeline.glue_scanner.frames import Frame


class Value:
    """Base of every analysed value."""


@dataclass(frozen=True)
class Const(Value):
    value: Any
    """A str, int, float, bool, bytes or None."""


@dataclass(frozen=True)
class Seq(Value):
    items: tuple[Value, ...]


@dataclass(frozen=True)
class Dict(Value):
    items: tuple[tuple[Value, Value], ...]

    def get(self, key: Any) -> Value | None:
        for item_key, value in self.items:
            if isinstance(item_key, Const) and item_key.value == key:
                return value
        return None


@dataclass(frozen=True)
class Unknown(Value):
    problem: Problem


@dataclass(frozen=True)
class FrameValue(Value):
    frame: Frame


@dataclass(frozen=True)
class ColumnValue(Value):
    expr: ColExpr


@dataclass(frozen=True)
class Lib(Value):
    """A library object named by its import path: ``pyspark.sql.functions.col``."""

    path: str


@dataclass(frozen=True)
class Obj(Value):
    """A Spark or Glue object: the Glue context, a reader, a writer, grouped data, a window spec..."""

    kind: str
    frame: Frame | None = None
    settings: tuple[tuple[str, Value], ...] = ()
    exprs: tuple[ColExpr, ...] = ()

    def setting(self, key: str) -> Value | None:
        for name, value in reversed(self.settings):
            if name == key:
                return value
        return None

    def with_setting(self, key: str, value: Value) -> Obj:
        return Obj(self.kind, self.frame, (*self.settings, (key, value)), self.exprs)


@dataclass(frozen=True)
class Args(Value):
    """What ``getResolvedOptions`` returns: the asked-for job arguments by name."""

    values: tuple[tuple[str, Value], ...]

    def get(self, name: str) -> Value | None:
        for key, value in self.values:
            if key == name:
                return value
        return None


class Scope:
    """Variables of a module or a function call; lookups go outwards."""

    def __init__(self, parent: Scope | None = None, module: ModuleState | None = None) -> None:
        self.vars: dict[str, Value] = {}
        self.parent = parent
        self.module: ModuleState | None = module if module is not None else (parent.module if parent else None)
        self.global_names: set[str] = set()

    def lookup(self, name: str) -> Value | None:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.vars:
                return scope.vars[name]
            scope = scope.parent
        return None

    def bind(self, name: str, value: Value) -> None:
        if name in self.global_names and self.module is not None:
            self.module.scope.vars[name] = value
        else:
            self.vars[name] = value

    def copy(self) -> Scope:
        other = Scope(self.parent, self.module)
        other.vars = dict(self.vars)
        other.global_names = set(self.global_names)
        return other


@dataclass(eq=False)
class ModuleState:
    name: str
    filename: str
    scope: Scope = field(init=False)
    star_libraries: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.scope = Scope(module=self)


@dataclass(frozen=True, eq=False)
class Function(Value):
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
    scope: Scope
    name: str


@dataclass(frozen=True, eq=False)
class Module(Value):
    state: ModuleState


def iterate(value: Value) -> Iterator[Value] | None:
    """The items a ``for`` loop would see, when they are known."""
    if isinstance(value, Seq):
        return iter(value.items)
    if isinstance(value, Dict):
        return iter(key for key, _ in value.items)
    if isinstance(value, Const) and isinstance(value.value, str):
        return iter(Const(character) for character in value.value)
    return None


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
