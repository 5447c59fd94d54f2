"""EventBridge "Execution Status Change" (ABORTED, TIMED_OUT, FAILED) of a stage state machine → the end of its
run as its failure path ends one (``stage_end.stranded.end_stranded``), unless something ended it already."""

from __future__ import annotations

import json
import os
from functools import cache
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from lakeline.aws.clients import AwsClients
from lakeline.errors import InvalidInputError
from lakeline.lambda_support import load_environment
from lambdas.environments import StrandedRunEnvironment
from lambdas.failure import failure_runtime
from lambdas.observability import observability
from stage_end.runtime import FailureRuntime
from stage_end.stranded import end_stranded, parse_status_change
from stage_end.waiting import Stage

logger, tracer, metrics = observability("stranded-run")


@cache
def environment() -> StrandedRunEnvironment:
    return load_environment(StrandedRunEnvironment, os.environ)


@cache
def runtime(stage: Stage) -> FailureRuntime:
    env = environment()
    if stage == "A":
        return failure_runtime(env, "a", env.stage_a_follow_up_queue_url, env.stage_a_dead_letter_queue_url)
    return failure_runtime(env, "b", env.stage_b_follow_up_queue_url, env.stage_b_dead_letter_queue_url)


@cache
def aws() -> AwsClients:
    return AwsClients()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    status = parse_status_change(event.get("detail"))
    env = environment()
    stages: dict[str, Stage] = {env.stage_a_state_machine_arn: "A", env.stage_b_state_machine_arn: "B"}
    stage = stages.get(status.state_machine_arn)
    if stage is None:
        raise InvalidInputError(f"{status.state_machine_arn} is not a stage state machine of this pipeline")
    # Read from the execution: the event leaves the input out when it is large.
    described = aws().stepfunctions.describe_execution(executionArn=status.execution_arn)
    report = end_stranded(stage, json.loads(described.get("input") or "{}"), status, runtime(stage)).reported(logger)
    metrics.add_metric(name="StrandedRunsEnded", unit=MetricUnit.Count, value=1 if report["ended"] else 0)
    return report
