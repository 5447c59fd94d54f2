"""Stage B state machine Catch: a step failed; its temp table is already dropped. Remove what the run
wrote to its fresh prefix (the partition still points at its previous data), record the failure (a
lineage record and FAIL events) and park the message in the DLQ."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

import boto3
from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel

from lakeline.engines.athena import AthenaEngine
from lakeline.lambda_support import StepError, dead_letter, load_environment
from lakeline.lineage.pipeline_steps import record_stage_b_failure
from lakeline.lineage.step_events import StepEvents
from lakeline.lineage.writer import LineageWriter
from lakeline.storage import SchemeObjectStore
from stage_b.messages import StageBMessage
from stage_b.plan import StageBPlan
from stage_b.runner import abandon_stage_b

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

logger = Logger(service="stage-b-failure")
tracer = Tracer(service="stage-b-failure")


class FailureInput(BaseModel):
    plan: dict[str, Any]
    error: StepError
    failed_step: Literal["steps", "publish", "spark"] = "steps"
    execution_id: str = ""


class FailureEnvironment(BaseModel):
    lineage_queue_url: str
    dead_letter_queue_url: str


@dataclass(frozen=True)
class Runtime:
    store: SchemeObjectStore
    lineage: LineageWriter
    sqs: SQSClient
    dead_letter_queue_url: str
    events: StepEvents


@cache
def runtime() -> Runtime:
    environment = load_environment(FailureEnvironment, os.environ)
    sqs, s3 = boto3.client("sqs"), boto3.client("s3")
    return Runtime(
        SchemeObjectStore(s3),
        LineageWriter(sqs, environment.lineage_queue_url),
        sqs,
        environment.dead_letter_queue_url,
        StepEvents.in_lambda(
            os.environ, s3=s3, catalog=AthenaEngine(boto3.client("athena"), glue=boto3.client("glue"))
        ),
    )


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = FailureInput.model_validate(event)
    plan = StageBPlan.from_dict(request.plan)
    run = runtime()
    deleted = abandon_stage_b(plan, run.store) if request.failed_step == "steps" else 0
    message = StageBMessage.model_validate(plan.message)
    record_stage_b_failure(run.lineage, plan, message, execution=run.events.stage_b_execution(plan, message))
    reason = f"{request.failed_step} failed: {request.error.Error}: {request.error.Cause}"
    # Every step of the run fails with it: none of their output was published.
    events = run.events.stage_b(plan, message, "FAIL", error=reason)
    # The run is over: park its message in queue B's DLQ with the reason, for an operator to redrive.
    dead_letter(run.sqs, run.dead_letter_queue_url, message.model_dump_json(), reason, "stage-b-failure")
    logger.error(
        "stage B failed",
        extra={
            "target": f"{plan.dataset} {plan.partition}",
            "failed_step": request.failed_step,
            "error": request.error.Error,
            "cause": request.error.Cause[:2000],
            "partial_objects_deleted": deleted,
            "openlineage_events": len(events),
        },
    )
    return {
        "failed_step": request.failed_step,
        "error": request.error.Error,
        "partial_objects_deleted": deleted,
        "openlineage_events": len(events),
    }
