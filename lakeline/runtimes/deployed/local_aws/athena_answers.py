"""What the local Athena answers, in Athena's shapes: statement types, result columns and values as Trino
writes them, and the answers given from Glue (``DESCRIBE``, ``SHOW CREATE TABLE``, ``SHOW PARTITIONS``,
``SHOW COLUMNS``)."""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Iterable
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from lakeline.names import ddl_name, string_literal
from lakeline.runtimes.deployed.local_aws.athena_statements import LocalAthenaError


def statement_type(query: str) -> str:
    first = query.lstrip(" \t\r\n(").split(None, 1)[0].upper() if query.strip() else ""
    if first in {"SHOW", "DESCRIBE", "EXPLAIN"}:
        return "UTILITY"
    if first in {"CREATE", "ALTER", "DROP", "MSCK"}:
        return "DDL"
    return "DML"


def column_info(name: str, kind: str) -> dict[str, Any]:
    base, _, rest = kind.partition("(")
    precision, scale = 0, 0
    if base == "decimal" and rest:
        numbers = rest.rstrip(")").split(",")
        precision, scale = int(numbers[0]), int(numbers[1]) if len(numbers) > 1 else 0
    return {
        "CatalogName": "hive",
        "SchemaName": "",
        "TableName": "",
        "Name": name,
        "Label": name,
        "Type": base,
        "Precision": precision,
        "Scale": scale,
        "Nullable": "UNKNOWN",
        "CaseSensitive": base in {"varchar", "char"},
    }


def _selected(query: str, count: int) -> list[exp.Expression] | None:
    """The expressions of a query's select list, one a result column; ``None`` where they cannot be
    matched to the ``count`` columns (a ``*``, not a query)."""
    try:
        tree = sqlglot.parse_one(query, read="athena")
    except ParseError:
        return None
    while isinstance(tree, exp.SetOperation):
        tree = tree.left
    if not isinstance(tree, exp.Select):
        return None
    selected = tree.expressions
    starred = any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and e.is_star) for e in selected)
    return None if starred or len(selected) != count else list(selected)


def athena_names(query: str, spark_names: list[str]) -> list[str]:
    """A query's column names as Athena gives them: an expression without an alias is ``_col<i>`` (Spark
    names it by its text, ``count(1)``) and ``"$path"`` is ``$path`` (Spark's ``input_file_name()``).
    Spark's names where the select list cannot be matched to them (a ``*``)."""
    selected = _selected(query, len(spark_names))
    if selected is None:
        return spark_names
    names = []
    for index, (expression, spark_name) in enumerate(zip(selected, spark_names, strict=True)):
        if isinstance(expression, exp.Alias):
            names.append(spark_name)
        elif isinstance(expression, exp.Column):
            names.append("$path" if expression.name == "$path" else spark_name)
        else:
            names.append(f"_col{index}")
    return names


ZONED = "timestamp with time zone"
"""Trino's ``timestamp(p) with time zone``, as Athena names it in ``ResultSetMetadata`` (pyathena converts
its values, ``2024-03-01 10:00:00.000 UTC``, to aware datetimes)."""


def zoned_columns(query: str, count: int) -> list[bool]:
    """Which of a query's ``count`` columns Athena types ``timestamp with time zone``: those the select list
    makes with a function that returns one (``from_unixtime``, ``current_timestamp`` / ``now()``,
    ``from_iso8601_timestamp``, a ``TIMESTAMP '… UTC'`` literal or cast). Spark has no such type: its
    timestamp is the same instant (its session is in UTC), which Athena writes in the query's zone, UTC."""
    selected = _selected(query, count) or []
    zoned = [False] * count
    for index, expression in enumerate(selected):
        made = expression.this if isinstance(expression, exp.Alias) else expression
        if isinstance(made, exp.Cast):
            zoned[index] = made.to.this in {exp.DataType.Type.TIMESTAMPTZ, exp.DataType.Type.TIMESTAMPLTZ}
        else:
            zoned[index] = isinstance(made, exp.UnixToTime | exp.CurrentTimestamp | exp.FromISO8601Timestamp)
    return zoned


Answer = tuple[list[tuple[str, str]], list[list[str | None]]]


def glue_definition(entry: Any) -> dict[str, Any]:
    """The Glue table's current version (moto keeps every version of a table)."""
    found: dict[str, Any] = entry.get_version(str(entry._current_version))
    return found


def listed_partitions(database: str, table: str, entry: Any) -> Answer:
    """``SHOW PARTITIONS``: each partition as ``key=value[/key=value]``, as Athena lists them."""
    keys = [str(column["Name"]) for column in glue_definition(entry).get("PartitionKeys", [])]
    if not keys:
        raise LocalAthenaError(f"FAILED: SemanticException Table {table} is not a partitioned table")
    listed = sorted(
        "/".join(f"{key}={value}" for key, value in zip(keys, p.partition_input.get("Values", []), strict=False))
        for p in list(entry.partitions.values())
    )
    return [("partition", "string")], [[name] for name in listed]


def listed_columns(database: str, table: str, entry: Any) -> Answer:
    """``SHOW COLUMNS``: the column names, the partition columns last."""
    definition = glue_definition(entry)
    columns = [*definition.get("StorageDescriptor", {}).get("Columns", []), *definition.get("PartitionKeys", [])]
    return [("field", "string")], [[str(column["Name"])] for column in columns]


