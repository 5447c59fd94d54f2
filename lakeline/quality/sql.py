"""Each rule as SQL over one table reference, for Athena (Trino) and Spark SQL alike.

The statements are built as sqlglot trees and written for either dialect (``Compiled.metric_sql``);
the ``Engine`` protocol takes Athena's, which ``SparkEngine`` translates. A rule gives one query that
returns one row, ``metric`` and ``passed`` (1 or 0), and, if it judges rows, one that returns up to
``limit`` of its failing rows. ``ColumnCount`` is the exception: its query returns no row, and its metric
is the number of columns the query has.

The rules measured by counting the version's rows in one pass (``row_tally``: IsComplete, ColumnValues,
RowCount) can share one scan instead: ``fuse`` counts every row and each rule's good rows in one
aggregate and derives each rule's ``metric`` and ``passed`` from it exactly as its own query does, the
same SQL expressions over the same counts.

NULLs follow DQDL: a ``ColumnValues`` row whose value is NULL fails, except under ``!=`` and ``not in``
(unless the list names ``NULL``). Over an empty version the share-based rules have no metric and pass
(no row fails); ``RowCount > 0`` is how an empty version is refused.

Every statement stays under Athena's limit of 262,144 bytes: ``in`` lists and CustomSql text are bounded
when parsed, and the compiled text is measured here as well; a fused statement takes rules while it stays
under ``FUSED_STATEMENT_BYTES``, and the next ones go to another.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Literal

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError

from lakeline.errors import InvalidInputError, plain
from lakeline.names import check_identifier, check_partition_value
from lakeline.quality.rules import (
    ColumnCount,
    ColumnValues,
    Condition,
    CustomSql,
    IsComplete,
    IsUnique,
    Operand,
    RowCount,
    RowCountMatch,
    Rule,
)

Dialect = Literal["athena", "spark"]
COMPILED_DIALECTS: tuple[Dialect, ...] = ("athena", "spark")
ATHENA_STATEMENT_LIMIT = 262_144  # bytes of one query string (Athena's StartQueryExecution)
MAX_IN_VALUES = 1_000
MAX_VALUE_BYTES = 100  # of one quoted value; escaping may double it
MAX_CUSTOM_SQL_BYTES = 50_000
SAMPLE_ROWS = 5
FUSED_STATEMENT_BYTES = 200_000
"""What one fused statement may hold, in bytes: rules are added while it stays under (one rule larger than this
alone), well under ``ATHENA_STATEMENT_LIMIT``, which each statement is measured against as well."""
PRIMARY = "primary"  # DQDL's name of the dataset under check
_READ = "athena"  # CustomSql text is read as the Engine protocol's dialect


class QualityRuleError(InvalidInputError):
    """A rule that cannot be accepted; the message names the rule and what is wrong."""


@dataclass(frozen=True)
class TableRef:
    """What a rule reads: ``database.table``, restricted to one partition if ``partition`` is given."""

    database: str
    table: str
    partition: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        check_identifier(self.database, "database")
        check_identifier(self.table, "table")
        for column, value in self.partition:
            check_partition_value(value, check_identifier(column, "partition column"))

    @classmethod
    def of(cls, database: str, table: str, partition: Mapping[str, str] | None = None) -> TableRef:
        return cls(database, table, tuple((partition or {}).items()))

    def relation(self, alias: str) -> exp.Expr:
        """The rows it stands for, as a FROM source named ``alias``."""
        table = exp.Table(
            this=exp.to_identifier(self.table, quoted=True), db=exp.to_identifier(self.database, quoted=True)
        )
        name = exp.TableAlias(this=exp.to_identifier(alias, quoted=True))
        if not self.partition:
            table.set("alias", name)
            return table
        where = exp.and_(
            *(exp.column(column, quoted=True).eq(exp.Literal.string(value)) for column, value in self.partition)
        )
        return exp.Subquery(this=exp.select("*").from_(table).where(where), alias=name)

    def __str__(self) -> str:
        where = " and ".join(f"{column}={value}" for column, value in self.partition)
        return f"{self.database}.{self.table}" + (f" ({where})" if where else "")


@dataclass(frozen=True)
class Compiled:
    """A rule's statements: ``metric`` (one row: metric, passed), ``sample`` (failing rows) if it judges rows.
    ``columns_only``: the metric is the number of columns ``metric`` returns, less ``not_counted``."""

    metric: exp.Query
    sample: exp.Query | None = None
    columns_only: bool = False
    not_counted: frozenset[str] = field(default_factory=frozenset)

    def metric_sql(self, dialect: Dialect = "athena") -> str:
        return self.metric.sql(dialect)

    def sample_sql(self, dialect: Dialect = "athena") -> str | None:
        return None if self.sample is None else self.sample.sql(dialect)


# --- CustomSql: what is accepted ------------------------------------------------------------------


JVM_CALLS = frozenset({"reflect", "java_method", "try_reflect"})
"""Spark's functions that call a Java method by name: a check reads the new version, it runs no code."""


