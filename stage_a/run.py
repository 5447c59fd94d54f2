"""Running a stage A plan through any engine, with the guarantees the plan promises.

``execute_stage_a`` is what the state machine's SQL tasks (or the Glue job) do: reconcile, register,
CTAS (from the table over the run's manifest, for a compaction or a rewrite), always drop the temp
tables. Publishing is separate: under a lease the run commits its prefix first
(``lakeline.partitions.commit_write``), then ``publish_stage_a`` points the catalog at it.
"""

from __future__ import annotations

from lakeline.engines.base import Engine, QueryError
from lakeline.partitions import drop_temp_table, raise_abandoned, run_statements
from lakeline.run_order import Entering
from lakeline.storage import ObjectStore
from stage_a.finish import abandon_stage_a
from stage_a.plan import StageAPlan
from stage_a.type_check import PREFIX, TypeCheck, TypeCheckFailed, refusal


def execute_stage_a(
    plan: StageAPlan,
    engine: Engine,
    store: ObjectStore,
    *,
    entering: Entering = lambda _step: None,
) -> list[str]:
    """What the state machine's SQL tasks do before the commit: reconcile, register, CTAS, always drop
    the temp table. ``entering`` is told each task's step (``lakeline.run_order.STAGE_A``) as it begins, so
    that a caller running them all in one call names the one that failed as the state machine would.

    If the CTAS fails, its partial output is deleted and the error raised after the temp table is
    dropped; the stage partition keeps pointing at the previous data. Returns the query ids.
    """
    entering("reconcile")
    query_ids = run_statements(engine, plan.reconcile, plan.target_database)
    if not plan.writes:
        return query_ids
    if plan.register_raw:
        entering("register")
        query_ids.append(engine.execute(plan.register_raw, database=plan.source_database).query_id)
    if plan.type_check:
        entering("type_check")
        query_ids += check_types(plan.type_check, engine, plan.target_database)
    entering("ctas")
    ctas_error: QueryError | None = None
    try:
        if plan.source:
            query_ids.append(engine.execute(plan.source.create, database=plan.target_database).query_id)
        query_ids.append(engine.execute(plan.ctas, database=plan.target_database).query_id)
    except QueryError as error:
        ctas_error = error
    query_ids += drop_temp_table(engine, plan.drop_temp, plan.target_database, plan.temp_table, ctas_error)
    if plan.source:  # the manifest's table too, whatever happened (its manifest goes with the run's prefix)
        query_ids += drop_temp_table(engine, plan.source.drop, plan.target_database, plan.source.table, ctas_error)
    if ctas_error is not None:
        raise_abandoned(ctas_error, abandon_stage_a(plan, store), f"stage A {plan.stage_table} {plan.partition}")
    return query_ids


def check_types(check: TypeCheck, engine: Engine, database: str) -> list[str]:
    """Run the type check (``stage_a.type_check``): ``TypeCheckFailed`` naming the file, column and
    values if the run's files hold a value not of its column's type; the text table is always dropped."""
    session = getattr(engine, "session", None)
    if check.spark_ddl and session is not None:
        # A table whose quoted fields span lines: Spark's CSV reader's DDL, which the Athena-dialect
        # translation does not take (no Athena reads such a table).
        session.sql(check.create)
        query_ids = []
    else:
        query_ids = [engine.execute(check.create, database=database).query_id]
    try:
        try:
            result = engine.execute(check.check, database=database)
        except QueryError as error:  # Athena, or Spark in ANSI mode: the check's own failure names them
            if PREFIX not in str(error):
                raise
            raise TypeCheckFailed(str(error), sql=check.check, query_id=error.query_id, reason=error.reason) from None
        query_ids.append(result.query_id)
        reason = refusal(result.rows)
        if reason:
            raise TypeCheckFailed(reason, sql=check.check, query_id=result.query_id, reason=reason)
    finally:
        query_ids.append(engine.execute(check.drop, database=database).query_id)
    return query_ids
