"""Columns in a Glue script: ``pyspark.sql.functions`` calls, ``Column`` methods and the values used
as columns, made column expressions (``column_exprs``). The lowest layer of the script interpreter
(``script``), apart because the frames' methods, Glue's and Spark's, take their columns from it."""

from __future__ import annotations

import ast
from collections.abc import Iterable

from lakeline.glue_scanner.column_exprs import (
    Alias,
    Call,
    Cast,
    ColExpr,
    Lit,
    Opaque,
    Over,
    Ref,
    Star,
    When,
    function_call,
    parse_sql_expression,
)
from lakeline.glue_scanner.python_eval import PythonEvaluator
from lakeline.glue_scanner.values import ColumnValue, Const, Lib, Obj, Unknown, Value, const_str, flatten, literal

_VARIADIC_COLUMN_FUNCTIONS = frozenset(
    [
        "coalesce",
        "concat",
        "greatest",
        "least",
        "array",
        "struct",
        "create_map",
        "countdistinct",
        "count_distinct",
        "hash",
        "xxhash64",
        "map_concat",
        "arrays_zip",
        "named_struct",
    ]
)
_COLUMNS_AFTER_FIRST = frozenset({"concat_ws", "format_string"})


class SparkColumns(PythonEvaluator):
    """Values used as columns, column functions and Column methods."""

    # Columns -----------------------------------------------------------------------------------

    def column(self, value: Value | None, node: ast.AST, *, strings: bool = True) -> ColExpr:
        """A value used as a column: a column expression, or a name when ``strings`` (else a literal)."""
        if isinstance(value, ColumnValue):
            return value.expr
        if isinstance(value, Const):
            if isinstance(value.value, str) and strings:
                return Star() if value.value == "*" else Ref(value.value)
            return Lit(repr(value.value))
        if isinstance(value, Unknown):
            return Opaque(value.problem)
        return Opaque(self.site(node).problem("a column is expected here but the value is not resolved"))

    def columns(self, values: Iterable[Value], node: ast.AST, *, strings: bool = True) -> list[ColExpr]:
        return [self.column(value, node, strings=strings) for value in values]

    def names(self, value: Value | None, node: ast.AST) -> list[str] | None:
        if value is None:
            return None
        items = flatten([value])
        texts = [const_str(item) for item in items]
        return [t for t in texts if t is not None] if all(t is not None for t in texts) else None

    def condition(self, value: Value | None, node: ast.AST) -> ColExpr:
        text = const_str(value)
        if text is not None:
            return parse_sql_expression(text, self.site(node))
        return self.column(value, node, strings=False)

    def spark_function(self, name: str, args: list[Value], kwargs: dict[str, Value], node: ast.Call) -> Value:
        site = self.site(node)
        if name in ("col", "column"):
            text = const_str(args[0] if args else kwargs.get("col"))
            if text is None:
                return ColumnValue(self.column(args[0] if args else None, node))
            return ColumnValue(Star() if text == "*" else Ref(text))
        if name in ("lit", "typedLit"):
            return ColumnValue(Lit(repr(literal(args[0])[1]) if args else "NULL"))
        if name == "expr":
            text = const_str(args[0] if args else kwargs.get("str"))
            if text is None:
                return ColumnValue(Opaque(site.problem("F.expr text is not resolved")))
            return ColumnValue(parse_sql_expression(text, site))
        if name == "when":
            condition = self.condition(args[0] if args else kwargs.get("condition"), node)
            value = self.column(args[1] if len(args) > 1 else kwargs.get("value"), node, strings=False)
            return ColumnValue(When((condition,), (value,)))
        if name in ("udf", "pandas_udf"):
            return Obj("udf")
        if name == "broadcast":
            return args[0] if args else self.unknown(node, "broadcast() of nothing")
        flat = flatten(args)
        key = name.lower()
        exprs = []
        for position, argument in enumerate(flat):
            as_name = (
                key in _VARIADIC_COLUMN_FUNCTIONS
                or (position == 0 and key not in _COLUMNS_AFTER_FIRST)
                or (position > 0 and key in _COLUMNS_AFTER_FIRST)
            )
            exprs.append(self.column(argument, node, strings=as_name))
        return ColumnValue(function_call(name, tuple(exprs)))

    def column_method(
        self, expr: ColExpr, name: str, args: list[Value], kwargs: dict[str, Value], node: ast.Call
    ) -> Value:
        if name in ("alias", "name", "as_"):
            alias = const_str(args[0] if args else kwargs.get("alias"))
            return ColumnValue(Alias(expr, alias) if alias else expr)
        if name in ("cast", "astype"):
            target = args[0] if args else kwargs.get("dataType")
            type_name = const_str(target) or (
                target.path.rsplit(".", 1)[-1].removesuffix("()") if isinstance(target, Lib) else "?"
            )
            return ColumnValue(Cast(expr, type_name))
        if name == "over":
            window = args[0] if args else kwargs.get("window")
            spec = window.exprs if isinstance(window, Obj) and window.kind == "window" else ()
            return ColumnValue(Over(expr, spec))
        if name in ("when", "otherwise") and isinstance(expr, When):
            if name == "when":
                condition = self.condition(args[0] if args else None, node)
                value = self.column(args[1] if len(args) > 1 else None, node, strings=False)
                return ColumnValue(When((*expr.conditions, condition), (*expr.values, value)))
            return ColumnValue(
                When(expr.conditions, (*expr.values, self.column(args[0] if args else None, node, strings=False)))
            )
        if name in ("asc", "desc", "asc_nulls_first", "asc_nulls_last", "desc_nulls_first", "desc_nulls_last"):
            return ColumnValue(expr)
        others = tuple(self.column(a, node, strings=False) for a in [*args, *kwargs.values()])
        return ColumnValue(Call(name, (expr, *others)))
