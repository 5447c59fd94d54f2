"""How each statement that writes rows maps them onto its target table, for column lineage.

INSERT and CTAS write a query's rows: the query's columns go onto the listed columns, the target's
columns by position (data columns, then the dynamic partition columns, as in Athena and Hive), or the
query's own names (CTAS). A static partition (``PARTITION (dt = '2022')``) gets its literal.

MERGE, UPDATE and DELETE have no query of their own. Each is rewritten into one SELECT over the target
(joined to MERGE's source on its ON condition, or to UPDATE's FROM tables) whose projections are the
assigned values and the WHEN conditions, each under a generated alias. The same name resolution
(sqlglot's ``qualify``) and the same lineage walk then serve every statement; ``Assignment`` says which
projection sets which target column, under which condition. DELETE and TRUNCATE change no column: their
lineage is dataset-level only (the WHERE or WHEN conditions decide which rows go).

Statements that move no rows (DROP, ALTER, MSCK, SET, ...) have no write; anything else is refused
with the reason, never passed over as if it had no lineage.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from sqlglot import exp

from lakeline.engines.base import TableSchema
from lakeline.errors import InvalidInputError

# Statements that neither read nor write rows: no column lineage, and nothing is wrong with them.
NO_ROW_STATEMENTS: tuple[type[exp.Expr], ...] = (
    exp.Drop,
    exp.Alter,
    exp.Use,
    exp.Set,
    exp.Show,
    exp.Describe,
    exp.Cache,
    exp.Uncache,
    exp.Refresh,
    exp.Analyze,
    exp.Grant,
    exp.Revoke,
    exp.Comment,
    exp.Pragma,
    exp.Transaction,
    exp.Commit,
    exp.Rollback,
)
# sqlglot keeps what it has no syntax for as a Command; these ones only touch metadata or files' layout.
NO_ROW_COMMANDS = frozenset({"MSCK", "MSCK REPAIR", "VACUUM", "OPTIMIZE", "REFRESH", "ANALYZE", "EXPLAIN", "SHOW"})

GENERATED = "__lakeline_"
"""Prefix of the projections a rewritten MERGE/UPDATE/DELETE gets; never a user's column."""

Describe = Callable[[str, str], TableSchema]


def statement_error(message: str, sql: str) -> InvalidInputError:
    """One line: the reason, then the start of the statement it is about."""
    snippet = " ".join(sql.split())[:120]
    return InvalidInputError(f"{message} (in: {snippet})")


def table_parts(table: exp.Table, default_database: str | None, sql: str) -> tuple[str, str]:
    database = table.db.lower() if table.db else default_database
    if not database:
        raise statement_error(f"table {table.name!r} has no database: qualify it or give a default database", sql)
    return database, table.name.lower()


@dataclass(frozen=True)
class Assignment:
    """One target column set by a rewritten statement: from projection ``value``, when ``condition`` holds."""

    column: str
    value: str
    condition: str | None
    branch: str
    """How the statement says it, for the expression tree: ``WHEN MATCHED THEN UPDATE``, ``SET``."""


@dataclass
class WritePlan:
    target: tuple[str, str] | None
    query: exp.Query
    kind: Literal["query", "insert", "create", "rewrite"]
    column_list: list[str] | None = None
    static_partitions: dict[str, str] = field(default_factory=dict)
    """Partition columns given a value in the statement: name to the value's SQL."""
    dynamic_partitions: list[str] | None = None
    assignments: tuple[Assignment, ...] = ()
    row_conditions: tuple[str, ...] = ()
    """Projections of a rewritten statement whose inputs decide which rows are deleted."""


class _Projections:
    """The SELECT list of a rewritten statement: each expression under its own generated alias.

    The statement's parts are moved into the SELECT, not copied: the statement is parsed for this
    analysis alone, and copying its trees would cost more than the rest of the analysis.
    """

    def __init__(self) -> None:
        self.expressions: list[exp.Expr] = []

    def add(self, expression: exp.Expr) -> str:
        alias = f"{GENERATED}{len(self.expressions)}"
        self.expressions.append(exp.alias_(expression, alias, copy=False))
        return alias

    def select(self, source: exp.Expr, joins: Sequence[exp.Expr], where: exp.Expr | None) -> exp.Select:
        # A statement that assigns nothing (DELETE without WHERE) still needs a projection to be a query.
        expressions = self.expressions or [exp.alias_(exp.Literal.number(1), f"{GENERATED}rows", copy=False)]
        select = exp.Select(expressions=expressions).from_(source, copy=False)
        for join in joins:
            select = select.join(join, copy=False)
        if where is not None:
            select = select.where(where, copy=False)
        return select


