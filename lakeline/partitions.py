"""Write-then-swap of one table partition, shared by stage A and stage B.

A run writes a whole partition into a fresh prefix ``<partition root>/lakeline_run=<token>/`` through a
CTAS (exactly ``bucket_count`` files), then points the partition at it (``ADD IF NOT EXISTS`` then
``SET LOCATION``, which adds or swaps without knowing which), then deletes the run prefixes older than
itself. Nothing is deleted before the new data is in place, so readers never see an empty or
half-written partition.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import fields
from datetime import UTC, datetime
from typing import Any

from lakeline.engines.base import Column, Engine, QueryError
from lakeline.errors import ValidationError
from lakeline.names import check_identifier, ddl_name, dml_name, string_literal
from lakeline.settings import TableSettings
from lakeline.storage import ObjectStore, join_location

RUN_PREFIX = "lakeline_run="
RUN_TOKEN_PATTERN = re.compile(r"^\d{8}t\d{12}_[0-9a-f]{10}$")
INTEGER_TYPES = frozenset({"tinyint", "smallint", "int", "integer", "bigint"})
STRING_TYPES = ("string", "varchar", "char")

PartitionValues = list[tuple[Column, str]]


def new_run_token(now: datetime | None = None, unique: str | None = None) -> str:
    """A token that sorts by time: ``20220120t101500123456_1a2b3c4d5e``.

    ``unique`` may carry a deterministic id (a Step Functions execution name) instead of a random one.
    """
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    suffix = uuid.uuid5(uuid.NAMESPACE_URL, unique).hex[:10] if unique else uuid.uuid4().hex[:10]
    return f"{moment:%Y%m%d}t{moment:%H%M%S%f}_{suffix}"


def check_run_token(token: str) -> str:
    if not RUN_TOKEN_PATTERN.fullmatch(token):
        raise ValidationError(f"run token {token!r} is not of the form made by new_run_token")
    return token


def plan_values(plan_type: type, data: Mapping[str, Any], what: str) -> dict[str, Any]:
    """The fields of a plan dataclass from a dict passed through a state machine; missing ones are an error."""
    names = {item.name for item in fields(plan_type)}
    missing = names - data.keys()
    if missing:
        raise ValidationError(f"{what} is missing {sorted(missing)}")
    return {name: data[name] for name in names}


def check_run_location(target_location: str, partition_root: str, run_token: str, what: str) -> None:
    """A run writes, and its failure path deletes, only its own prefix under the partition root."""
    if target_location != run_location(partition_root, run_token):
        raise ValidationError(
            f"{what}'s target_location {target_location!r} is not its run's prefix under {partition_root!r}"
        )


def partition_literal(column: Column, value: str) -> str:
    """The SQL literal of a partition value, by the partition column's type."""
    kind = column.type.lower().split("(")[0].strip()
    if kind.startswith(STRING_TYPES):
        return string_literal(value)
    if kind in INTEGER_TYPES:
        if not re.fullmatch(r"-?\d{1,19}", value):
            raise ValidationError(f"partition {column.name}={value!r} is not an integer ({column.type})")
        return value
    if kind == "date":
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            raise ValidationError(f"partition {column.name}={value!r} is not a date YYYY-MM-DD")
        return f"DATE {string_literal(value)}"
    raise ValidationError(f"partition column {column.name} has unsupported type {column.type}")


def partition_filter(partition: PartitionValues) -> str:
    """``"col" = literal AND ...`` (empty for an unpartitioned table)."""
    return " AND ".join(f"{dml_name(column.name)} = {partition_literal(column, value)}" for column, value in partition)


def partition_spec_sql(partition: PartitionValues) -> str:
    return ", ".join(f"{ddl_name(column.name)}={string_literal(value)}" for column, value in partition)


def partition_prefix(partition: PartitionValues) -> str:
    return "".join(f"{column.name}={value}/" for column, value in partition)


