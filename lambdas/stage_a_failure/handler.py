"""Stage A state machine Catch: report the failure, delete the run's output unless it was committed,
end its lease (handing it to a follow-up run for arrivals that came meanwhile) and park the arrivals it
took in queue A's DLQ with the reason; the stage partition still points at its previous version.

A failure after the commit (while pointing the catalog at the new version) keeps the new files: they are
the partition's committed version, and the next run points the catalog at them first. A run whose lease
was lost parks nothing: its arrivals wait for the run that holds the partition now.
The run's FAIL event (with its START) goes to the OpenLineage event archive and any configured transport.

A failure of the post-update (``post_update``, after its retries) comes after the publish: nothing is
deleted and nothing abandoned. The lease is ended as the post-update ends it (handed to a follow-up run
for what arrived meanwhile), the run's lineage records and COMPLETE events are written (deterministic, as
the post-update writes them) and every arrival the run took is parked with the reason. A redrive finds
them published: its run writes nothing and repeats the post-update, routing the published version
onwards under the run that published it (``lambdas.post_update.onward_run``).
"""

from __future__ import annotations

import json
import os
from functools import cache
from typing import Any, Literal

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel

from lakeline.aws.sqs import dead_letter
from lakeline.commits import Lease
from lakeline.errors import validated
from lakeline.lambda_support import StepError, load_environment
from lakeline.partitions import Abandoned
from lambdas.environments import StageAFailureEnvironment
from lambdas.failure import FailureRuntime, failure_runtime
from lambdas.post_update import note_lineage
from stage_a.arrivals import Arrival, arrival_event
from stage_a.finish import abandon_stage_a
from stage_a.plan import StageAPlan, arrival_id, waiting_arrivals
from stage_lineage.records import record_stage_a, stage_a_parents

logger = Logger(service="stage-a-failure")
tracer = Tracer(service="stage-a-failure")


class FailureInput(BaseModel):
    plan: dict[str, Any]
    arrival: dict[str, Any] | None = None
    error: StepError
    failed_step: Literal["reconcile", "register", "ctas", "commit", "publish", "spark", "post_update"] = "ctas"
    execution_id: str = ""


@cache
def runtime() -> FailureRuntime[StageAFailureEnvironment]:
    environment = load_environment(StageAFailureEnvironment, os.environ)
    return failure_runtime(environment, environment.stage_a_queue_url)


def end_lease(plan: StageAPlan, failed_step: str) -> tuple[list[Arrival], Abandoned]:
    """End the failed run's lease; return the arrivals to park (those it added) and how it ended."""
    assert plan.lease is not None
    ended = runtime().runs.after_failure(plan.lease, failed_step=failed_step, root=plan.stage_partition_root)
    if not ended.held:
        return [], ended
    waiting = waiting_arrivals(Lease.from_dict(plan.lease))
    return [a for a in waiting if arrival_id(a.key, a.sequencer) in plan.applied], ended


def park(arrivals: list[Arrival], reason: str) -> None:
    """Park ``arrivals`` in queue A's DLQ with ``reason`` (``lakeline dlq`` lists them, a redrive sends them back)."""
    run = runtime()
    for arrival in arrivals:
        queue = run.environment.stage_a_dead_letter_queue_url
        dead_letter(run.sqs, queue, json.dumps(arrival_event(arrival)), reason, "stage-a-failure")


def park_published(plan: StageAPlan, request: FailureInput, reason: str) -> dict[str, Any]:
    """After a failed post-update: the run is published, so nothing is deleted. End its lease as the
    post-update does, unless it ended it already (``after_failed_post_update``), once where the run sits in the lineage
    records is noted (``note_lineage``); park every arrival the run took, then write its lineage records and
    COMPLETE events (the same nodes and events the post-update writes)."""
    run = runtime()
    follow_up = None
    if plan.writes:
        # Noted before the lease ends (the ids are known without writing anything): the run that routes the
        # version again hangs its targets under this one.
        note_lineage(run.runs.commits, plan.lease, plan.target_location, stage_a_parents(plan))
    if plan.lease is not None:
        settled = run.runs.after_failed_post_update(plan.lease, wrote=plan.writes, root=plan.stage_partition_root)
        follow_up = settled.follow_up
        parked = waiting_arrivals(Lease.from_dict(plan.lease))
    else:
        parked = [Arrival.model_validate(request.arrival)] if request.arrival is not None else []
    park(parked, reason)
    emitted: list[dict[str, Any]] = []
    if plan.writes:  # last: what made the post-update fail may be the lineage queue itself
        record_stage_a(run.lineage, plan, execution=run.events.stage_a_execution(plan))
        emitted = run.events.stage_a(plan, "COMPLETE")
    logger.error(
        "stage A post-update failed after the publish; its arrivals are parked for a redrive",
        extra={
            "table": f"{plan.target_database}.{plan.table}",
            "partition": plan.partition,
            "error": request.error.Error,
            "cause": request.error.Cause[:2000],
            "parked": [arrival.key for arrival in parked],
            "follow_up": follow_up.owner if follow_up else None,
        },
    )
    return {
        "failed_step": request.failed_step,
        "error": request.error.Error,
        "cause": request.error.Cause,
        "partial_objects_deleted": 0,
        "parked": [arrival.key for arrival in parked],
        "openlineage_events": len(emitted),
    }


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = validated(FailureInput, event, "failure input")
    plan = StageAPlan.from_dict(request.plan)
    run = runtime()
    reason = f"{request.failed_step} failed: {request.error.described()}"
    if request.failed_step == "post_update":
        return park_published(plan, request, reason)
    if plan.lease is not None:
        parked, ended = end_lease(plan, request.failed_step)
        deleted = ended.deleted
        reason += f"; {ended.left}" if ended.left else ""
    else:
        # The Spark job cleans its own partial output before failing; only Athena's CTAS leaves one behind.
        deleted, left = abandon_stage_a(plan, run.store) if request.failed_step == "ctas" else (0, "")
        reason += f"; {left}" if left else ""
        parked = [Arrival.model_validate(request.arrival)] if request.arrival is not None else []
    emitted = run.events.stage_a(plan, "FAIL", error=reason, failed=request.failed_step)
    # The run is over: park each arrival it took in queue A's DLQ with the reason; a redrive runs it again.
    park(parked, reason)
    logger.error(
        "stage A failed",
        extra={
            "table": f"{plan.target_database}.{plan.table}",
            "partition": plan.partition,
            "failed_step": request.failed_step,
            "error": request.error.Error,
            "cause": request.error.Cause[:2000],
            "partial_objects_deleted": deleted,
            "parked": [arrival.key for arrival in parked],
            "openlineage_events": len(emitted),
        },
    )
    return {
        "failed_step": request.failed_step,
        "error": request.error.Error,
        "cause": request.error.Cause,
        "partial_objects_deleted": deleted,
        "parked": [arrival.key for arrival in parked],
        "openlineage_events": len(emitted),
    }