def _table(node: exp.Expr, sql: str, what: str) -> exp.Table:
    if not isinstance(node, exp.Table) or isinstance(node.this, exp.Func):
        raise statement_error(f"{what} must be a table", sql)
    return node


def _merge(statement: exp.Merge, default_database: str | None, describe: Describe, sql: str) -> WritePlan:
    target = _table(statement.this, sql, "MERGE target")
    database, table = table_parts(target, default_database, sql)
    source = statement.args.get("using")
    if source is None:
        raise statement_error("MERGE without USING", sql)
    source_alias = source.alias_or_name
    projections = _Projections()
    assignments: list[Assignment] = []
    deletes: list[str] = []
    schema = describe(database, table)
    target_columns = [c.name for c in (*schema.columns, *schema.partition_columns)]
    whens = statement.args.get("whens")
    for when in whens.expressions if isinstance(whens, exp.Whens) else []:
        condition_node = when.args.get("condition")
        condition = projections.add(condition_node) if condition_node is not None else None
        matched = "MATCHED" if when.args.get("matched") else "NOT MATCHED"
        by_source = " BY SOURCE" if when.args.get("source") else ""
        then = when.args.get("then")
        if isinstance(then, exp.Update):
            pairs = _set_pairs(then.expressions, target_columns, source_alias, sql)
            branch = f"WHEN {matched}{by_source} THEN UPDATE"
        elif isinstance(then, exp.Insert):
            pairs = _insert_pairs(then, target_columns, source_alias, sql)
            branch = f"WHEN {matched}{by_source} THEN INSERT"
        elif isinstance(then, exp.Var) and then.name.upper() == "DELETE":
            # The rows that match (and meet the branch condition) go: the ON keys decide, and the condition.
            deletes.append(condition or "")
            continue
        else:
            raise statement_error(f"MERGE branch {when.sql()[:60]!r} is not supported for column lineage", sql)
        if condition_node is not None:
            branch += f" AND {condition_node.sql()}"
        for column, value in pairs:
            assignments.append(Assignment(column, projections.add(value), condition, branch))
    on = statement.args.get("on")
    if on is None:
        raise statement_error("MERGE without an ON condition is not supported for column lineage", sql)
    join = exp.Join(this=source, on=on)
    query = projections.select(target, [join], None)
    # Output columns in the target's order, whichever branch sets them first.
    order = {name: position for position, name in enumerate(target_columns)}
    return WritePlan(
        (database, table),
        query,
        "rewrite",
        assignments=tuple(sorted(assignments, key=lambda a: order.get(a.column, len(order)))),
        row_conditions=tuple(condition for condition in deletes if condition),
    )


def _set_pairs(
    items: list[exp.Expr], target_columns: list[str], source_alias: str, sql: str
) -> list[tuple[str, exp.Expr]]:
    pairs: list[tuple[str, exp.Expr]] = []
    for item in items:
        if isinstance(item, exp.Star):
            # Spark's UPDATE SET *: every target column from the source's column of the same name.
            pairs.extend((name, exp.column(name, table=source_alias)) for name in target_columns)
        elif isinstance(item, exp.EQ) and isinstance(item.this, exp.Column):
            pairs.append((item.this.name.lower(), item.expression))
        else:
            raise statement_error(f"assignment {item.sql()[:60]!r} is not supported for column lineage", sql)
    return pairs


def _insert_pairs(
    insert: exp.Insert, target_columns: list[str], source_alias: str, sql: str
) -> list[tuple[str, exp.Expr]]:
    columns = insert.this
    if isinstance(columns, exp.Star):
        return [(name, exp.column(name, table=source_alias)) for name in target_columns]
    names = [c.name.lower() for c in columns.expressions] if isinstance(columns, exp.Tuple) else target_columns
    values = insert.expression
    value_list = list(values.expressions) if isinstance(values, exp.Tuple) else [values] if values else []
    if len(names) != len(value_list):
        raise statement_error(f"MERGE INSERT lists {len(names)} columns but {len(value_list)} values", sql)
    return list(zip(names, value_list, strict=True))


