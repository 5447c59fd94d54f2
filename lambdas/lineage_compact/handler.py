"""EventBridge schedule (hourly) -> lineage archive: every day with staged traces folded into its archive objects.

See ``lakeline.lineage.records.compact``. One listing of the staging folder finds the days; a day is compacted
one bucket at a time and the function stops starting buckets when ``STOP_BEFORE`` of its time is left: what
is left is staged still, and the next run folds it (a rerun gives the same objects).
"""

from __future__ import annotations

import os
from datetime import timedelta
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from lakeline.aws.clients import AwsClients
from lakeline.lambda_support import load_environment
from lakeline.lineage.records.archive import S3ArchiveStore
from lakeline.lineage.records.compact import compact_archive
from lambdas.environments import LineageCompactEnvironment

logger = Logger(service="lakeline-lineage")
tracer = Tracer(service="lakeline-lineage")
metrics = Metrics(namespace="Lakeline", service="lineage-compact")

STOP_BEFORE = timedelta(minutes=3)


@cache
def dependencies() -> S3ArchiveStore:
    aws = AwsClients()
    environment = load_environment(LineageCompactEnvironment, os.environ)
    return S3ArchiveStore(aws.s3, environment.archive_bucket, environment.archive_prefix)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    store = dependencies()
    margin = STOP_BEFORE.total_seconds() * 1000
    results = compact_archive(store, keep_going=lambda: context.get_remaining_time_in_millis() > margin)
    staged = sum(len(result.staged) for result in results)
    summary = {
        "days": [result.day.isoformat() for result in results],
        "staged": staged,
        "written": sum(len(result.written) for result in results),
    }
    logger.info("lineage archive compacted", extra=summary)
    metrics.add_metric(name="StagedTracesFolded", unit=MetricUnit.Count, value=staged)
    return summary
