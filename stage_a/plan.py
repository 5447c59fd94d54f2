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

from dataclasses import asdict, dataclass
from typing import Any

from lakeline.engines.base import Column, TableSchema
from lakeline.errors import ValidationError
from lakeline.names import check_identifier, ddl_name, dml_name, string_literal
from lakeline.partitions import (
    RUN_PREFIX,
    bucket_columns,
    check_run_location,
    check_run_token,
    ctas_sql,
    new_run_token,
    partition_filter,
    partition_spec_sql,
    plan_values,
    run_location,
    swap_statements,
    temp_table_name,
)
from lakeline.settings import PipelineSettings, TableSettings
from lakeline.storage import join_location
from stage_a.keys import RawObject

__all__ = ["RUN_PREFIX", "StageAPlan", "new_run_token", "plan_stage_a"]


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
        values = plan_values(cls, data, "stage A plan")
        values["publish"] = tuple(values["publish"])
        values["partition"] = dict(values["partition"])
        plan = cls(**values)
        check_run_location(plan.target_location, plan.stage_partition_root, plan.run_token, "stage A plan")
        return plan

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["publish"] = list(self.publish)
        data["statements"] = self.statements
        return data


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
    check_run_token(run_token)
    source_db = settings.raw_database(raw.team, raw.dataset)
    target_db = settings.stage_database(raw.team, raw.dataset)
    table_cfg = table_settings or settings.table_settings(target_db, raw.table)
    partition = check_partition_columns(raw, raw_schema)
    data_columns = [check_identifier(column, "column") for column in raw_schema.column_names]
    if not data_columns:
        raise ValidationError(f"table {source_db}.{raw.table} has no data columns")
    bucketed_by = bucket_columns(table_cfg, data_columns, f"{source_db}.{raw.table}")

    raw_partition_location = join_location(settings.raw_root, raw.partition_prefix)
    stage_partition_root = join_location(settings.stage_root, raw.partition_prefix)
    target_location = run_location(stage_partition_root, run_token)
    temp_table = temp_table_name(raw.table, run_token)

    register_raw = None
    if partition:
        spec = partition_spec_sql(partition)
        register_raw = (
            f"ALTER TABLE {ddl_name(source_db, raw.table)} ADD IF NOT EXISTS PARTITION ({spec}) "
            f"LOCATION {string_literal(raw_partition_location)}"
        )
    publish = swap_statements(target_db, raw.table, partition, target_location)
    select = f"SELECT {', '.join(dml_name(c) for c in data_columns)} FROM {dml_name(source_db, raw.table)}"
    where = partition_filter(partition)
    if where:
        select += f" WHERE {where}"
    ctas = ctas_sql(target_db, temp_table, target_location, table_cfg, bucketed_by, select)
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
