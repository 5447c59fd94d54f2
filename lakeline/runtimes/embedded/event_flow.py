"""The pipeline's event flow on one machine, with the deployed handler code.

Queues, tables and streams are real (moto's server on 127.0.0.1, see ``lakeline.runtimes.embedded.cloud``); the
handlers the CDK app deploys run unchanged against them: the dependencies stream function, stage A
and stage B post-update and failure functions, the lineage load, schedule and trace functions. What
runs in the cloud as a Step Functions state machine of Athena (or Glue) tasks runs here on embedded
Spark, through the same planning and execution code (``stage_a.start``, ``stage_b.process``,
``execute_stage_a``/``execute_stage_b``).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from openlineage.client.event_v2 import RunEvent

from lakeline.aws.sqs import dead_letter
from lakeline.catalog_locations import EngineTables
from lakeline.commits import Lease, PartitionCommits, PartitionFull, parse_follow_up
from lakeline.dependencies.model import DependencyItem
from lakeline.dependencies.store import DependencyStore
from lakeline.engines.base import Column, QueryError, TableSchema
from lakeline.engines.spark import SparkEngine
from lakeline.errors import InvalidInputError, LakelineError, validated
from lakeline.lineage.openlineage.config import OpenLineageSettings
from lakeline.lineage.openlineage.emitter import LineageEmitter
from lakeline.lineage.openlineage.events import event_to_dict, now
from lakeline.lineage.openlineage.run_lifecycle import ExecutionLifecycle
from lakeline.lineage.records.archive import ARCHIVE_PREFIX, LOCAL_ARCHIVE_FOLDER, LocalArchiveStore
from lakeline.lineage.records.compact import compact_archive
from lakeline.project.catalog import ensure_tables
from lakeline.project.quarantine import Quarantine
from lakeline.project.workspace import Workspace
from lakeline.quality.evaluate import QualityReport
from lakeline.quality.gate import QualityGate
from lakeline.run_order import STAGE_A, STAGE_B, FailedStep, run_in_order
from lakeline.runtimes.embedded.cloud import ARCHIVE_BUCKET, MAX_RECEIVE_COUNT, LocalCloud
from lakeline.runtimes.embedded.full_disk import DiskFull, full_disk
from lakeline.runtimes.embedded.lambda_events import LambdaContext, QueuePoller, StreamPoller
from lakeline.settings import PipelineSettings
from lakeline.storage import LocalObjectStore
from stage_a.arrivals import parse_arrivals
from stage_a.finish import publish_stage_a
from stage_a.keys import RawObject
from stage_a.plan import StageAPlan
from stage_a.raw_files import LocalRawFiles
from stage_a.run import execute_stage_a
from stage_a.start import ReadByName, begin_arrival, plan_follow_up
from stage_b.finish import publish_stage_b
from stage_b.messages import StageBMessage
from stage_b.plan import StageBPlan
from stage_b.process import StageBServices, plan_local_message
from stage_b.run import StageBStepFailed, execute_stage_b
from stage_b.start import begin_message
from stage_b.start import plan_follow_up as plan_follow_up_b
from stage_end.quality import QualityBlocked, report_to_dict, run_quality
from stage_end.runtime import drop_quality_table
from stage_end.waiting import queued_subject
from stage_lineage.events import stage_a_lifecycle, stage_b_lifecycle, with_results

logger = logging.getLogger(__name__)
LOCAL_RAW_BUCKET = "local-raw"
CANNOT_BE_PLANNED = ": cannot be planned: "  # in the failure of a stage B message the router refuses

Listener = Callable[[str, str], None]  # told (stage, what) as each run starts, waits, fails


@dataclass
class LiveSteps:
    """Each stage B step's START when it starts and COMPLETE or FAIL when it ends, as it happens."""

    runs: ExecutionLifecycle
    emitter: LineageEmitter

    def started(self, index: int) -> None:
        self.emitter.emit(self.runs.step_started(index))

    def finished(self, index: int, error: StageBStepFailed | None) -> None:
        self.emitter.emit(self.runs.step_finished(index, error=str(error) if error is not None else None))


