"""Pipeline -> lineage queue: the seed's input function.

Invoked by the state machines with one lineage request (the seed's shape) or ``{"requests": [...]}``.
Every request is validated before anything is queued; a bad one fails the invocation with a message
naming the field. Returns the records' node ids, which the next step uses as its ``parent_id``.
"""

from __future__ import annotations

import os
from datetime import timedelta
from functools import cache
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from lakeline.aws.clients import AwsClients
from lakeline.lambda_support import load_environment
from lakeline.lineage.records.writer import LineageWriter
from lambdas.environments import LineageInputEnvironment
from lambdas.observability import observability

logger, tracer, metrics = observability("lakeline-lineage", metrics_service="lineage-input")


@cache
def writer() -> LineageWriter:
    environment = load_environment(LineageInputEnvironment, os.environ)
    return LineageWriter(AwsClients().sqs, environment.queue_url, ttl=timedelta(hours=environment.ttl_hours))


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    requests = event["requests"] if set(event) == {"requests"} else [event]
    records = writer().record_many(requests)
    logger.info("lineage records queued", extra={"records": len(records)})
    metrics.add_metric(name="LineageRecordsQueued", unit=MetricUnit.Count, value=len(records))
    return {
        "node_ids": [record.node_id for record in records],
        "records": [record.to_message() for record in records],
    }
