"""Stage B state machine Catch: a step failed; its temp table is already dropped. Remove what the run
wrote to its fresh prefix (the partition still points at its previous data) and report the step."""

from __future__ import annotations

from functools import cache
from typing import Any, Literal

import boto3
from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel

from lakeline.storage import S3ObjectStore
from stage_b.plan import StageBPlan
from stage_b.runner import abandon_stage_b

logger = Logger(service="stage-b-failure")
tracer = Tracer(service="stage-b-failure")


class StepError(BaseModel):
    Error: str = "Unknown"
    Cause: str = ""


class FailureInput(BaseModel):
    plan: dict[str, Any]
    error: StepError
    failed_step: Literal["steps", "publish", "spark"] = "steps"
    execution_id: str = ""


@cache
def object_store() -> S3ObjectStore:
    return S3ObjectStore(boto3.client("s3"))


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = FailureInput.model_validate(event)
    plan = StageBPlan.from_dict(request.plan)
    deleted = abandon_stage_b(plan, object_store()) if request.failed_step == "steps" else 0
    logger.error(
        "stage B failed",
        extra={
            "target": f"{plan.dataset} {plan.partition}",
            "failed_step": request.failed_step,
            "error": request.error.Error,
            "cause": request.error.Cause[:2000],
            "partial_objects_deleted": deleted,
        },
    )
    return {"failed_step": request.failed_step, "error": request.error.Error, "partial_objects_deleted": deleted}