def update_target(statement: exp.Update) -> exp.Expr:
    """The relation an UPDATE writes: the one it names, or the FROM relation it names by its alias or as the
    same unaliased table (T-SQL's ``UPDATE t SET ... FROM tab1 AS t JOIN ...`` writes tab1)."""
    named: exp.Expr = statement.this
    from_ = statement.args.get("from_")
    if not isinstance(named, exp.Table) or named.alias or not isinstance(from_, exp.From):
        return named
    key = (named.name.lower(), named.db.lower())
    # sqlglot hangs the FROM's joins (comma-separated relations too) on its first relation.
    relations: list[exp.Expr] = [from_.this, *(join.this for join in from_.this.args.get("joins") or [])]
    for relation in relations:
        alias = relation.alias.lower()
        by_alias = bool(alias) and (alias, "") == key
        by_name = not alias and isinstance(relation, exp.Table) and (relation.name.lower(), relation.db.lower()) == key
        if by_alias or by_name:
            return relation
    return named


def _update(statement: exp.Update, default_database: str | None, sql: str) -> WritePlan:
    """``UPDATE t SET c = expr [FROM ... [JOIN ...]] [WHERE ...]`` as ``SELECT expr FROM t [JOIN ...] WHERE ...``."""
    target = _table(update_target(statement), sql, "UPDATE target")
    database, table = table_parts(target, default_database, sql)
    from_ = statement.args.get("from_")
    source = from_.this if isinstance(from_, exp.From) else None
    joins: list[exp.Expr] = []
    if source is not None:
        # The query takes the FROM's joins as its own, or the joined relations' columns resolve to nothing.
        joins = list(source.args.get("joins") or [])
        source.set("joins", None)
    first: exp.Expr = target
    rest = [exp.Join(this=source), *joins] if source is not None else []
    if source is not None and target is not statement.this:
        # The target is one of the FROM's relations: the FROM as it is, or a second copy of the target
        # would clash with its alias.
        first, rest = source, joins
    projections = _Projections()
    assignments = []
    for item in statement.expressions:
        if not (isinstance(item, exp.EQ) and isinstance(item.this, exp.Column)):
            raise statement_error(f"assignment {item.sql()[:60]!r} is not supported for column lineage", sql)
        assignments.append(Assignment(item.this.name.lower(), projections.add(item.expression), None, "SET"))
    where = statement.args.get("where")
    query = projections.select(first, rest, where.this if isinstance(where, exp.Where) else None)
    _move_with(statement, query)  # WITH x AS (...) UPDATE ...: the SET, FROM and WHERE read x
    return WritePlan((database, table), query, "rewrite", assignments=tuple(assignments))


def _delete(statement: exp.Expr, default_database: str | None, sql: str) -> WritePlan:
    tables = statement.expressions if isinstance(statement, exp.TruncateTable) else [statement.this]
    if len(tables) != 1:
        raise statement_error("TRUNCATE of several tables is not supported for column lineage", sql)
    target = _table(tables[0], sql, "DELETE target")
    database, table = table_parts(target, default_database, sql)
    where = statement.args.get("where")
    condition = where.this if isinstance(where, exp.Where) else None
    query = _Projections().select(target, [], condition)
    return WritePlan((database, table), query, "rewrite")


def _move_with(statement: exp.Expr, query: exp.Expr) -> None:
    """Spark writes ``WITH x AS (...) INSERT ...`` (and sqlglot reads ``WITH ... UPDATE``); the CTEs belong to
    the query either way."""
    with_ = statement.args.get("with_")
    if with_ is not None and query.args.get("with_") is None:
        statement.set("with_", None)
        query.set("with_", with_)


def _insert(statement: exp.Insert, default_database: str | None, sql: str) -> WritePlan:
    target = statement.this
    column_list = None
    if isinstance(target, exp.Schema):
        column_list = [identifier.name.lower() for identifier in target.expressions]
        target = target.this
    if not isinstance(target, exp.Table):
        raise statement_error(f"INSERT into {type(target).__name__.lower()} is not supported: only tables", sql)
    static: dict[str, str] = {}
    dynamic: list[str] | None = None
    partition = target.args.get("partition")
    if isinstance(partition, exp.Partition):
        dynamic = []
        for item in partition.expressions:
            if isinstance(item, exp.EQ):
                static[item.this.name.lower()] = item.expression.sql()
            else:
                dynamic.append(item.name.lower())
    query = statement.expression
    if not isinstance(query, exp.Query | exp.Values):
        raise statement_error("INSERT without a query or VALUES is not supported for column lineage", sql)
    _move_with(statement, query)
    return WritePlan(
        table_parts(target, default_database, sql),
        query,  # type: ignore[arg-type]  # VALUES is walked like a query
        "insert",
        column_list,
        static,
        dynamic,
    )


