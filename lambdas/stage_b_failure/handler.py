"""Stage B state machine Catch: a step failed; its temp table is already dropped. Remove what the run
wrote to its fresh prefix unless it was committed (the partition still points at its previous version),
end its lease (handing it to a follow-up run for messages that came meanwhile), record the failure (a
lineage record and FAIL events) and park the messages it took in the DLQ. A run whose lease was lost
parks nothing: its messages wait for the run that holds the partition now."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from functools import cache
from typing import Any, Literal

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel

from lakeline.aws.sqs import dead_letter
from lakeline.commits import Lease
from lakeline.errors import validated
from lakeline.lambda_support import StepError, load_environment
from lakeline.lineage.records.writer import LineageWriter
from lambdas.environments import StageBFailureEnvironment
from lambdas.failure import FailureRuntime, failure_runtime
from stage_b.finish import abandon_stage_b
from stage_b.messages import StageBMessage
from stage_b.plan import StageBPlan, leased_messages
from stage_lineage.records import record_stage_b_failure

logger = Logger(service="stage-b-failure")
tracer = Tracer(service="stage-b-failure")


class FailureInput(BaseModel):
    plan: dict[str, Any]
    error: StepError
    failed_step: Literal["reconcile", "steps", "commit", "publish", "spark"] = "steps"
    execution_id: str = ""


@dataclass(frozen=True)
class Runtime(FailureRuntime[StageBFailureEnvironment]):
    lineage: LineageWriter


@cache
def runtime() -> Runtime:
    environment = load_environment(StageBFailureEnvironment, os.environ)
    shared = failure_runtime(environment, environment.stage_b_queue_url)
    parts = {part.name: getattr(shared, part.name) for part in fields(shared)}
    return Runtime(**parts, lineage=LineageWriter(shared.sqs, environment.lineage_queue_url))


def end_lease(run: Runtime, plan: StageBPlan, failed_step: str) -> tuple[list[StageBMessage], int]:
    """End the failed run's lease; return the messages to park (those it applied) and the objects deleted."""
    assert plan.lease is not None
    ended = run.runs.after_failure(plan.lease, failed_step=failed_step, root=plan.partition_root)
    if not ended.held:
        return [], ended.deleted
    return [m for m in leased_messages(Lease.from_dict(plan.lease)) if m.deduplication_id() in plan.message_ids], (
        ended.deleted
    )


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = validated(FailureInput, event, "failure input")
    plan = StageBPlan.from_dict(request.plan)
    run = runtime()
    message = validated(StageBMessage, plan.message, "stage B message")
    parked = [message]
    if plan.lease is not None:
        parked, deleted = end_lease(run, plan, request.failed_step)
    else:
        deleted = abandon_stage_b(plan, run.store) if request.failed_step == "steps" else 0
    record_stage_b_failure(run.lineage, plan, message, execution=run.events.stage_b_execution(plan, message))
    reason = f"{request.failed_step} failed: {request.error.Error}: {request.error.Cause}"
    # Every step of the run fails with it: none of their output was published.
    events = run.events.stage_b(plan, message, "FAIL", error=reason)
    # The run is over: park its messages in queue B's DLQ with the reason, for an operator to redrive.
    for taken in parked:
        queue = run.environment.dead_letter_queue_url
        dead_letter(run.sqs, queue, taken.model_dump_json(), reason, "stage-b-failure")
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
