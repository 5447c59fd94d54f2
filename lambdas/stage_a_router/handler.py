"""Queue A → stage A: one state machine execution per partition run.

An arrival takes its partition's lease and starts a run, or, while another run holds the partition, waits in
the partition's state for that run's follow-up (which the run's post-update function queues here as a
follow-up message). A batch is taken in two passes: every record's arrivals enter their partitions first, then
the runs they leased are planned and started, so that the files of one partition in one batch (queue A's
batching window gathers a burst's) make one run rather than a run and a follow-up. An arrival whose key or
file breaks its table's contract (``stage_a.contract``: the file is read here, before anything else) can never
succeed: it goes straight to the DLQ with its reason and no SQL is planned. A CSV file whose columns are in
another order than its table's, or a JSON file whose keys are spelled in another case, is loaded through a
copy in the table's order and spelling, which the router writes next to it (``stage_a.by_name``) and whose own
S3 event brings it back here. Other failures (catalog or Step Functions errors) fail only their own record,
which SQS redelivers and finally dead-letters.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from lakeline.aws.sqs import dead_letter
from lakeline.commits import Lease, PartitionFull, parse_follow_up
from lakeline.commits.slots import NoRunSlot
from lakeline.errors import InvalidInputError
from lakeline.lambda_support import load_environment
from lakeline.storage import S3ObjectStore
from lambdas.environments import StageARouterEnvironment
from lambdas.observability import observability
from lambdas.router import RouterRuntime, router_runtime, send_back, send_back_to_wait, times_waited
from stage_a.arrivals import parse_arrivals
from stage_a.raw_files import S3RawFiles
from stage_a.start import (
    EnteredArrival,
    ReadByName,
    WaitingArrival,
    enter_arrival,
    follow_up_wait,
    plan_follow_up,
    start_entered,
    start_plan,
)

logger, tracer, metrics = observability("stage-a-router")
# Two passes over each batch (``handler``); the batch fails whole only if every record failed in either.
entering = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
starting = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


@dataclass(frozen=True)
class Runtime(RouterRuntime[StageARouterEnvironment]):
    raw_files: S3RawFiles
    manifests: S3ObjectStore  # where a compaction's plan writes its manifest (stage_a.manifest)


@cache
def runtime() -> Runtime:
    shared = router_runtime(load_environment(StageARouterEnvironment, os.environ), "a")
    parts = {part.name: getattr(shared, part.name) for part in fields(shared)}
    return Runtime(**parts, raw_files=S3RawFiles(shared.aws.s3), manifests=S3ObjectStore(shared.aws.s3))


SMALL_RECORD_BYTES = 8 * 1024 * 1024
SMALL_RECORD_BUDGET_MS = 10_000
"""The most a record of small files (each at most ``SMALL_RECORD_BYTES``, as its S3 event says) may take."""
RECORD_BUDGET_MS = 45_000
"""The most one record may take: its file's door check and a copy by name of up to 64 MB (``stage_a.by_name``).
A record reached with less of the invocation left is sent back to queue A (``defer``) rather than started and
cut off by the function's timeout, which would fail the whole batch and, after a few such receives, park good
arrivals in the DLQ with no reason (#39)."""
START_BUDGET_MS = 3_000
"""Kept for each run the batch's arrivals have leased so far, and for the run the next record may lease: planning it
(its lease read again, its batch taken, its manifest written) and starting its execution, once every record has
entered (a few requests, well under a second unless throttled). A record that would leave less is sent back
(``defer``): a batch of small files leases up to its ten records' runs, one of large files four, and a burst into
one partition enters whole. A run reached with less left is not started: its record goes back to queue A, and its
copy enters again and starts it (its run token is fixed by the arrival)."""


@dataclass
class EnteredRecord:
    """What a record's arrivals left to do once the whole batch has entered: the runs they leased, to be planned
    and started (``start_entered``). ``sent_back``: the record went back to its queue to wait (its copy enters its
    arrivals again), so a run of it that finds no slot does not send it back a second time."""

    arrivals: list[EnteredArrival] = field(default_factory=list)
    sent_back: bool = False


@dataclass
class EnteredBatch:
    records: dict[str, EnteredRecord] = field(default_factory=dict)
    waiting: set[str] = field(default_factory=set)
    """The partitions in which arrivals of the batch wait: a run leased in one of them takes them."""


def lost_batch(run: Runtime, record: SQSRecord) -> Callable[[str], None]:
    """Where a batch found gone is reported: logged, and the record that found it parked in queue A's DLQ with the
    reason, where ``lakeline dlq`` lists it (#39)."""

    def report(reason: str) -> None:
        logger.error("a taken batch is gone", extra={"reason": reason})
        dead_letter(run.sqs, run.environment.dead_letter_queue_url, record.body, reason, "stage-a-router")
        metrics.add_metric(name="LostBatches", unit=MetricUnit.Count, value=1)

    return report


def enter_record(record: SQSRecord, lambda_context: LambdaContext | None, entered: EnteredBatch) -> None:
    """A record's first pass: its arrivals through the door and into their partitions' states (the runs they lease
    noted in ``entered``, started by ``start_record`` once every record of the batch has entered, so that two files
    of one partition in one batch make one run, not a run and its follow-up); or its follow-up started."""
    run = runtime()
    try:
        body = json.loads(record.body)
        follow_up = parse_follow_up(body)
        arrivals = [] if follow_up is not None else parse_arrivals(body)
    except ValueError as error:  # not JSON, or not an arrival: InvalidInputError is a ValueError
        reason = f"not an S3 arrival: {error}"
        logger.warning(reason, extra={"message_id": record.message_id})
        dead_letter(run.sqs, run.environment.dead_letter_queue_url, record.body, reason, "stage-a-router")
        metrics.add_metric(name="RejectedArrivals", unit=MetricUnit.Count, value=1)
        return
    # A follow-up waits on the follow-up queue, apart from the arrivals a burst left in queue A: there it is
    # started as soon as a slot is free instead of behind the whole backlog, holding the slot its run handed it.
    queue_url = run.environment.stage_a_follow_up_queue_url if follow_up else run.environment.stage_a_queue_url
    small = bool(arrivals) and all(
        arrival.size is not None and arrival.size <= SMALL_RECORD_BYTES for arrival in arrivals
    )
    leased = sum(len(one.arrivals) for one in entered.records.values())
    if lambda_context is not None and lambda_context.get_remaining_time_in_millis() < (
        (SMALL_RECORD_BUDGET_MS if small else RECORD_BUDGET_MS) + START_BUDGET_MS * (leased + 1)
    ):
        defer(run, record, queue_url)
        return
    if follow_up is not None:
        start_follow_up(run, record, follow_up, queue_url)
        return
    mine = entered.records.setdefault(record.message_id, EnteredRecord())
    for arrival in arrivals:
        try:
            outcome = enter_arrival(arrival, run.settings, run.catalog, run.commits, run.raw_files)
        except PartitionFull as waiting:
            mine.sent_back = True
            wait_in_queue(run, record, waiting, queue_url)
            return  # the record's other arrivals come back with it
        except InvalidInputError as error:
            logger.warning("arrival rejected", extra={"key": arrival.key, "reason": str(error)})
            dead_letter(run.sqs, run.environment.dead_letter_queue_url, record.body, str(error), "stage-a-router")
            metrics.add_metric(name="RejectedArrivals", unit=MetricUnit.Count, value=1)
            continue
        except Exception:
            mine.sent_back = True  # it fails: SQS receives it again, so the second pass sends no copy of it
            raise
        if isinstance(outcome, ReadByName):
            logger.info(
                "arrival read by name: its copy in the table's column order is loaded instead",
                extra={
                    "key": arrival.key,
                    "copy": outcome.copy_key,
                    "written": outcome.written,
                    "reason": outcome.reason,
                },
            )
            metrics.add_metric(name="ReadByNameArrivals", unit=MetricUnit.Count, value=1)
        elif isinstance(outcome, WaitingArrival):
            entered.waiting.add(outcome.partition)
            logger.info("arrival waits for the partition's run in flight", extra={"key": arrival.key})
            metrics.add_metric(name="CoalescedArrivals", unit=MetricUnit.Count, value=1)
        else:
            mine.arrivals.append(outcome)


def start_record(record: SQSRecord, lambda_context: LambdaContext | None, batch: EnteredBatch) -> None:
    """A record's second pass: the runs its arrivals leased planned (each takes what waits in its partition then,
    the batch's other arrivals of it included) and started."""
    run = runtime()
    entered = batch.records[record.message_id]
    for one in entered.arrivals:
        if lambda_context is not None and lambda_context.get_remaining_time_in_millis() < START_BUDGET_MS:
            if not entered.sent_back:
                entered.sent_back = True
                defer(run, record, run.environment.stage_a_queue_url)
            return
        try:
            started = start_entered(
                one,
                run.settings,
                run.catalog,
                run.commits,
                run.sfn,
                run.environment.state_machine_arn,
                run.manifests,
                run.slots,
                lost_batch(run, record),
                others_waiting=one.lease.key in batch.waiting,
            )
        except NoRunSlot as busy:
            if not entered.sent_back:
                entered.sent_back = True
                wait_in_queue(run, record, busy, run.environment.stage_a_queue_url)
            return  # the record's copy enters its arrivals again and starts their runs
        if started.plan is None:
            logger.info("arrival's run found nothing to take", extra={"key": one.arrival.key})
            continue
        logger.info(
            "stage A started",
            extra={
                "key": one.arrival.key,
                "execution": started.execution_name,
                "duplicate": started.duplicate,
                "arrivals": started.plan.batch.count if started.plan.batch else None,
            },
        )
        metrics.add_metric(name="StartedRuns", unit=MetricUnit.Count, value=0 if started.duplicate else 1)


def start_follow_up(run: Runtime, record: SQSRecord, follow_up: Lease, queue_url: str) -> None:
    waited = times_waited(record)
    window = follow_up_wait(follow_up, waited, run.commits, run.environment.follow_up_window_seconds)
    if window:
        # Its partition's arrivals still come: it waits another window, holding its lease and its slot.
        send_back(run.sqs, queue_url, record.body, delay_seconds=window, waited=waited + 1)
        logger.info("follow-up waits for more of its partition's arrivals", extra={"run": follow_up.owner})
        metrics.add_metric(name="FollowUpWindows", unit=MetricUnit.Count, value=1)
        return
    try:  # no run slot, at the plan (which takes its batch once it holds one) or at the start: it waits
        plan = plan_follow_up(
            follow_up, run.settings, run.catalog, run.commits, run.manifests, lost_batch(run, record), run.slots
        )
        if plan is None:
            run.slots.release(follow_up.owner)  # the slot its run's end handed it, if any
            logger.info("follow-up no longer holds its partition; nothing to start", extra={"run": follow_up.owner})
            return
        started = start_plan(plan, run.sfn, run.environment.state_machine_arn, slots=run.slots)
    except NoRunSlot as busy:
        wait_in_queue(run, record, busy, queue_url)
        return
    logger.info("stage A follow-up started", extra={"partition": follow_up.key, "run": follow_up.owner})
    metrics.add_metric(name="StartedRuns", unit=MetricUnit.Count, value=0 if started.duplicate else 1)


def wait_in_queue(run: Runtime, record: SQSRecord, reason: NoRunSlot | PartitionFull, queue_url: str) -> None:
    """The record goes back to its queue (``queue_url``) to wait: for a free slot (its run keeps its partition's
    lease), or for room in its partition's item, which holds as many waiting arrivals as it may."""
    delay = send_back_to_wait(run.sqs, queue_url, record, reason)
    logger.info(
        "sent back to its queue to wait", extra={"id": record.message_id, "reason": str(reason), "delay": delay}
    )
    metric = "RunsWaitingForASlot" if isinstance(reason, NoRunSlot) else "DeferredRecords"
    metrics.add_metric(name=metric, unit=MetricUnit.Count, value=1)


def defer(run: Runtime, record: SQSRecord, queue_url: str) -> None:
    """Send the record back to its queue (``queue_url``) as a new message, then let this one go: its receive count
    stays as it was, and an arrival sent twice (a crash between the two) is the same arrival, recorded once."""
    send_back(run.sqs, queue_url, record.body, waited=times_waited(record))
    logger.info("no time left for the record in this invocation: sent back", extra={"id": record.message_id})
    metrics.add_metric(name="DeferredRecords", unit=MetricUnit.Count, value=1)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    entered = EnteredBatch()

    def enter(record: SQSRecord, lambda_context: LambdaContext | None = None) -> None:
        enter_record(record, lambda_context, entered)

    def start(record: SQSRecord, lambda_context: LambdaContext | None = None) -> None:
        start_record(record, lambda_context, entered)

    response = process_partial_response(event=event, record_handler=enter, processor=entering, context=context)
    failed = [item["itemIdentifier"] for item in response.get("batchItemFailures", [])]
    errors = list(entering.exceptions)
    # A record that failed to enter one arrival still starts the runs its others leased: a lease with no run
    # would hold its partition until it expired. Its redelivery enters them again and finds them started.
    leasing = [
        record for record in event["Records"] if entered.records.get(record["messageId"], EnteredRecord()).arrivals
    ]
    if leasing:
        started = process_partial_response(
            event={"Records": leasing}, record_handler=start, processor=starting, context=context
        )
        failed += [item["itemIdentifier"] for item in started.get("batchItemFailures", [])]
        errors += starting.exceptions
    failed = list(dict.fromkeys(failed))
    if failed and len(failed) == len(event["Records"]):
        raise BatchProcessingError(msg=f"All {len(failed)} records failed processing.", child_exceptions=errors)
    return {"batchItemFailures": [{"itemIdentifier": identifier} for identifier in failed]}
