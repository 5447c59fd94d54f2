"""Column lineage of a SQL file as Spark analyzes it, against tables described by a catalog file.

``lakeline lineage tree --engine spark`` starts an embedded session in a throw-away workspace, creates
the catalog's tables the SQL names (empty, with their Glue columns and partition keys), and reads each
statement's analyzed plan (``lineage.columns.spark``). A CTAS is also run, on those empty tables, so that the
statements after it see the table it creates, as they would in a stage B item. A statement whose plan cannot
be followed (a node the walker does not know, such as a recursive CTE's ``UnionLoop`` or ``MergeIntoTable``)
is refused on its own, with its reason; the others still get their lineage.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from lakeline.catalog_json import CatalogFile
from lakeline.engines.base import TableSchema
from lakeline.engines.translate import athena_to_spark
from lakeline.errors import InvalidInputError, LakelineError
from lakeline.lineage.columns.model import StatementLineage
from lakeline.lineage.columns.sql import parse_error_message, sqlglot_dialect
from lakeline.lineage.columns.writes import NO_ROW_STATEMENTS
from lakeline.names import ddl_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Refused:
    """A statement whose lineage Spark's plan does not give: its position in the file (from 1) and why."""

    position: int
    reason: str


def _create_sql(schema: TableSchema) -> str:
    columns = ", ".join(f"{ddl_name(c.name)} {c.type}" for c in (*schema.columns, *schema.partition_columns))
    partitioned = ", ".join(ddl_name(c.name) for c in schema.partition_columns)
    return f"CREATE TABLE IF NOT EXISTS {ddl_name(schema.database, schema.table)} ({columns}) USING parquet" + (
        f" PARTITIONED BY ({partitioned})" if partitioned else ""
    )


def _run(session: SparkSession, sql: str) -> None:
    try:
        session.sql(sql)
    except Exception as error:  # Spark's own errors (AnalysisException, Py4JJavaError): one line of them
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise InvalidInputError(f"Spark cannot run {' '.join(sql.split())[:80]!r}: {first}") from None


def spark_statements(
    sql: str, catalog: CatalogFile, *, dialect: str = "athena", default_database: str | None = None
) -> list[StatementLineage | Refused]:
    """Lineage of every row-moving statement of ``sql`` from Spark's analyzed plans, or why it is refused."""
    from lakeline.engines.spark import local_spark_session
    from lakeline.lineage.columns.spark import spark_column_lineage

    try:
        parsed = [s for s in sqlglot.parse(sql, read=sqlglot_dialect(dialect)) if s is not None]
    except ParseError as error:
        raise InvalidInputError(parse_error_message(error, dialect)) from None
    named = {(t.db.lower() or default_database or "", t.name.lower()) for s in parsed for t in s.find_all(exp.Table)}
    tables = [schema for schema in catalog.tables() if (schema.database, schema.table) in named]
    with tempfile.TemporaryDirectory(prefix="lakeline-lineage-") as workspace:
        session = local_spark_session(Path(workspace), master="local[1]", app_name="lakeline-lineage", quick_start=True)
        try:
            for database in sorted({database for database, _ in named if database} | {default_database or "default"}):
                _run(session, f"CREATE DATABASE IF NOT EXISTS {ddl_name(database)}")
            for schema in tables:
                _run(session, _create_sql(schema))
            if default_database:
                session.catalog.setCurrentDatabase(default_database)
            results: list[StatementLineage | Refused] = []
            for position, statement in enumerate(parsed, start=1):
                if isinstance(statement, (*NO_ROW_STATEMENTS, exp.Command)):
                    continue
                text = statement.sql(sqlglot_dialect(dialect))
                spark_sql = athena_to_spark(text) if dialect == "athena" else statement.sql("spark")
                try:
                    results.append(spark_column_lineage(session, spark_sql, dialect="spark"))
                except LakelineError as error:  # this statement's plan only: the others are read on
                    results.append(Refused(position, str(error)))
                if isinstance(statement, exp.Create):
                    # Even when its plan is refused: the statements after it read the table it creates.
                    try:
                        _run(session, spark_sql)
                    except InvalidInputError as error:
                        results.append(Refused(position, str(error)))
            return results
        finally:
            session.stop()