def check_custom_sql(text: str, *, row_level: bool) -> exp.Select:
    """The CustomSql statement parsed, if it is one SELECT reading only ``primary``; else ``ValueError``
    saying why. ``row_level``: the form without a condition, ``select <columns> from primary [where ...]``,
    whose WHERE decides which rows pass; otherwise it must return a single value."""
    if len(text.encode()) > MAX_CUSTOM_SQL_BYTES:
        raise ValueError(f"the SQL is longer than {MAX_CUSTOM_SQL_BYTES} bytes")
    try:
        statements = sqlglot.parse(text, read=_READ)
    except (ParseError, SqlglotError) as error:
        raise ValueError(plain(f"the SQL does not parse: {str(error).splitlines()[0]}")) from None
    if len(statements) != 1 or statements[0] is None:
        raise ValueError(f"the SQL must be one statement, not {len(statements)}")
    statement = statements[0]
    if not isinstance(statement, exp.Select):
        raise ValueError(f"the SQL must be a SELECT, not {statement.key.upper()}")
    for node in statement.walk():
        if isinstance(node, exp.With | exp.Into | exp.Command | exp.DDL | exp.DML | exp.Lateral | exp.Values):
            raise ValueError(f"the SQL may not use {node.key.upper()}: only SELECT ... FROM primary")
        if isinstance(node, exp.Table) and (node.name != PRIMARY or node.db or node.catalog or not node.this):
            raise ValueError(f"the SQL may read only {PRIMARY} (the new version), not {node.sql(_READ)}")
        if isinstance(node, exp.From | exp.Join) and not isinstance(node.this, exp.Table | exp.Subquery):
            raise ValueError(f"the SQL may read only {PRIMARY} (the new version), not {node.this.sql(_READ)}")
        if isinstance(node, exp.Anonymous) and node.name.lower() in JVM_CALLS:
            raise ValueError(f"the SQL may not call {node.name}: it runs code on the engine, not a check")
    if statement.args.get("from_") is None:
        raise ValueError(f"the SQL must read {PRIMARY}")
    if row_level:
        extra = sorted(key for key, value in statement.args.items() if value and key not in _ROW_LEVEL_PARTS)
        source = statement.args["from_"].this
        if extra or not isinstance(source, exp.Table):
            raise ValueError(
                f"without a condition, CustomSql must be select <columns> from {PRIMARY} [where <condition>]"
                + (f" (not {', '.join(extra)})" if extra else "")
            )
    elif len(statement.expressions) != 1 or isinstance(statement.expressions[0], exp.Star):
        raise ValueError("with a condition, CustomSql must select a single value (e.g. count(*))")
    return statement


_ROW_LEVEL_PARTS = frozenset({"expressions", "from_", "where"})


# --- compilation ----------------------------------------------------------------------------------


def compile_rule(
    rule: Rule, table: TableRef, reference: TableRef | None = None, *, limit: int = SAMPLE_ROWS
) -> Compiled:
    """The statements checking ``rule`` on ``table`` (``reference``: the published version, for RowCountMatch).
    ``QualityRuleError`` if a statement would exceed Athena's size limit."""
    compiled = _compile(rule, table, reference, limit)
    for statement in (compiled.metric, compiled.sample):
        for dialect in COMPILED_DIALECTS:
            size = 0 if statement is None else len(statement.sql(dialect).encode())
            if size > ATHENA_STATEMENT_LIMIT:
                raise QualityRuleError(
                    f"rule compiles to {size} bytes of SQL, over the {ATHENA_STATEMENT_LIMIT} allowed"
                )
    return compiled


