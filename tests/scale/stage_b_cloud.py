"""A stage B target partition on moto, driven through the real router, planning and commit code, every run
taken to its end as the deployed state machine ends it (commit, then the lease's hand-over, whose follow-up the
router plans and starts), until nothing waits.

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
from lakeline.partitions import LeasedRunEnd, commit_write, new_run_token
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
START = datetime(2024, 1, 1, tzinfo=UTC)  # the source's first hour


def source_hour(index: int) -> dict[str, str]:
    """The ``index``-th hourly partition of the source (1,200 span 50 days)."""
    moment = START + timedelta(hours=index)
    return {"date": f"{moment:%Y%m%d}", "hour": f"{moment:%H}"}


def message(source: int, version: int) -> StageBMessage:
    """Version ``version`` of source partition ``source`` (a late file loads it again), for the target's year."""
    return StageBMessage.model_validate(
        {
            "target_dataset": TARGET,
            "partition": {"year": YEAR},
            "trigger": {
                "table": SOURCE,
                "partition": source_hour(source),
                "run": new_run_token(START + timedelta(hours=source, minutes=version), unique=f"{source}-{version}"),
            },
            "usage": "append",
            "lineage": {"root_id": f"{source:016x}{version:016x}", "parent_id": f"{version:016x}{source:016x}"},
            "path": [f"{SOURCE}/date={source_hour(source)['date']}/hour={source_hour(source)['hour']}"],
        }
    )


def run_files(run_token: str) -> list[str]:
    """The files a run's CTAS writes: Athena names a bucketed CTAS's files ``<query id>_bucket-<n>``."""
    query = f"{run_token[:8]}_{run_token[9:15]}_{int(run_token[-10:], 16) % 100_000:05d}_{run_token[-5:]}"
    return [f"{query}_bucket-{bucket:05d}" for bucket in range(FILES_PER_RUN)]


def dependency_item() -> dict[str, Any]:
    return {
        "dataset": TARGET,
        "dependencies": [
            {
                "TableName": SOURCE,
                "FieldColumn": "date",
                "Usage": "append",
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
    plans: list[StageBPlan] = field(default_factory=list)
    input_bytes: list[int] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)

    def send(self, messages: list[StageBMessage]) -> None:
        send_bodies(self.sqs, self.queue_url, [m.model_dump_json() for m in messages])
        self.drain()

    def drain(self) -> None:
        from lambdas.stage_b_router import handler as router

        report = self.router.run_until_empty(router.handler, max_invocations=10_000)
        assert report.reported_failures == 0 and report.errors == 0, report

    def started(self) -> list[dict[str, Any]]:
        paginator = self.sfn.get_paginator("list_executions")
        executions = [e for page in paginator.paginate(stateMachineArn=self.machine_arn) for e in page["executions"]]
        new = sorted((e for e in executions if e["executionArn"] not in self._seen), key=lambda e: e["startDate"])
        self._seen.update(e["executionArn"] for e in new)
        return new

    def end(self, execution: dict[str, Any]) -> None:
        """The execution's SQL writes its files, its commit function commits them, its post-update hands over."""
        text = self.sfn.describe_execution(executionArn=execution["executionArn"])["input"]
        plan = StageBPlan.from_dict(json.loads(text)["plan"])
        assert plan.lease is not None
        self.plans.append(plan)
        self.input_bytes.append(len(text.encode()))
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
        slots = RunSlots(self.commits.client, self.commits.table_name, "b")
        ended = LeasedRunEnd(self.commits, self.store, self.sqs, self.queue_url, slots=slots)
        ended.after_publish(plan.lease, wrote=plan.writes, root=plan.partition_root)

    def run_to_the_end(self, max_runs: int = 1_000) -> None:
        for _ in range(max_runs):
            started = self.started()
            if not started:
                return
            for execution in started:
                self.end(execution)
            self.drain()
        raise AssertionError(f"runs still starting after {max_runs}")

    def state(self) -> PartitionState:
        (state,) = self.commits.partitions()
        return state


@contextmanager
def target_cloud(monkeypatch: pytest.MonkeyPatch) -> Iterator[TargetCloud]:
    """Queue B, the stage B router, the dependency item, the target's table and the pipeline-state table on moto."""
    from lambdas.stage_b_router import handler as router

    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        queue, dead_letters = create_queue_with_dead_letters(sqs, "queue-b")
        sfn = boto3.client("stepfunctions", region_name=REGION)
        machine = create_pass_state_machine(sfn, "stage-b")
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        names = DependencyTableNames()
        create_dependency_tables(dynamodb, names)
        dependencies = DependencyStore(dynamodb)
        dependencies.put_items([parse_dependency_item(dependency_item())])
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
            "STAGE_B_FOLLOW_UP_QUEUE_URL": queue,  # one queue here: its follow-ups are delivered with the rest
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
            )
        finally:
            router.runtime.cache_clear()
