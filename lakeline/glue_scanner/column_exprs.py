"""Column expressions of a PySpark or Glue script, kept as a small tree until a frame resolves them.

``F.col("x")`` names a column without saying of which frame: it is resolved by the method that uses it
(``df.withColumn("y", F.col("x") * 2)`` reads ``x`` of ``df``). ``df["x"]`` is bound to ``df`` at once.
Spark SQL snippets (``F.expr``, ``selectExpr``, string filters, ``push_down_predicate``) are parsed with
sqlglot into the same tree, so both spellings give the same lineage.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from lakeline.lineage.columns.model import Dependencies, Subtype
from lakeline.lineage.columns.walk import MASKING_FUNCTIONS


@dataclass(frozen=True, order=True)
class Problem:
    """Something in a script that cannot be resolved, at its line (0: the job as a whole)."""

    line: int
    message: str
    file: str = ""
    """The file the line is in, when it is not the job's script (an extra .py file)."""

    def __str__(self) -> str:
        where = f"{self.file} line {self.line}" if self.file else f"line {self.line}"
        return f"{where}: {self.message}" if self.line else self.message


@dataclass(frozen=True)
class Site:
    """Where in which file something happens: problems found there point at it."""

    line: int
    file: str = ""

    def problem(self, message: str) -> Problem:
        return Problem(self.line, message, self.file)


class ColExpr:
    """A column expression; subclasses are immutable."""


@dataclass(frozen=True)
class Ref(ColExpr):
    """A column named but not yet bound to a frame; ``o.id`` is qualified by a frame alias."""

    name: str


@dataclass(frozen=True)
class Bound(ColExpr):
    """A column already resolved against its frame (``df["x"]``)."""

    name: str
    dependencies: Dependencies
    problems: tuple[Problem, ...] = ()


@dataclass(frozen=True)
class Lit(ColExpr):
    text: str


@dataclass(frozen=True)
class Call(ColExpr):
    """A function or operator over columns; its value is computed from its arguments."""

    function: str
    args: tuple[ColExpr, ...]
    subtype: Subtype = Subtype.TRANSFORMATION
    masking: bool = False


@dataclass(frozen=True)
class Cast(ColExpr):
    child: ColExpr
    type: str


@dataclass(frozen=True)
class Alias(ColExpr):
    child: ColExpr
    name: str


@dataclass(frozen=True)
class When(ColExpr):
    """``F.when(c1, v1).when(c2, v2).otherwise(v3)`` and SQL ``CASE``."""

    conditions: tuple[ColExpr, ...]
    values: tuple[ColExpr, ...]


@dataclass(frozen=True)
class Over(ColExpr):
    """A window function: ``spec`` holds the partitioning and ordering columns."""

    child: ColExpr
    spec: tuple[ColExpr, ...]


@dataclass(frozen=True)
class Star(ColExpr):
    qualifier: str | None = None


@dataclass(frozen=True)
class Opaque(ColExpr):
    """An expression that cannot be analysed (an unknown call); resolving it reports ``problem``."""

    problem: Problem


AGGREGATE_FUNCTIONS = frozenset(
    {
        "sum",
        "avg",
        "mean",
        "min",
        "max",
        "count",
        "countdistinct",
        "count_distinct",
        "approx_count_distinct",
        "approxcountdistinct",
        "first",
        "last",
        "collect_list",
        "collect_set",
        "stddev",
        "stddev_pop",
        "stddev_samp",
        "variance",
        "var_pop",
        "var_samp",
        "sumdistinct",
        "sum_distinct",
        "corr",
        "covar_pop",
        "covar_samp",
        "kurtosis",
        "skewness",
        "percentile_approx",
        "percentile",
        "median",
        "mode",
        "any_value",
        "max_by",
        "min_by",
        "bool_and",
        "bool_or",
        "every",
        "some",
        "product",
        "array_agg",
    }
)
"""``pyspark.sql.functions`` aggregates (lower-cased): their value comes from many rows."""

MASKING_NAMES = frozenset(
    {
        "md5",
        "sha",
        "sha1",
        "sha2",
        "hash",
        "xxhash64",
        "crc32",
        "count",
        "countdistinct",
        "count_distinct",
        "approx_count_distinct",
        "approxcountdistinct",
    }
)
"""Functions whose result hides the input's value, as ``column_sql.MASKING_FUNCTIONS`` lists them."""


