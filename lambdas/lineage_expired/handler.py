"""Lineage table stream -> lineage archive: items removed by TTL before a trace archived them.

Only REMOVE records made by the TTL service are considered; see ``lakeline.lineage.records.expired``. Each
stream record is handled on its own, so a failure is reported for that record alone.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.parser.models import DynamoDBStreamRecordModel
from aws_lambda_powertools.utilities.typing import LambdaContext

from lakeline.aws.clients import AwsClients
from lakeline.lambda_support import load_environment
from lakeline.lineage.records.archive import S3ArchiveStore
from lakeline.lineage.records.expired import ExpirySettings, TracedLookup, archive_expired, removed_by_ttl
from lakeline.lineage.records.trace import traced_at
from lambdas.environments import LineageExpiredEnvironment

logger = Logger(service="lakeline-lineage")
tracer = Tracer(service="lakeline-lineage")
metrics = Metrics(namespace="Lakeline", service="lineage-expired")


@cache
def dependencies() -> tuple[Any, S3ArchiveStore, LineageExpiredEnvironment]:
    aws = AwsClients()
    environment = load_environment(LineageExpiredEnvironment, os.environ)
    store = S3ArchiveStore(aws.s3, environment.archive_bucket, environment.archive_prefix)
    return aws.dynamodb, store, environment


class ExpiredItemArchiver:
    """The record handler of one invocation (it caches each root's ``traced_at`` for the batch)."""

    def __init__(self) -> None:
        dynamodb, self.store, environment = dependencies()
        self.traced = TracedLookup(lambda root_id: traced_at(dynamodb, environment.table_name, root_id))
        self.settings = ExpirySettings(
            margin=timedelta(seconds=environment.margin_seconds), trace_action=environment.trace_action
        )

    def __call__(self, record: DynamoDBStreamRecordModel) -> str | None:
        identity = record.userIdentity.model_dump() if record.userIdentity else None
        image = record.dynamodb.OldImage
        if not removed_by_ttl(record.eventName, identity) or not isinstance(image, dict):
            return None
        removed_at = record.dynamodb.ApproximateCreationDateTime or datetime.now(UTC)
        key = archive_expired(image, removed_at.astimezone(UTC), self.store, self.traced, settings=self.settings)
        if key:
            logger.info("expired item archived", extra={"key": key})
            metrics.add_metric(name="ExpiredItemsArchived", unit=MetricUnit.Count, value=1)
        return key


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    processor = BatchProcessor(event_type=EventType.DynamoDBStreams, model=DynamoDBStreamRecordModel)
    return dict(
        process_partial_response(
            event=event, record_handler=ExpiredItemArchiver(), processor=processor, context=context
        )
    )