def plan_write(statement: exp.Expr, *, default_database: str | None, describe: Describe, sql: str) -> WritePlan | None:
    """What ``statement`` writes and from which query; ``None`` if it moves no rows."""
    if isinstance(statement, exp.Insert):
        return _insert(statement, default_database, sql)
    if isinstance(statement, exp.Create):
        kind = str(statement.args.get("kind") or "").upper()
        if not isinstance(statement.expression, exp.Query):
            return None  # CREATE TABLE (columns), CREATE DATABASE, ...: no rows
        if kind not in ("TABLE", "VIEW"):
            raise statement_error(f"CREATE {kind} ... AS is not supported for column lineage", sql)
        target = statement.this
        column_list = None
        if isinstance(target, exp.Schema):
            column_list = [column.name.lower() for column in target.expressions]
            target = target.this
        query = statement.expression
        _move_with(statement, query)
        return WritePlan(table_parts(target, default_database, sql), query, "create", column_list or None)
    if isinstance(statement, exp.Merge):
        return _merge(statement, default_database, describe, sql)
    if isinstance(statement, exp.Update):
        return _update(statement, default_database, sql)
    if isinstance(statement, exp.Delete | exp.TruncateTable):
        return _delete(statement, default_database, sql)
    if isinstance(statement, exp.Query):
        return WritePlan(None, statement, "query")
    if isinstance(statement, exp.Cache) and statement.expression is not None:
        # Spark's session-scoped view of a query's rows: no table of the catalog, and no dataset to name.
        raise statement_error("CACHE TABLE ... AS SELECT is not supported for column lineage", sql)
    if isinstance(statement, NO_ROW_STATEMENTS):
        return None
    if isinstance(statement, exp.Command) and str(statement.this).upper() in NO_ROW_COMMANDS:
        return None
    keyword = str(statement.this) if isinstance(statement, exp.Command) else sql.split(maxsplit=1)[0]
    raise statement_error(f"{keyword.upper()} statements are not supported for column lineage", sql)


def written_tables(statement: exp.Expr, *, default_database: str | None, sql: str) -> list[tuple[str, str]]:
    """Every table ``statement`` changes (its rows, definition or existence), ``[]`` for a query.

    Unlike ``plan_write`` this counts statements that move no rows (DROP, ALTER, CREATE TABLE without AS)
    and asks for no schema: it says what a statement may touch, before it runs. A statement whose effect
    is not a table (CREATE or DROP of a database, MSCK, UNLOAD, USE, SET, ...) is refused with its reason.
    """
    if isinstance(statement, exp.Query):
        return []
    kind = str(statement.args.get("kind") or "").upper()
    targets: list[exp.Expr] = []
    if isinstance(statement, exp.Update):
        targets = [update_target(statement)]
    elif isinstance(statement, exp.Insert | exp.Merge | exp.Delete):
        targets = [statement.this]
    elif isinstance(statement, exp.Create | exp.Drop) and kind in ("TABLE", "VIEW"):
        targets = [statement.this] if isinstance(statement, exp.Create) else list(statement.args.get("tables") or [])
    elif isinstance(statement, exp.Alter) and kind == "TABLE":
        renamed = [action.this for action in statement.args.get("actions") or [] if isinstance(action, exp.AlterRename)]
        targets = [statement.this, *renamed]
    elif isinstance(statement, exp.TruncateTable):
        targets = list(statement.expressions)
    else:
        keyword = str(statement.this) if isinstance(statement, exp.Command) else sql.split(maxsplit=1)[0]
        what = f"{keyword} {kind}".strip() if kind else keyword
        raise statement_error(f"{what.upper()} changes something other than a table", sql)
    tables = []
    for target in targets:
        node = target.this if isinstance(target, exp.Schema) else target
        tables.append(
            table_parts(_table(node, sql, f"{type(statement).__name__.upper()} target"), default_database, sql)
        )
    return tables
