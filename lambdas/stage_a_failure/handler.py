"""Stage A state machine Catch: report the failure, and after a failed CTAS (its temp table already
dropped) delete its partial output; the stage partition still points at its previous data.

A failure after the CTAS (while publishing) keeps the new files: the partition may already point at them.
The run's FAIL event (with its START) goes to the OpenLineage event archive and any configured transport.
"""

from __future__ import annotations

import json
import os
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

import boto3
from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel

from lakeline.engines.athena import AthenaEngine
from lakeline.lambda_support import StepError, dead_letter, load_environment
from lakeline.lineage.step_events import StepEvents
from lakeline.storage import SchemeObjectStore
from stage_a.arrivals import Arrival, arrival_event
from stage_a.plan import StageAPlan
from stage_a.runner import abandon_stage_a

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

logger = Logger(service="stage-a-failure")
tracer = Tracer(service="stage-a-failure")


class FailureEnvironment(BaseModel):
    dead_letter_queue_url: str


class FailureInput(BaseModel):
    plan: dict[str, Any]
    arrival: dict[str, Any] | None = None
    error: StepError
    failed_step: Literal["ctas", "publish", "spark"] = "ctas"
    execution_id: str = ""


@cache
def sqs() -> SQSClient:
    return boto3.client("sqs")


@cache
def dead_letter_queue_url() -> str:
    return load_environment(FailureEnvironment, os.environ).dead_letter_queue_url


@cache
def object_store() -> SchemeObjectStore:
    return SchemeObjectStore(boto3.client("s3"))


@cache
def step_events() -> StepEvents:
    """The OpenLineage events of the failed run; their column lineage is read from the Glue catalog."""
    return StepEvents.in_lambda(
        os.environ, s3=boto3.client("s3"), catalog=AthenaEngine(boto3.client("athena"), glue=boto3.client("glue"))
    )


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = FailureInput.model_validate(event)
    plan = StageAPlan.from_dict(request.plan)
    # The Spark job cleans its own partial output before failing; only Athena's CTAS leaves one behind.
    deleted = abandon_stage_a(plan, object_store()) if request.failed_step == "ctas" else 0
    reason = f"{request.failed_step} failed: {request.error.Error}: {request.error.Cause}"
    emitted = step_events().stage_a(plan, "FAIL", error=reason)
    if request.arrival is not None:
        # The run is over: park the arrival in queue A's DLQ with the reason; redriving it runs again.
        arrival = Arrival.model_validate(request.arrival)
        dead_letter(sqs(), dead_letter_queue_url(), json.dumps(arrival_event(arrival)), reason, "stage-a-failure")
    logger.error(
        "stage A failed",
        extra={
            "table": f"{plan.target_database}.{plan.table}",
            "partition": plan.partition,
            "failed_step": request.failed_step,
            "error": request.error.Error,
            "cause": request.error.Cause[:2000],
            "partial_objects_deleted": deleted,
            "openlineage_events": len(emitted),
        },
    )
    return {
        "failed_step": request.failed_step,
        "error": request.error.Error,
        "cause": request.error.Cause,
        "partial_objects_deleted": deleted,
        "openlineage_events": len(emitted),
    }
