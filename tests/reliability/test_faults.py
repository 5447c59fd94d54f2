"""Faults on the cloud path (moto): throttling, UnprocessedItems, redelivery, invocations that die.

Each fault is injected into the real moto-backed clients the deployed handlers build (botocore hooks
on a fresh default boto3 session), and the handlers run behind a Lambda-like SQS event source over
real moto queues with their dead-letter queues. Afterwards every count is exact: nothing lost,
nothing doubled, and what could not be done is in the DLQ. (A failing SQL step and a Spark error
mid-CTAS are in ``test_pipeline_flow``, on real Spark.)
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from harness.faults import (
    REGION,
    BatchWriteFaults,
    InvocationDied,
    LambdaSqsSource,
    arrival_event,
    context,
    create_queue_with_dead_letters,
    drain_messages,
    error_answer,
    expected_execution_name,
    fresh_default_session,
    send_bodies,
    stage_a_cloud,
)
from lakeline.dependencies.model import parse_dependency_item
from lakeline.dependencies.store import DependencyStore
from lakeline.dependencies.sync import backfill
from lakeline.dependencies.tables import DependencyTableNames, create_dependency_tables
from lakeline.engines.base import Column, TableSchema
from lakeline.lineage.records.model import LineageRecord, build_records
from lakeline.lineage.records.table import LINEAGE_TABLE
from lakeline.lineage.records.writer import send_records
from lakeline.settings import PipelineSettings
from stage_a.keys import parse_raw_key
from stage_a.plan import plan_stage_a
from stage_b.messages import StageBMessage

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
# The router publishes no metric for a batch that started nothing; Powertools warns about it.
pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")
TABLE = "lineage"


# -- lineage load: DynamoDB throttling and UnprocessedItems ----------------------------------------------


def lineage_records(roots: int, outputs: int) -> list[LineageRecord]:
    """``roots`` runs, each a raw input and one step writing ``outputs`` outputs."""
    records: list[LineageRecord] = []
    for run in range(roots):
        root = f"run-{run:03d}"
        [raw] = build_records(
            {"root_id": root, "parent_id": root, "action_taken": "RAW_DATA_INPUT", "storage_location": f"s3://r/{run}"},
            now=NOW,
        )
        step = {
            "root_id": root,
            "parent_id": raw.node_id,
            "action_taken": "STAGE_A_COMPLETE",
            "records": [{"storage_location": f"s3://s/{run}/{i}"} for i in range(outputs)],
        }
        records += [raw, *build_records(step, now=NOW)]
    return records


def stored_nodes(dynamodb: Any) -> list[str]:
    paginator = dynamodb.get_paginator("scan")
    items = [item for page in paginator.paginate(TableName=TABLE) for item in page["Items"]]
    return sorted(item["node_id"]["S"] for item in items if not item["root_id"]["S"].startswith("_"))


@pytest.fixture
def lineage_cloud(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    from lambdas.lineage_load import handler as load

    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        dynamodb.create_table(**LINEAGE_TABLE.create_table_kwargs(TABLE))
        sqs = boto3.client("sqs", region_name=REGION)
        queue, dead_letters = create_queue_with_dead_letters(sqs, "lineage")
        monkeypatch.setenv("LINEAGE_TABLE_NAME", TABLE)
        monkeypatch.setenv("LINEAGE_DEAD_LETTER_QUEUE_URL", dead_letters)
        monkeypatch.setenv("LINEAGE_WRITE_ATTEMPTS", "2")
        monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
        load.loader.cache_clear()
        load.environment.cache_clear()
        load.sqs.cache_clear()
        try:
            yield {"dynamodb": dynamodb, "sqs": sqs, "queue": queue, "dlq": dead_letters, "handler": load.handler}
        finally:
            load.loader.cache_clear()
            load.environment.cache_clear()
            load.sqs.cache_clear()


def test_lineage_load_recovers_from_throttling_and_unprocessed_items_exactly(
    lineage_cloud: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    records = lineage_records(roots=12, outputs=24)  # 300 records
    send_records(lineage_cloud["sqs"], lineage_cloud["queue"], records)
    with fresh_default_session(monkeypatch) as session:
        # A storm over the first 18 write calls: every third is throttled, every third leaves a quarter
        # of its items unprocessed; the loader has two attempts per call, then SQS redelivers.
        faults = BatchWriteFaults(
            session.events,
            throttle=lambda call: call <= 18 and call % 3 == 1,
            hold=lambda call, requests: (
                [i for i in range(len(requests)) if (i + call) % 4 == 0] if call <= 18 and call % 3 == 2 else []
            ),
        )
        source = LambdaSqsSource(lineage_cloud["sqs"], lineage_cloud["queue"], "lineage-load", batch_size=100)
        report = source.run_until_empty(lineage_cloud["handler"])
    assert faults.throttled > 0 and faults.unprocessed > 0
    assert report.failed_deliveries > 0, "some writes outlasted their attempts and were redelivered"
    dead = drain_messages(lineage_cloud["sqs"], lineage_cloud["dlq"])
    assert dead == [], [json.loads(m["Body"])["node_id"] for m in dead]
    assert stored_nodes(lineage_cloud["dynamodb"]) == sorted(record.node_id for record in records)


def test_items_dynamodb_never_takes_reach_the_dlq_and_their_neighbours_are_loaded(
    lineage_cloud: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    records = lineage_records(roots=4, outputs=24)  # 100 records
    stuck = {records[10].node_id, records[60].node_id}
    send_records(lineage_cloud["sqs"], lineage_cloud["queue"], records)
    with fresh_default_session(monkeypatch) as session:
        BatchWriteFaults(
            session.events,
            hold=lambda _call, requests: [
                i for i, r in enumerate(requests) if r["PutRequest"]["Item"]["node_id"]["S"] in stuck
            ],
        )
        report = LambdaSqsSource(
            lineage_cloud["sqs"], lineage_cloud["queue"], "lineage-load", batch_size=100
        ).run_until_empty(lineage_cloud["handler"])
    dead = drain_messages(lineage_cloud["sqs"], lineage_cloud["dlq"])
    assert sorted(json.loads(m["Body"])["node_id"] for m in dead) == sorted(stuck)
    assert stored_nodes(lineage_cloud["dynamodb"]) == sorted(r.node_id for r in records if r.node_id not in stuck)
    assert report.failed_deliveries == 2 * 3, "each stuck message failed on each of its three receives"


def test_a_lineage_load_that_dies_mid_batch_loads_every_record_exactly_once(
    lineage_cloud: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    records = lineage_records(roots=3, outputs=49)  # 150 records: 100 + 50 per invocation
    send_records(lineage_cloud["sqs"], lineage_cloud["queue"], records)
    with fresh_default_session(monkeypatch) as session:
        calls = {"n": 0}

        def die_after_two_writes(**_: Any) -> None:
            calls["n"] += 1
            if calls["n"] == 2:  # two of the first invocation's four writes are done, then it dies
                raise InvocationDied

        session.events.register("after-call.dynamodb.BatchWriteItem", die_after_two_writes)
        report = LambdaSqsSource(
            lineage_cloud["sqs"], lineage_cloud["queue"], "lineage-load", batch_size=100
        ).run_until_empty(lineage_cloud["handler"])
    assert report.died == 1
    assert stored_nodes(lineage_cloud["dynamodb"]) == sorted(record.node_id for record in records)
    assert len(stored_nodes(lineage_cloud["dynamodb"])) == 150
    assert drain_messages(lineage_cloud["sqs"], lineage_cloud["dlq"]) == []


# -- the stage A router: Step Functions throttling, redelivery, a dying invocation ----------------------------


def burst(cloud: Any, count: int, offset: int = 0) -> list[tuple[str, str]]:
    """``count`` arrivals, each into a partition of its own (arrivals into one partition whose run is in
    flight wait for it: tests/spark/test_partition_commits.py)."""
    arrivals = [(f"eng/mysql/orders/date=p{i:05d}/f{i:04d}.csv", f"{i:018X}") for i in range(offset, offset + count)]
    send_bodies(cloud.sqs, cloud.queue_url, [json.dumps(arrival_event(key, seq)) for key, seq in arrivals])
    return arrivals


def started_names(cloud: Any) -> list[str]:
    return sorted(execution["name"] for execution in cloud.executions())


def test_a_throttling_storm_delays_arrivals_but_starts_each_exactly_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from lambdas.stage_a_router import handler as router

    with stage_a_cloud(monkeypatch) as cloud:
        arrivals = burst(cloud, 200)
        with fresh_default_session(monkeypatch) as session:
            calls = {"n": 0}

            def storm(**_: Any) -> Any:
                calls["n"] += 1
                return error_answer("ThrottlingException", "Rate exceeded") if calls["n"] <= 60 else None

            session.events.register("before-call.states.StartExecution", storm)
            report = LambdaSqsSource(cloud.sqs, cloud.queue_url, "stage-a-router").run_until_empty(router.handler)
        assert report.failed_deliveries == 60, "each throttled arrival failed and came back"
        assert started_names(cloud) == sorted(expected_execution_name(k, s) for k, s in arrivals)
        assert drain_messages(cloud.sqs, cloud.dead_letter_url) == []


def test_a_storm_longer_than_the_redrive_budget_parks_arrivals_and_a_redrive_starts_them_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lambdas.stage_a_router import handler as router

    with stage_a_cloud(monkeypatch) as cloud:
        arrivals = burst(cloud, 30)
        with fresh_default_session(monkeypatch) as session:
            throttled = {"on": True}
            session.events.register(
                "before-call.states.StartExecution",
                lambda **_: error_answer("ThrottlingException", "Rate exceeded") if throttled["on"] else None,
            )
            source = LambdaSqsSource(cloud.sqs, cloud.queue_url, "stage-a-router")
            source.run_until_empty(router.handler)
            parked = drain_messages(cloud.sqs, cloud.dead_letter_url)
            assert len(parked) == 30 and started_names(cloud) == []
            # The storm is over; the operator moves the DLQ back to queue A (a DLQ redrive).
            throttled["on"] = False
            send_bodies(cloud.sqs, cloud.queue_url, [m["Body"] for m in parked])
            send_bodies(cloud.sqs, cloud.queue_url, [m["Body"] for m in parked[:5]])  # redriven twice
            source.run_until_empty(router.handler)
        assert started_names(cloud) == sorted(expected_execution_name(k, s) for k, s in arrivals)


def test_a_router_that_dies_mid_batch_starts_each_arrival_exactly_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from lambdas.stage_a_router import handler as router

    with stage_a_cloud(monkeypatch) as cloud:
        arrivals = burst(cloud, 50)
        with fresh_default_session(monkeypatch) as session:
            calls = {"n": 0}

            def die(**_: Any) -> None:
                calls["n"] += 1
                if calls["n"] in (5, 27):  # after starting the execution, before answering SQS
                    raise InvocationDied

            session.events.register("after-call.states.StartExecution", die)
            report = LambdaSqsSource(cloud.sqs, cloud.queue_url, "stage-a-router").run_until_empty(router.handler)
        assert report.died == 2
        assert report.messages == 50 + 2 * 10, "the two dead invocations' batches were delivered again"
        names = started_names(cloud)
        assert names == sorted(expected_execution_name(k, s) for k, s in arrivals)
        assert len(set(names)) == 50
        assert drain_messages(cloud.sqs, cloud.dead_letter_url) == []


# -- stage A post-update: a throttled routing query, then the retry ----------------------------------------


def test_post_update_retried_after_dynamodb_throttling_routes_and_records_exactly_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lambdas.lineage_load import handler as load
    from lambdas.stage_a_post_update import handler as post_update

    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        create_dependency_tables(dynamodb, DependencyTableNames())
        dynamodb.create_table(**LINEAGE_TABLE.create_table_kwargs(TABLE))
        sqs = boto3.client("sqs", region_name=REGION)
        queue_b = sqs.create_queue(QueueName="queue-b")["QueueUrl"]
        lineage_queue = sqs.create_queue(QueueName="lineage")["QueueUrl"]
        boto3.client("s3", region_name=REGION).create_bucket(Bucket="stage-bucket")
        store = DependencyStore(dynamodb)
        store.put_items(
            [
                parse_dependency_item(
                    {
                        "dataset": "eng_analytics_dev.daily_orders",
                        "dependencies": [
                            {
                                "TableName": "eng_mysql_dev.orders",
                                "FieldColumn": "date",
                                "Usage": "overwrite",
                                "DateExpression": "%Y%m%d",
                            }
                        ],
                        "partitionColumn": "date",
                        "partitionPythonMask": "%Y%m%d",
                        "steps": [{"db": "eng_analytics_dev", "sql": "SELECT 1"}],
                    }
                )
            ]
        )
        backfill(store)
        for name, value in {
            "DEPENDENCIES_TABLE": "dependencies",
            "DEPENDENCIES_BY_TABLE_TABLE": "dependencies-by-table",
            "PIPELINE_STATE_TABLE": "pipeline-state",
            "STAGE_A_FOLLOW_UP_QUEUE_URL": queue_b,
            "STAGE_B_QUEUE_URL": queue_b,
            "STAGE_B_FOLLOW_UP_QUEUE_URL": queue_b,
            "STAGE_B_DEAD_LETTER_QUEUE_URL": sqs.create_queue(QueueName="queue-b-dlq")["QueueUrl"],
            "LINEAGE_QUEUE_URL": lineage_queue,
            "LINEAGE_TABLE_NAME": TABLE,
            "LINEAGE_DEAD_LETTER_QUEUE_URL": sqs.create_queue(QueueName="lineage-dlq")["QueueUrl"],
            "POWERTOOLS_TRACE_DISABLED": "true",
        }.items():
            monkeypatch.setenv(name, value)
        settings = PipelineSettings(raw_root="s3://raw-bucket/", stage_root="s3://stage-bucket/", environment="dev")
        schema = TableSchema("eng_mysql_raw_dev", "orders", (Column("id", "bigint"),), (Column("date", "string"),))
        plan = plan_stage_a(
            parse_raw_key("eng/mysql/orders/date=20220120/f.csv"),
            settings,
            schema,
            run_token="20220120t101500000000_abcdef0123",
        )
        with fresh_default_session(monkeypatch) as session:
            post_update.runtime.cache_clear()
            for cached in (load.loader, load.environment, load.sqs):
                cached.cache_clear()
            queries = {"n": 0}

            def throttle_first_query(**_: Any) -> Any:
                queries["n"] += 1
                if queries["n"] == 1:
                    return error_answer("ProvisionedThroughputExceededException", "Rate of requests exceeds")
                return None

            session.events.register("before-call.dynamodb.Query", throttle_first_query)
            with pytest.raises(Exception, match="ProvisionedThroughputExceeded"):
                post_update.handler({"plan": plan.to_dict()}, context("stage-a-post-update"))
            result = post_update.handler({"plan": plan.to_dict()}, context("stage-a-post-update"))
            assert result["triggered"] == ["eng_analytics_dev.daily_orders/date=20220120"]
            # Every message counted, not their distinct ids: a duplicate sent by the retry would show here.
            routed = [StageBMessage.model_validate_json(m["Body"]) for m in drain_messages(sqs, queue_b)]
            assert [(m.target_dataset, m.partition) for m in routed] == [
                ("eng_analytics_dev.daily_orders", {"date": "20220120"})
            ], "the throttled attempt routed nothing; the retry sent exactly one stage B message"
            lineage = drain_messages(sqs, lineage_queue)
            sent = Counter((body["action_taken"], body["node_id"]) for body in (json.loads(m["Body"]) for m in lineage))
            assert sorted(action for action, _ in sent) == ["RAW_DATA_INPUT", "STAGE_A_COMPLETE"]
            assert set(sent.values()) == {2}, "each attempt recorded each node once, under the same id"
            send_bodies(sqs, lineage_queue, [m["Body"] for m in lineage])
            LambdaSqsSource(sqs, lineage_queue, "lineage-load", batch_size=100).run_until_empty(load.handler)
            assert stored_nodes(dynamodb) == sorted(node for _, node in sent), "each node stored once"
        post_update.runtime.cache_clear()
        for cached in (load.loader, load.environment, load.sqs):
            cached.cache_clear()
