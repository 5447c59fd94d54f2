"""Queue A → stage A: one state machine execution per partition run.

An arrival takes its partition's lease and starts a run, or, while another run holds the partition,
waits in the partition's state for that run's follow-up (which the run's post-update function queues
here as a follow-up message). An arrival whose key or file breaks its table's contract
(``stage_a.contract``: the file is read here, before anything else) can never succeed: it goes
straight to the DLQ with its reason and no SQL is planned. A CSV file whose columns are in another
order than its table's, or a JSON file whose keys are spelled in another case, is loaded through a copy
in the table's order and spelling, which the router writes next to it (``stage_a.by_name``) and whose
own S3 event brings it back here. Other failures (catalog or Step Functions errors) fail only their
own record, which SQS redelivers and finally dead-letters.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from lakeline.aws.sqs import dead_letter
from lakeline.commits import PartitionFull, parse_follow_up
from lakeline.commits.slots import NoRunSlot
from lakeline.errors import InvalidInputError
from lakeline.lambda_support import load_environment
from lakeline.storage import S3ObjectStore
from lambdas.environments import StageARouterEnvironment
from lambdas.router import RouterRuntime, router_runtime, send_back, send_back_to_wait, times_waited
from stage_a.arrivals import parse_arrivals
from stage_a.raw_files import S3RawFiles
from stage_a.start import follow_up_wait, plan_follow_up, start_plan, start_stage_a

logger = Logger(service="stage-a-router")
tracer = Tracer(service="stage-a-router")
metrics = Metrics(namespace="Lakeline", service="stage-a-router")
processor = BatchProcessor(event_type=EventType.SQS)


@dataclass(frozen=True)
class Runtime(RouterRuntime[StageARouterEnvironment]):
    raw_files: S3RawFiles
    manifests: S3ObjectStore  # where a compaction's plan writes its manifest (stage_a.manifest)


@cache
def runtime() -> Runtime:
    shared = router_runtime(load_environment(StageARouterEnvironment, os.environ), "a")
    parts = {part.name: getattr(shared, part.name) for part in fields(shared)}
    return Runtime(**parts, raw_files=S3RawFiles(shared.aws.s3), manifests=S3ObjectStore(shared.aws.s3))


RECORD_BUDGET_MS = 45_000
"""The most one record may take: its file's door check and a copy by name of up to 64 MB (``stage_a.by_name``).
A record reached with less of the invocation left is sent back to queue A (``defer``) rather than started and
cut off by the function's timeout, which would fail the whole batch and, after a few such receives, park good
arrivals in the DLQ with no reason (#39)."""


def lost_batch(run: Runtime, record: SQSRecord) -> Callable[[str], None]:
    """Where a batch found gone is reported: logged, and the record that found it parked in queue A's DLQ with the
    reason, where ``lakeline dlq`` lists it (#39)."""

    def report(reason: str) -> None:
        logger.error("a taken batch is gone", extra={"reason": reason})
        dead_letter(run.sqs, run.environment.dead_letter_queue_url, record.body, reason, "stage-a-router")
        metrics.add_metric(name="LostBatches", unit=MetricUnit.Count, value=1)

    return report


def handle_record(record: SQSRecord, lambda_context: LambdaContext | None = None) -> None:
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
    if lambda_context is not None and lambda_context.get_remaining_time_in_millis() < RECORD_BUDGET_MS:
        defer(run, record, queue_url)
        return
    if follow_up is not None:
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
        return
    for arrival in arrivals:
        try:
            started = start_stage_a(
                arrival,
                run.settings,
                run.catalog,
                run.commits,
                run.raw_files,
                run.sfn,
                run.environment.state_machine_arn,
                run.manifests,
                run.slots,
                lost_batch(run, record),
            )
        except (NoRunSlot, PartitionFull) as waiting:
            wait_in_queue(run, record, waiting, queue_url)
            return  # the record's other arrivals come back with it
        except InvalidInputError as error:
            logger.warning("arrival rejected", extra={"key": arrival.key, "reason": str(error)})
            dead_letter(run.sqs, run.environment.dead_letter_queue_url, record.body, str(error), "stage-a-router")
            metrics.add_metric(name="RejectedArrivals", unit=MetricUnit.Count, value=1)
            continue
        if started.by_name is not None:
            copy = started.by_name
            logger.info(
                "arrival read by name: its copy in the table's column order is loaded instead",
                extra={"key": arrival.key, "copy": copy.copy_key, "written": copy.written, "reason": copy.reason},
            )
            metrics.add_metric(name="ReadByNameArrivals", unit=MetricUnit.Count, value=1)
            continue
        if started.plan is None:
            logger.info("arrival waits for the partition's run in flight", extra={"key": arrival.key})
            metrics.add_metric(name="CoalescedArrivals", unit=MetricUnit.Count, value=1)
            continue
        logger.info(
            "stage A started",
            extra={"key": arrival.key, "execution": started.execution_name, "duplicate": started.duplicate},
        )
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
    return process_partial_response(event=event, record_handler=handle_record, processor=processor, context=context)