def described_table(database: str, table: str, entry: Any) -> Answer:
    """``DESCRIBE``'s answer as Athena gives it (Hive's): each column, the partition columns last, then
    for a partitioned table a ``# Partition Information`` section naming them again."""
    definition = glue_definition(entry)
    descriptor = definition.get("StorageDescriptor", {})
    keys = definition.get("PartitionKeys", [])

    def row(column: dict[str, Any]) -> list[str | None]:
        return [str(column["Name"]), str(column.get("Type", "string")), str(column.get("Comment", ""))]

    rows = [row(column) for column in [*descriptor.get("Columns", []), *keys]]
    if keys:
        rows += [["", "", ""], ["# Partition Information", "", ""], ["# col_name", "data_type", "comment"]]
        rows += [["", "", ""], *(row(column) for column in keys)]
    return [("col_name", "string"), ("data_type", "string"), ("comment", "string")], rows


def create_table_statement(database: str, table: str, entry: Any) -> Answer:
    """``SHOW CREATE TABLE``'s answer as Athena gives it: the table's Hive DDL from Glue, one row a line."""
    definition = glue_definition(entry)
    if definition.get("TableType") == "VIRTUAL_VIEW":
        raise LocalAthenaError(f"{database}.{table} is a view: use SHOW CREATE VIEW")
    descriptor = definition.get("StorageDescriptor", {})
    serde = descriptor.get("SerdeInfo", {})

    def listed(columns: list[dict[str, Any]]) -> list[str]:
        lines = []
        for column in columns:
            comment = f" COMMENT {string_literal(str(column['Comment']))}" if column.get("Comment") else ""
            lines.append(f"  {ddl_name(str(column['Name']))} {column.get('Type', 'string')}{comment}")
        return [f"{line}, " for line in lines[:-1]] + lines[-1:]

    def pairs(parameters: dict[str, Any]) -> list[str]:
        lines = [f"  {string_literal(str(k))}={string_literal(str(v))}" for k, v in sorted(parameters.items())]
        return [f"{line}, " for line in lines[:-1]] + lines[-1:]

    external = "EXTERNAL " if definition.get("TableType", "EXTERNAL_TABLE") == "EXTERNAL_TABLE" else ""
    columns = listed(descriptor.get("Columns", []))
    lines = [
        f"CREATE {external}TABLE {ddl_name(database, table)}(",
        *columns[:-1],
        f"{columns[-1]})" if columns else ")",
    ]
    keys = definition.get("PartitionKeys", [])
    if keys:
        partition_lines = listed(keys)
        lines += ["PARTITIONED BY ( ", *partition_lines[:-1], f"{partition_lines[-1]})"]
    if descriptor.get("BucketColumns"):
        bucketed = ", ".join(ddl_name(str(c)) for c in descriptor["BucketColumns"])
        lines += ["CLUSTERED BY ( ", f"  {bucketed}) ", f"INTO {int(descriptor.get('NumberOfBuckets', 1))} BUCKETS"]
    if serde.get("SerializationLibrary"):
        lines += ["ROW FORMAT SERDE ", f"  {string_literal(str(serde['SerializationLibrary']))} "]
    if serde.get("Parameters"):
        serde_lines = pairs(serde["Parameters"])
        lines += ["WITH SERDEPROPERTIES ( ", *serde_lines[:-1], f"{serde_lines[-1]}) "]
    if descriptor.get("InputFormat") or descriptor.get("OutputFormat"):
        lines += [
            "STORED AS INPUTFORMAT ",
            f"  {string_literal(str(descriptor.get('InputFormat', '')))} ",
            "OUTPUTFORMAT ",
            f"  {string_literal(str(descriptor.get('OutputFormat', '')))}",
        ]
    if descriptor.get("Location"):
        lines += ["LOCATION", f"  {string_literal(str(descriptor['Location']))}"]
    parameters = {k: v for k, v in definition.get("Parameters", {}).items() if k != "EXTERNAL"}
    if parameters:
        property_lines = pairs(parameters)
        lines += ["TBLPROPERTIES (", *property_lines[:-1], f"{property_lines[-1]})"]
    return [("createtab_stmt", "string")], [[line] for line in lines]


ATHENA_TYPES = {
    "string": "varchar",
    "int": "integer",
    "bigint": "bigint",
    "smallint": "smallint",
    "tinyint": "tinyint",
    "float": "real",
    "double": "double",
    "boolean": "boolean",
    "date": "date",
    "timestamp": "timestamp",
    "timestamp_ntz": "timestamp",
    "binary": "varbinary",
    "void": "unknown",
}


def athena_type(spark_type: str) -> str:
    base = spark_type.split("<", 1)[0].split("(", 1)[0]
    if base == "decimal":
        return spark_type
    if base == "struct":
        return "row"
    if base in {"array", "map"}:
        return base
    return ATHENA_TYPES.get(base, "varchar")


def value_type(values: Iterable[Any]) -> str:
    for value in values:
        if value is None:
            continue
        if isinstance(value, bool):
            return "boolean"
        if isinstance(value, int):
            return "bigint"
        if isinstance(value, float):
            return "double"
        if isinstance(value, decimal.Decimal):
            return "decimal"
        if isinstance(value, datetime.datetime):
            return "timestamp"
        if isinstance(value, datetime.date):
            return "date"
        return "varchar"
    return "varchar"


def athena_text(value: Any) -> str | None:
    """A value as Athena writes it in results (Trino's text forms, as far as they are known here)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return " ".join(f"{byte:02x}" for byte in value)
    if hasattr(value, "asDict"):  # a Spark Row: a struct
        return "{" + ", ".join(f"{k}={athena_text(v)}" for k, v in value.asDict().items()) + "}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{athena_text(k)}={athena_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(str(athena_text(v)) for v in value) + "]"
    return str(value)
