"""Planning a CTAS-simulated insert of one raw partition into its stage table.

Athena cannot control how many files an INSERT writes, but a CTAS with ``bucket_count`` can. The plan
(after the seed's "simulating insert using CREATE TABLE AS SELECT"):

1. register the raw partition (``ADD IF NOT EXISTS``), so the new file is visible;
2. CTAS a uniquely named temp table over the whole raw partition into a fresh prefix
   ``<stage partition>/lakeline_run=<token>/``: exactly ``bucket_count`` files;
3. DROP the temp table (metadata only; the files stay), also when the CTAS fails;
4. point the stage partition at the fresh prefix: ``ADD IF NOT EXISTS`` then ``SET LOCATION``, which
   together add a new partition or swap an existing one without knowing which it is;
5. delete the run prefixes older than this one.

Nothing is deleted before the new data is in place, so readers see either the old or the new
partition, never an empty or half-written one. Redelivery re-reads the whole raw partition, so the
stage partition ends up with the same rows, not doubled.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from typing import Any

from lakeline.engines.base import Column, TableSchema
from lakeline.errors import ValidationError
from lakeline.names import check_identifier, ddl_name, dml_name, string_literal
from lakeline.settings import PipelineSettings, TableSettings
from lakeline.storage import join_location
from stage_a.keys import RawObject

RUN_PREFIX = "lakeline_run="
RUN_TOKEN_PATTERN = re.compile(r"^\d{8}t\d{12}_[0-9a-f]{10}$")
INTEGER_TYPES = frozenset({"tinyint", "smallint", "int", "integer", "bigint"})
STRING_TYPES = ("string", "varchar", "char")


def new_run_token(now: datetime | None = None, unique: str | None = None) -> str:
    """A token that sorts by time: ``20220120t101500123456_1a2b3c4d5e``.

    ``unique`` may carry a deterministic id (a Step Functions execution name) instead of a random one.
    """
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    suffix = uuid.uuid5(uuid.NAMESPACE_URL, unique).hex[:10] if unique else uuid.uuid4().hex[:10]
    return f"{moment:%Y%m%d}t{moment:%H%M%S%f}_{suffix}"


def partition_literal(column: Column, value: str) -> str:
    """The SQL literal of a partition value, by the partition column's type in the raw table."""
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


@dataclass(frozen=True)
class StageAPlan:
    raw_key: str
    team: str
    dataset: str
    table: str
    source_database: str
    target_database: str
    partition: dict[str, str]
    run_token: str
    temp_table: str
    raw_partition_location: str
    stage_partition_root: str
    target_location: str
    bucket_count: int
    register_raw: str | None
    ctas: str
    drop_temp: str
    publish: tuple[str, ...]

    @property
    def statements(self) -> list[str]:
        """Every statement in the order it runs (the DROP runs whether or not the CTAS succeeds)."""
        head = [self.register_raw] if self.register_raw else []
        return [*head, self.ctas, self.drop_temp, *self.publish]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StageAPlan:
        """Rebuild a plan passed through a state machine; unknown or missing fields are an error."""
        names = {field.name for field in fields(cls)}
        missing = names - data.keys()
        if missing:
            raise ValidationError(f"stage A plan is missing {sorted(missing)}")
        values = {name: data[name] for name in names}
        values["publish"] = tuple(values["publish"])
        values["partition"] = dict(values["partition"])
        plan = cls(**values)
        if not RUN_TOKEN_PATTERN.fullmatch(plan.run_token):
            raise ValidationError(f"stage A plan has a malformed run token {plan.run_token!r}")
        return plan

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["publish"] = list(self.publish)
        data["statements"] = self.statements
        return data


def _partition_spec_sql(partition: list[tuple[Column, str]]) -> str:
    return ", ".join(f"{ddl_name(column.name)}={string_literal(value)}" for column, value in partition)


