"""Stage B state machine task after the swap: the run's end (``stage_end.stage_b.complete_stage_b``:
lease, sweep, lineage, routing onwards for B→B chains). Every part is idempotent."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from lakeline.errors import validated
from lakeline.lambda_support import load_environment
from lambdas.environments import StageBPostUpdateEnvironment
from lambdas.post_update import post_update_runtime
from stage_b.plan import StageBPlan
from stage_end.runtime import PostUpdateRuntime
from stage_end.stage_b import StageBPostUpdate, complete_stage_b

logger = Logger(service="stage-b-post-update")
tracer = Tracer(service="stage-b-post-update")
metrics = Metrics(namespace="Lakeline", service="stage-b-post-update")


@cache
def runtime() -> PostUpdateRuntime:
    environment = load_environment(StageBPostUpdateEnvironment, os.environ)
    return post_update_runtime(environment, "b", environment.stage_b_follow_up_queue_url)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = validated(StageBPostUpdate, event, "post-update input")
    ended = complete_stage_b(StageBPlan.from_dict(request.plan), request, runtime())
    ended.log(logger)
    metrics.add_metric(name="PublishedFiles", unit=MetricUnit.Count, value=ended.report["files"])
    metrics.add_metric(name="TriggeredTargets", unit=MetricUnit.Count, value=len(ended.report["triggered"]))
    return ended.report
