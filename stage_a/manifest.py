"""The files a stage A run reads, named in a manifest instead of in its SQL (#39).

Listing the files in the SQL (``"$path" IN (...)``) makes the statement and the state machine input grow with
the batch (an append, the type check) or the partition's history (a compaction, a rewrite): at ~2,000 files
the SQL passes Athena's 262,144 bytes. Instead the plan
writes a symlink manifest (one file's location a line) into the run's manifest prefix
(``lakeline.storage.manifest_prefix``) and the run reads it through a temp external table with the raw
table's SerDe and Hive's ``SymlinkTextInputFormat``, which Athena reads for Parquet, ORC, JSON and text, and
Lakeline's Spark engine reads as Athena does (``lakeline.engines.symlink``). The statements stay the same
size whatever the partition holds; the manifest goes with the run's prefix (its failure path, the sweep).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from lakeline.engines.base import TableSchema
from lakeline.engines.serdes import JSON_SERDE, OPEN_CSV
from lakeline.engines.symlink import MULTILINE_PROPERTY, SYMLINK_INPUT_FORMAT
from lakeline.errors import InvalidInputError
from lakeline.names import check_identifier, ddl_name, string_literal

TEXT_OUTPUT = "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat"
_TYPED = {
    "parquet": (
        "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
        "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
    ),
    "orc": ("org.apache.hadoop.hive.ql.io.orc.OrcSerde", "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat"),
    "json": (JSON_SERDE, TEXT_OUTPUT),
}


@dataclass(frozen=True)
class ManifestSource:
    """The table a run reads its files through: made before the CTAS, dropped after it (also on failure)."""

    table: str  # in the stage database
    manifest: str  # the folder holding the manifest (the table's location)
    create: str
    drop: str


HIVE_TYPE = re.compile(r"[A-Za-z][A-Za-z0-9_<>(),: ]*")
"""A column type as the catalog gives it (``bigint``, ``decimal(10,2)``, ``struct<a:int>``): no quote, no
comment, nothing that could end the column list."""


def _column_type(schema: TableSchema, name: str, kind: str) -> str:
    if not HIVE_TYPE.fullmatch(kind):
        raise InvalidInputError(f"table {schema.database}.{schema.table}: column {name} has type {kind!r}")
    return kind


def source_table_name(temp_table: str) -> str:
    return check_identifier(f"{temp_table}_files", "manifest table")


def _row_format(schema: TableSchema, encoding: str) -> tuple[str, str, dict[str, str]]:
    """(ROW FORMAT clause, output format, table properties) of the raw table's files."""
    kind = (schema.format or "csv").lower()
    if kind in _TYPED:
        serde, output = _TYPED[kind]
        return f"ROW FORMAT SERDE {string_literal(serde)}", output, {}
    if kind != "csv":
        raise InvalidInputError(f"table {schema.database}.{schema.table}: format {kind} cannot be read from a manifest")
    delimiter = string_literal(schema.delimiter or ",")
    properties = {"skip.header.line.count": "1"}
    if schema.multiline_fields:
        # Only Spark reads quoted fields across lines (the embedded runtime's raw tables, which Athena never
        # reads): the property tells Lakeline's reader so, as the raw table's own reader does.
        properties |= {MULTILINE_PROPERTY: "true", "serialization.encoding": encoding}
    if not schema.quote:  # never quoted: LazySimpleSerDe, as the raw table's DDL has it
        return f"ROW FORMAT DELIMITED FIELDS TERMINATED BY {delimiter}", TEXT_OUTPUT, properties
    serde = (
        f"ROW FORMAT SERDE {string_literal(OPEN_CSV)} WITH SERDEPROPERTIES ('separatorChar' = {delimiter}, "
        f"'quoteChar' = {string_literal(schema.quote)})"
    )
    return serde, TEXT_OUTPUT, properties


def symlink_table_ddl(
    schema: TableSchema,
    *,
    database: str,
    table: str,
    columns: Sequence[tuple[str, str]],
    manifest: str,
    encoding: str = "utf-8",
) -> str:
    """``CREATE EXTERNAL TABLE`` of ``columns`` (name, Hive type) over the manifest folder ``manifest``, reading
    the listed files with the raw table ``schema``'s SerDe through ``SymlinkTextInputFormat``."""
    listed_columns = ", ".join(f"{ddl_name(name)} {kind}" for name, kind in columns)
    row_format, output, properties = _row_format(schema, encoding)
    listed = ", ".join(f"{string_literal(key)} = {string_literal(value)}" for key, value in properties.items())
    return (
        f"CREATE EXTERNAL TABLE {ddl_name(database, table)} ({listed_columns}) {row_format} "
        f"STORED AS INPUTFORMAT {string_literal(SYMLINK_INPUT_FORMAT)} OUTPUTFORMAT {string_literal(output)} "
        f"LOCATION {string_literal(manifest)}" + (f" TBLPROPERTIES ({listed})" if listed else "")
    )


def plan_source(
    schema: TableSchema, *, database: str, temp_table: str, manifest: str, encoding: str = "utf-8"
) -> ManifestSource:
    """The temp external table over the manifest folder ``manifest``: the raw table ``schema``'s data columns
    (its partition columns are folders, not in the files) and SerDe, read through ``SymlinkTextInputFormat``."""
    table = source_table_name(temp_table)
    columns = [(column.name, _column_type(schema, column.name, column.type)) for column in schema.columns]
    create = symlink_table_ddl(
        schema, database=database, table=table, columns=columns, manifest=manifest, encoding=encoding
    )
    return ManifestSource(table, manifest, create, f"DROP TABLE IF EXISTS {ddl_name(database, table)}")
