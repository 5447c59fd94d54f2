"""Trace queue -> lineage archive: every message of the batch is one root to trace.

Each root is traced on its own; a root that fails is reported alone and retried by SQS, the others
are archived. Writing a root again replaces its object, so redelivery never duplicates lines.
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.parser.models import SqsRecordModel
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import Json

from lakeline.aws.clients import AwsClients
from lakeline.lambda_support import load_environment
from lakeline.lineage.records.archive import S3ArchiveStore
from lakeline.lineage.records.trace import TraceMessage, trace_root
from lambdas.environments import LineageTraceEnvironment

logger = Logger(service="lakeline-lineage")
tracer = Tracer(service="lakeline-lineage")
metrics = Metrics(namespace="Lakeline", service="lineage-trace")


class TraceQueueMessage(SqsRecordModel):
    body: Json[TraceMessage]


@cache
def dependencies() -> tuple[Any, S3ArchiveStore, LineageTraceEnvironment]:
    aws = AwsClients()
    environment = load_environment(LineageTraceEnvironment, os.environ)
    store = S3ArchiveStore(aws.s3, environment.archive_bucket, environment.archive_prefix)
    return aws.dynamodb, store, environment


def trace_message(record: TraceQueueMessage) -> dict[str, Any]:
    dynamodb, store, environment = dependencies()
    result = trace_root(dynamodb, environment.table_name, record.body, store, settings=environment.settings())
    summary = {"root_id": result.root_id, "nodes": result.nodes, "lines": result.lines, **result.statuses}
    logger.info("root traced", extra={**summary, "location": result.location})
    metrics.add_metric(name="RootsTraced", unit=MetricUnit.Count, value=1)
    metrics.add_metric(name="TracedNodes", unit=MetricUnit.Count, value=result.nodes)
    return summary


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    processor = BatchProcessor(event_type=EventType.SQS, model=TraceQueueMessage)
    return dict(
        process_partial_response(event=event, record_handler=trace_message, processor=processor, context=context)
    )
