"""A stage B target partition on moto, driven through the real router, planning and commit code, every run
taken to its end as the deployed state machine ends it (commit, then the lease's hand-over, whose follow-up the
router plans and starts), until nothing waits.

Follow-ups go to a follow-up queue of their own, as deployed (``STAGE_B_FOLLOW_UP_QUEUE_URL``), which the router
reads too; both park in queue B's DLQ. A record the router sends back to wait (``DelaySeconds``) comes back when
the test lets a run's time pass (``TargetCloud.advance``): moto's delays are in real seconds.

What moto cannot do is the SQL: its Athena returns canned results. Each run's prefix gets the files its CTAS
would write (``FILES_PER_RUN``, named as Athena names a bucketed CTAS's files), so that an append's commit records
them as its contribution's, as it does in AWS.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from harness.faults import (
    REGION,
    LambdaSqsSource,
    create_pass_state_machine,
    create_queue_with_dead_letters,
    send_bodies,
)
from lakeline.commits import Lease, PartitionCommits, PartitionState
from lakeline.commits.slots import RunSlots
from lakeline.dependencies.model import parse_dependency_item
from lakeline.dependencies.store import DependencyStore
from lakeline.dependencies.sync import backfill
from lakeline.dependencies.tables import DependencyTableNames, create_dependency_tables
from lakeline.partitions import LeasedRunEnd, commit_write, new_run_token, run_location
from lakeline.storage import S3ObjectStore
from stage_b.messages import StageBMessage
from stage_b.plan import StageBPlan

ANALYTICS_BUCKET = "lakeline-analytics-123456789012-eu-central-1-production"  # 55 characters
DATABASE = "retail_analytics_reporting_dev"
TARGET = f"{DATABASE}.yearly_store_takings_by_hour"
SOURCE = "retail_point_of_sale_transactions_dev.store_sales_lines"
YEAR = "2024"
FILES_PER_RUN = 4  # the target's bucket_count
ROUTER_BATCH = 10
RUN_SECONDS = 120  # a run's time, as the router's first wait for a full partition assumes (lambdas/router.py)
ACCOUNT = "123456789012"  # moto's default account
START = datetime(2024, 1, 1, tzinfo=UTC)  # the source's first hour


def source_hour(index: int) -> dict[str, str]:
    """The ``index``-th hourly partition of the source (1,200 span 50 days)."""
    moment = START + timedelta(hours=index)
    return {"date": f"{moment:%Y%m%d}", "hour": f"{moment:%H}"}


def message(source: int, version: int, usage: str = "append") -> StageBMessage:
    """Version ``version`` of source partition ``source`` (a late file loads it again), for the target's year
    (``usage``: the target's, as the router copies it from the dependency)."""
    return StageBMessage.model_validate(
        {
            "target_dataset": TARGET,
            "partition": {"year": YEAR},
            "trigger": {
                "table": SOURCE,
                "partition": source_hour(source),
                "run": new_run_token(START + timedelta(hours=source, minutes=version), unique=f"{source}-{version}"),
            },
            "usage": usage,
            "lineage": {"root_id": f"{source:016x}{version:016x}", "parent_id": f"{version:016x}{source:016x}"},
            "path": [f"{SOURCE}/date={source_hour(source)['date']}/hour={source_hour(source)['hour']}"],
        }
    )


def run_files(run_token: str) -> list[str]:
    """The files a run's CTAS writes: Athena names a bucketed CTAS's files ``<query id>_bucket-<n>``."""
    query = f"{run_token[:8]}_{run_token[9:15]}_{int(run_token[-10:], 16) % 100_000:05d}_{run_token[-5:]}"
    return [f"{query}_bucket-{bucket:05d}" for bucket in range(FILES_PER_RUN)]


def message_bytes(record: dict[str, Any]) -> int:
    """An SQS message's size as SQS counts it against its quota: the body and every attribute's name, type and
    value."""
    attributes = record.get("messageAttributes") or {}
    # Lambda spells an attribute's fields ``dataType``/``stringValue``; the local poller passes SQS's spelling on.
    return len(record["body"].encode()) + sum(
        len(name.encode()) + sum(len(str(part).encode()) for part in value.values())
        for name, value in attributes.items()
    )


def dependency_item(usage: str) -> dict[str, Any]:
    return {
        "dataset": TARGET,
        "dependencies": [
            {
                "TableName": SOURCE,
                "FieldColumn": "date",
                "Usage": usage,
                "DateExpression": "%Y%m%d",
                "relativedelta_attributes": {"days": 0},
            }
        ],
        "partitionColumn": "year",
        "partitionPythonMask": "%Y",
        "steps": [
            {
                "db": DATABASE,
                "sql": f"INSERT INTO {TARGET} SELECT store, hour, sum(amount), '$year' FROM {SOURCE} "
                "WHERE date LIKE '$year%' GROUP BY store, hour",
                "info": "takings by store and hour",
            }
        ],
        "date_substitutions": [{"token": "$year", "format": "%Y", "relativedelta_attributes": {"days": 0}}],
    }


@dataclass
class TargetCloud:
    """The target partition's cloud on moto, and every run's input size and plan, in order."""

    sqs: Any
    sfn: Any
    queue_url: str
    machine_arn: str
    commits: PartitionCommits
    store: S3ObjectStore
    router: LambdaSqsSource
    follow_up_url: str
    follow_ups: LambdaSqsSource
    dead_letters_url: str
    plans: list[StageBPlan] = field(default_factory=list)
    input_bytes: list[int] = field(default_factory=list)
    body_bytes: list[int] = field(default_factory=list)
    """The size of every SQS message the router was given, from either queue (sent backs and follow-ups too)."""
    held_back: list[StageBMessage] = field(default_factory=list)
    """Messages recorded with ``wait`` that the partition's item had no room for: offered again each round."""
    _seen: set[str] = field(default_factory=set)

    def wait(self, messages: list[StageBMessage], *, per_call: int = 100) -> None:
        """Record messages as waiting behind the run that holds their partition, with the call the router makes
        for each (``PartitionCommits.begin`` of its body), many at a time: 2,000 router invocations on moto take
        minutes, and a test may send only part of a backlog through queue B. Those the item has no room for
        (``PartitionFull``) are held back, as the router sends them back to wait in queue B, and offered again
        each round of ``run_to_the_end``."""
        from lakeline.commits import PartitionFull
        from stage_b.start import message_commit_key, message_run_token

        state = self.state()
        assert state.root is not None
        left = [*self.held_back, *messages]
        self.held_back = []
        for start in range(0, len(left), per_call):
            chunk = left[start : start + per_call]
            token = message_run_token(chunk[0])
            key, location = message_commit_key(chunk[0]), run_location(state.root, token)
            try:
                lease = self.commits.begin(key, token, location, state.root, [m.model_dump_json() for m in chunk])
            except PartitionFull:
                # One at a time, as the router records them, until one is refused: the rest would be too.
                for offset, waiting in enumerate(chunk):
                    try:
                        lease = self.commits.begin(key, token, location, state.root, [waiting.model_dump_json()])
                    except PartitionFull:
                        self.held_back = left[start + offset :]
                        return
                    assert lease is None, "a run holds the partition: the messages wait"
                continue
            assert lease is None, "a run holds the partition: the messages wait"

    def send(self, messages: list[StageBMessage]) -> None:
        send_bodies(self.sqs, self.queue_url, [m.model_dump_json() for m in messages])
        self.drain()

    def drain(self) -> None:
        """Both queues, until neither has a message to deliver (records sent back to wait stay delayed)."""
        from lambdas.stage_b_router import handler as router

        def measured(event: dict[str, Any], context: Any) -> Any:
            self.body_bytes.extend(message_bytes(record) for record in event["Records"])
            return router.handler(event, context)

        while True:
            reports = [source.run_until_empty(measured, max_invocations=10_000) for source in self.sources]
            for report in reports:
                assert report.reported_failures == 0 and report.errors == 0, report
            if not any(report.messages for report in reports):
                return

    @property
    def sources(self) -> tuple[LambdaSqsSource, LambdaSqsSource]:
        return self.router, self.follow_ups

    def delayed(self) -> int:
        """Records sent back to wait whose delay has not passed yet, in either queue."""
        return sum(
            int(
                self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesDelayed"])[
                    "Attributes"
                ]["ApproximateNumberOfMessagesDelayed"]
            )
            for url in (self.queue_url, self.follow_up_url)
        )

    def advance(self, seconds: int) -> None:
        """``seconds`` pass for the records waiting out a delay in either queue (only for them: moto's SQS has no
        clock of its own to move)."""
        from moto.sqs.models import sqs_backends

        backend: Any = sqs_backends[ACCOUNT][REGION]  # moto's models, untyped where this reads them
        for url in (self.queue_url, self.follow_up_url):
            for sent in list(backend.get_queue(url.rsplit("/", 1)[-1])._messages):
                sent.delayed_until -= seconds * 1_000

    def started(self) -> list[dict[str, Any]]:
        paginator = self.sfn.get_paginator("list_executions")
        executions = [e for page in paginator.paginate(stateMachineArn=self.machine_arn) for e in page["executions"]]
        new = sorted((e for e in executions if e["executionArn"] not in self._seen), key=lambda e: e["startDate"])
        self._seen.update(e["executionArn"] for e in new)
        return new

    def take(self, execution: dict[str, Any]) -> StageBPlan:
        """An execution's plan, read from its input as Step Functions holds it (its size noted)."""
        text = self.sfn.describe_execution(executionArn=execution["executionArn"])["input"]
        plan = StageBPlan.from_dict(json.loads(text)["plan"])
        assert plan.lease is not None
        self.plans.append(plan)
        self.input_bytes.append(len(text.encode()))
        return plan

    def end(self, execution: dict[str, Any]) -> None:
        """The execution's SQL writes its files, its commit function commits them, its post-update hands over."""
        self.finish(self.take(execution))

    def finish(self, plan: StageBPlan, *, hand_over: bool = True) -> None:
        """A taken run's end; ``hand_over=False``: it dies after its commit, before its post-update ends its lease."""
        assert plan.lease is not None
        if plan.writes:
            for name in run_files(plan.run_token):
                self.store.write_text(f"{plan.target_location}{name}", "store,hour,takings\n")
            commit_write(
                self.commits,
                Lease.from_dict(plan.lease),
                self.store,
                carry_from=plan.carry_from,
                applied=plan.applied,
                contribution=plan.contribution,
                replaces=plan.replaces,
            )
        if not hand_over:
            return
        slots = RunSlots(self.commits.client, self.commits.table_name, "b")
        ended = LeasedRunEnd(self.commits, self.store, self.sqs, self.follow_up_url, slots=slots)
        ended.after_publish(plan.lease, wrote=plan.writes, root=plan.partition_root)

    def run_to_the_end(self, max_runs: int = 1_000) -> None:
        """End every started run, a run's time passing each round, until no run starts and nothing waits out a
        delay."""
        for _ in range(max_runs):
            started = self.started()
            if not started and not self.delayed():
                assert not self.held_back, f"{len(self.held_back)} messages wait with no run to take them"
                return
            if started and self.held_back:
                self.wait([])
            for execution in started:
                self.end(execution)
            self.advance(RUN_SECONDS)
            self.drain()
        raise AssertionError(f"runs still starting after {max_runs}")

    def state(self) -> PartitionState:
        (state,) = self.commits.partitions()
        return state


