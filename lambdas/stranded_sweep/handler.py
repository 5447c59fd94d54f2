"""EventBridge schedule → the sweep of stranded partitions (``lakeline.commits.stranded``): each partition whose
arrivals wait behind an expired or free lease gets its follow-up run, queued on its stage's queue."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from lakeline.aws.clients import AwsClients
from lakeline.commits import Lease, PartitionCommits, send_follow_up
from lakeline.commits.slots import RunSlots
from lakeline.commits.stranded import SweepLimits, sweep_stranded
from lakeline.errors import InvalidInputError
from lakeline.lambda_support import load_environment
from lakeline.partitions import new_run_token
from lambdas.environments import StrandedSweepEnvironment
from lambdas.observability import observability
from stage_end.waiting import waiting_stage

logger, tracer, metrics = observability("stranded-sweep")


@cache
def dependencies() -> tuple[AwsClients, StrandedSweepEnvironment]:
    return AwsClients(), load_environment(StrandedSweepEnvironment, os.environ)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    aws, env = dependencies()
    queues = {"A": env.stage_a_follow_up_queue_url, "B": env.stage_b_follow_up_queue_url}

    def start(lease: Lease) -> None:
        send_follow_up(aws.sqs, queues[waiting_stage(lease.pending, lease.taken)], lease)

    report = sweep_stranded(
        PartitionCommits(aws.dynamodb, env.pipeline_state_table),
        new_run_token,
        start,
        SweepLimits(max_items=env.max_items, max_starts=env.max_starts),
        check=lambda state: waiting_stage(state.pending, state.taken),
    )
    # Slots whose runs outlived their lease without ending them (lakeline.commits.slots): given back.
    freed = {stage: RunSlots(aws.dynamodb, env.pipeline_state_table, stage).release_expired() for stage in ("a", "b")}
    # What the sweep finds is a run that ended with nothing to end it: alarmed (stacks/constructs/stranded.py).
    metrics.add_metric(name="StrandedPartitions", unit=MetricUnit.Count, value=len(report.stranded))
    metrics.add_metric(name="ExpiredRunSlots", unit=MetricUnit.Count, value=sum(map(len, freed.values())))
    summary = {
        "expired_slots": freed,
        "read": report.read,
        "stranded": report.stranded,
        "started": [lease.key for lease in report.started],
        "taken_meanwhile": report.taken_meanwhile,
        "refused": report.refused,
        "finished": report.finished,
    }
    (logger.warning if report.stranded else logger.info)("stranded partitions swept", extra=summary)
    if report.refused:  # left as they are: an operator looks (the function's error alarm)
        raise InvalidInputError(f"stranded partitions with no stage to start them in: {report.refused}")
    return summary
