"""Stage B state machine Catch: the failed run's end (``stage_end.stage_b.fail_stage_b``: its output
removed unless committed, its lease ended, the failure recorded, its messages parked in queue B's DLQ)."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from lakeline.errors import validated
from lakeline.lambda_support import load_environment
from lakeline.quality.metrics import BLOCKED_VERSIONS
from lambdas.environments import StageBFailureEnvironment
from lambdas.failure import failure_runtime
from lambdas.observability import observability
from lambdas.quality_metrics import emit_quality_metric
from stage_end.runtime import FailureRuntime
from stage_end.stage_b import StageBFailure, fail_stage_b

logger, tracer, metrics = observability("stage-b-failure")


@cache
def runtime() -> FailureRuntime:
    environment = load_environment(StageBFailureEnvironment, os.environ)
    return failure_runtime(environment, "b", environment.stage_b_follow_up_queue_url, environment.dead_letter_queue_url)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    report = fail_stage_b(validated(StageBFailure, event, "failure input"), runtime()).reported(logger)
    metrics.add_metric(name="FailedRuns", unit=MetricUnit.Count, value=1)
    metrics.add_metric(name="ParkedMessages", unit=MetricUnit.Count, value=report.get("parked", 0))
    emit_quality_metric(BLOCKED_VERSIONS, 1 if report.get("quality_blocked") else 0)
    return report
