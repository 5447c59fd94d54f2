"""``spark.sql(...)`` inside a script: the SQL column lineage over the script's temp views and the catalog.

The statement goes through ``lakeline.lineage.columns.sql`` (Spark dialect). Temp views registered by
``createOrReplaceTempView`` become tables of a reserved database whose columns are those of the frame
behind the view; the lineage found for them is then carried through to the frame's own sources, so
``spark.sql("SELECT id FROM v")`` reads what ``v`` read. Unqualified names that are not views are
tables of Spark's current database, ``default``. Catalog resource links are followed.

A view whose frame has unknown columns (an S3 read without catalog schema) gets the columns the SQL
names, when it is the only such view in the statement; otherwise the names could belong to any of
them, and the statement is reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from lakeline.engines.base import DEFAULT_DATABASE, Column, TableNotFound, TableSchema
from lakeline.errors import LakelineError
from lakeline.glue_scanner.catalog import GlueCatalog
from lakeline.glue_scanner.column_exprs import Problem, Site
from lakeline.glue_scanner.frames import Frame, merge_problems, opaque_frame, resolve_name
from lakeline.lineage.columns.model import (
    NO_DEPENDENCIES,
    Dependencies,
    Edge,
    OutputColumn,
    StatementLineage,
    compose,
    union,
)
from lakeline.lineage.columns.sql import SqlColumnLineage

TEMP_VIEW_DATABASE = "lakeline_temp_views"
"""Where temp views live while a statement is analysed; never a dataset of the results."""


@dataclass(frozen=True)
class SqlResult:
    """What one ``spark.sql`` call gives: a query's frame, a write, or a new temp view."""

    frame: Frame | None = None
    write: StatementLineage | None = None
    write_problems: tuple[Problem, ...] = ()
    view: str | None = None


class _Describer:
    def __init__(self, catalog: GlueCatalog, views: Mapping[str, TableSchema]) -> None:
        self.catalog = catalog
        self.views = views

    def describe_table(self, database: str, table: str) -> TableSchema:
        if database == TEMP_VIEW_DATABASE:
            if table in self.views:
                return self.views[table]
            raise TableNotFound(database, table)
        return self.catalog.describe_table(database, table)


def _is_temporary(statement: exp.Expr) -> bool:
    properties = statement.args.get("properties")
    return (
        isinstance(statement, exp.Create)
        and isinstance(properties, exp.Properties)
        and any(isinstance(p, exp.TemporaryProperty) for p in properties.expressions)
    )


def _qualify_tables(statement: exp.Expr, views: Mapping[str, Frame], catalog: GlueCatalog) -> set[str]:
    """Give every table a database (views, then ``default``), follow links; the views read, lower-cased."""
    ctes = {cte.alias_or_name.lower() for cte in statement.find_all(exp.CTE)}
    used: set[str] = set()
    creates_view = _is_temporary(statement)
    target = (
        statement.this.this
        if isinstance(statement, exp.Create) and isinstance(statement.this, exp.Schema)
        else (statement.this if isinstance(statement, exp.Create) else None)
    )
    for table in list(statement.find_all(exp.Table)):
        if not table.name or isinstance(table.this, exp.Func):
            continue
        name = table.name.lower()
        if table is target and creates_view:
            table.set("db", exp.to_identifier(TEMP_VIEW_DATABASE))
            continue
        if not table.db and name in ctes:
            continue
        if not table.db and name in views:
            table.set("db", exp.to_identifier(TEMP_VIEW_DATABASE))
            used.add(name)
            continue
        database, real = catalog.resolve_link(table.db or DEFAULT_DATABASE, name)
        table.set("catalog", None)
        table.set("db", exp.to_identifier(database))
        table.set("this", exp.to_identifier(real))
    return used


def _view_schemas(
    statement: exp.Expr, views: Mapping[str, Frame], used: set[str], catalog: GlueCatalog
) -> dict[str, TableSchema]:
    schemas = {}
    open_views = [name for name in used if views[name].is_open]
    named = {column.name.lower() for column in statement.find_all(exp.Column) if column.name}
    others: set[str] = set()
    for table in statement.find_all(exp.Table):
        if table.db and table.db != TEMP_VIEW_DATABASE:
            schema = catalog.schema_or_none(table.db, table.name)
            if schema is not None:
                others.update(c.name.lower() for c in (*schema.columns, *schema.partition_columns))
    for name in used:
        frame = views[name]
        columns = [Column(column.name.lower(), "string") for column in frame.columns]
        if len(open_views) == 1 and name in open_views:
            known = {column.name for column in columns}
            for other in sorted(named - known - others - frame.hidden):
                columns.append(Column(other, "string"))
        unique = {column.name: column for column in columns}
        schemas[name] = TableSchema(TEMP_VIEW_DATABASE, name, tuple(unique.values()))
    return schemas