def _compile(rule: Rule, table: TableRef, reference: TableRef | None, limit: int) -> Compiled:
    source = table.relation(PRIMARY)
    if isinstance(rule, IsComplete | ColumnValues):
        good, threshold = _good(rule)
        return _share(good, threshold, source, limit)
    if isinstance(rule, RowCount):
        count = exp.Count(this=exp.Star())
        return Compiled(exp.select(count.as_("metric"), _flag(_condition(count, rule.condition))).from_(source))
    if isinstance(rule, IsUnique):
        return _uniqueness(rule.column, source, table, limit)
    if isinstance(rule, RowCountMatch):
        if reference is None:
            raise ValueError("RowCountMatch needs the reference")
        return _row_count_match(rule.condition, source, reference)
    if isinstance(rule, ColumnCount):
        query = exp.select("*").from_(source).limit(0)
        return Compiled(query, columns_only=True, not_counted=frozenset(column for column, _ in table.partition))
    return _custom(rule, source, limit)


def _flag(condition: exp.Expr, name: str = "passed") -> exp.Expr:
    """``passed``: 1 if ``condition`` is true, else 0 (a NULL condition fails)."""
    return _one_if(condition).as_(name)


def _one_if(condition: exp.Expr) -> exp.Expr:
    return exp.Case(ifs=[exp.If(this=condition, true=exp.Literal.number(1))], default=exp.Literal.number(0))


def _literal(value: Operand) -> exp.Expr:
    if value is None:
        return exp.null()
    if isinstance(value, Decimal):
        return exp.Literal.number(str(value))
    return exp.Literal.string(value)


SQL_COMPARISONS: dict[str, type[exp.Binary]] = {
    "=": exp.EQ,
    "!=": exp.NEQ,
    ">": exp.GT,
    ">=": exp.GTE,
    "<": exp.LT,
    "<=": exp.LTE,
}
"""DQDL's comparison operators as SQL's."""


def _condition(subject: exp.Expr, condition: Condition) -> exp.Expr:
    """``subject`` meets ``condition`` (its operands numbers or strings, not NULL), as a SQL predicate."""
    operands = [_literal(value) for value in condition.operands]
    match condition.operator:
        case "=" | "!=" | ">" | ">=" | "<" | "<=":
            return SQL_COMPARISONS[condition.operator](this=subject.copy(), expression=operands[0])
        case "between":  # DQDL's between excludes both ends
            return exp.and_(
                exp.GT(this=subject.copy(), expression=operands[0]), exp.LT(this=subject.copy(), expression=operands[1])
            )
        case "not between":
            return exp.or_(
                exp.LTE(this=subject.copy(), expression=operands[0]),
                exp.GTE(this=subject.copy(), expression=operands[1]),
            )
        case "in":
            return exp.In(this=subject.copy(), expressions=operands)
        case "not in":
            return exp.In(this=subject.copy(), expressions=operands).not_()


def _row_passes(column: str, condition: Condition) -> exp.Expr:
    """Whether one row's value meets a ColumnValues condition, with DQDL's NULL rules."""
    value = exp.column(column, quoted=True)
    is_null, not_null = value.copy().is_(exp.null()), value.copy().is_(exp.null()).not_()
    given = [operand for operand in condition.operands if operand is not None]
    null_listed = len(given) < len(condition.operands)
    rest = Condition(condition.operator, tuple(given))
    match condition.operator:
        case "=" if null_listed:
            return is_null
        case "!=" if null_listed:
            return not_null
        case "!=":
            return exp.or_(is_null, _condition(value, rest))
        case "in" if null_listed:
            return exp.or_(is_null, _condition(value, rest)) if given else is_null
        case "not in" if null_listed:
            return exp.and_(not_null, _condition(value, rest)) if given else not_null
        case "not in":
            return exp.or_(is_null, _condition(value, rest))
    return _condition(value, rest)


def _ratio(numerator: str, denominator: str) -> exp.Expr:
    """``numerator / denominator`` as a double, NULL when the denominator is 0."""
    div = exp.Div(
        this=exp.cast(exp.column(numerator), "DOUBLE"), expression=exp.cast(exp.column(denominator), "DOUBLE")
    )
    zero = exp.column(denominator).eq(0)
    return exp.Case(ifs=[exp.If(this=zero, true=exp.null())], default=div)


def _share(passes: exp.Expr, threshold: Condition | None, source: exp.Expr, limit: int) -> Compiled:
    """A rule on each row: the share of rows where ``passes`` holds, and the rows where it does not."""
    good = exp.Coalesce(this=passes.copy(), expressions=[exp.false()])
    counts = exp.select(_TOTAL.copy(), _good_rows(passes, "good")).from_(source.copy())
    metric = exp.select(*_share_verdict("good", threshold, "metric", "passed")).from_(counts.subquery("counts"))
    sample = exp.select("*").from_(source.copy()).where(good.copy().not_()).limit(limit)
    return Compiled(metric, sample)


