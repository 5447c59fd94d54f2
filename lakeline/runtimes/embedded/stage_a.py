"""Reading a stage table on the embedded engine: how many rows one partition holds."""

from __future__ import annotations

from lakeline.engines.base import Engine
from lakeline.names import dml_name, string_literal


def partition_row_count(engine: Engine, database: str, table: str, partition: dict[str, str]) -> int:
    """Rows in one partition (or the whole table when ``partition`` is empty)."""
    where = " AND ".join(f"{dml_name(column)} = {string_literal(value)}" for column, value in partition.items())
    sql = f"SELECT count(*) FROM {dml_name(database, table)}" + (f" WHERE {where}" if where else "")
    return int(engine.execute(sql).rows[0][0])