def function_call(name: str, args: tuple[ColExpr, ...]) -> Call:
    key = name.lower()
    subtype = Subtype.AGGREGATION if key in AGGREGATE_FUNCTIONS else Subtype.TRANSFORMATION
    return Call(name, args, subtype, key in MASKING_NAMES)


def name_of(expression: ColExpr) -> str:
    """The column name Spark gives an expression: the alias, the column's own name, else its text."""
    if isinstance(expression, Alias):
        return expression.name
    if isinstance(expression, Ref):
        return unquote(expression.name.rsplit(".", 1)[-1]) if "`" not in expression.name else unquote(expression.name)
    if isinstance(expression, Bound):
        return expression.name
    if isinstance(expression, Cast):
        # Spark keeps a cast column's name when it casts a named column.
        if isinstance(expression.child, Ref | Bound):
            return name_of(expression.child)
        return f"CAST({name_of(expression.child)} AS {expression.type.upper()})"
    if isinstance(expression, Lit):
        return expression.text
    if isinstance(expression, Call):
        return f"{expression.function}({', '.join(name_of(arg) for arg in expression.args)})"
    if isinstance(expression, When):
        return "CASE WHEN ... END"
    if isinstance(expression, Over):
        return f"{name_of(expression.child)} OVER (...)"
    if isinstance(expression, Star):
        return f"{expression.qualifier}.*" if expression.qualifier else "*"
    return "?"


def unquote(name: str) -> str:
    return name.replace("`", "")


# Spark SQL snippets ---------------------------------------------------------------------------------


def parse_sql_expression(text: str, site: Site) -> ColExpr:
    """One Spark SQL expression (``a + 1 AS b``, ``x > 5``) as a column expression."""
    try:
        parsed = sqlglot.parse_one(text, read="spark", into=exp.Expr)
    except (ParseError, ValueError) as error:
        return Opaque(site.problem(f"cannot parse Spark SQL expression {text!r}: {error}"))
    return from_sqlglot(parsed, site)


def from_sqlglot(node: exp.Expr, site: Site) -> ColExpr:
    if isinstance(node, exp.Alias):
        return Alias(from_sqlglot(node.this, site), node.alias)
    if isinstance(node, exp.Column):
        if isinstance(node.this, exp.Star):
            return Star(node.table or None)
        return Ref(".".join(part.name for part in node.parts))
    if isinstance(node, exp.Star):
        return Star()
    if isinstance(node, exp.Literal | exp.Null | exp.Boolean):
        return Lit(node.sql("spark"))
    if isinstance(node, exp.Paren):
        return from_sqlglot(node.this, site)
    if isinstance(node, exp.Cast):
        return Cast(from_sqlglot(node.this, site), node.to.sql("spark"))
    if isinstance(node, exp.Case):
        conditions = [from_sqlglot(branch.this, site) for branch in node.args.get("ifs") or []]
        values = [from_sqlglot(branch.args["true"], site) for branch in node.args.get("ifs") or []]
        if node.this is not None:
            conditions.append(from_sqlglot(node.this, site))
        default = node.args.get("default")
        if default is not None:
            values.append(from_sqlglot(default, site))
        return When(tuple(conditions), tuple(values))
    if isinstance(node, exp.If):
        values = [from_sqlglot(node.args[key], site) for key in ("true", "false") if node.args.get(key) is not None]
        return When((from_sqlglot(node.this, site),), tuple(values))
    if isinstance(node, exp.Window):
        keys = [from_sqlglot(key, site) for key in node.args.get("partition_by") or []]
        order = node.args.get("order")
        if order is not None:
            keys.extend(from_sqlglot(item.this, site) for item in order.expressions)
        return Over(from_sqlglot(node.this, site), tuple(keys))
    if isinstance(node, exp.Subquery | exp.Select | exp.Exists):
        return Opaque(site.problem(f"subqueries in column expressions are not analysed: {node.sql('spark')[:80]}"))
    children = tuple(from_sqlglot(child, site) for child in node.iter_expressions() if _is_value(child))
    if isinstance(node, exp.Anonymous):
        name = str(node.name)
    elif isinstance(node, exp.Func):
        name = node.sql_name()
    else:
        name = type(node).__name__
    subtype = Subtype.AGGREGATION if isinstance(node, exp.AggFunc) else Subtype.TRANSFORMATION
    return Call(name.lower(), children, subtype, isinstance(node, MASKING_FUNCTIONS))


def _is_value(node: exp.Expr) -> bool:
    # Type names, interval units and the like are arguments but not values that carry lineage.
    return not isinstance(node, exp.DataType | exp.Var | exp.Identifier)
