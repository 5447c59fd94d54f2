"""The end of a stage A run.

After the publish (``complete_stage_a``, the post-update task): end the run's lease (or queue the
follow-up run that takes the arrivals that came meanwhile), sweep superseded versions past their grace
period, record lineage (records and OpenLineage events), then route the finished partition to the stage B
targets it triggers (queue B). Every part is idempotent, so the task is retried on failure.

After a failed step (``fail_stage_a``, the state machine's Catch): report the failure, drop its quality table
(left when the quality step was killed), delete the run's output unless it was committed, end its lease
(handing it to a follow-up run for arrivals that came meanwhile) and park the arrivals it took in queue A's
DLQ with the reason; the stage partition still points at its previous version. A failure after the commit
(while pointing the catalog at the new version) keeps the new files: they are the partition's committed
version, and the next run points the catalog at them first. A run whose lease was lost parks nothing: its
arrivals wait for the run that holds the partition now. The run's FAIL event (with its START) goes to the
OpenLineage event archive and any configured transport.

A failure of the post-update (``post_update``, after its retries) comes after the publish: nothing is
deleted and nothing abandoned. The lease is ended as the post-update ends it (handed to a follow-up run
for what arrived meanwhile), the run's lineage records and COMPLETE events are written (deterministic, as
the post-update writes them) and every arrival the run took is parked with the reason. A redrive finds
them published: its run writes nothing and repeats the post-update, routing the published version
onwards under the run that published it (``stage_end.published.onward_run``)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Annotated, Any

from pydantic import BaseModel

from lakeline.aws.sqs import dead_letter
from lakeline.commits import Lease, PartitionCommits
from lakeline.commits.batch import BatchMissing, BatchReader
from lakeline.lambda_support import StepError
from lakeline.run_order import STAGE_A, FailedStep
from stage_a.arrivals import Arrival, arrival_event
from stage_a.finish import abandon_stage_a
from stage_a.plan import StageAPlan, arrival_id
from stage_b.messages import LineageParents
from stage_end.published import (
    end_lease,
    note_lineage,
    note_routed,
    onward_run,
    onward_version,
    published_parents,
)
from stage_end.quality import blocked_by_checks, failed_run_report, published_report, warned_rules
from stage_end.runtime import (
    Ended,
    FailureRuntime,
    PostUpdateRuntime,
    drop_quality_table,
    prune_table_versions,
    steps_of,
    unrouted_note,
)
from stage_lineage.records import record_stage_a, stage_a_parents


class StageAPostUpdate(BaseModel):
    plan: dict[str, Any]
    execution_id: str = ""


class StageAFailure(BaseModel):
    plan: dict[str, Any]
    arrival: dict[str, Any] | None = None
    error: StepError
    failed_step: Annotated[FailedStep, steps_of("stage A", STAGE_A.failed_steps)] = "ctas"
    execution_id: str = ""


def complete_stage_a(request: StageAPostUpdate, run: PostUpdateRuntime) -> Ended:
    """End a published run: sweep, record its lineage, route it onwards, end its lease, in that order."""
    plan = _with_batch(StageAPlan.from_dict(request.plan), run.store, run.runs.commits)
    files = run.store.list_data_files(plan.target_location)
    table = f"{plan.target_database}.{plan.table}"
    routed_run = onward_run(plan.run_token, plan.writes, plan.lease)
    if routed_run is None:
        superseded, follow_up = end_lease(run.runs, plan.lease, plan.stage_partition_root, wrote=plan.writes)
        return Ended(
            {
                "table": table,
                "partition": plan.partition,
                "files": 0,
                "superseded_deleted": superseded,
                "triggered": [],
                "follow_up": follow_up.owner if follow_up else None,
            },
            "stage A: nothing published, or routed already",
            {"table": table, "partition": plan.partition},
        )
    # A run that took nothing new routes the published version again, under the run that published it
    # (``onward_run``); its lineage records are that run's when it is that run again (the same arrival's).
    # A run routing again hangs the targets' runs under the publishing run's lineage (``note_lineage``).
    parents: LineageParents | None
    if routed_run == plan.run_token:
        parents = record_stage_a(run.lineage, plan, execution=run.events.stage_a_execution(plan))
        note_lineage(run.runs.commits, plan.lease, plan.target_location, parents)
    else:
        parents = published_parents(plan.lease)
    report = published_report(plan.quality, routed_run == plan.run_token, run.store, plan.target_location)
    events = run.events.stage_a(plan, "COMPLETE", report=report) if plan.writes else []
    version = onward_version(plan.run_token, routed_run, plan.lease, wrote=plan.writes)
    onward = run.routing.route(table, plan.partition, run=routed_run, lineage=parents, version=version)
    note_routed(run.runs.commits, plan.lease, plan.target_location, wrote=plan.writes)
    # The lease ends after the routing is sent and noted: a run that takes the partition next finds the
    # version routed, and a routing that fails leaves the lease to the failure path (which ends it).
    superseded, follow_up = end_lease(run.runs, plan.lease, plan.stage_partition_root, wrote=plan.writes)
    pruned = prune_table_versions(run.table_versions, table, plan.partition, wrote=plan.writes)
    triggered = [m.node for m in onward.messages]
    return Ended(
        {
            "table": table,
            "partition": plan.partition,
            "location": plan.target_location,
            "files": len(files),
            "superseded_deleted": superseded,
            "triggered": triggered,
            "unrouted": [unrouted.describe() for unrouted in onward.unrouted],
            "lineage": parents.model_dump() if parents else None,
            "openlineage_events": len(events),
            "follow_up": follow_up.owner if follow_up else None,
            "quality_warnings": warned_rules(report),
        },
        "stage A published",
        {
            "table": table,
            "partition": plan.partition,
            "files": len(files),
            "routed_run": routed_run,
            "triggered": triggered,
            "openlineage_events": len(events),
            "follow_up": follow_up.owner if follow_up else None,
        },
        notes=[*(unrouted_note(unrouted.describe()) for unrouted in onward.unrouted), *pruned],
    )


def fail_stage_a(request: StageAFailure, run: FailureRuntime) -> Ended:
    """End a run whose ``request.failed_step`` failed: delete or keep its output, end its lease, send its
    FAIL events, park what it took."""
    plan = StageAPlan.from_dict(request.plan)
    reason = f"{request.failed_step} failed: {request.error.described()}"
    lost: list[Arrival] = []
    try:
        plan = _with_batch(plan, run.store, run.runs.commits)
    except BatchMissing as missing:
        plan = replace(plan, batch_read=True)
        if plan.lease is not None and Lease.from_dict(plan.lease).takes_own_batch:
            # Its arrivals left ``pending`` when it was planned (#39): the object was their only record. The run
            # ends all the same (a partition is never held by it); what it knows of them is parked, with how to
            # load the rest.
            reason += (
                f"; {missing}, deleted while the run held its partition: the arrivals it took cannot be named; "
                f"upload the files of {plan.raw_partition_location} that are not loaded again"
            )
            lost = [Arrival.model_validate(request.arrival)] if request.arrival is not None else []
            if not lost:  # a follow-up run, started by no arrival: the notice is what is parked
                notice = json.dumps({"lost_batch": plan.batch.location if plan.batch else None, "run": plan.run_token})
                dead_letter(run.sqs, run.dead_letter_queue_url, notice, reason, "stage-a-failure")
        else:
            # A plan from before the batches were taken (#39): nothing is taken out of ``pending`` and nothing
            # parked, so the run's arrivals wait for the follow-up run the lease goes to, which takes them again.
            reason += f"; {missing}: its arrivals stay for the follow-up run"
    if request.failed_step == "post_update":
        return _park_published(plan, request, reason, run)
    # Read before the run's prefix goes with its report: its FAIL events carry the checks' results, the metric counts
    # a blocked version.
    report = failed_run_report(plan.quality, run.store, plan.target_location)
    blocked = blocked_by_checks(request.failed_step, reason, report)
    dropped = drop_quality_table(plan.quality, run.tables)
    if plan.lease is not None:
        ended = run.runs.after_failure(plan.lease, failed_step=request.failed_step, root=plan.stage_partition_root)
        parked = (_applied_arrivals(plan) or lost) if ended.held else []
        deleted = ended.deleted
        reason += f"; {ended.left}" if ended.left else ""
    else:
        # The Spark job cleans its own partial output before failing; only Athena's CTAS leaves one behind.
        deleted, left = abandon_stage_a(plan, run.store) if request.failed_step == "ctas" else (0, "")
        reason += f"; {left}" if left else ""
        parked = [Arrival.model_validate(request.arrival)] if request.arrival is not None else []
    if blocked:  # the trees of the arrivals it took end at the refused version's table (stage_lineage.records)
        record_stage_a(run.lineage, plan, execution=run.events.stage_a_execution(plan), blocked=True)
    emitted = run.events.stage_a(plan, "FAIL", error=reason, failed=request.failed_step, report=report)
    # The run is over: park each arrival it took in queue A's DLQ with the reason; a redrive runs it again.
    _park(parked, reason, run)
    return Ended(
        {
            "failed_step": request.failed_step,
            "error": request.error.Error,
            "cause": request.error.Cause,
            "partial_objects_deleted": deleted,
            "parked": [arrival.key for arrival in parked],
            "openlineage_events": len(emitted),
            "quality_blocked": blocked,
        },
        "stage A failed",
        {
            "table": f"{plan.target_database}.{plan.table}",
            "partition": plan.partition,
            "failed_step": request.failed_step,
            "error": request.error.Error,
            "cause": request.error.Cause[:2000],
            "partial_objects_deleted": deleted,
            "parked": [arrival.key for arrival in parked],
            "openlineage_events": len(emitted),
        },
        level="error",
        notes=dropped,
    )


def _with_batch(plan: StageAPlan, store: BatchReader, commits: PartitionCommits) -> StageAPlan:
    """The plan with its batch, read from its object (``StageAPlan.with_batch``). The object is kept beside the
    run's version once published and beside a live lease's run (the sweep); a run that lost it had been ended
    already (an earlier attempt, or the sweep after its lease ended), and takes nothing; ``BatchMissing`` if
    the run still holds its lease."""
    try:
        return plan.with_batch(store)
    except BatchMissing:
        lease = Lease.from_dict(plan.lease or {})
        if commits.read(lease.key).lease_owner == lease.owner:
            raise
        return replace(plan, batch_read=True)


def _applied_arrivals(plan: StageAPlan) -> list[Arrival]:
    """The arrivals a failed run took (those it added to its lease), to park."""
    assert plan.lease is not None
    return [a for a in plan.arrivals if arrival_id(a.key, a.sequencer) in plan.applied]


def _park(arrivals: list[Arrival], reason: str, run: FailureRuntime) -> None:
    """Park ``arrivals`` in queue A's DLQ with ``reason`` (``lakeline dlq`` lists them, a redrive sends them back)."""
    for arrival in arrivals:
        dead_letter(run.sqs, run.dead_letter_queue_url, json.dumps(arrival_event(arrival)), reason, "stage-a-failure")