_TOTAL = exp.Count(this=exp.Star()).as_("total")


def _good_rows(passes: exp.Expr, name: str) -> exp.Expr:
    """The number of rows where ``passes`` holds (a NULL does not), as ``name``."""
    good = exp.Coalesce(this=passes.copy(), expressions=[exp.false()])
    return exp.Sum(this=_one_if(good)).as_(name)


def _share_verdict(good: str, threshold: Condition | None, metric: str, passed: str) -> tuple[exp.Expr, exp.Expr]:
    """Over the counts ``total`` and ``good``: the share of good rows as ``metric``, and ``passed``: every row
    is good or, with ``threshold``, the share meets it; an empty version passes."""
    ratio = _ratio(good, "total")
    ok = exp.column(good).eq(exp.column("total")) if threshold is None else _condition(ratio, threshold)
    return ratio.as_(metric), _flag(exp.or_(exp.column("total").eq(0), ok), passed)


def _good(rule: IsComplete | ColumnValues) -> tuple[exp.Expr, Condition | None]:
    """Which of its rows a row-level rule passes, and the threshold on their share (``None``: every row)."""
    if isinstance(rule, IsComplete):
        return exp.column(rule.column, quoted=True).is_(exp.null()).not_(), None
    return _row_passes(rule.column, rule.condition), rule.threshold


# --- rules measured together: one scan counting the rows -----------------------------------------


@dataclass(frozen=True)
class RowTally:
    """How a rule is measured by counting the version's rows: ``good``, the rows that pass (``None``: the rule
    judges the row count itself, RowCount); ``condition``, what the share of good rows must meet (``None``:
    every row good) or, for RowCount, what the count must."""

    good: exp.Expr | None
    condition: Condition | None


def row_tally(rule: Rule) -> RowTally | None:
    """How ``rule`` is measured by counting the version's rows, if it is (else it needs a statement of its own:
    a group-by, the reference, the columns, a user's query)."""
    if isinstance(rule, IsComplete | ColumnValues):
        return RowTally(*_good(rule))
    if isinstance(rule, RowCount):
        return RowTally(None, rule.condition)
    return None


@dataclass(frozen=True)
class Fused:
    """One statement measuring several rules in one scan: ``positions``, the rules' places in the list given;
    its one row holds each rule's ``metric`` and ``passed``, in that order, the rule at ``positions[k]`` in
    columns ``2k`` and ``2k + 1``."""

    positions: tuple[int, ...]
    statement: exp.Query

    def sql(self, dialect: Dialect = "athena") -> str:
        return self.statement.sql(dialect)


def fuse(
    rules: Sequence[tuple[int, Rule]], table: TableRef, *, budget: int = FUSED_STATEMENT_BYTES
) -> tuple[Fused, ...]:
    """The counted rules of ``rules`` (each with its position) on ``table``, measured in as few statements as keep
    each under ``budget`` bytes: greedy, in order; ``ValueError`` for a rule that is not counted.
    ``QualityRuleError`` if a statement would exceed Athena's size limit."""
    parts: list[tuple[int, exp.Expr | None, tuple[exp.Expr, exp.Expr]]] = []
    for position, rule in rules:
        tally = row_tally(rule)
        if tally is None:
            raise ValueError(f"{type(rule).__name__} is not measured by counting rows")
        metric, passed = f"metric_{position}", f"passed_{position}"
        if tally.good is None:
            assert tally.condition is not None  # RowCount's
            verdict = (exp.column("total").as_(metric), _flag(_condition(exp.column("total"), tally.condition), passed))
            parts.append((position, None, verdict))
        else:
            good = f"good_{position}"
            parts.append(
                (position, _good_rows(tally.good, good), _share_verdict(good, tally.condition, metric, passed))
            )
    groups: list[list[tuple[int, exp.Expr | None, tuple[exp.Expr, exp.Expr]]]] = []
    size = 0
    base = _size(_fused_statement(table, [], [exp.column("total")]))
    for part in parts:
        position, count, verdict = part
        grows = _size(*(expression for expression in (count, *verdict) if expression is not None)) + 6  # ", "
        if not groups or size + grows > budget:
            groups.append([])
            size = base
        groups[-1].append(part)
        size += grows
    fused = []
    for group in groups:
        counts = [count for _, count, _ in group if count is not None]
        statement = _fused_statement(table, counts, [expression for _, _, verdict in group for expression in verdict])
        measured = _size(statement)
        if measured > ATHENA_STATEMENT_LIMIT:
            raise QualityRuleError(f"rules fused to {measured} bytes of SQL, over the {ATHENA_STATEMENT_LIMIT} allowed")
        fused.append(Fused(tuple(position for position, _, _ in group), statement))
    return tuple(fused)