def run_location(partition_root: str, run_token: str) -> str:
    return join_location(partition_root, f"{RUN_PREFIX}{check_run_token(run_token)}")


def temp_table_name(table: str, run_token: str) -> str:
    return check_identifier(f"lakeline_tmp_{table[:60]}_{check_run_token(run_token)}", "temp table")


def swap_statements(database: str, table: str, partition: PartitionValues, location: str) -> tuple[str, ...]:
    """Point the partition (or the unpartitioned table) at ``location``, adding it if new."""
    name = ddl_name(database, table)
    if not partition:
        return (f"ALTER TABLE {name} SET LOCATION {string_literal(location)}",)
    spec = partition_spec_sql(partition)
    return (
        f"ALTER TABLE {name} ADD IF NOT EXISTS PARTITION ({spec}) LOCATION {string_literal(location)}",
        f"ALTER TABLE {name} PARTITION ({spec}) SET LOCATION {string_literal(location)}",
    )


def ctas_sql(
    database: str, temp_table: str, location: str, table_settings: TableSettings, bucketed_by: list[str], select: str
) -> str:
    """Athena CTAS of ``select`` into ``location``: format, compression and exactly-N-files bucketing."""
    properties = [
        f"format = {string_literal(table_settings.format)}",
        f"external_location = {string_literal(location)}",
        f"bucketed_by = ARRAY[{', '.join(string_literal(check_identifier(c, 'bucket column')) for c in bucketed_by)}]",
        f"bucket_count = {table_settings.bucket_count}",
    ]
    if table_settings.compression != "NONE":
        properties.append(f"write_compression = {string_literal(table_settings.compression)}")
    return f"CREATE TABLE {dml_name(database, temp_table)} WITH ({', '.join(properties)}) AS {select}"


def bucket_columns(table_settings: TableSettings, data_columns: list[str], table: str) -> list[str]:
    """The configured bucket columns, or the first data column; each must be a data column."""
    chosen = list(table_settings.bucketed_by) or data_columns[:1]
    if not chosen:
        raise ValidationError(f"table {table} has no data columns")
    missing = [column for column in chosen if column not in data_columns]
    if missing:
        raise ValidationError(f"bucket columns {missing} are not columns of {table}")
    return chosen


def superseded_run_prefixes(store: ObjectStore, partition_root: str, run_token: str) -> list[str]:
    """Run prefixes of the same partition older than ``run_token``, i.e. replaced by it.

    Only prefixes Lakeline wrote (``lakeline_run=<token>``) are candidates; newer ones belong to a
    later run and are left alone.
    """
    superseded = []
    for prefix in store.list_child_prefixes(partition_root):
        name = prefix.rstrip("/").rsplit("/", 1)[-1]
        if name.startswith(RUN_PREFIX) and name[len(RUN_PREFIX) :] < run_token:
            superseded.append(prefix)
    return superseded


def delete_superseded(store: ObjectStore, partition_root: str, run_token: str) -> list[str]:
    superseded = superseded_run_prefixes(store, partition_root, run_token)
    for prefix in superseded:
        store.delete_prefix(prefix)
    return superseded


def drop_temp_table(
    engine: Engine, drop_sql: str | None, database: str, temp_table: str, failure: QueryError | None
) -> list[str]:
    """Drop the run's temp table whatever happened before; return the query id.

    If the drop fails too, the run's own failure is what the caller raises (with a note about the
    drop); a drop that fails after a successful write is raised.
    """
    if not drop_sql:
        return []
    try:
        return [engine.execute(drop_sql, database=database).query_id]
    except QueryError as drop_error:
        if failure is None:
            raise
        failure.add_note(f"dropping temp table {temp_table} also failed: {drop_error}")
        return []


def run_statements(engine: Engine, statements: Sequence[str], database: str) -> list[str]:
    return [engine.execute(statement, database=database).query_id for statement in statements]