def _park_published(plan: StageAPlan, request: StageAFailure, reason: str, run: FailureRuntime) -> Ended:
    """After a failed post-update: the run is published, so nothing is deleted. End its lease as the
    post-update does, unless it ended it already (``after_failed_post_update``), once where the run sits in
    the lineage records is noted (``note_lineage``); park every arrival the run took, then write its lineage
    records and COMPLETE events (the same nodes and events the post-update writes)."""
    follow_up = None
    if plan.writes:
        # Noted before the lease ends (the ids are known without writing anything): the run that routes the
        # version again hangs its targets under this one.
        note_lineage(run.runs.commits, plan.lease, plan.target_location, stage_a_parents(plan))
    if plan.lease is not None:
        settled = run.runs.after_failed_post_update(plan.lease, wrote=plan.writes, root=plan.stage_partition_root)
        follow_up = settled.follow_up
        parked = plan.arrivals  # its batch: what waits beyond it is the follow-up run's
    else:
        parked = [Arrival.model_validate(request.arrival)] if request.arrival is not None else []
    _park(parked, reason, run)
    emitted: list[dict[str, Any]] = []
    if plan.writes:  # last: what made the post-update fail may be the lineage queue itself
        record_stage_a(run.lineage, plan, execution=run.events.stage_a_execution(plan))
        report = published_report(plan.quality, plan.writes, run.store, plan.target_location)
        emitted = run.events.stage_a(plan, "COMPLETE", report=report)
    return Ended(
        {
            "failed_step": request.failed_step,
            "error": request.error.Error,
            "cause": request.error.Cause,
            "partial_objects_deleted": 0,
            "parked": [arrival.key for arrival in parked],
            "openlineage_events": len(emitted),
        },
        "stage A post-update failed after the publish; its arrivals are parked for a redrive",
        {
            "table": f"{plan.target_database}.{plan.table}",
            "partition": plan.partition,
            "error": request.error.Error,
            "cause": request.error.Cause[:2000],
            "parked": [arrival.key for arrival in parked],
            "follow_up": follow_up.owner if follow_up else None,
        },
        level="error",
    )