@contextmanager
def target_cloud(monkeypatch: pytest.MonkeyPatch, usage: str = "append") -> Iterator[TargetCloud]:
    """Queue B, the stage B router, the dependency item (its dependency's ``usage``), the target's table and the
    pipeline-state table on moto."""
    from lambdas.stage_b_router import handler as router

    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        queue, dead_letters = create_queue_with_dead_letters(sqs, "queue-b")
        # Its follow-up queue shares its DLQ, as deployed.
        redrive = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["RedrivePolicy"])["Attributes"]
        follow_up = sqs.create_queue(QueueName="queue-b-follow-up", Attributes=redrive)["QueueUrl"]
        sfn = boto3.client("stepfunctions", region_name=REGION)
        machine = create_pass_state_machine(sfn, "stage-b")
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        names = DependencyTableNames()
        create_dependency_tables(dynamodb, names)
        dependencies = DependencyStore(dynamodb)
        dependencies.put_items([parse_dependency_item(dependency_item(usage))])
        backfill(dependencies)
        glue = boto3.client("glue", region_name=REGION)
        glue.create_database(DatabaseInput={"Name": DATABASE})
        glue.create_table(
            DatabaseName=DATABASE,
            TableInput={
                "Name": TARGET.split(".")[1],
                "StorageDescriptor": {
                    "Columns": [
                        {"Name": "store", "Type": "string"},
                        {"Name": "hour", "Type": "string"},
                        {"Name": "takings", "Type": "double"},
                    ],
                    "Location": f"s3://{ANALYTICS_BUCKET}/reporting/{TARGET.split('.')[1]}/",
                },
                "PartitionKeys": [{"Name": "year", "Type": "string"}],
            },
        )
        s3 = boto3.client("s3", region_name=REGION)
        for bucket in (ANALYTICS_BUCKET, "artifacts-bucket"):
            s3.create_bucket(Bucket=bucket)
        for name, value in {
            "STATE_MACHINE_ARN": machine,
            "DEAD_LETTER_QUEUE_URL": dead_letters,
            "DEPENDENCIES_TABLE": names.dependencies,
            "DEPENDENCIES_BY_TABLE_TABLE": names.by_table,
            "PIPELINE_STATE_TABLE": names.pipeline_state,
            "STAGE_B_QUEUE_URL": queue,
            "STAGE_B_FOLLOW_UP_QUEUE_URL": follow_up,
            "STAGE_A_FOLLOW_UP_QUEUE_URL": follow_up,  # only the stranded sweep reads it; no stage A partition here
            "STAGE_B_DEAD_LETTER_QUEUE_URL": dead_letters,
            "ARTIFACTS_BUCKET": "artifacts-bucket",
            "STAGE_BUCKET": "stage-bucket",
            "PIPELINE_ENVIRONMENT": "dev",
            # Runs here end only when the test ends them (the bound on runs in flight is tested on its own).
            "RUNS_IN_FLIGHT": "1000",
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_METRICS_NAMESPACE": "Lakeline",
        }.items():
            monkeypatch.setenv(name, value)
        router.runtime.cache_clear()
        store = S3ObjectStore(s3)
        try:
            yield TargetCloud(
                sqs,
                sfn,
                queue,
                machine,
                PartitionCommits(dynamodb, names.pipeline_state, lists=store),
                store,
                LambdaSqsSource(sqs, queue, "stage-b-router", batch_size=ROUTER_BATCH),
                follow_up,
                LambdaSqsSource(sqs, follow_up, "stage-b-router", batch_size=ROUTER_BATCH),
                dead_letters,
            )
        finally:
            router.runtime.cache_clear()
