"""Queue B → stage B: take the target partition's lease, plan (dependency item, catalog, SQL files) and
start one execution per partition run.

A message while another run holds the target partition waits in the partition's state for that run's
follow-up (queued here by the run's post-update function). The run, and so the execution name, is fixed
by the message, so a redelivered message cannot run twice; a message that can never succeed (invalid,
no dependency item, an unknown token) goes to the DLQ with its reason.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields
from functools import cache
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from lakeline.aws.sqs import dead_letter
from lakeline.commits import Lease, PartitionFull, parse_follow_up
from lakeline.commits.slots import NoRunSlot
from lakeline.dependencies.store import DependencyStore
from lakeline.errors import validated
from lakeline.lambda_support import load_environment
from lambdas.environments import StageBRouterEnvironment
from lambdas.observability import observability
from lambdas.router import RouterRuntime, router_runtime, send_back_to_wait
from stage_b.artifacts import s3_sql_reader
from stage_b.messages import StageBMessage
from stage_b.plan import PlanSources, StageBPlan, plan_message
from stage_b.start import begin_message, plan_follow_up, start_leased

if TYPE_CHECKING:
    pass

logger, tracer, metrics = observability("stage-b-router")
processor = BatchProcessor(event_type=EventType.SQS)


@dataclass(frozen=True)
class Runtime(RouterRuntime[StageBRouterEnvironment]):
    dependencies: DependencyStore


@cache
def runtime() -> Runtime:
    shared = router_runtime(load_environment(StageBRouterEnvironment, os.environ), "b")
    parts = {part.name: getattr(shared, part.name) for part in fields(shared)}
    dependencies = DependencyStore(shared.aws.dynamodb, shared.environment.dependencies_table)
    return Runtime(**parts, dependencies=dependencies)


def plan(run: Runtime, message: StageBMessage, run_token: str, lease: Lease | None) -> StageBPlan:
    sources = PlanSources(
        run.dependencies,
        run.catalog,
        run.settings,
        lambda team: s3_sql_reader(run.aws.s3, run.environment.artifacts_bucket, team),
    )
    return plan_message(message, sources, run_token, lease)


def handle_record(record: SQSRecord) -> None:
    run = runtime()

    def planner(message: StageBMessage, run_token: str, lease: Lease | None) -> StageBPlan:
        return plan(run, message, run_token, lease)

    try:
        body = json.loads(record.body)
        follow_up = parse_follow_up(body)
        if follow_up is not None:
            planned: StageBPlan | None = plan_follow_up(follow_up, planner, run.commits)
        else:
            message = validated(StageBMessage, body, "stage B message")
            planned = begin_message(message, planner, run.commits)
    # Not JSON, or an invalid message or plan: InvalidInputError and pydantic's errors are ValueErrors.
    except ValueError as error:
        logger.warning("stage B message rejected", extra={"reason": str(error)})
        dead_letter(run.sqs, run.environment.dead_letter_queue_url, record.body, str(error), "stage-b-router")
        metrics.add_metric(name="RejectedMessages", unit=MetricUnit.Count, value=1)
        return
    except PartitionFull as full:
        # Its target partition's item holds as many waiting messages as it may: it waits in the queue instead.
        delay = send_back_to_wait(run.sqs, run.environment.stage_b_queue_url, record, full)
        logger.info("message sent back to queue B to wait", extra={"reason": str(full), "delay": delay})
        metrics.add_metric(name="DeferredMessages", unit=MetricUnit.Count, value=1)
        return
    if planned is None:
        if follow_up is not None:
            run.slots.release(follow_up.owner)  # no longer its partition's: the slot its run's end handed it, if any
            logger.info(
                "follow-up no longer holds its target partition; nothing to start", extra={"run": follow_up.owner}
            )
            return
        logger.info("message waits for the target partition's run in flight", extra={"body": record.body[:500]})
        return
    try:
        started = start_leased(planned, planner, run.commits, run.sfn, run.environment.state_machine_arn, run.slots)

    except NoRunSlot as busy:
        # The run keeps its partition's lease; its message goes back to wait for a free slot: a follow-up on the
        # follow-up queue, where a backlog of new messages in queue B does not hold it up.
        env = run.environment
        queue_url = env.stage_b_follow_up_queue_url if follow_up is not None else env.stage_b_queue_url
        delay = send_back_to_wait(run.sqs, queue_url, record, busy)
        logger.info("run waits for a slot: sent back to its queue", extra={"reason": str(busy), "delay": delay})
        metrics.add_metric(name="DeferredMessages", unit=MetricUnit.Count, value=1)
        return
    metrics.add_metric(name="StartedRuns", unit=MetricUnit.Count, value=0 if started.duplicate else 1)
    logger.info(
        "stage B started",
        extra={"target": planned.dataset, "partition": planned.partition, "execution": started.execution_name},
    )


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(event=event, record_handler=handle_record, processor=processor, context=context)
