"""Stage A state machine task after the swap: clean superseded prefixes and report the result."""

from __future__ import annotations

from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel

from lakeline.storage import S3ObjectStore
from stage_a.plan import StageAPlan
from stage_a.runner import finish_stage_a

logger = Logger(service="stage-a-post-update")
tracer = Tracer(service="stage-a-post-update")


class PostUpdateInput(BaseModel):
    plan: dict[str, Any]
    execution_id: str = ""


@cache
def object_store() -> S3ObjectStore:
    return S3ObjectStore(boto3.client("s3"))


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = PostUpdateInput.model_validate(event)
    plan = StageAPlan.from_dict(request.plan)
    files, superseded = finish_stage_a(plan, object_store())
    logger.info(
        "stage A published",
        extra={"table": f"{plan.target_database}.{plan.table}", "partition": plan.partition, "files": len(files)},
    )
    return {
        "table": f"{plan.target_database}.{plan.table}",
        "partition": plan.partition,
        "location": plan.target_location,
        "files": len(files),
        "superseded_deleted": superseded,
    }
