"""Stage A state machine task after the swap: end the run's lease (or queue the follow-up run that
takes the arrivals that came meanwhile), sweep superseded versions past their grace period, record
lineage (records and OpenLineage events), then route the finished partition to the stage B targets it
triggers (queue B). Every part is idempotent, so the task is retried on failure."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel

from lakeline.errors import validated
from lakeline.lambda_support import load_environment
from lambdas.environments import StageAPostUpdateEnvironment
from lambdas.post_update import (
    PostUpdateRuntime,
    end_lease,
    note_lineage,
    note_routed,
    onward_run,
    post_update_runtime,
    published_parents,
)
from stage_a.finish import finish_stage_a
from stage_a.plan import StageAPlan
from stage_b.messages import LineageParents
from stage_lineage.records import record_stage_a

logger = Logger(service="stage-a-post-update")
tracer = Tracer(service="stage-a-post-update")


class PostUpdateInput(BaseModel):
    plan: dict[str, Any]
    execution_id: str = ""


@cache
def runtime() -> PostUpdateRuntime:
    environment = load_environment(StageAPostUpdateEnvironment, os.environ)
    return post_update_runtime(environment, environment.stage_a_queue_url)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = validated(PostUpdateInput, event, "post-update input")
    plan = StageAPlan.from_dict(request.plan)
    run = runtime()
    files, superseded = finish_stage_a(plan, run.store)
    table = f"{plan.target_database}.{plan.table}"
    routed_run = onward_run(plan.run_token, plan.writes, plan.lease)
    if routed_run is None:
        superseded, follow_up = end_lease(run, plan.lease, plan.stage_partition_root, superseded, wrote=plan.writes)
        logger.info(
            "stage A: nothing published, or routed already", extra={"table": table, "partition": plan.partition}
        )
        return {
            "table": table,
            "partition": plan.partition,
            "files": 0,
            "superseded_deleted": superseded,
            "triggered": [],
            "follow_up": follow_up.owner if follow_up else None,
        }
    # A run that took nothing new routes the published version again, under the run that published it
    # (``onward_run``); its lineage records are that run's when it is that run again (the same arrival's).
    # A run routing again hangs the targets' runs under the publishing run's lineage (``note_lineage``).
    own = routed_run == plan.run_token
    parents: LineageParents | None
    if own:
        parents = record_stage_a(run.lineage, plan, execution=run.events.stage_a_execution(plan))
        note_lineage(run.runs.commits, plan.lease, plan.target_location, parents)
    else:
        parents = published_parents(plan.lease)
    events = run.events.stage_a(plan, "COMPLETE") if plan.writes else []
    onward = run.routing.route(table, plan.partition, run=routed_run, lineage=parents)
    for unrouted in onward.unrouted:
        logger.error("target not routed; parked in queue B's DLQ", extra={"reason": unrouted.describe()})
    note_routed(run.runs.commits, plan.lease, plan.target_location, wrote=plan.writes)
    # The lease ends after the routing is sent and noted: a run that takes the partition next finds the
    # version routed, and a routing that fails leaves the lease to the failure path (which ends it).
    superseded, follow_up = end_lease(run, plan.lease, plan.stage_partition_root, superseded, wrote=plan.writes)
    logger.info(
        "stage A published",
        extra={
            "table": table,
            "partition": plan.partition,
            "files": len(files),
            "routed_run": routed_run,
            "triggered": [m.node for m in onward.messages],
            "openlineage_events": len(events),
            "follow_up": follow_up.owner if follow_up else None,
        },
    )
    return {
        "table": f"{plan.target_database}.{plan.table}",
        "partition": plan.partition,
        "location": plan.target_location,
        "files": len(files),
        "superseded_deleted": superseded,
        "triggered": [m.node for m in onward.messages],
        "unrouted": [unrouted.describe() for unrouted in onward.unrouted],
        "lineage": parents.model_dump() if parents else None,
        "openlineage_events": len(events),
        "follow_up": follow_up.owner if follow_up else None,
    }
