"""Stage B state machine Catch: a step failed; its temp table is already dropped. Remove what the run
wrote to its fresh prefix unless it was committed (the partition still points at its previous version),
end its lease (handing it to a follow-up run for messages that came meanwhile), record the failure (a
lineage record, and OpenLineage events: the steps before the failed one COMPLETE, it FAIL, the later ones
ABORT, when the error names the step, ``stage_b.failures``) and park the messages it took in the DLQ.
A run whose lease was lost parks nothing: its messages wait for the run that holds the partition now.

A failure of the post-update (``post_update``, after its retries) comes after the publish: nothing is
deleted and nothing abandoned. The lease is ended as the post-update ends it, the run's lineage record
and COMPLETE events are written (as the post-update writes them) and the messages it took are parked with
the reason. A redrive finds them applied: its run writes nothing and repeats the post-update, routing the
published version onwards under the run that published it (``lambdas.post_update.onward_run``)."""

from __future__ import annotations

import os
from datetime import datetime
from functools import cache
from typing import Any, Literal

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, Field, model_validator

from lakeline.aws.sqs import dead_letter
from lakeline.commits import Lease
from lakeline.errors import validated
from lakeline.lambda_support import StepError, load_environment
from lakeline.partitions import Abandoned
from lambdas.environments import StageBFailureEnvironment
from lambdas.failure import FailureRuntime, failure_runtime
from lambdas.post_update import note_lineage
from stage_b.failures import failed_query_times, failed_step_index
from stage_b.finish import abandon_stage_b
from stage_b.messages import StageBMessage
from stage_b.plan import StageBPlan, leased_messages
from stage_lineage.records import record_stage_b, record_stage_b_failure, stage_b_parents

logger = Logger(service="stage-b-failure")
tracer = Tracer(service="stage-b-failure")


class FailureInput(BaseModel):
    plan: dict[str, Any]
    error: StepError
    failed_step: Literal["reconcile", "steps", "commit", "publish", "spark", "post_update"] = "steps"
    execution_id: str = ""
    failed_index: int | None = Field(default=None, ge=0)
    """Which of the plan's steps failed, when the error says (``stage_b.failures``); ``error`` is then the
    step's task's own."""

    @model_validator(mode="after")
    def _failed_index(self) -> FailureInput:
        if self.failed_index is None:
            self.failed_index, self.error = failed_step_index(self.error, self.failed_step)
        return self


Runtime = FailureRuntime[StageBFailureEnvironment]


@cache
def runtime() -> Runtime:
    environment = load_environment(StageBFailureEnvironment, os.environ)
    return failure_runtime(environment, environment.stage_b_queue_url)


def end_lease(run: Runtime, plan: StageBPlan, failed_step: str) -> tuple[list[StageBMessage], Abandoned]:
    """End the failed run's lease; return the messages to park (those it applied) and how it ended."""
    assert plan.lease is not None
    ended = run.runs.after_failure(plan.lease, failed_step=failed_step, root=plan.partition_root)
    if not ended.held:
        return [], ended
    return [m for m in leased_messages(Lease.from_dict(plan.lease)) if m.deduplication_id() in plan.message_ids], ended


def park(run: Runtime, messages: list[StageBMessage], reason: str) -> None:
    """Park ``messages`` in queue B's DLQ with ``reason`` (``lakeline dlq`` lists them, a redrive sends them back)."""
    for taken in messages:
        dead_letter(run.sqs, run.environment.dead_letter_queue_url, taken.model_dump_json(), reason, "stage-b-failure")


def park_published(run: Runtime, plan: StageBPlan, message: StageBMessage, request: FailureInput) -> dict[str, Any]:
    """After a failed post-update: the run is published, so nothing is deleted. End its lease as the
    post-update does, unless it ended it already (``after_failed_post_update``), once where the run sits in the lineage
    records is noted (``note_lineage``); park the messages the run took, then write its lineage record and
    COMPLETE events (the same the post-update writes)."""
    reason = f"{request.failed_step} failed: {request.error.described()}"
    parked = [message]
    if plan.message_ids:
        # Noted before the lease ends (the ids are known without writing anything): the run that routes the
        # version again hangs its targets under this one.
        note_lineage(run.runs.commits, plan.lease, plan.target_location, stage_b_parents(plan, message))
    if plan.lease is not None:
        run.runs.after_failed_post_update(plan.lease, wrote=plan.writes, root=plan.partition_root)
        leased = leased_messages(Lease.from_dict(plan.lease))
        # The messages it applied; a run that applied none (a repeat) parks what it took.
        parked = [m for m in leased if m.deduplication_id() in plan.message_ids] or leased
    park(run, parked, reason)
    events: list[dict[str, Any]] = []
    if plan.message_ids:  # last: what made the post-update fail may be the lineage queue itself
        record_stage_b(run.lineage, plan, message, execution=run.events.stage_b_execution(plan, message))
        events = run.events.stage_b(plan, message, "COMPLETE")
    logger.error(
        "stage B post-update failed after the publish; its messages are parked for a redrive",
        extra={
            "target": f"{plan.dataset} {plan.partition}",
            "error": request.error.Error,
            "cause": request.error.Cause[:2000],
            "parked": len(parked),
        },
    )
    return {
        "failed_step": request.failed_step,
        "error": request.error.Error,
        "partial_objects_deleted": 0,
        "openlineage_events": len(events),
    }


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = validated(FailureInput, event, "failure input")
    plan = StageBPlan.from_dict(request.plan)
    run = runtime()
    message = validated(StageBMessage, plan.message, "stage B message")
    if request.failed_step == "post_update":
        return park_published(run, plan, message, request)
    parked, left = [message], ""
    if plan.lease is not None:
        parked, ended = end_lease(run, plan, request.failed_step)
        deleted, left = ended.deleted, ended.left
    else:
        deleted, left = abandon_stage_b(plan, run.store) if request.failed_step == "steps" else (0, "")
    record_stage_b_failure(run.lineage, plan, message, execution=run.events.stage_b_execution(plan, message))
    reason = f"{request.failed_step} failed: {request.error.described()}" + (f"; {left}" if left else "")
    # The steps before the failed one COMPLETE, it FAILs, the later ones ABORT (never ran); the run FAILs.
    failed_index = request.failed_index
    if failed_index is not None and failed_index >= len(plan.steps):
        logger.warning("the failed step's index is not one of the plan's steps", extra={"index": failed_index})
        failed_index = None  # then no step events, rather than a FAIL for a step that may not have run
    # Of the steps only the failed one's times are known (its query's, in the cause); the others are
    # dated by the replay, in order.
    times: list[tuple[datetime, datetime] | None] | None = None
    if failed_index is not None and (failed_times := failed_query_times(request.error)) is not None:
        times = [None] * failed_index + [failed_times]
    events = run.events.stage_b(
        plan, message, "FAIL", error=reason, failed_step=failed_index, step_times=times, failed=request.failed_step
    )
    # The run is over: park its messages in queue B's DLQ with the reason, for an operator to redrive.
    park(run, parked, reason)
    logger.error(
        "stage B failed",
        extra={
            "target": f"{plan.dataset} {plan.partition}",
            "failed_step": request.failed_step,
            "error": request.error.Error,
            "cause": request.error.Cause[:2000],
            "partial_objects_deleted": deleted,
            "parked": len(parked),
            "openlineage_events": len(events),
        },
    )
    return {
        "failed_step": request.failed_step,
        "error": request.error.Error,
        "partial_objects_deleted": deleted,
        "openlineage_events": len(events),
    }
