"""Column lineage from SQL text (Athena, Spark, Hive, Trino or ANSI SQL), resolved against the catalog's schemas.

sqlglot parses the statement and its ``qualify`` pass does the name resolution: every column gets the
alias of the relation it comes from, ``*`` and ``t.*`` are expanded from the schema, ``USING`` becomes
``ON``, a struct field ``s.info.city`` becomes a path into column ``info``. What is left is the lineage walk
over the qualified tree (``lineage.columns.walk``): each relation maps its column names to dependencies, and
each expression combines the dependencies of the columns it reads. Along the way every column records its
expression chain (``ExpressionNode``), which ``lineage tree`` prints down to table columns and literals.

``lineage.columns.writes`` maps a statement's rows onto its target (INSERT, CTAS, and MERGE/UPDATE/DELETE
rewritten as one SELECT). Statements that move no rows (DROP, ALTER, MSCK) are skipped; anything else
that cannot be followed is refused with a one-line reason.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel, ParseError, SqlglotError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify
from sqlglot.schema import MappingSchema

from lakeline.engines.base import Column, TableNotFound, TableSchema
from lakeline.errors import InvalidInputError
from lakeline.lineage.columns.model import (
    NO_DEPENDENCIES,
    Dependencies,
    ExpressionNode,
    OutputColumn,
    RelationLineage,
    StatementLineage,
    Subtype,
    as_indirect,
    union,
)
from lakeline.lineage.columns.walk import (
    Walker,
    glue_type,
    mark_unaliased_generators,
    mark_using_joins,
    schema_columns,
    unique_nodes,
)
from lakeline.lineage.columns.writes import (
    GENERATED,
    WritePlan,
    plan_write,
    statement_error,
    table_parts,
    update_target,
)

DIALECTS = ("athena", "spark", "hive", "trino", "ansi")
# sqlglot's base dialect is its ANSI SQL; the others are sqlglot's own names.
SQLGLOT_DIALECTS = {"ansi": ""}

_ESCAPES = re.compile(r"\x1b\[[0-9;]*m")


class _DropAll(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return False


@contextmanager
def _sqlglot_silenced() -> Iterator[None]:
    """sqlglot logs a multi-line warning for each statement it keeps as a Command ('... contains
    unsupported syntax'); this analysis says itself, on one line, what it does with such a statement."""
    logger = logging.getLogger("sqlglot")
    quiet = _DropAll()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


class TableDescriber(Protocol):
    """Anything that knows table schemas: ``CatalogFile``, an ``Engine`` (Glue through Athena, Spark)."""

    def describe_table(self, database: str, table: str) -> TableSchema: ...


def sqlglot_dialect(dialect: str) -> str:
    return SQLGLOT_DIALECTS.get(dialect, dialect)


def parse_error_message(error: ParseError, dialect: str) -> str:
    """sqlglot's first parse error on one line, without the terminal escape codes of its highlight."""
    details = error.errors[0] if error.errors else {}
    if details:
        description = str(details.get("description") or "").split(". Line")[0]
        description = re.sub(r"<Token token_type: [^,]+, text: ([^,]*),.*?>", r"'\1'", description)
        where = f"line {details.get('line')}, column {details.get('col')}"
        message = f"{where}: {description}"
    else:
        message = str(error).splitlines()[0]
    return _ESCAPES.sub("", f"cannot parse SQL as {dialect}: {message}")


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
        found.add(table_parts(table, default_database, sql))
    return found


def _lineage_type(glue_type: str, dialect: str) -> str:
    """The type sqlglot is told about a column: structs as they are (so ``s.info.city`` resolves as a field),
    anything else as ``string`` (types do not matter for lineage, and Glue's Hive type strings need not
    parse in every dialect)."""
    if "struct<" not in glue_type.lower():
        return "string"
    try:
        return exp.DataType.build(glue_type, dialect="hive").sql(dialect)
    except SqlglotError:
        return "string"


def _parsed_type(glue_type: str) -> exp.DataType:
    if glue_type:
        try:
            return exp.DataType.build(glue_type, dialect="hive")
        except SqlglotError:
            pass
    return exp.DataType.build("unknown")


def _result_types(query: exp.Query, schemas: dict[tuple[str, str], TableSchema], dialect: str) -> list[str]:
    """The types of ``query``'s (qualified) columns as far as the catalog's types tell them; ``""`` where not.

    Only for the tables a statement creates: their schema facets and later statements read these types.
    """
    nested: dict[str, dict[str, dict[str, exp.DataType]]] = {}
    for (database, table), schema in schemas.items():
        nested.setdefault(database, {})[table] = {c.name: _parsed_type(c.type) for c in schema_columns(schema)}
    try:
        annotate_types(query, schema=MappingSchema(dict(nested), dialect=dialect), dialect=dialect)
    except (SqlglotError, ValueError, KeyError):  # types are a detail of the schema facet: unknown, not a failure
        return ["" for _ in query.selects]
    return [glue_type(projection.type) for projection in query.selects]


@dataclass(frozen=True)
class TableLevel:
    """What a statement set reads and writes at table level alone, ``database.table``, in order."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


def _write_target(statement: exp.Expr) -> exp.Table | None:
    target = statement.this if isinstance(statement, exp.Insert | exp.Merge | exp.Delete) else None
    if isinstance(statement, exp.Update):
        target = update_target(statement)
    if isinstance(statement, exp.Create) and str(statement.args.get("kind") or "").upper() in ("TABLE", "VIEW"):
        target = statement.this
    if isinstance(statement, exp.TruncateTable) and len(statement.expressions) == 1:
        target = statement.expressions[0]
    if isinstance(target, exp.Schema):
        target = target.this
    return target if isinstance(target, exp.Table) and not isinstance(target.this, exp.Func) else None


class SqlColumnLineage:
    """Column lineage of SQL statements against one catalog.

    ``catalog`` answers ``describe_table``; tables a statement creates (CTAS, or CREATE TABLE with its
    columns) become visible to the statements after it, the way a stage B step's temp tables are. Pass
    the same ``created`` to the analysers of several steps of one run, and a step sees the tables the
    steps before it made (they are not in the catalog before the run).
    """

    def __init__(
        self,
        catalog: TableDescriber,
        *,
        dialect: str = "athena",
        default_database: str | None = None,
        created: dict[tuple[str, str], TableSchema] | None = None,
    ) -> None:
        if dialect not in DIALECTS:
            raise InvalidInputError(f"dialect {dialect!r} is not supported: use one of {', '.join(DIALECTS)}")
        self.catalog = catalog
        self.dialect = dialect
        self.read = sqlglot_dialect(dialect)
        self.default_database = default_database
        self._created = created if created is not None else {}

    def describe(self, database: str, table: str) -> TableSchema:
        if (database, table) in self._created:
            return self._created[(database, table)]
        try:
            return self.catalog.describe_table(database, table)
        except TableNotFound:
            raise InvalidInputError(f"table {database}.{table} is not in the catalog") from None

    def statements(self, sql: str) -> list[StatementLineage]:
        """Lineage of each statement in ``sql`` that reads or writes rows, in order."""
        try:
            with _sqlglot_silenced():
                parsed = sqlglot.parse(sql, read=self.read)
        except ParseError as error:
            raise InvalidInputError(parse_error_message(error, self.dialect)) from None
        results = []
        for statement in parsed:
            if statement is None:
                continue
            lineage = self.statement(statement)
            if lineage is not None:
                results.append(lineage)
        return results

    def statement(self, statement: exp.Expr) -> StatementLineage | None:
        # The statement as its own dialect writes it, for messages and the event's SQL facet; what the
        # dialect cannot write (Hive's WITH RECURSIVE) is written as it is instead of logged.
        text = statement.sql(self.read, unsupported_level=ErrorLevel.IGNORE)
        if isinstance(statement, exp.Create) and isinstance(statement.this, exp.Schema):
            self._remember_definition(statement.this, text)
        for pivot in statement.find_all(exp.Pivot):
            # Its output columns are named after values in the data: refused before the walk, which would
            # only say that some column cannot be resolved.
            keyword = "UNPIVOT" if pivot.args.get("unpivot") else "PIVOT"
            raise statement_error(f"{keyword} is not supported for column lineage", text)
        write = plan_write(statement, default_database=self.default_database, describe=self.describe, sql=text)
        if write is None:
            return None
        query = write.query
        schemas = {}
        for database, table in sorted(_referenced_tables(query, self.default_database, text)):
            schema = self.describe(database, table)
            if not schema_columns(schema) and (database, table) in self._created:
                raise statement_error(
                    f"the columns of {database}.{table} are not known: the statement that creates it has no "
                    "column lineage",
                    text,
                )
            if not schema_columns(schema):
                raise statement_error(f"table {database}.{table} has no columns in the catalog", text)
            schemas[(database, table)] = schema
        mark_using_joins(query)
        mark_unaliased_generators(query)
        try:
            mapping = MappingSchema(self._nested(schemas), dialect=self.read)
            qualified = qualify(
                query,
                dialect=self.read,
                db=self.default_database,
                schema=mapping,
                validate_qualify_columns=True,
                quote_identifiers=False,
                identify=False,
            )
        except SqlglotError as error:
            reason = _ESCAPES.sub("", str(error).splitlines()[0] if str(error) else type(error).__name__)
            raise statement_error(f"cannot resolve the statement's columns: {reason}", text) from None
        walker = Walker(schemas, text)
        relation = walker.query(qualified, {}, None, None)
        columns, dataset = self._target_columns(write, relation, text)
        target = f"{write.target[0]}.{write.target[1]}" if write.target else None
        inputs = set(walker.inputs)
        if write.kind == "rewrite" and target is not None and not _reads(target, columns, dataset):
            inputs.discard(target)  # UPDATE/DELETE/MERGE name their target; it is an input only if read
        if write.kind == "create" and write.target:
            types = _result_types(qualified, schemas, self.read) if isinstance(qualified, exp.Query) else []
            if len(types) != len(columns):  # a generator's several columns come from one projection
                types = ["" for _ in columns]
            self._created[write.target] = TableSchema(
                write.target[0],
                write.target[1],
                tuple(Column(c.name, kind) for c, kind in zip(columns, types, strict=True)),
            )
        return StatementLineage(target, columns, dataset, tuple(sorted(inputs)), text)

    def tables(self, sql: str) -> TableLevel:
        """The tables ``sql`` reads and writes, from its parse alone: for a step whose column lineage is refused.

        The tables its CREATE statements make are remembered for later statements and steps, with their
        declared columns, or with none (not known) when they come from a query.
        """
        try:
            with _sqlglot_silenced():
                parsed = [statement for statement in sqlglot.parse(sql, read=self.read) if statement is not None]
        except ParseError as error:
            raise InvalidInputError(parse_error_message(error, self.dialect)) from None
        inputs: dict[str, None] = {}
        outputs: dict[str, None] = {}
        for statement in parsed:
            text = statement.sql(self.read, unsupported_level=ErrorLevel.IGNORE)
            target = _write_target(statement)
            # T-SQL's UPDATE t ... FROM tab1 AS t: t is the target's alias, no table of its own.
            named = statement.this if isinstance(statement, exp.Update) else target
            ctes = _cte_names(statement)
            for table in statement.find_all(exp.Table):
                if table is target or table is named or not table.name or isinstance(table.this, exp.Func):
                    continue
                if table.db or table.name.lower() not in ctes:
                    name = ".".join(table_parts(table, self.default_database, text))
                    if name not in outputs:  # a table this step wrote before reading it back is no input
                        inputs.setdefault(name)
            if target is None:
                continue
            database, table_name = table_parts(target, self.default_database, text)
            outputs.setdefault(f"{database}.{table_name}")
            if isinstance(statement, exp.Create):
                if isinstance(statement.this, exp.Schema) and not isinstance(statement.expression, exp.Query):
                    self._remember_definition(statement.this, text)
                else:
                    # A CTAS whose query was not followed (or one that was, earlier in this step): its
                    # columns are not made up; later statements reading it are refused, saying so.
                    self._created.setdefault((database, table_name), TableSchema(database, table_name, ()))
        return TableLevel(tuple(inputs), tuple(outputs))

    def _remember_definition(self, schema: exp.Schema, sql: str) -> None:
        """``CREATE TABLE t (a int, ...) [PARTITIONED BY (dt string)]``: t's columns for later statements."""
        if not isinstance(schema.this, exp.Table):
            return
        database, table = table_parts(schema.this, self.default_database, sql)
        columns = tuple(_declared(d) for d in schema.expressions if isinstance(d, exp.ColumnDef))
        partitions: tuple[Column, ...] = ()
        statement = schema.parent
        partitioned = statement.find(exp.PartitionedByProperty) if statement is not None else None
        if partitioned is not None and isinstance(partitioned.this, exp.Schema):
            definitions = partitioned.this.expressions
            partitions = tuple(_declared(d) for d in definitions if isinstance(d, exp.ColumnDef))
        if columns:
            self._created[(database, table)] = TableSchema(database, table, columns, partitions)

    def _nested(self, schemas: dict[tuple[str, str], TableSchema]) -> dict[str, object]:
        nested: dict[str, dict[str, dict[str, str]]] = {}
        for (database, table), schema in schemas.items():
            nested.setdefault(database, {})[table] = {
                column.name: _lineage_type(column.type, self.read) for column in schema_columns(schema)
            }
        return dict(nested)

    def _target_columns(
        self, write: WritePlan, relation: RelationLineage, sql: str
    ) -> tuple[tuple[OutputColumn, ...], Dependencies]:
        if write.kind == "rewrite" and write.target is not None:
            known = {column.name for column in schema_columns(self.describe(*write.target))}
            for assignment in write.assignments:
                if assignment.column not in known:
                    raise statement_error(f"{'.'.join(write.target)} has no column {assignment.column!r}", sql)
            return _assigned_columns(write, relation)
        if write.target is None or (write.kind == "create" and write.column_list is None):
            return relation.columns, relation.dataset
        static = write.static_partitions
        if write.column_list is not None:
            names = write.column_list
            order = [*names, *static]
        else:
            schema = self.describe(*write.target)
            if not schema_columns(schema):
                raise statement_error(f"table {'.'.join(write.target)} has no columns in the catalog", sql)
            partitions = schema.partition_names
            if write.dynamic_partitions is not None:
                named = [*static, *write.dynamic_partitions]
                unknown = [name for name in named if name not in partitions]
                if unknown:
                    raise statement_error(
                        f"{'.'.join(write.target)} has no partition column {unknown[0]!r} "
                        f"(its partitions: {', '.join(partitions) or 'none'})",
                        sql,
                    )
                partitions = [name for name in partitions if name not in static]
            names = [*schema.column_names, *partitions]
            order = [*schema.column_names, *schema.partition_names]
        if len(names) != len(relation.columns):
            raise statement_error(
                f"{'.'.join(write.target)} takes {len(names)} columns ({', '.join(names)}) "
                f"but the query gives {len(relation.columns)}",
                sql,
            )
        columns = [
            OutputColumn(name, column.dependencies, column.expression, column.node)
            for name, column in zip(names, relation.columns, strict=True)
        ]
        for name, value in static.items():
            columns.append(OutputColumn(name, NO_DEPENDENCIES, value, ExpressionNode(name, f"PARTITION {value}")))
        # In the table's order: a static partition ahead of a dynamic one (dt = '...', country) is still first.
        position = {name: index for index, name in enumerate(order)}
        return tuple(sorted(columns, key=lambda column: position[column.name])), relation.dataset


def _declared(definition: exp.ColumnDef) -> Column:
    """A column of ``CREATE TABLE t (...)`` with the type it is declared with."""
    kind = definition.args.get("kind")
    return Column(definition.name.lower(), glue_type(kind if isinstance(kind, exp.DataType) else None))


def _assigned_columns(write: WritePlan, relation: RelationLineage) -> tuple[tuple[OutputColumn, ...], Dependencies]:
    """A rewritten MERGE/UPDATE/DELETE: each target column from every branch that assigns it."""
    by_alias = {column.name: column for column in relation.columns}
    dataset = [relation.dataset]
    for alias in write.row_conditions:
        dataset.append(as_indirect(by_alias[alias].dependencies, Subtype.FILTER))
    per_column: dict[str, list[tuple[Dependencies, ExpressionNode]]] = {}
    for assignment in write.assignments:
        value = by_alias[assignment.value]
        dependencies = value.dependencies
        children = list(value.node.children) if value.node else []
        if assignment.condition is not None:
            condition = by_alias[assignment.condition]
            dependencies = union(dependencies, as_indirect(condition.dependencies, Subtype.CONDITIONAL))
            children += condition.node.children if condition.node else ()
        expression = (value.expression or "").rsplit(f" AS {GENERATED}", 1)[0]
        node = ExpressionNode(
            assignment.branch, f"{assignment.column} = {expression}", None, unique_nodes(children), dependencies
        )
        per_column.setdefault(assignment.column, []).append((dependencies, node))
    columns = tuple(
        OutputColumn(
            name,
            union(*(dependencies for dependencies, _ in branches)),
            " | ".join(node.expression or "" for _, node in branches),
            ExpressionNode(name, "MERGE" if len(branches) > 1 else None, None, tuple(node for _, node in branches)),
        )
        for name, branches in per_column.items()
    )
    return columns, union(*dataset)


def _reads(dataset: str, columns: Sequence[OutputColumn], shaping: Dependencies) -> bool:
    edges = [edge for column in columns for edge in column.dependencies] + list(shaping)
    return any(edge.source.dataset == dataset for edge in edges)


def column_lineage(
    sql: str,
    catalog: TableDescriber,
    *,
    dialect: str = "athena",
    default_database: str | None = None,
) -> list[StatementLineage]:
    """Column lineage of every row-moving statement in ``sql``."""
    return SqlColumnLineage(catalog, dialect=dialect, default_database=default_database).statements(sql)
