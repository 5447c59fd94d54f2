"""The end of a stage B run.

After the publish (``complete_stage_b``, the post-update task): end the run's lease (or queue the
follow-up run that takes the messages that came meanwhile), sweep superseded versions past their grace
period, record lineage (records and OpenLineage events), and route the finished partition onwards (B→B
chains). Appends are recorded as applied by the commit itself (``lambdas/partition_commit``). Every part
is idempotent.

After a failed step (``fail_stage_b``, the state machine's Catch; its temp table is already dropped): drop its
quality table (left when the quality step was killed), remove what the run wrote to its fresh prefix unless it
was committed (the partition still points at its previous version), end its lease (handing it to a follow-up
run for messages that came meanwhile), record the failure (a lineage record, and OpenLineage events: the steps
before the failed one COMPLETE, it FAIL, the later ones ABORT, when the error names the step,
``stage_b.failures``) and park the messages it took in the DLQ. A run whose lease was lost parks nothing: its
messages wait for the run that holds the partition now.

A failure of the post-update (``post_update``, after its retries) comes after the publish: nothing is
deleted and nothing abandoned. The lease is ended as the post-update ends it, the run's lineage record
and COMPLETE events are written (as the post-update writes them) and the messages it took are parked with
the reason. A redrive finds them applied: its run writes nothing and repeats the post-update, routing the
published version onwards under the run that published it (``stage_end.published.onward_run``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, Field, model_validator

from lakeline.aws.sqs import dead_letter
from lakeline.commits import Lease
from lakeline.errors import validated
from lakeline.lambda_support import StepError
from lakeline.run_order import STAGE_B, FailedStep
from stage_b.failures import StepTime, failed_query_times, failed_step_index, step_times
from stage_b.finish import abandon_stage_b
from stage_b.messages import LineageParents, StageBMessage
from stage_b.plan import StageBPlan, leased_messages
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
from stage_lineage.records import record_stage_b, record_stage_b_failure, stage_b_parents


class StageBPostUpdate(BaseModel):
    message: dict[str, Any]
    plan: dict[str, Any]
    execution_id: str = ""
    step_times: list[StepTime] | None = None
    """When each step's query ran (the Athena engine's Map keeps them; a Glue job run does not)."""


class StageBFailure(BaseModel):
    plan: dict[str, Any]
    error: StepError
    failed_step: Annotated[FailedStep, steps_of("stage B", STAGE_B.failed_steps)] = "steps"
    execution_id: str = ""
    failed_index: int | None = Field(default=None, ge=0)
    """Which of the plan's steps failed, when the error says (``stage_b.failures``); ``error`` is then the
    step's task's own."""

    @model_validator(mode="after")
    def _failed_index(self) -> StageBFailure:
        if self.failed_index is None:
            self.failed_index, self.error = failed_step_index(self.error, self.failed_step)
        return self


def complete_stage_b(request: StageBPostUpdate, run: PostUpdateRuntime) -> Ended:
    """End a published run: sweep, record its lineage, route it onwards, end its lease, in that order."""
    plan = StageBPlan.from_dict(request.plan)
    message = validated(StageBMessage, request.message, "stage B message")
    files = run.store.list_data_files(plan.target_location) if plan.writes else []
    routed_run = onward_run(plan.run_token, bool(plan.message_ids), plan.lease)
    if routed_run is None:
        superseded, follow_up = end_lease(run.runs, plan.lease, plan.partition_root, wrote=plan.writes)
        return Ended(
            {
                "dataset": message.target_dataset,
                "partition": message.partition,
                "files": 0,
                "superseded_deleted": superseded,
                "triggered": [],
                "follow_up": follow_up.owner if follow_up else None,
            },
            "stage B: nothing published, or routed already",
            {"target": message.node},
        )
    # A run whose messages were all applied already (a redelivery, or a redrive of a message parked after
    # its run's post-update failed) routes the published version again under the run that published it
    # (``onward_run``): the targets recognise what was sent before as a repeat and do not apply it again.
    execution = run.events.stage_b_execution(plan, message)
    parents: LineageParents | None
    if routed_run == plan.run_token:
        parents = record_stage_b(run.lineage, plan, message, execution=execution)
        note_lineage(run.runs.commits, plan.lease, plan.target_location, parents)
    else:
        parents = published_parents(plan.lease)  # where the publishing run sits (``note_lineage``)
    times = step_times(request.step_times)
    report = published_report(plan.quality, routed_run == plan.run_token, run.store, plan.target_location)
    events = run.events.stage_b(plan, message, "COMPLETE", step_times=times, report=report) if plan.message_ids else []
    version = onward_version(plan.run_token, routed_run, plan.lease, wrote=plan.writes)
    onward = run.routing.route(
        message.target_dataset, message.partition, run=routed_run, path=message.path, lineage=parents, version=version
    )
    note_routed(run.runs.commits, plan.lease, plan.target_location, wrote=bool(plan.message_ids))
    # The lease ends after the routing is sent and noted: a run that takes the partition next finds the
    # version routed, and a routing that fails leaves the lease to the failure path (which ends it).
    superseded, follow_up = end_lease(run.runs, plan.lease, plan.partition_root, wrote=plan.writes)
    pruned = prune_table_versions(run.table_versions, message.target_dataset, message.partition, wrote=plan.writes)
    triggered = [m.node for m in onward.messages]
    return Ended(
        {
            "dataset": message.target_dataset,
            "partition": message.partition,
            "files": len(files),
            "superseded_deleted": superseded,
            "triggered": triggered,
            "unrouted": [unrouted.describe() for unrouted in onward.unrouted],
            "openlineage_events": len(events),
            "follow_up": follow_up.owner if follow_up else None,
            "quality_warnings": warned_rules(report),
        },
        "stage B published",
        {
            "target": message.node,
            "files": len(files),
            "triggered": triggered,
            "openlineage_events": len(events),
            "follow_up": follow_up.owner if follow_up else None,
        },
        notes=[*(unrouted_note(unrouted.describe()) for unrouted in onward.unrouted), *pruned],
    )


def fail_stage_b(request: StageBFailure, run: FailureRuntime) -> Ended:
    """End a run whose ``request.failed_step`` failed: delete or keep its output, end its lease, record the
    failure and send its step events, park what it took."""
    plan = StageBPlan.from_dict(request.plan)
    message = validated(StageBMessage, plan.message, "stage B message")
    if request.failed_step == "post_update":
        return _park_published(plan, message, request, run)
    # Read before the run's prefix goes with its report: its FAIL events carry the checks' results, the metric counts
    # a blocked version.
    report = failed_run_report(plan.quality, run.store, plan.target_location)
    blocked = blocked_by_checks(request.failed_step, request.error.described(), report)
    notes = drop_quality_table(plan.quality, run.tables)
    parked, left = [message], ""
    if plan.lease is not None:
        ended = run.runs.after_failure(plan.lease, failed_step=request.failed_step, root=plan.partition_root)
        parked = _applied_messages(plan) if ended.held else []
        deleted, left = ended.deleted, ended.left
    else:
        deleted, left = abandon_stage_b(plan, run.store) if request.failed_step == "steps" else (0, "")
    execution = run.events.stage_b_execution(plan, message)
    record_stage_b_failure(run.lineage, plan, message, execution=execution, blocked=blocked)
    reason = f"{request.failed_step} failed: {request.error.described()}" + (f"; {left}" if left else "")
    # The steps before the failed one COMPLETE, it FAILs, the later ones ABORT (never ran); the run FAILs.
    failed_index = request.failed_index
    if failed_index is not None and failed_index >= len(plan.steps):
        notes.append(("warning", "the failed step's index is not one of the plan's steps", {"index": failed_index}))
        failed_index = None  # then no step events, rather than a FAIL for a step that may not have run
    # Of the steps only the failed one's times are known (its query's, in the cause); the others are
    # dated by the replay, in order.
    times: list[tuple[datetime, datetime] | None] | None = None
    if failed_index is not None and (failed_times := failed_query_times(request.error)) is not None:
        times = [None] * failed_index + [failed_times]
    events = run.events.stage_b(
        plan,
        message,
        "FAIL",
        error=reason,
        failed_step=failed_index,
        step_times=times,
        failed=request.failed_step,
        report=report,
    )
    # The run is over: park its messages in queue B's DLQ with the reason, for an operator to redrive.
    _park(parked, reason, run)
    return Ended(
        {
            "failed_step": request.failed_step,
            "error": request.error.Error,
            "partial_objects_deleted": deleted,
            "openlineage_events": len(events),
            "quality_blocked": blocked,
        },
        "stage B failed",
        {
            "target": f"{plan.dataset} {plan.partition}",
            "failed_step": request.failed_step,
            "error": request.error.Error,
            "cause": request.error.Cause[:2000],
            "partial_objects_deleted": deleted,
            "parked": len(parked),
            "openlineage_events": len(events),
        },
        level="error",
        notes=notes,
    )


def _applied_messages(plan: StageBPlan) -> list[StageBMessage]:
    """The messages a failed run applied (of those its lease took), to park."""
    assert plan.lease is not None
    return [m for m in leased_messages(Lease.from_dict(plan.lease)) if m.deduplication_id() in plan.message_ids]


def _park(messages: list[StageBMessage], reason: str, run: FailureRuntime) -> None:
    """Park ``messages`` in queue B's DLQ with ``reason`` (``lakeline dlq`` lists them, a redrive sends them back)."""
    for taken in messages:
        dead_letter(run.sqs, run.dead_letter_queue_url, taken.model_dump_json(), reason, "stage-b-failure")


