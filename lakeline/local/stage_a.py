"""Stage A for one arrival in a local workspace, on embedded Spark."""

from __future__ import annotations

from lakeline.engines.base import Engine
from lakeline.engines.spark import SparkEngine
from lakeline.errors import ValidationError
from lakeline.local.catalog import ensure_tables
from lakeline.local.workspace import Workspace
from lakeline.names import dml_name, string_literal
from lakeline.settings import PipelineSettings
from lakeline.storage import LocalObjectStore
from stage_a.keys import parse_raw_key
from stage_a.plan import new_run_token, plan_stage_a
from stage_a.runner import StageAResult, run_stage_a


def run_local_arrival(
    engine: SparkEngine,
    workspace: Workspace,
    key: str,
    settings: PipelineSettings,
    *,
    run_token: str | None = None,
) -> StageAResult:
    raw = parse_raw_key(key)
    raw_file = workspace.raw_dir / raw.key
    if not raw_file.is_file():
        raise ValidationError(f"no raw file at {raw_file}: put arrivals under {workspace.raw_dir}")
    raw_schema, _ = ensure_tables(engine, raw, raw_file, settings)
    plan = plan_stage_a(raw, settings, raw_schema, run_token=run_token or new_run_token())
    return run_stage_a(plan, engine, LocalObjectStore())


def partition_row_count(engine: Engine, database: str, table: str, partition: dict[str, str]) -> int:
    """Rows in one partition (or the whole table when ``partition`` is empty)."""
    where = " AND ".join(f"{dml_name(column)} = {string_literal(value)}" for column, value in partition.items())
    sql = f"SELECT count(*) FROM {dml_name(database, table)}" + (f" WHERE {where}" if where else "")
    return int(engine.execute(sql).rows[0][0])
