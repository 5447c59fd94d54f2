"""Column lineage from SQL text (Athena or Spark dialect), resolved against the catalog's table schemas.

sqlglot parses the statement and its ``qualify`` pass does the name resolution: every column gets the
alias of the relation it comes from, ``*`` and ``t.*`` are expanded from the schema, ``USING`` becomes
``ON``. What is left here is the lineage walk over the qualified tree: each relation (table, CTE,
derived table, UNNEST) maps its column names to dependencies, and each expression combines the
dependencies of the columns it reads (see ``column_model`` for the DIRECT/INDIRECT rules).

Writes: ``INSERT INTO t (cols) SELECT`` maps select outputs onto the listed columns, ``INSERT INTO t
SELECT`` onto the target's columns by position (data columns, then partition columns, as in Athena and
Hive), ``CREATE TABLE/VIEW ... AS`` onto the select's own names. Statements that neither read nor write
rows (DROP, ALTER, MSCK) have no column lineage and are skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError, ParseError
from sqlglot.optimizer.qualify import qualify
from sqlglot.schema import MappingSchema

from lakeline.engines.base import Column, TableNotFound, TableSchema
from lakeline.errors import ValidationError
from lakeline.lineage.column_model import (
    NO_DEPENDENCIES,
    Dependencies,
    OutputColumn,
    RelationLineage,
    StatementLineage,
    Subtype,
    as_indirect,
    as_value,
    identity_of,
    union,
)

DIALECTS = ("athena", "spark")

# Functions whose result hides the input's value (OpenLineage ``masking``).
MASKING_FUNCTIONS: tuple[type[exp.Expr], ...] = (
    exp.MD5,
    exp.MD5Digest,
    exp.SHA,
    exp.SHA1Digest,
    exp.SHA2,
    exp.SHA2Digest,
    exp.StandardHash,
    exp.FarmFingerprint,
    exp.Count,
    exp.CountIf,
    exp.ApproxDistinct,
    exp.Hll,
)

# Marks left on a SELECT before ``qualify`` rewrites its USING joins: which side a USING column's value
# comes from. Inner and LEFT joins keep the left value, RIGHT the right one, FULL a COALESCE of all.
_USING_META = "lakeline_using"


class TableDescriber(Protocol):
    """Anything that knows table schemas: ``CatalogFile``, an ``Engine`` (Glue through Athena, Spark)."""

    def describe_table(self, database: str, table: str) -> TableSchema: ...


def _error(message: str, sql: str) -> ValidationError:
    snippet = " ".join(sql.split())[:120]
    return ValidationError(f"{message} (in: {snippet})")


def _table_parts(table: exp.Table, default_database: str | None, sql: str) -> tuple[str, str]:
    database = table.db.lower() if table.db else default_database
    if not database:
        raise _error(f"table {table.name!r} has no database: qualify it or give a default database", sql)
    return database, table.name.lower()


def _cte_names(node: exp.Expr) -> set[str]:
    return {cte.alias_or_name.lower() for cte in node.find_all(exp.CTE)}


def _referenced_tables(query: exp.Expr, default_database: str | None, sql: str) -> set[tuple[str, str]]:
    ctes = _cte_names(query)
    found = set()
    for table in query.find_all(exp.Table):
        if not table.name or isinstance(table.this, exp.Func):
            continue
        if not table.db and table.name.lower() in ctes:
            continue
        found.add(_table_parts(table, default_database, sql))
    return found


def _mark_using_joins(query: exp.Expr) -> None:
    for select in query.find_all(exp.Select):
        rules: dict[str, str] = {}
        for join in select.args.get("joins") or []:
            side = (join.side or "").upper()
            for identifier in join.args.get("using") or []:
                name = identifier.name.lower()
                if side == "FULL" or rules.get(name) == "all":
                    rules[name] = "all"
                elif side == "RIGHT":
                    rules[name] = "last"
                else:
                    rules.setdefault(name, "first")
        if rules:
            select.meta[_USING_META] = rules


def _all_columns(schema: TableSchema) -> list[Column]:
    return [*schema.columns, *schema.partition_columns]


@dataclass
class _Scope:
    """The relations one SELECT can see, by alias, and the scope around it (correlated subqueries)."""

    sources: dict[str, dict[str, Dependencies]] = field(default_factory=dict)
    outer: _Scope | None = None
    using: dict[str, str] = field(default_factory=dict)
    projections: dict[str, Dependencies] | None = None

    def resolve(self, column: exp.Column, sql: str) -> Dependencies:
        name = column.name.lower()
        table = column.table.lower()
        if not table:
            # Only ORDER BY (and similar) may name an output column without a table after qualify.
            scope: _Scope | None = self
            while scope is not None:
                if scope.projections is not None and name in scope.projections:
                    return scope.projections[name]
                scope = scope.outer
            raise _error(f"column {name!r} cannot be resolved", sql)
        scope = self
        while scope is not None:
            if table in scope.sources:
                columns = scope.sources[table]
                if name not in columns:
                    raise _error(f"relation {table!r} has no column {name!r}", sql)
                return columns[name]
            scope = scope.outer
        raise _error(f"column {table}.{name} refers to an unknown relation", sql)


class _Walker:
    """Computes the lineage of one qualified query."""

    def __init__(self, schemas: dict[tuple[str, str], TableSchema], sql: str) -> None:
        self.schemas = schemas
        self.sql = sql
        self.inputs: set[str] = set()

    # Relations -----------------------------------------------------------------------------------

    def query(self, node: exp.Expr, ctes: dict[str, RelationLineage], outer: _Scope | None) -> RelationLineage:
        with_ = node.args.get("with_")
        if isinstance(with_, exp.With):
            if with_.args.get("recursive"):
                raise _error("recursive CTEs are not supported", self.sql)
            ctes = dict(ctes)
            for cte in with_.expressions:
                relation = self.query(cte.this, ctes, outer)
                ctes[cte.alias_or_name.lower()] = self._renamed(relation, cte.args.get("alias"))
        if isinstance(node, exp.Subquery):
            return self.query(node.this, ctes, outer)
        if isinstance(node, exp.Select):
            return self._select(node, ctes, outer)
        if isinstance(node, exp.SetOperation):
            return self._set_operation(node, ctes, outer)
        if isinstance(node, exp.Values):
            return RelationLineage(self._value_columns(node))
        raise _error(f"unsupported query form {type(node).__name__}", self.sql)

    def _renamed(self, relation: RelationLineage, alias: exp.Expr | None) -> RelationLineage:
        names = [column.name.lower() for column in alias.columns] if isinstance(alias, exp.TableAlias) else []
        if not names:
            return relation
        if len(names) != len(relation.columns):
            raise _error(f"alias lists {len(names)} columns but its query has {len(relation.columns)}", self.sql)
        return RelationLineage(
            tuple(
                OutputColumn(name, column.dependencies, column.expression)
                for name, column in zip(names, relation.columns, strict=True)
            ),
            relation.dataset,
        )

    def _value_columns(self, values: exp.Values) -> tuple[OutputColumn, ...]:
        alias = values.args.get("alias")
        names = [column.name.lower() for column in alias.columns] if isinstance(alias, exp.TableAlias) else []
        return tuple(OutputColumn(name, NO_DEPENDENCIES) for name in names)

    def _set_operation(
        self, node: exp.SetOperation, ctes: dict[str, RelationLineage], outer: _Scope | None
    ) -> RelationLineage:
        left = self.query(node.left, ctes, outer)
        right = self.query(node.right, ctes, outer)
        if len(left.columns) != len(right.columns):
            raise _error(
                f"{type(node).__name__.upper()} sides have {len(left.columns)} and {len(right.columns)} columns",
                self.sql,
            )
        dataset = union(left.dataset, right.dataset)
        if isinstance(node, exp.Union):
            columns = tuple(
                OutputColumn(a.name, union(a.dependencies, b.dependencies), a.expression)
                for a, b in zip(left.columns, right.columns, strict=True)
            )
            if node.args.get("distinct"):
                # UNION without ALL removes duplicates: every column decides which rows remain.
                every = union(*(column.dependencies for column in columns))
                dataset = union(dataset, as_indirect(every, Subtype.GROUP_BY))
        else:
            # INTERSECT / EXCEPT: the right side only decides which left rows stay.
            columns = left.columns
            dataset = union(dataset, as_indirect(union(*(c.dependencies for c in right.columns)), Subtype.FILTER))
        order = node.args.get("order")
        if order is not None:
            scope = _Scope(projections={column.name: column.dependencies for column in columns}, outer=outer)
            dataset = union(dataset, as_indirect(self.expr(order, scope, ctes), Subtype.SORT))
        return RelationLineage(columns, dataset)

    def _source(self, source: exp.Expr, ctes: dict[str, RelationLineage], scope: _Scope) -> tuple[str, RelationLineage]:
        alias = source.alias_or_name.lower()
        if isinstance(source, exp.Table) and not isinstance(source.this, exp.Func):
            if not source.db and source.name.lower() in ctes:
                relation = self._renamed(ctes[source.name.lower()], source.args.get("alias"))
                return alias, relation
            database, table = source.db.lower(), source.name.lower()
            schema = self.schemas[(database, table)]
            dataset = f"{database}.{table}"
            self.inputs.add(dataset)
            columns = tuple(
                OutputColumn(column.name, identity_of(dataset, column.name)) for column in _all_columns(schema)
            )
            return alias, self._renamed(RelationLineage(columns), source.args.get("alias"))
        if isinstance(source, exp.Subquery):
            relation = self.query(source.this, ctes, scope.outer)
            return alias, self._renamed(relation, source.args.get("alias"))
        if isinstance(source, exp.Unnest):
            return alias, self._unnest(source, source.expressions, source.args.get("alias"), ctes, scope)
        if isinstance(source, exp.Lateral):
            return alias, self._unnest(source, [source.this], source.args.get("alias"), ctes, scope)
        if isinstance(source, exp.Values):
            return alias, RelationLineage(self._value_columns(source))
        raise _error(f"unsupported FROM item {source.sql()[:60]!r}", self.sql)

    def _unnest(
        self,
        source: exp.Expr,
        expressions: Sequence[exp.Expr],
        alias: exp.Expr | None,
        ctes: dict[str, RelationLineage],
        scope: _Scope,
    ) -> RelationLineage:
        names = [column.name.lower() for column in alias.columns] if isinstance(alias, exp.TableAlias) else []
        if not names:
            raise _error(f"{source.sql()[:60]!r} needs column aliases, e.g. AS t(x)", self.sql)
        parts = [as_value(self.expr(item, scope, ctes), Subtype.TRANSFORMATION) for item in expressions]
        ordinality = bool(source.args.get("offset")) or bool(source.args.get("ordinality"))
        value_names = names[:-1] if ordinality and len(names) > 1 else names
        if len(parts) == len(value_names):
            columns = [OutputColumn(name, deps) for name, deps in zip(value_names, parts, strict=True)]
        else:
            # One array of rows or a map spread over several columns: each comes from all of it.
            columns = [OutputColumn(name, union(*parts)) for name in value_names]
        if len(value_names) < len(names):
            columns.append(OutputColumn(names[-1], NO_DEPENDENCIES))
        return RelationLineage(tuple(columns))

    def _select(self, node: exp.Select, ctes: dict[str, RelationLineage], outer: _Scope | None) -> RelationLineage:
        scope = _Scope(outer=outer, using=dict(node.meta.get(_USING_META, {})))
        dataset: list[Dependencies] = []
        from_ = node.args.get("from_")
        joins = node.args.get("joins") or []
        sources = ([from_.this] if from_ is not None else []) + [join.this for join in joins]
        for source in sources:
            alias, relation = self._source(source, ctes, scope)
            scope.sources[alias] = {column.name: column.dependencies for column in relation.columns}
            dataset.append(relation.dataset)
        for lateral in node.args.get("laterals") or []:
            alias, relation = self._source(lateral, ctes, scope)
            scope.sources[alias] = {column.name: column.dependencies for column in relation.columns}
        for join in joins:
            condition = join.args.get("on")
            if condition is not None:
                dataset.append(as_indirect(self.expr(condition, scope, ctes), Subtype.JOIN))

        columns = []
        for projection in node.expressions:
            dependencies = self.expr(projection, scope, ctes)
            columns.append(OutputColumn(projection.alias_or_name.lower(), dependencies, projection.sql()))
        scope.projections = {column.name: column.dependencies for column in columns}

        for key, subtype in (
            ("where", Subtype.FILTER),
            ("group", Subtype.GROUP_BY),
            ("having", Subtype.FILTER),
            ("qualify", Subtype.FILTER),
            ("order", Subtype.SORT),
        ):
            clause = node.args.get(key)
            if clause is not None:
                dataset.append(as_indirect(self.expr(clause, scope, ctes), subtype))
        if node.args.get("distinct"):
            dataset.append(as_indirect(union(*scope.projections.values()), Subtype.GROUP_BY))
        return RelationLineage(tuple(columns), union(*dataset))

    # Expressions ---------------------------------------------------------------------------------

    def expr(self, node: exp.Expr, scope: _Scope, ctes: dict[str, RelationLineage]) -> Dependencies:
        if isinstance(node, exp.Column):
            return scope.resolve(node, self.sql)
        if isinstance(node, (exp.Literal, exp.Null, exp.Boolean, exp.Star, exp.DataType, exp.Identifier)):
            return NO_DEPENDENCIES
        if isinstance(node, (exp.Alias, exp.Paren, exp.Cast)):
            return self.expr(node.this, scope, ctes)
        if isinstance(node, exp.Subquery):
            relation = self.query(node.this, ctes, scope)
            # A scalar subquery's value, plus whatever decided which row it came from.
            return union(*(column.dependencies for column in relation.columns), relation.dataset)
        if isinstance(node, exp.Exists):
            relation = self.query(node.this, ctes, scope)
            values = union(*(column.dependencies for column in relation.columns))
            return union(as_value(values, Subtype.TRANSFORMATION), relation.dataset)
        if isinstance(node, exp.Window):
            value = self.expr(node.this, scope, ctes)
            keys = [*(node.args.get("partition_by") or [])]
            order = node.args.get("order")
            if order is not None:
                keys.append(order)
            window = union(*(self.expr(key, scope, ctes) for key in keys))
            return union(value, as_indirect(window, Subtype.WINDOW))
        if isinstance(node, exp.Filter):
            # agg(x) FILTER (WHERE c): c picks the rows the aggregate sees.
            value = self.expr(node.this, scope, ctes)
            condition = self.expr(node.expression, scope, ctes)
            return union(value, as_indirect(condition, Subtype.CONDITIONAL))
        if isinstance(node, exp.Case):
            return self._case(node, scope, ctes)
        if isinstance(node, exp.If):
            condition = self.expr(node.this, scope, ctes)
            branches = union(
                *(self.expr(node.args[key], scope, ctes) for key in ("true", "false") if node.args.get(key))
            )
            return union(as_value(branches, Subtype.TRANSFORMATION), as_indirect(condition, Subtype.CONDITIONAL))
        if isinstance(node, exp.Coalesce):
            using = self._using_column(node, scope)
            if using is not None:
                return using
        children = union(*(self.expr(child, scope, ctes) for child in node.iter_expressions()))
        subtype = Subtype.AGGREGATION if isinstance(node, exp.AggFunc) else Subtype.TRANSFORMATION
        return as_value(children, subtype, masking=isinstance(node, MASKING_FUNCTIONS))

    def _case(self, node: exp.Case, scope: _Scope, ctes: dict[str, RelationLineage]) -> Dependencies:
        conditions: list[Dependencies] = []
        values: list[Dependencies] = []
        if node.this is not None:
            conditions.append(self.expr(node.this, scope, ctes))
        for branch in node.args.get("ifs") or []:
            conditions.append(self.expr(branch.this, scope, ctes))
            values.append(self.expr(branch.args["true"], scope, ctes))
        default = node.args.get("default")
        if default is not None:
            values.append(self.expr(default, scope, ctes))
        return union(
            as_value(union(*values), Subtype.TRANSFORMATION),
            as_indirect(union(*conditions), Subtype.CONDITIONAL),
        )

    def _using_column(self, node: exp.Coalesce, scope: _Scope) -> Dependencies | None:
        arguments = [node.this, *node.expressions]
        if not all(isinstance(argument, exp.Column) for argument in arguments):
            return None
        names = {argument.name.lower() for argument in arguments}
        tables = [argument.table.lower() for argument in arguments]
        if len(names) != 1 or len(set(tables)) != len(tables) or not all(t in scope.sources for t in tables):
            return None
        rule = scope.using.get(names.pop())
        if rule is None:
            return None
        if rule == "first":
            return scope.resolve(arguments[0], self.sql)
        if rule == "last":
            return scope.resolve(arguments[-1], self.sql)
        both = union(*(scope.resolve(argument, self.sql) for argument in arguments))
        return as_value(both, Subtype.TRANSFORMATION)


@dataclass
class _Write:
    target: tuple[str, str] | None
    column_list: list[str] | None
    static_partitions: set[str]
    dynamic_partitions: list[str] | None
    query: exp.Expr
    creates: bool


def _write_of(statement: exp.Expr, default_database: str | None, sql: str) -> _Write | None:
    if isinstance(statement, exp.Insert):
        target = statement.this
        column_list = None
        if isinstance(target, exp.Schema):
            column_list = [identifier.name.lower() for identifier in target.expressions]
            target = target.this
        if not isinstance(target, exp.Table):
            raise _error("INSERT target must be a table", sql)
        static: set[str] = set()
        dynamic: list[str] | None = None
        partition = target.args.get("partition")
        if isinstance(partition, exp.Partition):
            dynamic = []
            for item in partition.expressions:
                if isinstance(item, exp.EQ):
                    static.add(item.this.name.lower())
                else:
                    dynamic.append(item.name.lower())
        query = statement.expression
        _move_with(statement, query)
        return _Write(_table_parts(target, default_database, sql), column_list, static, dynamic, query, False)
    if isinstance(statement, exp.Create) and isinstance(statement.expression, exp.Query):
        kind = str(statement.args.get("kind") or "").upper()
        if kind not in ("TABLE", "VIEW"):
            return None
        target = statement.this
        column_list = None
        if isinstance(target, exp.Schema):
            column_list = [column.name.lower() for column in target.expressions]
            target = target.this
        query = statement.expression
        _move_with(statement, query)
        return _Write(_table_parts(target, default_database, sql), column_list or None, set(), None, query, True)
    if isinstance(statement, exp.Query):
        return _Write(None, None, set(), None, statement, False)
    return None


def _move_with(statement: exp.Expr, query: exp.Expr) -> None:
    """Spark writes ``WITH x AS (...) INSERT ...``; the CTEs belong to the query either way."""
    with_ = statement.args.get("with_")
    if with_ is not None and query.args.get("with_") is None:
        statement.set("with_", None)
        query.set("with_", with_)


class SqlColumnLineage:
    """Column lineage of SQL statements against one catalog.

    ``catalog`` answers ``describe_table``; tables a statement creates (CTAS) become visible to the
    statements after it in the same call, the way a stage B step's temp tables are.
    """

    def __init__(
        self, catalog: TableDescriber, *, dialect: str = "athena", default_database: str | None = None
    ) -> None:
        if dialect not in DIALECTS:
            raise ValidationError(f"dialect {dialect!r} is not supported: use one of {', '.join(DIALECTS)}")
        self.catalog = catalog
        self.dialect = dialect
        self.default_database = default_database
        self._created: dict[tuple[str, str], TableSchema] = {}

    def describe(self, database: str, table: str) -> TableSchema:
        if (database, table) in self._created:
            return self._created[(database, table)]
        try:
            return self.catalog.describe_table(database, table)
        except TableNotFound:
            raise ValidationError(f"table {database}.{table} is not in the catalog") from None

    def statements(self, sql: str) -> list[StatementLineage]:
        """Lineage of each statement in ``sql`` that reads or writes rows, in order."""
        try:
            parsed = sqlglot.parse(sql, read=self.dialect)
        except ParseError as error:
            raise ValidationError(f"cannot parse SQL as {self.dialect}: {error}") from error
        results = []
        for statement in parsed:
            if statement is None:
                continue
            lineage = self.statement(statement)
            if lineage is not None:
                results.append(lineage)
        return results

    def statement(self, statement: exp.Expr) -> StatementLineage | None:
        text = statement.sql(self.dialect)
        write = _write_of(statement, self.default_database, text)
        if write is None:
            return None
        query = write.query
        schemas = {
            (database, table): self.describe(database, table)
            for database, table in sorted(_referenced_tables(query, self.default_database, text))
        }
        # Types do not matter for lineage, and Glue's Hive type strings need not parse in every dialect.
        mapping = MappingSchema(_nested(schemas), dialect=self.dialect)
        _mark_using_joins(query)
        try:
            qualified = qualify(
                query,
                dialect=self.dialect,
                db=self.default_database,
                schema=mapping,
                validate_qualify_columns=True,
                quote_identifiers=False,
                identify=False,
            )
        except OptimizeError as error:
            raise _error(f"cannot resolve the statement's columns: {error}", text) from error
        walker = _Walker(schemas, text)
        relation = walker.query(qualified, {}, None)
        columns = self._target_columns(write, relation, text)
        target = f"{write.target[0]}.{write.target[1]}" if write.target else None
        if write.creates and write.target:
            self._created[write.target] = TableSchema(
                write.target[0], write.target[1], tuple(Column(c.name, "string") for c in columns)
            )
        return StatementLineage(target, columns, relation.dataset, tuple(sorted(walker.inputs)), text)

    def _target_columns(self, write: _Write, relation: RelationLineage, sql: str) -> tuple[OutputColumn, ...]:
        if write.target is None:
            return relation.columns
        if write.column_list is not None:
            names = write.column_list
        elif write.creates:
            return relation.columns
        else:
            schema = self.describe(*write.target)
            partitions = schema.partition_names
            if write.dynamic_partitions is not None:
                partitions = [name for name in write.dynamic_partitions if name not in write.static_partitions]
            names = [*schema.column_names, *partitions]
        if len(names) != len(relation.columns):
            raise _error(
                f"{'.'.join(write.target)} takes {len(names)} columns ({', '.join(names)}) "
                f"but the query gives {len(relation.columns)}",
                sql,
            )
        return tuple(
            OutputColumn(name, column.dependencies, column.expression)
            for name, column in zip(names, relation.columns, strict=True)
        )


def _nested(schemas: dict[tuple[str, str], TableSchema]) -> dict[str, object]:
    nested: dict[str, dict[str, dict[str, str]]] = {}
    for (database, table), schema in schemas.items():
        nested.setdefault(database, {})[table] = {column.name: "string" for column in _all_columns(schema)}
    return dict(nested)


def column_lineage(
    sql: str,
    catalog: TableDescriber,
    *,
    dialect: str = "athena",
    default_database: str | None = None,
) -> list[StatementLineage]:
    """Column lineage of every row-moving statement in ``sql``."""
    return SqlColumnLineage(catalog, dialect=dialect, default_database=default_database).statements(sql)
