"""Stage B state machine task after the swap: end the run's lease (or queue the follow-up run that takes
the messages that came meanwhile), sweep superseded versions past their grace period, record lineage
(records and OpenLineage events), and route the finished partition onwards (B→B chains). Appends are
recorded as applied by the commit itself (``lambdas/partition_commit``). Every part is idempotent."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel

from lakeline.errors import validated
from lakeline.lambda_support import load_environment
from lambdas.environments import PostUpdateEnvironment
from lambdas.post_update import (
    PostUpdateRuntime,
    end_lease,
    note_lineage,
    note_routed,
    onward_run,
    post_update_runtime,
    published_parents,
)
from stage_b.failures import StepTime, step_times
from stage_b.finish import finish_stage_b
from stage_b.messages import LineageParents, StageBMessage
from stage_b.plan import StageBPlan
from stage_lineage.records import record_stage_b

logger = Logger(service="stage-b-post-update")
tracer = Tracer(service="stage-b-post-update")


class PostUpdateInput(BaseModel):
    message: dict[str, Any]
    plan: dict[str, Any]
    execution_id: str = ""
    step_times: list[StepTime] | None = None
    """When each step's query ran (the Athena engine's Map keeps them; a Glue job run does not)."""


@cache
def runtime() -> PostUpdateRuntime:
    environment = load_environment(PostUpdateEnvironment, os.environ)
    return post_update_runtime(environment, environment.stage_b_queue_url)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = validated(PostUpdateInput, event, "post-update input")
    message = validated(StageBMessage, request.message, "stage B message")
    plan = StageBPlan.from_dict(request.plan)
    run = runtime()
    files, superseded = finish_stage_b(plan, run.store)
    routed_run = onward_run(plan.run_token, bool(plan.message_ids), plan.lease)
    if routed_run is None:
        superseded, follow_up = end_lease(run, plan.lease, plan.partition_root, superseded, wrote=plan.writes)
        logger.info("stage B: nothing published, or routed already", extra={"target": message.node})
        return {
            "dataset": message.target_dataset,
            "partition": message.partition,
            "files": 0,
            "superseded_deleted": superseded,
            "triggered": [],
            "follow_up": follow_up.owner if follow_up else None,
        }
    # A run whose messages were all applied already (a redelivery, or a redrive of a message parked after
    # its run's post-update failed) routes the published version again under the run that published it
    # (``onward_run``): the targets recognise what was sent before as a repeat and do not apply it again.
    own = routed_run == plan.run_token
    execution = run.events.stage_b_execution(plan, message)
    parents: LineageParents | None
    if own:
        parents = record_stage_b(run.lineage, plan, message, execution=execution)
        note_lineage(run.runs.commits, plan.lease, plan.target_location, parents)
    else:
        parents = published_parents(plan.lease)  # where the publishing run sits (``note_lineage``)
    times = step_times(request.step_times)
    events = run.events.stage_b(plan, message, "COMPLETE", step_times=times) if plan.message_ids else []
    onward = run.routing.route(
        message.target_dataset, message.partition, run=routed_run, path=message.path, lineage=parents
    )
    for unrouted in onward.unrouted:
        logger.error("target not routed; parked in queue B's DLQ", extra={"reason": unrouted.describe()})
    note_routed(run.runs.commits, plan.lease, plan.target_location, wrote=bool(plan.message_ids))
    # The lease ends after the routing is sent and noted: a run that takes the partition next finds the
    # version routed, and a routing that fails leaves the lease to the failure path (which ends it).
    superseded, follow_up = end_lease(run, plan.lease, plan.partition_root, superseded, wrote=plan.writes)
    logger.info(
        "stage B published",
        extra={
            "target": message.node,
            "files": len(files),
            "triggered": [m.node for m in onward.messages],
            "openlineage_events": len(events),
            "follow_up": follow_up.owner if follow_up else None,
        },
    )
    return {
        "dataset": message.target_dataset,
        "partition": message.partition,
        "files": len(files),
        "superseded_deleted": superseded,
        "triggered": [m.node for m in onward.messages],
        "unrouted": [unrouted.describe() for unrouted in onward.unrouted],
        "openlineage_events": len(events),
        "follow_up": follow_up.owner if follow_up else None,
    }
