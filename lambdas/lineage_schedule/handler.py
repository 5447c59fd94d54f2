"""EventBridge schedule (nightly) -> trace queue: one message per root loaded since the last run."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import AwareDatetime, BaseModel, ConfigDict

from lakeline.aws.clients import AwsClients
from lakeline.lambda_support import load_environment
from lakeline.lineage.records.schedule import ScheduleSettings, schedule_traces
from lambdas.environments import LineageScheduleEnvironment

logger = Logger(service="lakeline-lineage")
tracer = Tracer(service="lakeline-lineage")
metrics = Metrics(namespace="Lakeline", service="lineage-schedule")


class ScheduledEvent(BaseModel):
    """The part of an EventBridge scheduled event used here: when it fired."""

    model_config = ConfigDict(extra="ignore")

    time: AwareDatetime | None = None


@cache
def dependencies() -> tuple[Any, Any, LineageScheduleEnvironment]:
    aws = AwsClients()
    environment = load_environment(LineageScheduleEnvironment, os.environ)
    return aws.dynamodb, aws.sqs, environment


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    dynamodb, sqs, environment = dependencies()
    fired = ScheduledEvent.model_validate(event).time or datetime.now(UTC)
    result = schedule_traces(
        dynamodb,
        environment.table_name,
        sqs,
        environment.trace_queue_url,
        now=fired.astimezone(UTC),
        settings=ScheduleSettings(
            settle=timedelta(seconds=environment.settle_seconds),
            first_run_lookback=timedelta(hours=environment.first_run_lookback_hours),
        ),
    )
    summary = {
        "trace_date": result.trace_date.isoformat(),
        "since_ms": result.since_ms,
        "until_ms": result.until_ms,
        "roots": len(result.roots),
        "queries": result.queries,
        "state_saved": result.state_saved,
    }
    logger.info("traces queued", extra=summary)
    metrics.add_metric(name="TracesQueued", unit=MetricUnit.Count, value=len(result.roots))
    return summary
