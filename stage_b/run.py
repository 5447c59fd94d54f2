"""Running a stage B plan through any engine.

``execute_stage_b`` is what the state machine's SQL tasks (or the Glue job) do: reconcile, the steps in
order, always drop the temp table. Publishing is separate: under a lease the run commits its prefix
first (``lakeline.partitions.commit_write``), then ``publish_stage_b`` points the catalog at it.
"""

from __future__ import annotations

from typing import Protocol

from lakeline.engines.base import Engine, QueryError
from lakeline.partitions import drop_temp_table, raise_abandoned, run_statements
from lakeline.run_order import Entering
from lakeline.storage import ObjectStore
from stage_b.finish import abandon_stage_b
from stage_b.plan import PlannedStep, StageBPlan


class StageBStepFailed(QueryError):
    """A step failed: nothing after it ran, the temp table is gone, the partition is untouched."""

    def __init__(self, plan: StageBPlan, step: PlannedStep, error: QueryError) -> None:
        super().__init__(
            f"stage B {plan.dataset} {plan.partition}: steps[{step.index}] ({step.info or step.db}) failed: {error}",
            sql=step.sql,
            query_id=error.query_id,
            reason=error.reason,
        )
        self.step = step


class StepObserver(Protocol):
    """Told when each step starts and ends (the local runtime's OpenLineage life cycle)."""

    def started(self, index: int) -> None: ...

    def finished(self, index: int, error: StageBStepFailed | None) -> None: ...


def execute_stage_b(
    plan: StageBPlan,
    engine: Engine,
    store: ObjectStore,
    *,
    observer: StepObserver | None = None,
    entering: Entering = lambda _step: None,
) -> list[str]:
    """What the state machine's SQL tasks do before the commit: reconcile, the steps in order, always
    the DROP of the temp table. ``entering`` is told each task's step (``lakeline.run_order.STAGE_B``) as it
    begins, so that a caller running them all in one call names the one that failed as the state machine would."""
    entering("reconcile")
    query_ids = run_statements(engine, plan.reconcile, plan.target_database)
    entering("steps")
    failure: StageBStepFailed | None = None
    for position, step in enumerate(plan.steps):
        if observer is not None:
            observer.started(position)
        try:
            query_ids.append(engine.execute(step.sql, database=step.db).query_id)
        except QueryError as error:
            failure = StageBStepFailed(plan, step, error)
        if observer is not None:
            observer.finished(position, failure)
        if failure is not None:
            break
    query_ids += drop_temp_table(engine, plan.drop_temp, plan.target_database, plan.temp_table, failure)
    if failure is not None:
        raise_abandoned(failure, abandon_stage_b(plan, store), f"stage B {plan.dataset} {plan.partition}")
    return query_ids
