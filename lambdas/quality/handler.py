"""State machine task between a run's writes and its commit (both stages, Athena engine): the quality checks of
what the commit would publish (``stage_end.quality.run_quality``, on Athena in the workgroup). A failed ``block``
rule fails the task with ``QualityBlocked`` (no retry: the version does not change), which the state machine's
Catch sends to the stage's failure function as the ``quality`` step. The state machine skips the task when the
plan has no checks."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.exceptions import ClientError
from pydantic import BaseModel

from lakeline.aws.clients import AwsClients
from lakeline.engines.athena import DEADLINE_GRACE_SECONDS, AthenaEngine, AthenaSettings, athena_throttled
from lakeline.errors import InvalidInputError, validated
from lakeline.lambda_support import load_environment
from lakeline.storage import SchemeObjectStore
from lambdas.environments import QualityEnvironment
from stage_a.plan import StageAPlan
from stage_b.plan import StageBPlan
from stage_end.quality import run_quality

logger = Logger(service="quality")
tracer = Tracer(service="quality")
metrics = Metrics(namespace="Lakeline", service="quality")


class QualityThrottled(Exception):
    """Athena stayed at its quota past the engine's own retries (a backfill holding every query slot): the task's
    throttling retry waits, as for the state machines' own Athena tasks (``stacks.constructs.engines``), instead
    of the run failing and parking what it took."""


class QualityInput(BaseModel):
    stage: Literal["A", "B"]
    plan: dict[str, Any]


# What the step needs after the engine's deadline: the check running then (``DEADLINE_GRACE_SECONDS``), dropping the
# quality table (as long) and failing the task cleanly, which a Lambda killed at its timeout does not
# (Sandbox.Timedout skips the step's ``finally``).
CLEAN_END_SECONDS = 2 * DEADLINE_GRACE_SECONDS + 30.0


@dataclass(frozen=True)
class Runtime:
    aws: AwsClients
    workgroup: str
    store: SchemeObjectStore

    def engine(self, context: LambdaContext) -> AthenaEngine:
        """The engine of one invocation: no query waits past ``CLEAN_END_SECONDS`` before the function's timeout."""
        now = time.monotonic()
        deadline = now + context.get_remaining_time_in_millis() / 1000 - CLEAN_END_SECONDS
        settings = AthenaSettings(workgroup=self.workgroup)
        return AthenaEngine(self.aws.athena, settings, glue=self.aws.glue, deadline=max(deadline, now))


@cache
def runtime() -> Runtime:
    aws = AwsClients()
    environment = load_environment(QualityEnvironment, os.environ)
    return Runtime(aws, environment.athena_workgroup, SchemeObjectStore(aws.s3))


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = validated(QualityInput, event, "quality input")
    plan = StageAPlan.from_dict(request.plan) if request.stage == "A" else StageBPlan.from_dict(request.plan)
    if plan.quality is None:
        raise InvalidInputError(f"the plan of run {plan.run_token} has no checks: the quality task must not run")
    replaces = plan.replaces if isinstance(plan, StageBPlan) else ()
    run = runtime()
    try:
        report = run_quality(
            plan.quality,
            target_location=plan.target_location,
            engine=run.engine(context),
            store=run.store,
            carry_from=plan.carry_from,
            replaces=replaces,
        )
    except ClientError as error:
        if athena_throttled(error):
            raise QualityThrottled(str(error)) from error
        raise
    failed = [result.rule for result in report.failed]
    # The checks run here on Athena only: what both engines' runs say (blocked versions, warnings) the failure and
    # post-update functions emit (lakeline.quality.metrics).
    metrics.add_metric(name="QualityChecks", unit=MetricUnit.Count, value=len(report.results))
    logger.info("quality checks passed", extra={"table": report.table, "checks": len(report.results), "warned": failed})
    return {"table": report.table, "checks": len(report.results), "warned": failed}
