"""Stage A for one arrival in a local workspace, on embedded Spark."""

from __future__ import annotations

from lakeline.commits import Lease, PartitionCommits
from lakeline.engines.base import Engine
from lakeline.engines.spark import SparkEngine
from lakeline.errors import InvalidInputError
from lakeline.local.catalog import ensure_tables
from lakeline.local.workspace import Workspace
from lakeline.names import dml_name, string_literal
from lakeline.partitions import commit_write, settle_run
from lakeline.settings import PipelineSettings
from lakeline.storage import LocalObjectStore, ObjectStore
from stage_a.finish import publish_stage_a
from stage_a.keys import parse_raw_key
from stage_a.plan import StageAPlan, new_run_token, plan_stage_a
from stage_a.run import StageAResult, execute_stage_a, run_stage_a
from stage_a.start import Catalog, plan_follow_up


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
        raise InvalidInputError(f"no raw file at {raw_file}: put arrivals under {workspace.raw_dir}")
    raw_schema, _ = ensure_tables(engine, raw, raw_file, settings)
    plan = plan_stage_a(raw, settings, raw_schema, run_token=run_token or new_run_token())
    return run_stage_a(plan, engine, LocalObjectStore())


def partition_row_count(engine: Engine, database: str, table: str, partition: dict[str, str]) -> int:
    """Rows in one partition (or the whole table when ``partition`` is empty)."""
    where = " AND ".join(f"{dml_name(column)} = {string_literal(value)}" for column, value in partition.items())
    sql = f"SELECT count(*) FROM {dml_name(database, table)}" + (f" WHERE {where}" if where else "")
    return int(engine.execute(sql).rows[0][0])


def complete_leased_stage_a(
    plan: StageAPlan | None,
    engine: Engine,
    store: ObjectStore,
    commits: PartitionCommits,
    settings: PipelineSettings,
    catalog: Catalog,
) -> list[StageAPlan]:
    """Run a leased plan and every follow-up run it hands its lease to, in this process, in the order the
    state machine and its functions do (SQL, commit, catalog swap, settle). Returns the plans that ran."""
    ran: list[StageAPlan] = []
    while plan is not None:
        if plan.lease is None:
            raise InvalidInputError(f"the plan of run {plan.run_token} holds no lease: run it with run_stage_a")
        lease = Lease.from_dict(plan.lease)
        if plan.writes:
            execute_stage_a(plan, engine, store)
            commit_write(commits, lease, store, carry_from=plan.carry_from, applied=plan.applied)
            publish_stage_a(plan, engine)
            ran.append(plan)
        settled = settle_run(commits, lease, store, wrote=plan.writes, root=plan.stage_partition_root)
        plan = plan_follow_up(settled.follow_up, settings, catalog, commits) if settled.follow_up else None
    return ran