@dataclass
class FlowReport:
    duplicates: list[str] = field(default_factory=list)
    coalesced: list[str] = field(default_factory=list)  # arrivals and messages that waited for a run in flight
    stage_a: list[StageAPlan] = field(default_factory=list)
    stage_b: list[StageBPlan] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)  # arrivals refused at the door, with the reason
    refused_tables: list[str] = field(default_factory=list)  # why each table not made from its first file was not
    read_by_name: list[str] = field(default_factory=list)  # CSV arrivals loaded through a copy in table order
    copies: list[str] = field(default_factory=list)  # the keys of those copies
    lineage_records: int = 0
    quality: list[dict[str, Any]] = field(default_factory=list)
    """Each quality step's report (``stage_end.quality.report_to_dict``), blocked ones too (#41)."""
    arrived: int = 0  # arrivals sent (files, and by-name copies)
    settled: int = 0  # arrivals a stage A run took (loaded, duplicate or failed), quarantined or read by name


class SparkCatalog:
    """The catalog the router consults, backed by the workspace's metastore; the first arrival of a
    table creates its raw and stage tables from the file (see ``lakeline.project.catalog``)."""

    def __init__(self, engine: SparkEngine, workspace: Workspace, settings: PipelineSettings) -> None:
        self.engine = engine
        self.workspace = workspace
        self.settings = settings

    def prepare(self, raw: RawObject) -> None:
        ensure_tables(self.engine, raw, self.workspace.raw_dir / raw.key, self.settings)

    def describe_table(self, database: str, table: str) -> TableSchema:
        return self.engine.describe_table(database, table)

    def add_columns(self, database: str, table: str, columns: tuple[Column, ...]) -> None:
        self.engine.add_columns(database, table, columns)


