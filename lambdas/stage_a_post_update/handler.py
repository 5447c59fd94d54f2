"""Stage A state machine task after the swap: clean superseded prefixes, record lineage (records and
OpenLineage events), then route the finished partition to the stage B targets it triggers (queue B)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel

from lakeline.engines.athena import AthenaEngine
from lakeline.lambda_support import load_environment
from lakeline.lineage.pipeline_steps import record_stage_a
from lakeline.lineage.step_events import StepEvents
from lakeline.lineage.writer import LineageWriter
from lakeline.storage import SchemeObjectStore
from stage_a.plan import StageAPlan
from stage_a.runner import finish_stage_a
from stage_b.onward import OnwardRouting, RoutingEnvironment

logger = Logger(service="stage-a-post-update")
tracer = Tracer(service="stage-a-post-update")


class PostUpdateInput(BaseModel):
    plan: dict[str, Any]
    execution_id: str = ""


@dataclass(frozen=True)
class Runtime:
    store: SchemeObjectStore
    routing: OnwardRouting
    lineage: LineageWriter
    events: StepEvents


@cache
def runtime() -> Runtime:
    environment = load_environment(RoutingEnvironment, os.environ)
    sqs, s3 = boto3.client("sqs"), boto3.client("s3")
    return Runtime(
        SchemeObjectStore(s3),
        OnwardRouting.from_environment(environment, boto3.client("dynamodb"), sqs),
        LineageWriter(sqs, environment.lineage_queue_url),
        StepEvents.in_lambda(
            os.environ, s3=s3, catalog=AthenaEngine(boto3.client("athena"), glue=boto3.client("glue"))
        ),
    )


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = PostUpdateInput.model_validate(event)
    plan = StageAPlan.from_dict(request.plan)
    run = runtime()
    files, superseded = finish_stage_a(plan, run.store)
    table = f"{plan.target_database}.{plan.table}"
    parents = record_stage_a(run.lineage, plan, execution=run.events.stage_a_execution(plan))
    events = run.events.stage_a(plan, "COMPLETE")
    onward = run.routing.route(table, plan.partition, run=plan.run_token, lineage=parents)
    logger.info(
        "stage A published",
        extra={
            "table": table,
            "partition": plan.partition,
            "files": len(files),
            "triggered": [m.node for m in onward],
            "openlineage_events": len(events),
        },
    )
    return {
        "table": f"{plan.target_database}.{plan.table}",
        "partition": plan.partition,
        "location": plan.target_location,
        "files": len(files),
        "superseded_deleted": superseded,
        "triggered": [m.node for m in onward],
        "lineage": parents.model_dump(),
        "openlineage_events": len(events),
    }
