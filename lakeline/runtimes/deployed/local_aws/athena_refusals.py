"""What Athena refuses and Spark would run: the local Athena refuses it too, with Athena's reason (#36).

Checked before the statement runs, so a refused statement writes nothing (Athena checks these while
planning, before it writes):
- ``INSERT INTO`` a bucketed table: Athena's INSERT INTO does not support bucketed tables (Athena user
  guide, "INSERT INTO", considerations and limitations); Spark appends files to one.
- A CTAS into a location that holds any object: Athena checks that the prefix is empty and never
  overwrites (user guide, "Considerations and limitations for CTAS queries"), failing with
  ``HIVE_PATH_ALREADY_EXISTS``; Spark's own check sees only the mirror's files.
- More than 100 partitions written by one CTAS or INSERT INTO: ``HIVE_TOO_MANY_OPEN_PARTITIONS`` (user
  guide, "Use CTAS and INSERT INTO to work around the 100 partition limit"). Counted here by running the
  statement's query for its distinct partition values (a second read of its sources).
"""

from __future__ import annotations

from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from lakeline.engines.base import QueryError
from lakeline.engines.spark import SparkEngine
from lakeline.engines.translate import TranslationError, read_ctas_properties

MAX_OPEN_PARTITIONS = 100
TOO_MANY_PARTITIONS = (
    f"HIVE_TOO_MANY_OPEN_PARTITIONS: Exceeded limit of {MAX_OPEN_PARTITIONS} open writers for partitions/buckets"
)


def athena_refusal(
    kind: str, sql: str, changes: set[tuple[str, str]], location: str | None, glue: Any, s3: Any, engine: SparkEngine
) -> str | None:
    """Athena's reason to refuse the statement, or ``None``. ``kind``, ``sql`` (rewritten for the local
    engine), ``changes`` (the Glue tables it changes) and ``location`` (a CTAS's, s3://) are the local
    Athena's reading of it; ``glue`` and ``s3`` are moto's backends."""
    if kind not in {"insert", "ctas"} or len(changes) != 1:
        return None
    try:
        tree = sqlglot.parse_one(sql, read="athena")
    except ParseError:
        return None  # the statement fails on its own when it runs
    ((database, table),) = changes
    if kind == "ctas" and isinstance(tree, exp.Create):
        return _ctas_refusal(tree, f"{database}.{table}", location, s3, engine)
    if isinstance(tree, exp.Insert):
        found = glue.databases.get(database)
        entry = found.tables.get(table) if found is not None else None
        if entry is not None:
            return _insert_refusal(tree, f"{database}.{table}", entry.get_version(str(entry._current_version)), engine)
    return None


def _ctas_refusal(tree: exp.Create, name: str, location: str | None, s3: Any, engine: SparkEngine) -> str | None:
    if location and _holds_objects(s3, location):
        return (
            f"HIVE_PATH_ALREADY_EXISTS: Target directory for table '{name}' already exists: {location}. "
            f"You may need to manually clean the data at location '{location}' before retrying. "
            "Athena will not delete data in your account."
        )
    try:
        partitioned_by = read_ctas_properties(tree.args.get("properties")).partitioned_by
    except TranslationError:
        return None
    query = tree.expression
    if not partitioned_by or not isinstance(query, exp.Query):
        return None
    keys = ", ".join(exp.to_identifier(column, quoted=True).sql("athena") for column in partitioned_by)
    return _partitions_refusal(f"SELECT DISTINCT {keys} FROM ({query.sql('athena')}) AS lakeline_rows", engine)


def _insert_refusal(tree: exp.Insert, name: str, definition: dict[str, Any], engine: SparkEngine) -> str | None:
    descriptor = definition.get("StorageDescriptor", {})
    buckets = int(descriptor.get("NumberOfBuckets") or 0)
    if buckets > 0 and descriptor.get("BucketColumns"):
        return f"NOT_SUPPORTED: Inserting into a bucketed table is not supported: {name} has {buckets} buckets"
    keys = [str(column["Name"]).lower() for column in definition.get("PartitionKeys", [])]
    query = tree.expression
    if not keys or not isinstance(query, exp.Query):
        return None
    target = tree.this
    if isinstance(target, exp.Schema):
        listed = [column.name.lower() for column in target.expressions]
    else:
        listed = [str(column["Name"]).lower() for column in descriptor.get("Columns", [])] + keys
    if any(key not in listed for key in keys):
        return None  # a partition column left out: the statement fails on its own
    aliases = [f"c{index}" for index in range(len(listed))]
    chosen = ", ".join(aliases[listed.index(key)] for key in keys)
    return _partitions_refusal(
        f"SELECT DISTINCT {chosen} FROM ({query.sql('athena')}) AS lakeline_rows({', '.join(aliases)})", engine
    )


def _partitions_refusal(distinct_sql: str, engine: SparkEngine) -> str | None:
    try:
        result = engine.execute(f"SELECT COUNT(*) FROM ({distinct_sql}) AS lakeline_partitions")
    except QueryError:
        return None  # the statement fails on its own, with its own reason, when it runs
    return TOO_MANY_PARTITIONS if int(result.rows[0][0]) > MAX_OPEN_PARTITIONS else None


def _holds_objects(s3: Any, location: str) -> bool:
    """Whether any object of moto's S3 is under ``location``'s prefix (a folder marker of its own is not)."""
    from moto.s3.models import FakeKey

    bucket, _, key = location.removeprefix("s3://").removeprefix("s3a://").partition("/")
    prefix = key.rstrip("/") + "/" if key.strip("/") else ""
    found = s3.buckets.get(bucket)
    if found is None:
        return False
    return any(
        isinstance(item, FakeKey) and name.startswith(prefix) and name != prefix for name, item in found.keys.items()
    )
