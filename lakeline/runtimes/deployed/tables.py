"""The tables a local deployment's run leaves, as its summary shows them: each partition Glue has, its rows counted
through Athena as users query and its data files listed in S3 (``DeployedProject.finish``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lakeline.names import string_literal

if TYPE_CHECKING:
    from lakeline.runtimes.deployed.operator import Operator

TABLES_PER_COUNT = 50
"""Tables counted by one Athena statement (a UNION ALL of their counts): a few hundred bytes each."""
AS_GLUE_WRITES = ("string", "varchar", "char", "date", "tinyint", "smallint", "int", "integer", "bigint")
"""Partition column types whose values Athena casts to varchar as Glue holds them (a double is ``1.5E0`` there,
``1.5`` in Glue): the tables counted together; the others one statement each, their values read typed."""


def summarized_tables(operator: Operator, datasets: list[str]) -> list[dict[str, Any]]:
    """Rows and data files of every partition Glue has of ``datasets``, counted through Athena (``_row_counts``)
    and listed in S3 (an unpartitioned table is one line)."""
    glue = operator.deployment.client("glue")
    s3 = operator.deployment.client("s3")
    entries = {}
    for name in datasets:
        database, table = name.split(".")
        if operator.table_exists(database, table):
            entries[name] = glue.get_table(DatabaseName=database, Name=table)["Table"]
    counts = _row_counts(operator, {name: entry.get("PartitionKeys", []) for name, entry in entries.items()})
    rows: list[dict[str, Any]] = []
    for name, entry in entries.items():
        database, table = name.split(".")
        keys = [key["Name"] for key in entry.get("PartitionKeys", [])]
        if not keys:
            location = entry["StorageDescriptor"].get("Location", "")
            rows.append(
                {"table": name, "partition": "", "rows": counts.get((name, ()), 0), "files": _files(s3, location)}
            )
            continue
        pages = glue.get_paginator("get_partitions").paginate(DatabaseName=database, TableName=table)
        for partition in sorted((p for page in pages for p in page["Partitions"]), key=lambda p: p["Values"]):
            rows.append(
                {
                    "table": name,
                    "partition": "/".join(f"{k}={v}" for k, v in zip(keys, partition["Values"], strict=True)),
                    "rows": counts.get((name, tuple(partition["Values"])), 0),
                    "files": _files(s3, partition["StorageDescriptor"]["Location"]),
                }
            )
    return rows


def _row_counts(operator: Operator, keys: dict[str, list[dict[str, Any]]]) -> dict[tuple[str, tuple[str, ...]], int]:
    """(table, its partition values as Glue holds them) → rows, for each table of ``keys`` (its partition columns,
    as Glue gives them): up to ``TABLES_PER_COUNT`` tables counted in one UNION ALL, their values as varchar padded
    to the most partition columns any of them has; a table with a partition column of another type on its own."""
    together = [name for name, columns in keys.items() if all(_casts_as_glue(column) for column in columns)]
    width = max((len(keys[name]) for name in together), default=0)
    statements = []
    for start in range(0, len(together), TABLES_PER_COUNT):
        parts = []
        for name in together[start : start + TABLES_PER_COUNT]:
            quoted = [f'"{column["Name"]}"' for column in keys[name]]
            values = [f"CAST({column} AS varchar)" for column in quoted]
            padded = [string_literal(name), *values, *["CAST(NULL AS varchar)"] * (width - len(values))]
            grouped = f" GROUP BY {', '.join(quoted)}" if quoted else ""
            parts.append(f"SELECT {', '.join(padded)}, count(*) FROM {name}{grouped}")
        statements.append(" UNION ALL ".join(parts))
    for name in keys:
        if name not in together:
            columns = ", ".join(f'"{column["Name"]}"' for column in keys[name])
            statements.append(f"SELECT {string_literal(name)}, {columns}, count(*) FROM {name} GROUP BY {columns}")
    counts: dict[tuple[str, tuple[str, ...]], int] = {}
    for statement in statements:
        for name, *values, count in operator.athena(statement):
            counts[(str(name), tuple(str(value) for value in values[: len(keys[str(name)])]))] = int(count)
    return counts


def _casts_as_glue(column: dict[str, Any]) -> bool:
    kind = str(column.get("Type", "string")).lower()
    return kind.split("(", 1)[0] in AS_GLUE_WRITES


def _files(s3: Any, location: str) -> int:
    """The data files under an s3:// location (not Spark's or Athena's hidden ones)."""
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    if not bucket:
        return 0
    listed = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix.rstrip("/") + "/")
    return sum(
        1
        for page in listed
        for item in page.get("Contents", [])
        if not item["Key"].rsplit("/", 1)[-1].startswith(("_", "."))
    )
