"""Run the archive queries in ``athena_queries/lineage/``: on Athena (pyathena) or on local Spark.

The query files are Athena SQL over ``"lineage"."lineage_archive"``; ``bind_archive_table`` points
them at another database and table. On Spark the archive folder becomes a JSON table with the same
columns (``lakeline.lineage.records.archive_table.spark_ddl``) and ``SparkEngine`` translates the query as it
does every statement (sqlglot turns ``CROSS JOIN UNNEST ... WITH ORDINALITY`` into
``LATERAL VIEW POSEXPLODE``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from lakeline.engines.base import QueryFailed, QueryResult
from lakeline.errors import ConfigError, InvalidInputError
from lakeline.lineage.records.archive_table import ARCHIVE_TABLE, DEFAULT_TABLE, LINEAGE_DATABASE
from lakeline.names import check_identifier, check_partition_value, check_qualified_table
from lakeline.repository import REPOSITORY

if TYPE_CHECKING:
    from lakeline.engines.spark import SparkEngine

# The lineage queries the stacks also save as Athena named queries (stacks/constructs/athena.py).
QUERY_FOLDER = REPOSITORY / "athena_queries" / "lineage"
DEFAULT_QUERY = QUERY_FOLDER / "lineage_records.sql"


def load_query(path: Path | None = None) -> str:
    path = path or DEFAULT_QUERY
    try:
        return path.read_text()
    except OSError as error:
        raise ConfigError(f"cannot read the query {path}: {error}") from error


def bind_archive_table(sql: str, database: str, table: str) -> str:
    """Point references to the placeholder archive table at ``database.table`` (checked names)."""
    check_identifier(database, "archive database")
    check_identifier(table, "archive table")
    if (database, table) == (LINEAGE_DATABASE, DEFAULT_TABLE):
        return sql
    try:
        statement = sqlglot.parse_one(sql, read="athena")
    except ParseError as error:
        raise InvalidInputError(f"cannot parse the archive query: {error}") from error
    point_table_at(statement, (LINEAGE_DATABASE, DEFAULT_TABLE), database, table)
    return statement.sql("athena")


def point_table_at(statement: exp.Expr, placeholder: tuple[str, str], database: str, table: str) -> None:
    """Point every reference to the ``placeholder`` (database, table), qualified or not, at ``database.table``."""
    placeholder_database, placeholder_table = placeholder
    for node in statement.find_all(exp.Table):
        if node.name == placeholder_table and node.db in ("", placeholder_database):
            node.set("this", exp.to_identifier(table, quoted=True))
            node.set("db", exp.to_identifier(database, quoted=True))


def query_local_archive(
    engine: SparkEngine,
    archive_dir: Path,
    sql: str,
    *,
    database: str = LINEAGE_DATABASE,
    table: str = DEFAULT_TABLE,
) -> QueryResult:
    ARCHIVE_TABLE.register_local(engine, archive_dir, database, table)
    return engine.execute(bind_archive_table(sql, database, table))


@dataclass(frozen=True)
class AthenaTarget:
    s3_staging_dir: str | None = None
    work_group: str | None = None
    region_name: str | None = None
    database: str = LINEAGE_DATABASE
    table: str = DEFAULT_TABLE


def query_athena(sql: str, target: AthenaTarget) -> QueryResult:
    """Run the query on Athena through pyathena's DB-API cursor."""
    from pyathena import connect
    from pyathena.error import Error as PyAthenaError

    bound = bind_archive_table(sql, target.database, target.table)
    if not target.s3_staging_dir and not target.work_group:
        raise ConfigError("Athena needs a result location (--s3-staging-dir) or a work group that has one")
    connection = connect(
        s3_staging_dir=target.s3_staging_dir,
        work_group=target.work_group,
        region_name=target.region_name,
        schema_name=target.database,
    )
    cursor = None
    try:
        cursor = connection.cursor()
        cursor.execute(bound)
        columns = [column[0] for column in cursor.description or []]
        rows = [tuple(row) for row in cursor.fetchall()]
        return QueryResult(query_id=str(cursor.query_id), columns=columns, rows=rows)
    except PyAthenaError as error:
        query_id = getattr(cursor, "query_id", None)
        raise QueryFailed(f"Athena query failed: {error}", sql=bound, query_id=query_id) from error
    finally:
        connection.close()


VERSION_QUERY = QUERY_FOLDER / "partition_version.sql"


def bind_version_query(
    sql: str,
    table: str,
    partition: str,
    version: str = "",
    *,
    database: str = LINEAGE_DATABASE,
    archive_table: str = DEFAULT_TABLE,
) -> str:
    """``partition_version.sql`` with its three ``?`` (table, partition path, version; ``""``: the newest) as
    checked literals, for an engine without execution parameters (Spark, the local Athena), over
    ``database.archive_table``."""
    check_qualified_table(table, "table")
    for part in partition.split("/"):
        column, equals, value = part.partition("=")
        if not equals:
            raise InvalidInputError(f"partition {partition!r} is not col=value/col2=value2")
        check_identifier(column, "partition column")
        check_partition_value(value, f"partition {column!r}")
    if version and not re.fullmatch(r"v?[0-9]{1,18}|v[0-9]{1,18}\.[0-9a-z_]{1,40}", version):
        raise InvalidInputError(f"version {version!r} is not a number, v<number> or a version token")
    named = {"table": table, "partition": partition, "version": version}
    return bind_parameters(bind_archive_table(sql, database, archive_table), "version query", named).sql("athena")


def bind_parameters(sql: str, what: str, values: Mapping[str, str]) -> exp.Expr:
    """``sql`` parsed, its ``?`` (Athena's execution parameters, in order) replaced by ``values`` as string
    literals (checked by the caller); the number of ``?`` must be the number of values (named in the error)."""
    try:
        statement = sqlglot.parse_one(sql, read="athena")
    except ParseError as error:
        raise InvalidInputError(f"cannot parse the {what}: {error}") from error
    placeholders = list(statement.find_all(exp.Placeholder, bfs=False))  # in the order of the text (depth first)
    if len(placeholders) != len(values):
        count = "one value" if len(values) == 1 else f"{len(values)} values"
        raise InvalidInputError(
            f"the {what} has {len(placeholders)} '?' for {count} ({', '.join(values)}, in that order): "
            "give one value per '?'"
        )
    for placeholder, value in zip(placeholders, values.values(), strict=True):
        placeholder.replace(exp.Literal.string(value))
    return statement