def _park_published(plan: StageBPlan, message: StageBMessage, request: StageBFailure, run: FailureRuntime) -> Ended:
    """After a failed post-update: the run is published, so nothing is deleted. End its lease as the
    post-update does, unless it ended it already (``after_failed_post_update``), once where the run sits in
    the lineage records is noted (``note_lineage``); park the messages the run took, then write its lineage
    record and COMPLETE events (the same the post-update writes)."""
    reason = f"{request.failed_step} failed: {request.error.described()}"
    parked = [message]
    if plan.message_ids:
        # Noted before the lease ends (the ids are known without writing anything): the run that routes the
        # version again hangs its targets under this one.
        note_lineage(run.runs.commits, plan.lease, plan.target_location, stage_b_parents(plan, message))
    if plan.lease is not None:
        run.runs.after_failed_post_update(plan.lease, wrote=plan.writes, root=plan.partition_root)
        leased = leased_messages(Lease.from_dict(plan.lease))
        # The messages it applied; a run that applied none (a repeat) parks what it took.
        parked = [m for m in leased if m.deduplication_id() in plan.message_ids] or leased
    _park(parked, reason, run)
    events: list[dict[str, Any]] = []
    if plan.message_ids:  # last: what made the post-update fail may be the lineage queue itself
        record_stage_b(run.lineage, plan, message, execution=run.events.stage_b_execution(plan, message))
        report = published_report(plan.quality, plan.writes, run.store, plan.target_location)
        events = run.events.stage_b(plan, message, "COMPLETE", report=report)
    return Ended(
        {
            "failed_step": request.failed_step,
            "error": request.error.Error,
            "partial_objects_deleted": 0,
            "openlineage_events": len(events),
        },
        "stage B post-update failed after the publish; its messages are parked for a redrive",
        {
            "target": f"{plan.dataset} {plan.partition}",
            "error": request.error.Error,
            "cause": request.error.Cause[:2000],
            "parked": len(parked),
        },
        level="error",
    )