def _fused_statement(table: TableRef, counts: Sequence[exp.Expr], verdicts: Sequence[exp.Expr]) -> exp.Select:
    inner = exp.select(_TOTAL.copy(), *(count.copy() for count in counts)).from_(table.relation(PRIMARY))
    return exp.select(*(verdict.copy() for verdict in verdicts)).from_(inner.subquery("counts"))


def _size(*expressions: exp.Expr) -> int:
    """The bytes ``expressions`` take written, in the larger of the dialects."""
    return max(sum(len(e.sql(dialect).encode()) for e in expressions) for dialect in COMPILED_DIALECTS)


def _uniqueness(column: str, source: exp.Expr, table: TableRef, limit: int) -> Compiled:
    value = exp.column(column, quoted=True)
    groups = (
        exp.select(value.copy().as_("v", quoted=True), exp.Count(this=exp.Star()).as_("k"))
        .from_(source.copy())
        .group_by(value.copy())
    )
    once = exp.and_(exp.column("v", quoted=True).is_(exp.null()).not_(), exp.column("k").eq(1))
    counts = exp.select(
        exp.Coalesce(this=exp.Sum(this=exp.column("k")), expressions=[exp.Literal.number(0)]).as_("total"),
        exp.Coalesce(
            this=exp.Sum(
                this=exp.Case(ifs=[exp.If(this=once, true=exp.Literal.number(1))], default=exp.Literal.number(0))
            ),
            expressions=[exp.Literal.number(0)],
        ).as_("good"),
    ).from_(groups.subquery("value_counts"))
    ok = exp.or_(exp.column("total").eq(0), exp.column("good").eq(exp.column("total")))
    metric = exp.select(_ratio("good", "total").as_("metric"), _flag(ok)).from_(counts.subquery("counts"))
    repeated = (
        exp.select(value.copy())
        .from_(table.relation("seen"))
        .where(value.copy().is_(exp.null()).not_())
        .group_by(value.copy())
        .having(exp.GT(this=exp.Count(this=exp.Star()), expression=exp.Literal.number(1)))
    )
    failing = exp.or_(value.copy().is_(exp.null()), exp.In(this=value.copy(), query=repeated.subquery()))
    sample = exp.select("*").from_(source.copy()).where(failing).limit(limit)
    return Compiled(metric, sample)


def _row_count_match(condition: Condition, source: exp.Expr, reference: TableRef) -> Compiled:
    new = exp.select(exp.Count(this=exp.Star()).as_("new_rows")).from_(source)
    old = exp.select(exp.Count(this=exp.Star()).as_("reference_rows")).from_(reference.relation("reference"))
    ratio = _ratio("new_rows", "reference_rows")
    # A reference without rows gives no ratio: there is nothing for the new version to fall short of.
    ok = exp.or_(exp.column("reference_rows").eq(0), _condition(ratio, condition))
    metric = (
        exp.select(ratio.as_("metric"), _flag(ok))
        .from_(new.subquery("new_version"))
        .join(old.subquery("reference_version"), join_type="cross")
    )
    return Compiled(metric)


def _with_primary(statement: exp.Select, source: exp.Expr) -> exp.Select:
    """``statement`` reading ``source`` wherever it names ``primary`` (under the alias it gave it, if any)."""

    def replace(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Table) and node.name == PRIMARY and not node.db:
            replaced = source.copy()
            replaced.set("alias", exp.TableAlias(this=exp.to_identifier(node.alias or PRIMARY, quoted=True)))
            return replaced
        return node

    transformed = statement.copy().transform(replace)
    assert isinstance(transformed, exp.Select)
    return transformed


def _custom(rule: CustomSql, source: exp.Expr, limit: int) -> Compiled:
    statement = _with_primary(check_custom_sql(rule.sql, row_level=rule.condition is None), source)
    if rule.condition is None:
        where = statement.args.get("where")
        passes = where.this if where is not None else exp.true()
        return _share(passes, None, statement.args["from_"].this, limit)
    value = statement.expressions[0]
    statement.set("expressions", [exp.alias_(value.unalias() if isinstance(value, exp.Alias) else value, "metric")])
    metric = exp.select(exp.column("metric"), _flag(_condition(exp.column("metric"), rule.condition))).from_(
        statement.subquery("custom")
    )
    return Compiled(metric)