def _through_views(
    dependencies: Dependencies, views: Mapping[str, Frame], site: Site
) -> tuple[Dependencies, list[Problem]]:
    """Replace a view's columns by where the view's frame takes them from."""
    result: set[Edge] = set()
    problems: list[Problem] = []
    prefix = f"{TEMP_VIEW_DATABASE}."
    for edge in dependencies:
        if not edge.source.dataset.startswith(prefix):
            result.add(edge)
            continue
        frame = views[edge.source.dataset[len(prefix) :]]
        inner, found = resolve_name(frame, edge.source.field, site)
        problems.extend(found)
        for source in inner:
            result.add(Edge(source.source, compose(edge.transformation, source.transformation)))
    return frozenset(result), problems


def _selects_star(statement: exp.Expr) -> bool:
    for select in statement.find_all(exp.Select):
        for projection in select.expressions:
            if isinstance(projection, exp.Star) or (
                isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star)
            ):
                return True
    return False


def _written_table(statement: exp.Expr) -> str | None:
    if not isinstance(statement, exp.Insert | exp.Create):
        return None
    target = statement.this.this if isinstance(statement.this, exp.Schema) else statement.this
    if not isinstance(target, exp.Table) or not target.db:
        return None
    return f"{target.db}.{target.name}".lower()


def run_spark_sql(sql: str, views: Mapping[str, Frame], catalog: GlueCatalog, site: Site) -> SqlResult:
    """The lineage of one ``spark.sql(sql)`` call; failures become a frame or write that reports them."""
    try:
        statements = [s for s in sqlglot.parse(sql, read="spark") if s is not None]
    except ParseError as error:
        return SqlResult(frame=opaque_frame(site.problem(f"cannot parse spark.sql text: {error}")))
    if len(statements) != 1:
        return SqlResult(frame=opaque_frame(site.problem(f"spark.sql runs one statement; found {len(statements)}")))
    statement = statements[0]
    try:
        used = _qualify_tables(statement, views, catalog)
    except LakelineError as error:
        return SqlResult(frame=opaque_frame(site.problem(str(error))))
    view_inputs = frozenset().union(*(views[name].inputs for name in used))
    tables = {
        f"{t.db}.{t.name}".lower()
        for t in statement.find_all(exp.Table)
        if t.db and t.db != TEMP_VIEW_DATABASE and t.name
    }
    problems: list[Problem] = [p for name in sorted(used) for p in views[name].problems]
    if any(views[name].is_open for name in used) and _selects_star(statement):
        message = "SELECT * over a temp view whose columns are not all known: only named columns are traced"
        problems.append(site.problem(message))
    schemas = _view_schemas(statement, views, used, catalog)
    try:
        lineage = SqlColumnLineage(_Describer(catalog, schemas), dialect="spark").statement(statement)
    except LakelineError as error:
        problem = site.problem(f"spark.sql: {error}")
        target = _written_table(statement)
        if target is not None and not target.startswith(f"{TEMP_VIEW_DATABASE}."):
            # The table-level lineage still holds: what it writes and what it reads.
            read = (tables - {target}) | view_inputs
            write = StatementLineage(target, (), NO_DEPENDENCIES, tuple(sorted(read)), statement.sql("spark"))
            return SqlResult(write=write, write_problems=merge_problems(problems, [problem]))
        return SqlResult(frame=opaque_frame(problem, inputs=tables | view_inputs).with_problems(problems))
    if lineage is None:
        return SqlResult()
    columns = []
    for column in lineage.columns:
        deps, found = _through_views(column.dependencies, views, site)
        problems.extend(found)
        columns.append(OutputColumn(column.name, deps, column.expression))
    dataset, found = _through_views(lineage.dataset, views, site)
    problems.extend(found)
    dataset = union(dataset, *(views[name].dataset for name in used))
    inputs = frozenset(name for name in lineage.inputs if not name.startswith(f"{TEMP_VIEW_DATABASE}.")) | view_inputs
    frame = Frame(columns=tuple(columns), dataset=dataset, inputs=inputs, problems=merge_problems(problems))
    if lineage.target is None:
        return SqlResult(frame=frame)
    if lineage.target.startswith(f"{TEMP_VIEW_DATABASE}."):
        return SqlResult(frame=frame, view=lineage.target[len(TEMP_VIEW_DATABASE) + 1 :])
    write = replace(lineage, columns=tuple(columns), dataset=dataset, inputs=tuple(sorted(inputs)))
    return SqlResult(write=write, write_problems=frame.problems)
