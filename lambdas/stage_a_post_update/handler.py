"""Stage A state machine task after the swap: the run's end (``stage_end.stage_a.complete_stage_a``:
lease, sweep, lineage, routing to queue B). Every part is idempotent, so the task is retried on failure."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from lakeline.errors import validated
from lakeline.lambda_support import load_environment
from lakeline.quality.metrics import WARNINGS
from lambdas.environments import StageAPostUpdateEnvironment
from lambdas.observability import observability
from lambdas.post_update import post_update_runtime
from lambdas.quality_metrics import emit_quality_metric
from stage_end.runtime import PostUpdateRuntime
from stage_end.stage_a import StageAPostUpdate, complete_stage_a

logger, tracer, metrics = observability("stage-a-post-update")


@cache
def runtime() -> PostUpdateRuntime:
    environment = load_environment(StageAPostUpdateEnvironment, os.environ)
    return post_update_runtime(environment, "a", environment.stage_a_follow_up_queue_url)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    report = complete_stage_a(validated(StageAPostUpdate, event, "post-update input"), runtime()).reported(logger)
    metrics.add_metric(name="PublishedFiles", unit=MetricUnit.Count, value=report["files"])
    metrics.add_metric(name="TriggeredTargets", unit=MetricUnit.Count, value=len(report["triggered"]))
    emit_quality_metric(WARNINGS, report.get("quality_warnings", 0))
    return report