def check_partition_columns(raw: RawObject, schema: TableSchema) -> list[tuple[Column, str]]:
    """The key's partition columns must be the table's, in the table's order."""
    key_columns = [column for column, _ in raw.partition]
    if key_columns != schema.partition_names:
        raise ValidationError(
            f"key {raw.key!r} has partition columns {key_columns}, but table "
            f"{schema.database}.{schema.table} is partitioned by {schema.partition_names}"
        )
    return [(column, value) for column, (_, value) in zip(schema.partition_columns, raw.partition, strict=True)]


def plan_stage_a(
    raw: RawObject,
    settings: PipelineSettings,
    raw_schema: TableSchema,
    *,
    run_token: str,
    table_settings: TableSettings | None = None,
) -> StageAPlan:
    if not RUN_TOKEN_PATTERN.fullmatch(run_token):
        raise ValidationError(f"run token {run_token!r} is not of the form made by new_run_token")
    source_db = settings.raw_database(raw.team, raw.dataset)
    target_db = settings.stage_database(raw.team, raw.dataset)
    table_cfg = table_settings or settings.table_settings(target_db, raw.table)
    partition = check_partition_columns(raw, raw_schema)
    data_columns = [check_identifier(column, "column") for column in raw_schema.column_names]
    if not data_columns:
        raise ValidationError(f"table {source_db}.{raw.table} has no data columns")
    bucketed_by = list(table_cfg.bucketed_by) or data_columns[:1]
    missing = [column for column in bucketed_by if column not in data_columns]
    if missing:
        raise ValidationError(f"bucket columns {missing} are not columns of {source_db}.{raw.table}")

    raw_partition_location = join_location(settings.raw_root, raw.partition_prefix)
    stage_partition_root = join_location(settings.stage_root, raw.partition_prefix)
    target_location = join_location(stage_partition_root, f"{RUN_PREFIX}{run_token}")
    temp_table = check_identifier(f"lakeline_tmp_{raw.table[:60]}_{run_token}", "temp table")

    register_raw = None
    publish: tuple[str, ...]
    if partition:
        spec = _partition_spec_sql(partition)
        register_raw = (
            f"ALTER TABLE {ddl_name(source_db, raw.table)} ADD IF NOT EXISTS PARTITION ({spec}) "
            f"LOCATION {string_literal(raw_partition_location)}"
        )
        publish = (
            f"ALTER TABLE {ddl_name(target_db, raw.table)} ADD IF NOT EXISTS PARTITION ({spec}) "
            f"LOCATION {string_literal(target_location)}",
            f"ALTER TABLE {ddl_name(target_db, raw.table)} PARTITION ({spec}) "
            f"SET LOCATION {string_literal(target_location)}",
        )
    else:
        publish = (f"ALTER TABLE {ddl_name(target_db, raw.table)} SET LOCATION {string_literal(target_location)}",)

    where = " AND ".join(f"{dml_name(column.name)} = {partition_literal(column, value)}" for column, value in partition)
    select = f"SELECT {', '.join(dml_name(c) for c in data_columns)} FROM {dml_name(source_db, raw.table)}"
    if where:
        select += f" WHERE {where}"
    properties = [
        f"format = {string_literal(table_cfg.format)}",
        f"external_location = {string_literal(target_location)}",
        f"bucketed_by = ARRAY[{', '.join(string_literal(c) for c in bucketed_by)}]",
        f"bucket_count = {table_cfg.bucket_count}",
    ]
    if table_cfg.compression != "NONE":
        properties.append(f"write_compression = {string_literal(table_cfg.compression)}")
    ctas = f"CREATE TABLE {dml_name(target_db, temp_table)} WITH ({', '.join(properties)}) AS {select}"
    return StageAPlan(
        raw_key=raw.key,
        team=raw.team,
        dataset=raw.dataset,
        table=raw.table,
        source_database=source_db,
        target_database=target_db,
        partition=raw.partition_spec,
        run_token=run_token,
        temp_table=temp_table,
        raw_partition_location=raw_partition_location,
        stage_partition_root=stage_partition_root,
        target_location=target_location,
        bucket_count=table_cfg.bucket_count,
        register_raw=register_raw,
        ctas=ctas,
        drop_temp=f"DROP TABLE IF EXISTS {ddl_name(target_db, temp_table)}",
        publish=publish,
    )
