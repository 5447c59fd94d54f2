"""Stage A state machine Catch: the failed run's end (``stage_end.stage_a.fail_stage_a``: its output
deleted unless committed, its lease ended, its FAIL events sent, its arrivals parked in queue A's DLQ)."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from lakeline.errors import validated
from lakeline.lambda_support import load_environment
from lakeline.quality.metrics import BLOCKED_VERSIONS
from lambdas.environments import StageAFailureEnvironment
from lambdas.failure import failure_runtime
from lambdas.observability import observability
from lambdas.quality_metrics import emit_quality_metric
from stage_end.runtime import FailureRuntime
from stage_end.stage_a import StageAFailure, fail_stage_a

logger, tracer, metrics = observability("stage-a-failure")


@cache
def runtime() -> FailureRuntime:
    environment = load_environment(StageAFailureEnvironment, os.environ)
    return failure_runtime(
        environment, "a", environment.stage_a_follow_up_queue_url, environment.stage_a_dead_letter_queue_url
    )


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    report = fail_stage_a(validated(StageAFailure, event, "failure input"), runtime()).reported(logger)
    metrics.add_metric(name="FailedRuns", unit=MetricUnit.Count, value=1)
    metrics.add_metric(name="ParkedArrivals", unit=MetricUnit.Count, value=len(report.get("parked", [])))
    emit_quality_metric(BLOCKED_VERSIONS, 1 if report.get("quality_blocked") else 0)
    return report