class EventFlow:
    def __init__(
        self,
        cloud: LocalCloud,
        engine: SparkEngine,
        workspace: Workspace,
        settings: PipelineSettings,
        queries_root: Path,
        *,
        listener: Listener | None = None,
        openlineage: OpenLineageSettings | None = None,
    ) -> None:
        from lambdas.dependencies_by_table import handler as dependencies_handler
        from lambdas.lineage_load import handler as lineage_load
        from lambdas.partition_commit import handler as partition_commit
        from lambdas.stage_a_failure import handler as stage_a_failure
        from lambdas.stage_a_post_update import handler as stage_a_post_update
        from lambdas.stage_b_failure import handler as stage_b_failure
        from lambdas.stage_b_post_update import handler as stage_b_post_update

        self.cloud = cloud
        self.engine = engine
        self.workspace = workspace
        self.settings = settings
        self.catalog = SparkCatalog(engine, workspace, settings)
        self.notify = listener or (lambda _stage, _what: None)
        self.store = DependencyStore(cloud.dynamodb, cloud.names.dependencies, cloud.names.by_table)
        self.services = StageBServices(
            engine=engine,
            store=LocalObjectStore(),
            settings=settings,
            dependencies=self.store,
            queries_root=queries_root,
        )
        self.emitter = LineageEmitter(openlineage or OpenLineageSettings())
        self.events: list[dict[str, Any]] = []
        self._events_written = 0
        self.commits = PartitionCommits(cloud.dynamodb, cloud.names.pipeline_state, lists=LocalObjectStore())
        self.raw_files = LocalRawFiles(workspace.raw_dir)
        self.quarantine = Quarantine.of(workspace.root)
        self.quarantine.prune(workspace.raw_dir)
        self.report = FlowReport()
        self.stopped: DiskFull | None = None  # the full disk that stopped the flow: nothing more runs
        sqs = cloud.sqs
        self.queue_a = QueuePoller(sqs, cloud.queue_urls["queue-a"])
        self.queue_b = QueuePoller(sqs, cloud.queue_urls["queue-b"])
        self.follow_ups_a = QueuePoller(sqs, cloud.queue_urls["queue-a-follow-ups"])
        self.follow_ups_b = QueuePoller(sqs, cloud.queue_urls["queue-b-follow-ups"])
        self.lineage_queue = QueuePoller(sqs, cloud.queue_urls["lineage"])
        self.trace_queue = QueuePoller(sqs, cloud.queue_urls["trace"])
        self.dependencies_stream = StreamPoller(cloud.streams, cloud.dependencies_stream_arn)
        self._dependencies_handler = dependencies_handler.handler
        self._lineage_load = lineage_load.handler
        self._partition_commit = partition_commit.handler
        self._stage_a_failure = stage_a_failure.handler
        self._stage_a_post_update = stage_a_post_update.handler
        self._stage_b_post_update = stage_b_post_update.handler
        self._stage_b_failure = stage_b_failure.handler

    # --- dependencies ---------------------------------------------------------------------------

    def register(self, items: Iterable[DependencyItem]) -> int:
        """``lakeline deps put``, then the stream function builds dependencies-by-table."""
        items = list(items)
        self.store.put_items(items)
        processed, failed = self.dependencies_stream.deliver(self._dependencies_handler, "dependencies-by-table")
        if failed:
            raise LakelineError(f"the dependencies stream function failed {failed} of {processed} records")
        return len(items)

    # --- arrivals ---------------------------------------------------------------------------------

    def arrive(self, key: str, digest: str | None = None) -> None:
        """The EventBridge "Object Created" event S3 would send for a file under the raw folder (its
        version: the SHA-256 of its content, ``digest`` if the caller read it already)."""
        path = self.workspace.raw_dir / key
        sequencer = (digest or hashlib.sha256(path.read_bytes()).hexdigest())[:18].upper()
        # The upload time is the file's: the same file arriving again is the same event (same run, same
        # lineage root), as a redelivery of one S3 event is.
        uploaded = datetime.fromtimestamp(path.stat().st_mtime, UTC)
        event = {
            "version": "0",
            "id": sequencer,
            "detail-type": "Object Created",
            "source": "aws.s3",
            "time": uploaded.isoformat(),
            "region": "us-east-1",
            "detail": {
                "bucket": {"name": LOCAL_RAW_BUCKET},
                "object": {"key": key, "size": path.stat().st_size, "sequencer": sequencer},
                "reason": "PutObject",
            },
        }
        self.cloud.sqs.send_message(QueueUrl=self.cloud.queue_urls["queue-a"], MessageBody=json.dumps(event))
        self.report.arrived += 1

    # --- the routers and state machines, on Spark ---------------------------------------------------
    # As deployed: the router takes the partition's lease and plans (or lets the arrival wait for the
    # run in flight); the state machine runs the SQL, then the commit function, then the catalog swap,
    # then the post-update function, which ends the lease or queues the follow-up run on the stage's
    # queue; a failure goes to the failure function, which parks what the run took in the DLQ.

    def _stage_a_record(self, record: SQSRecord) -> None:
        body = json.loads(record.body)
        follow_up = parse_follow_up(body)
        if follow_up is not None:
            resumed = plan_follow_up(follow_up, self.settings, self.catalog, self.commits)
            if resumed is not None:
                self._run_stage_a(resumed)
            return
        for arrival in parse_arrivals(body):
            try:
                self.catalog.prepare(arrival.raw)
                plan = begin_arrival(arrival, self.settings, self.catalog, self.commits, self.raw_files)
            except PartitionFull:  # as the deployed router does: it waits in the queue instead
                self.cloud.sqs.send_message(QueueUrl=self.cloud.queue_urls["queue-a"], MessageBody=record.body)
                return
            except InvalidInputError as error:
                # As the deployed router does: parked in the DLQ with its reason, never retried as is.
                dead_letter(self.cloud.sqs, self.cloud.queue_urls["queue-a-dlq"], record.body, str(error), "stage-a")
                self.quarantine.park(arrival.key, str(error))
                self.report.quarantined.append(f"{arrival.key}: {error}")
                self.report.settled += 1
                self.notify("quarantined", str(error))
                continue
            self.quarantine.release(arrival.key)
            if isinstance(plan, ReadByName):
                self.report.read_by_name.append(f"{arrival.key} as {plan.copy_key}")
                self.report.copies.append(plan.copy_key)
                self.report.settled += 1
                self.notify("by name", f"{arrival.key}: read by name; loaded as {plan.copy_key}")
                self.arrive(plan.copy_key)  # as S3 sends the copy's "Object Created" event
                continue
            if plan is None:
                self.report.coalesced.append(arrival.key)
                self.notify("waits", f"{arrival.key} (its partition's run is in flight)")
                continue
            self._run_stage_a(plan)

    def run_started(self, plan: StageAPlan) -> None:
        """Run a plan whose router's start took the lease (``stage_a.start.begin_arrival``) outside the flow,
        as its state machine would: a benchmark's burst begins every arrival while the first run is in flight."""
        self._run_stage_a(plan)

    def _run_stage_a(self, plan: StageAPlan) -> None:
        context = {"plan": plan.to_dict()}
        self.report.settled += len(plan.arrival_keys)
        what = (", ".join(plan.arrival_keys), f"{plan.target_database}.{plan.table} {plan.partition}")
        runs = None
        if plan.writes:
            self.notify("stage A", what[1])
            runs = stage_a_lifecycle(plan, catalog=self.catalog, settings=self.emitter.settings, engine="spark")
            for event in [*runs.started(), runs.step_started(0)]:
                self.emitter.emit(event)
        else:  # it routes a version whose post-update failed before, as the state machine's does
            self.report.duplicates.extend(plan.arrival_keys)
            self.notify("duplicate", f"{what[1]}: nothing new")

        checked: list[RunEvent] = []  # the checks' run, sent after the step's end as the deployed replay sends it

        def written() -> None:
            if runs is not None:
                for event in [runs.step_finished(0), *checked, *runs.finished()]:
                    self.emitter.emit(event)
                self.report.stage_a.append(plan)

        failed = run_in_order(
            STAGE_A,
            {
                "quality": lambda: self._quality(
                    plan.quality, plan.target_location, plan.carry_from, runs=runs, checked=checked
                ),
                "commit": lambda: self._partition_commit(context, LambdaContext("partition-commit")),
                "publish": lambda: publish_stage_a(plan, self.engine),
                "post_update": lambda: self._post_update(self._stage_a_post_update, context, "stage-a-post-update"),
            },
            writes=lambda entering: execute_stage_a(plan, self.engine, self.services.store, entering=entering),
            wrote=plan.writes,
            written=written,
        )
        if failed is None:
            return
        if runs is not None and failed.step.kind != "post_update":
            error = str(failed.error)
            step_error = error if failed.step.kind == "writes" else None
            for event in [runs.step_finished(0, error=step_error), *checked, *runs.finished(error=error)]:
                self.emitter.emit(event)
        self._caught(self._stage_a_failure, context, failed.step.name, failed.error, what, plan.quality)

    def _stage_b_record(self, record: SQSRecord) -> None:
        body = json.loads(record.body)
        follow_up = parse_follow_up(body)
        if follow_up is not None:
            resumed = plan_follow_up_b(follow_up, self._plan_b, self.commits)
            if resumed is not None:
                self._run_stage_b(resumed)
            return
        message = validated(StageBMessage, body, "stage B message")
        try:
            plan = begin_message(message, self._plan_b, self.commits)
        except PartitionFull:  # as the deployed router does: it waits in the queue instead
            self.cloud.sqs.send_message(QueueUrl=self.cloud.queue_urls["queue-b"], MessageBody=record.body)
            return
        except InvalidInputError as error:
            # As the deployed router does: a message that can never be planned goes to the DLQ with its
            # reason at once, and the run's summary says why.
            reason = f"{message.node}{CANNOT_BE_PLANNED}{' '.join(str(error).split())}"
            dead_letter(self.cloud.sqs, self.cloud.queue_urls["queue-b-dlq"], record.body, reason, "stage-b-router")
            self.report.failures.append(reason)
            self.notify("failed", reason)
            return
        if plan is None:
            self.report.coalesced.append(message.node)
            self.notify("waits", f"{message.node} (its partition's run is in flight)")
            return
        self._run_stage_b(plan)

    def _plan_b(self, message: StageBMessage, run_token: str, lease: Lease | None) -> StageBPlan:
        return plan_local_message(message, self.services, run_token, lease=lease)

    def _run_stage_b(self, plan: StageBPlan) -> None:
        message = StageBMessage.model_validate(plan.message)
        context = {"message": plan.message, "plan": plan.to_dict()}
        what = (message.node, message.node)
        runs = None
        if plan.message_ids:
            self.notify("stage B", message.node)
            runs = stage_b_lifecycle(
                plan, message, catalog=self.catalog, settings=self.emitter.settings, engine="spark"
            )
            for event in runs.started():
                self.emitter.emit(event)
        else:  # it routes a version whose post-update failed before, as the state machine's does
            self.report.duplicates.append(message.node)
            self.notify("duplicate", message.node)
        observer = LiveSteps(runs, self.emitter) if runs is not None else None

        checked: list[RunEvent] = []  # the checks' run, sent before the execution's end

        def written() -> None:
            if runs is not None:
                for event in [*checked, *runs.finished()]:
                    self.emitter.emit(event)
                self.report.stage_b.append(plan)

        failed = run_in_order(
            STAGE_B,
            {
                "quality": lambda: self._quality(
                    plan.quality, plan.target_location, plan.carry_from, plan.replaces, runs=runs, checked=checked
                ),
                "commit": lambda: self._partition_commit(context, LambdaContext("partition-commit")),
                "publish": lambda: publish_stage_b(plan, self.engine),
                "post_update": lambda: self._post_update(self._stage_b_post_update, context, "stage-b-post-update"),
            },
            writes=lambda entering: execute_stage_b(
                plan, self.engine, self.services.store, observer=observer, entering=entering
            ),
            wrote=bool(plan.message_ids) and plan.writes,
            written=written,
        )
        if failed is None:
            return
        if runs is not None and failed.step.kind != "post_update":
            for event in [*checked, *runs.finished(error=str(failed.error))]:  # steps that never ran are ABORTed
                self.emitter.emit(event)
        self._caught(
            self._stage_b_failure, {"plan": plan.to_dict()}, failed.step.name, failed.error, what, plan.quality
        )

    def _quality(
        self,
        gate: QualityGate | None,
        location: str,
        carry_from: str | None,
        replaces: tuple[str, ...] = (),
        *,
        runs: ExecutionLifecycle | None,
        checked: list[RunEvent],
    ) -> None:
        """The quality step, as the state machine's quality task runs it (skipped, as there, without checks); the
        checks' run's events (with their results) into ``checked``."""
        if gate is None:
            return
        started = now()
        try:
            report = run_quality(
                gate,
                target_location=location,
                engine=self.engine,
                store=self.services.store,
                carry_from=carry_from,
                replaces=replaces,
            )
        except QualityBlocked as blocked:
            self.report.quality.append(report_to_dict(blocked.report))
            checked += _checks_ran(runs, blocked.report, started, error=blocked)
            raise
        except Exception as error:  # the checks could not run: their run FAILs without results
            checked += _checks_ran(runs, None, started, error=error)
            raise
        self.report.quality.append(report_to_dict(report))
        checked += _checks_ran(runs, report, started)

    def _reported(self, record_handler: Callable[[SQSRecord], None]) -> Callable[[SQSRecord], None]:
        """A record whose handling fails returns to its queue and is tried again; on its last try the
        error goes into the report, as the message goes to the DLQ (never silently)."""

        def handle(record: SQSRecord) -> None:
            if self.stopped is not None:
                raise self.stopped  # the record stays in its queue; the run ends after this batch
            try:
                record_handler(record)
            except Exception as error:
                self._stop_if_disk_full(error)
                tries = int(record.attributes.approximate_receive_count)
                if tries >= MAX_RECEIVE_COUNT:
                    what = queued_subject(record.body)
                    self.report.failures.append(
                        f"{what}: {describe_failure(error)} (failed {tries} times; parked in the DLQ)"
                    )
                    self.notify("failed", f"{what}: {describe_failure(error)}")
                raise

        return handle

    def _caught(
        self,
        failure: Callable[[dict[str, Any], Any], Any],
        context: dict[str, Any],
        failed_step: FailedStep,
        error: Exception,
        what: tuple[str, str],
        quality: QualityGate | None,
    ) -> None:
        """As the state machine's Catch on every state after the router: the stage's failure function with
        the step that failed (it ends the lease and parks the input with its reason), and the run reported.
        The failure function drops the run's quality table from Glue; here the tables are the engine's
        metastore's, so it is dropped there as well.
        ``what``: the input as the report names it, and as the progress line does. A full disk stops the
        flow (after the failure function deleted what the run wrote): the next file would fail as well."""
        cause = {"Error": type(error).__name__, "Cause": str(error)}
        full = self.stopped or full_disk(error, self.workspace.root)
        for level, message, details in drop_quality_table(quality, EngineTables(self.engine)):
            getattr(logger, level)("%s: %s", message, details)
        try:
            failure({**context, "error": cause, "failed_step": failed_step}, LambdaContext(f"failure-{failed_step}"))
        except Exception:
            if full is None:
                raise
            # On a full disk the failure function may fail too (Derby read-only): what it could not
            # clean up, the next run undoes (``lakeline.runtimes.embedded.unsaved_runs``).
        if full is not None:
            self._stop_if_disk_full(full)
        self.report.failures.append(f"{what[0]}: {describe_failure(error)}")
        self.notify("failed", f"{what[1]}: {error}")

    def _stop_if_disk_full(self, error: BaseException) -> None:
        """Raise ``DiskFull`` (and remember it: nothing more runs) if ``error`` is a write that found the
        disk full (``lakeline.runtimes.embedded.full_disk``)."""
        full = self.stopped or full_disk(error, self.workspace.root)
        if full is not None:
            self.stopped = full
            raise full from None

    def _post_update(self, handler: Callable[[dict[str, Any], Any], Any], context: dict[str, Any], name: str) -> None:
        """Run a post-update function; the targets it could not route (parked in queue B's DLQ) are failures."""
        result = handler(context, LambdaContext(name))
        for unrouted in result.get("unrouted", []):
            self.report.failures.append(unrouted)
            self.notify("failed", unrouted)

    def _state_machine(self, record_handler: Callable[[SQSRecord], None]) -> Callable[[dict[str, Any], Any], Any]:
        record_handler = self._reported(record_handler)

        def handler(event: dict[str, Any], context: Any) -> Any:
            # A batch whose every record failed is reported like any partial failure (the messages
            # return and reach the DLQ in time), not raised: the loop goes on with the other queues.
            processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
            return process_partial_response(
                event=event, record_handler=record_handler, processor=processor, context=context
            )

        return handler

    # --- the loop ------------------------------------------------------------------------------------

    def run_until_idle(self, *, max_rounds: int = 10_000) -> FlowReport:
        stage_a = self._state_machine(self._stage_a_record)
        stage_b = self._state_machine(self._stage_b_record)
        for _ in range(max_rounds):
            moved = 0
            # Each router reads its stage's queue and its follow-up queue, as its two event source mappings do.
            for queue, handler, name in (
                (self.follow_ups_a, stage_a, "stage-a"),
                (self.queue_a, stage_a, "stage-a"),
                (self.follow_ups_b, stage_b, "stage-b"),
                (self.queue_b, stage_b, "stage-b"),
            ):
                moved += queue.deliver(handler, name)[0]
                self._raise_if_stopped()
            loaded, _ = self.lineage_queue.deliver(self._lineage_load, "lineage-load")
            self.report.lineage_records += loaded
            moved += loaded
            queues = (self.follow_ups_a, self.queue_a, self.follow_ups_b, self.queue_b, self.lineage_queue)
            if moved == 0 and not any(q.depth() for q in queues):
                break
        self.events.extend(event_to_dict(event) for event in self.emitter.drain())
        return self.report

    def _raise_if_stopped(self) -> None:
        """End the run at the batch whose record found the disk full: the queues keep the rest, unsent,
        and the pipeline state is not saved (``LocalProject.__exit__``)."""
        if self.stopped is not None:
            raise self.stopped

    # --- the nightly trace ---------------------------------------------------------------------------

    def trace(self) -> list[str]:
        """Run the nightly schedule and trace functions now, copy what they staged into the workspace's archive
        (as ``aws s3 sync`` would) and compact it there, where the archived lineage is queried (the workspace
        keeps the archive between runs; the local bucket does not). Returns the archive objects written."""
        from lambdas.lineage_schedule import handler as schedule
        from lambdas.lineage_trace import handler as trace

        schedule.handler({"source": "aws.events", "detail-type": "Scheduled Event"}, LambdaContext("lineage-schedule"))
        while self.trace_queue.deliver(trace.handler, "lineage-trace")[0]:
            pass
        local = LocalArchiveStore(self.workspace.root / LOCAL_ARCHIVE_FOLDER)
        paginator = self.cloud.s3.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=ARCHIVE_BUCKET, Prefix=ARCHIVE_PREFIX):
            for item in page.get("Contents", []):
                body = self.cloud.s3.get_object(Bucket=ARCHIVE_BUCKET, Key=item["Key"])["Body"].read()
                local.put(item["Key"].removeprefix(ARCHIVE_PREFIX), body)
                self.cloud.s3.delete_object(Bucket=ARCHIVE_BUCKET, Key=item["Key"])
        return [local.location(key) for result in compact_archive(local) for key in result.written]

    def write_openlineage(self) -> Path:
        """Append this flow's events not written yet: the file keeps every run's events, as a lineage
        backend would (a rerun that does nothing adds nothing)."""
        path = self.workspace.root / "lineage" / "openlineage.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        fresh = self.events[self._events_written :]
        with path.open("a") as output:
            output.writelines(json.dumps(event, sort_keys=True) + "\n" for event in fresh)
        self._events_written = len(self.events)
        return path


def _checks_ran(
    runs: ExecutionLifecycle | None,
    report: QualityReport | None,
    started: datetime,
    *,
    error: BaseException | None = None,
) -> list[RunEvent]:
    """The checks' run's START and end (``stage_lineage.events``), with ``report``'s results."""
    if runs is None or runs.checks is None:
        return []
    if report is not None:
        runs.checks = with_results(runs.checks, report)
    return runs.checks_ran(started, now(), error=None if error is None else f"{type(error).__name__}: {error}")


def describe_failure(error: BaseException) -> str:
    return str(error) if isinstance(error, (LakelineError, QueryError)) else repr(error)
