"""Stage A's Lambda handlers against moto: SQS, Step Functions, Glue and S3."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.stepfunctions.models import stepfunctions_backends

import stage_a.contract as contract_module
import stage_a.raw_files as raw_files
import stage_a.start as stage_a_start
from harness.faults import create_pass_state_machine
from harness.raw_objects import put_raw_object
from lakeline.commits.applied import APPLIED_FOLDER
from lakeline.commits.batch import BATCH_FOLDER
from lakeline.dependencies.model import parse_dependency_item
from lakeline.dependencies.store import DependencyStore, to_dynamodb
from lakeline.dependencies.sync import backfill
from lakeline.dependencies.tables import DependencyTableNames, create_dependency_tables
from lakeline.lineage.records.model import deterministic_node_id
from lakeline.quality.evaluate import CheckResult, QualityReport
from lakeline.quality.metrics import BLOCKED_VERSIONS, DIMENSIONS, METRICS_NAMESPACE, WARNINGS
from lakeline.storage import MANIFEST_OBJECT, S3ObjectStore
from lambdas.partition_commit import handler as commit
from lambdas.stage_a_failure import handler as failure
from lambdas.stage_a_post_update import handler as post_update
from lambdas.stage_a_router import handler as router
from stage_a.keys import parse_raw_key
from stage_a.plan import StageAPlan
from stage_a.raw_files import S3RawFiles
from stage_end.quality import report_location, report_to_json
from stage_lineage.records import (
    RAW_DATA_INPUT,
    ROOT_NAMESPACE,
    STAGE_A_COMPLETE,
    raw_object_location,
    stage_a_root_id,
)
from tests.handlers.settings_file import use_table_settings
from tests.lambda_context import LambdaContextStub

REGION = "us-east-1"
CONTEXT = LambdaContextStub()


def eventbridge_arrival(key: str, sequencer: str = "0062E99A88DC407460") -> dict[str, Any]:
    put_raw_object(key)
    return {
        "version": "0",
        "id": "17793124-05d4-b198-2fde-7ededc63b103",
        "detail-type": "Object Created",
        "source": "aws.s3",
        "account": "123456789012",
        "time": "2022-01-20T10:15:00Z",
        "region": REGION,
        "resources": ["arn:aws:s3:::raw-bucket"],
        "detail": {
            "version": "0",
            "bucket": {"name": "raw-bucket"},
            "object": {"key": key, "size": 1024, "etag": "abc", "sequencer": sequencer},
            "request-id": "N4N7GDK58NMKJ12R",
            "requester": "123456789012",
            "reason": "PutObject",
        },
    }


def sqs_event(*bodies: dict[str, Any] | str) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": f"message-{index}",
                "receiptHandle": f"handle-{index}",
                "body": body if isinstance(body, str) else json.dumps(body),
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": f"arn:aws:sqs:{REGION}:123456789012:queue-a",
                "awsRegion": REGION,
            }
            for index, body in enumerate(bodies)
        ]
    }


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, Any]]:
    use_table_settings(monkeypatch, tmp_path, {"engineering_mysql_dev.customers": {"bucket_count": 3}})
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        dlq_url = sqs.create_queue(QueueName="queue-a-dlq")["QueueUrl"]
        queue_a = sqs.create_queue(QueueName="queue-a")["QueueUrl"]
        follow_ups_a = sqs.create_queue(QueueName="queue-a-follow-ups")["QueueUrl"]
        sfn = boto3.client("stepfunctions", region_name=REGION)
        machine = create_pass_state_machine(sfn, "stage-a")
        # Every leased plan writes its manifests there (stage_a.manifest).
        boto3.client("s3", region_name=REGION).create_bucket(Bucket="stage-bucket")
        glue = boto3.client("glue", region_name=REGION)
        glue.create_database(DatabaseInput={"Name": "engineering_mysql_raw_dev"})
        glue.create_table(
            DatabaseName="engineering_mysql_raw_dev",
            TableInput={
                "Name": "customers",
                "StorageDescriptor": {"Columns": [{"Name": "customer_id", "Type": "bigint"}, {"Name": "name"}]},
                "PartitionKeys": [{"Name": "date", "Type": "string"}],
            },
        )
        for name, value in {
            "STATE_MACHINE_ARN": machine,
            "DEAD_LETTER_QUEUE_URL": dlq_url,
            "STAGE_A_DEAD_LETTER_QUEUE_URL": dlq_url,
            "STAGE_A_QUEUE_URL": queue_a,
            "STAGE_A_FOLLOW_UP_QUEUE_URL": follow_ups_a,
            "RAW_BUCKET": "raw-bucket",
            "STAGE_BUCKET": "stage-bucket",
            "PIPELINE_ENVIRONMENT": "dev",
            # A follow-up is queued to start at once; the window's own test opens it.
            "FOLLOW_UP_WINDOW_SECONDS": "0",
        }.items():
            monkeypatch.setenv(name, value)
        create_dependency_tables(boto3.client("dynamodb", region_name=REGION), DependencyTableNames())
        queue_b = sqs.create_queue(QueueName="queue-b")["QueueUrl"]
        lineage_queue = sqs.create_queue(QueueName="lineage")["QueueUrl"]
        for name, value in {
            "DEPENDENCIES_TABLE": "dependencies",
            "DEPENDENCIES_BY_TABLE_TABLE": "dependencies-by-table",
            "PIPELINE_STATE_TABLE": "pipeline-state",
            "STAGE_B_QUEUE_URL": queue_b,
            "STAGE_B_DEAD_LETTER_QUEUE_URL": sqs.create_queue(QueueName="queue-b-dlq")["QueueUrl"],
            "LINEAGE_QUEUE_URL": lineage_queue,
        }.items():
            monkeypatch.setenv(name, value)
        clear_caches()
        yield {
            "sqs": sqs,
            "dlq_url": dlq_url,
            "sfn": sfn,
            "machine": machine,
            "queue_a": queue_a,
            "follow_ups_a": follow_ups_a,
            "queue_b": queue_b,
            "lineage": lineage_queue,
        }
        clear_caches()


def clear_caches() -> None:
    for cached in (
        router.runtime,
        post_update.runtime,
        commit.runtime,
        failure.runtime,
    ):
        cached.cache_clear()


def executions(aws: dict[str, Any]) -> list[dict[str, Any]]:
    return list(aws["sfn"].list_executions(stateMachineArn=aws["machine"])["executions"])


def dead_letters(aws: dict[str, Any]) -> list[dict[str, Any]]:
    response = aws["sqs"].receive_message(
        QueueUrl=aws["dlq_url"], MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    )
    return list(response.get("Messages", []))


def test_arrival_starts_one_execution_with_the_plan(aws: dict[str, Any]) -> None:
    key = "engineering/mysql/customers/date=20220120/file.csv"
    response = router.handler(sqs_event(eventbridge_arrival(key)), CONTEXT)
    assert response == {"batchItemFailures": []}
    (execution,) = executions(aws)
    detail = aws["sfn"].describe_execution(executionArn=execution["executionArn"])
    payload = json.loads(detail["input"])
    assert payload["arrival"]["key"] == key
    plan = payload["plan"]
    assert plan["target_database"] == "engineering_mysql_dev"
    assert plan["bucket_count"] == 3
    assert plan["target_location"].startswith("s3://stage-bucket/engineering/mysql/customers/date=20220120/")
    # The CTAS reads the run's files through its manifest's table, which names the arrival's file.
    assert plan["source"]["table"] in plan["ctas"] and key not in plan["ctas"]
    assert read_files(plan) == [f"s3://raw-bucket/{key}"]


def test_redelivered_arrival_does_not_start_a_second_execution(aws: dict[str, Any]) -> None:
    event = eventbridge_arrival("engineering/mysql/customers/date=20220120/file.csv")
    router.handler(sqs_event(event), CONTEXT)
    router.handler(sqs_event(event), CONTEXT)
    assert len(executions(aws)) == 1


def succeeded(execution_arn: str) -> None:
    """The execution ended well (moto's executions stay RUNNING: its model is told)."""
    stepfunctions_backends["123456789012"][REGION].describe_execution(execution_arn).status = "SUCCEEDED"


def committed_run_with_one_waiting(aws: dict[str, Any]) -> dict[str, Any]:
    """A partition's first arrival starts a run, a second waits behind it (recorded now), and the run commits: its
    plan, for the post-update that hands the partition to the follow-up."""
    router.handler(sqs_event(eventbridge_arrival("engineering/mysql/customers/date=20220120/file.csv")), CONTEXT)
    late = eventbridge_arrival("engineering/mysql/customers/date=20220120/file2.csv", sequencer="0062E99A88DC407461")
    router.handler(sqs_event(late), CONTEXT)
    (first,) = executions(aws)
    plan: dict[str, Any] = json.loads(aws["sfn"].describe_execution(executionArn=first["executionArn"])["input"])[
        "plan"
    ]
    commit.handler({"plan": plan}, CONTEXT)
    return plan


def partition_state(key: str) -> dict[str, Any]:
    item = boto3.client("dynamodb", region_name=REGION).get_item(
        TableName="pipeline-state", Key={"target_partition": {"S": key}}, ConsistentRead=True
    )["Item"]
    return dict(item)


def test_an_arrival_redelivered_after_its_run_ended_hands_the_lease_to_a_run_that_ends_it(
    aws: dict[str, Any],
) -> None:
    """Before: the redelivery took the ended run's lease again (same run token), its execution was
    found done ("duplicate") and nothing ended the lease: the partition was held for 3 hours and the
    arrivals queued behind it waited until some later arrival."""
    boto3.client("s3", region_name=REGION).create_bucket(Bucket="stage-bucket")
    event = eventbridge_arrival("engineering/mysql/customers/date=20220120/file.csv")
    router.handler(sqs_event(event), CONTEXT)
    (first,) = executions(aws)
    plan = json.loads(aws["sfn"].describe_execution(executionArn=first["executionArn"])["input"])["plan"]
    commit.handler({"plan": plan}, CONTEXT)
    assert post_update.handler({"plan": plan}, CONTEXT)["follow_up"] is None
    succeeded(first["executionArn"])
    key = plan["lease"]["key"]
    assert "lease_owner" not in partition_state(key)

    router.handler(sqs_event(event), CONTEXT)  # the redelivery
    (second,) = [e for e in executions(aws) if e["executionArn"] != first["executionArn"]]
    handed = json.loads(aws["sfn"].describe_execution(executionArn=second["executionArn"])["input"])["plan"]
    assert (handed["mode"], handed["applied"]) == ("none", [])  # it has nothing to load: the file is in
    assert partition_state(key)["lease_owner"]["S"] == handed["run_token"] != plan["run_token"]
    assert post_update.handler({"plan": handed}, CONTEXT)["follow_up"] is None
    state = partition_state(key)
    assert "lease_owner" not in state and "pending" not in state and state["version"]["N"] == "1"


def queued(aws: dict[str, Any], queue: str) -> list[dict[str, Any]]:
    response = aws["sqs"].receive_message(QueueUrl=aws[queue], MaxNumberOfMessages=10)
    for message in response.get("Messages", []):
        aws["sqs"].delete_message(QueueUrl=aws[queue], ReceiptHandle=message["ReceiptHandle"])
    return [json.loads(message["Body"]) for message in response.get("Messages", [])]


def test_arrivals_during_a_run_wait_and_its_post_update_queues_one_follow_up(aws: dict[str, Any]) -> None:
    """Router → state machine → commit → post-update → queue A → router, as deployed."""
    boto3.client("s3", region_name=REGION).create_bucket(Bucket="stage-bucket")
    key = "engineering/mysql/customers/date=20220120/file.csv"
    router.handler(sqs_event(eventbridge_arrival(key)), CONTEXT)
    # Two more files of the partition (one of them a new version of the same key) while it runs.
    later = [
        eventbridge_arrival(key, sequencer="0062E99A88DC4074FF"),
        eventbridge_arrival("engineering/mysql/customers/date=20220120/file2.csv"),
    ]
    router.handler(sqs_event(*later), CONTEXT)
    (execution,) = executions(aws)
    plan = json.loads(aws["sfn"].describe_execution(executionArn=execution["executionArn"])["input"])["plan"]
    # The batch is an object the input names (lakeline.commits.batch): one arrival, its entry not in the input.
    assert plan["mode"] == "compact" and plan["batch"]["count"] == 1 and plan["lease"]["pending"] == []
    committed = commit.handler({"plan": plan}, CONTEXT)
    assert committed["version"] == 1
    result = post_update.handler({"plan": plan}, CONTEXT)
    assert result["follow_up"] is not None
    (follow_up,) = queued(aws, "follow_ups_a")
    router.handler(sqs_event(follow_up), CONTEXT)
    assert len(executions(aws)) == 2
    second = next(e for e in executions(aws) if e["executionArn"] != execution["executionArn"])
    follow_plan = json.loads(aws["sfn"].describe_execution(executionArn=second["executionArn"])["input"])["plan"]
    # The follow-up takes both waiting arrivals in one run; a re-sent file means a compaction.
    assert follow_plan["batch"]["count"] == 2 and follow_plan["mode"] == "compact"
    # The catalog already points at the committed version: one statement swaps it, no reconcile first.
    assert follow_plan["reconcile"] == [] and len(follow_plan["publish"]) == 1
    # Redelivering the follow-up message starts nothing new.
    router.handler(sqs_event(follow_up), CONTEXT)
    assert len(executions(aws)) == 2
    commit.handler({"plan": follow_plan}, CONTEXT)
    assert post_update.handler({"plan": follow_plan}, CONTEXT)["follow_up"] is None
    assert queued(aws, "follow_ups_a") == [] and queued(aws, "queue_a") == []


def plans(aws: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each execution's plan, by its partition's folder (``date=...``)."""
    found = {}
    for execution in executions(aws):
        plan = json.loads(aws["sfn"].describe_execution(executionArn=execution["executionArn"])["input"])["plan"]
        found[plan["target_location"].split("/")[-3]] = plan
    return found


def test_the_files_of_one_partition_in_one_batch_make_one_run_and_no_follow_up(aws: dict[str, Any]) -> None:
    """Every record of a batch enters before any run is planned: the run the first file leases takes the second,
    which would otherwise wait for a follow-up run (in AWS, a burst's first batch ran each partition twice)."""
    boto3.client("s3", region_name=REGION).create_bucket(Bucket="stage-bucket")
    folder = "engineering/mysql/customers"
    batch = sqs_event(
        eventbridge_arrival(f"{folder}/date=20220120/morning.csv"),
        eventbridge_arrival(f"{folder}/date=20220121/file.csv"),
        eventbridge_arrival(f"{folder}/date=20220120/afternoon.csv"),
    )
    assert router.handler(batch, CONTEXT) == {"batchItemFailures": []}
    planned = plans(aws)
    assert sorted(planned) == ["date=20220120", "date=20220121"]
    both = planned["date=20220120"]
    assert both["batch"]["count"] == 2
    assert read_files(both) == [
        f"s3://raw-bucket/{folder}/date=20220120/afternoon.csv",
        f"s3://raw-bucket/{folder}/date=20220120/morning.csv",
    ]
    assert planned["date=20220121"]["batch"]["count"] == 1
    for plan in planned.values():
        commit.handler({"plan": plan}, CONTEXT)
        assert post_update.handler({"plan": plan}, CONTEXT)["follow_up"] is None  # nothing was left waiting
    assert queued(aws, "follow_ups_a") == []


def test_a_run_whose_start_fails_fails_its_record_alone_and_its_redelivery_takes_the_batchs_waiting_file(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Forced between the two passes: the second file has waited in the partition's state when the run the first
    leased cannot start. Only the first record is reported failed; its redelivery alone starts one run with both."""
    boto3.client("s3", region_name=REGION).create_bucket(Bucket="stage-bucket")
    folder = "engineering/mysql/customers/date=20220120"
    first, second = eventbridge_arrival(f"{folder}/morning.csv"), eventbridge_arrival(f"{folder}/afternoon.csv")
    real = stage_a_start.start_execution_once
    throttled = iter([ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "Start")])

    def start_once(*args: Any, **kwargs: Any) -> Any:
        failure = next(throttled, None)
        if failure is not None:
            raise failure
        return real(*args, **kwargs)

    monkeypatch.setattr(stage_a_start, "start_execution_once", start_once)
    assert router.handler(sqs_event(first, second), CONTEXT) == {"batchItemFailures": [{"itemIdentifier": "message-0"}]}
    assert executions(aws) == [] and dead_letters(aws) == []
    assert router.handler(sqs_event(first), CONTEXT) == {"batchItemFailures": []}  # SQS receives it again
    (plan,) = plans(aws).values()
    assert plan["batch"]["count"] == 2
    assert router.handler(sqs_event(first), CONTEXT) == {"batchItemFailures": []}  # and once more: a duplicate
    assert len(executions(aws)) == 1
    commit.handler({"plan": plan}, CONTEXT)
    assert post_update.handler({"plan": plan}, CONTEXT)["follow_up"] is None


def test_invalid_key_goes_to_the_dlq_with_its_reason_and_neighbours_proceed(aws: dict[str, Any]) -> None:
    bad = eventbridge_arrival("engineering/mysql/customers/date=x';DROP TABLE t;--/f.csv")
    good = eventbridge_arrival("engineering/mysql/customers/date=20220121/file.csv")
    response = router.handler(sqs_event(bad, "not json at all", good), CONTEXT)
    assert response == {"batchItemFailures": []}
    assert len(executions(aws)) == 1
    letters = dead_letters(aws)
    assert len(letters) == 2
    reasons = sorted(m["MessageAttributes"]["lakeline_reason"]["StringValue"] for m in letters)
    assert "partition 'date' value" in reasons[1] or "partition 'date' value" in reasons[0]
    assert any("not an S3 arrival" in reason for reason in reasons)


def test_missing_raw_table_is_parked_at_once_with_its_reason_and_its_neighbour_starts(aws: dict[str, Any]) -> None:
    missing = eventbridge_arrival("engineering/mysql/orders/date=20220120/file.csv")
    good = eventbridge_arrival("engineering/mysql/customers/date=20220120/file.csv")
    response = router.handler(sqs_event(missing, good), CONTEXT)
    assert response == {"batchItemFailures": []}  # not retried for 18 minutes first: it cannot succeed
    assert len(executions(aws)) == 1
    (letter,) = dead_letters(aws)
    reason = letter["MessageAttributes"]["lakeline_reason"]["StringValue"]
    assert reason.endswith("no raw table engineering_mysql_raw_dev.orders in the catalog")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"customer_id\n1\n", "header lacks column name"),
        (b"customer_id,name,email\n1,ann,a@x\n", "header has column email not in table"),
        (b"customer_id,name\n6.5,ann\n", "line 2, column customer_id: '6.5' is not bigint"),
        (b"customer_id,name\n1,ann,extra\n", "line 2 has 3 fields, the header 2"),
        (b"customer_id,name\n1,caf\xe9\n", "is not valid utf-8"),
        (b"PAR1\x00\x00PAR1", "is a parquet file named as csv"),
        (b"", "is empty"),
    ],
)
def test_a_file_that_breaks_its_table_contract_is_parked_with_the_reason_and_its_neighbour_starts(
    aws: dict[str, Any], body: bytes, reason: str
) -> None:
    bad_key = "engineering/mysql/customers/date=20220120/bad.csv"
    bad = eventbridge_arrival(bad_key)
    boto3.client("s3", region_name=REGION).put_object(Bucket="raw-bucket", Key=bad_key, Body=body)
    good = eventbridge_arrival("engineering/mysql/customers/date=20220121/good.csv")
    assert router.handler(sqs_event(bad, good), CONTEXT) == {"batchItemFailures": []}
    (execution,) = executions(aws)
    started = json.loads(aws["sfn"].describe_execution(executionArn=execution["executionArn"])["input"])
    assert started["plan"]["raw_key"].endswith("date=20220121/good.csv")
    (letter,) = dead_letters(aws)
    parked = letter["MessageAttributes"]["lakeline_reason"]["StringValue"]
    assert parked.startswith(f"s3://raw-bucket/{bad_key}: ") and reason in parked
    assert json.loads(letter["Body"])["detail"]["object"]["key"] == bad_key
    # The bad file never entered its partition's state: the next good file of that partition runs.
    later = eventbridge_arrival("engineering/mysql/customers/date=20220120/later.csv", sequencer="0062E99A88DC4074FF")
    assert router.handler(sqs_event(later), CONTEXT) == {"batchItemFailures": []}
    assert len(executions(aws)) == 2


def test_a_csv_file_with_its_columns_in_another_order_is_loaded_by_name_through_a_copy(aws: dict[str, Any]) -> None:
    s3 = boto3.client("s3", region_name=REGION)
    folder = "engineering/mysql/customers/date=20220120"
    key, copy = f"{folder}/moved.csv", f"{folder}/moved.lakeline-by-name.csv"
    event = eventbridge_arrival(key)
    s3.put_object(Bucket="raw-bucket", Key=key, Body=b'Name,customer_id\r\n"ann, ""a""",1\r\n\r\nbob,2\r\n')
    assert router.handler(sqs_event(event), CONTEXT) == {"batchItemFailures": []}
    # Nothing runs for the original and nothing is parked: its copy, in the table's order, is written.
    assert executions(aws) == [] and dead_letters(aws) == []
    written = s3.get_object(Bucket="raw-bucket", Key=copy)
    assert written["Body"].read() == b'customer_id,Name\r\n1,"ann, ""a"""\r\n2,bob\r\n'
    made_from = written["Metadata"]["lakeline-made-from"]
    assert made_from == "0062E99A88DC407460"  # the sequencer of the version it was made from
    # A redelivery of the original finds its copy made and writes nothing (no second copy event).
    s3.put_object(Bucket="raw-bucket", Key=copy, Body=b"customer_id,name\n1,kept\n", Metadata=written["Metadata"])
    assert router.handler(sqs_event(event), CONTEXT) == {"batchItemFailures": []}
    assert s3.get_object(Bucket="raw-bucket", Key=copy)["Body"].read() == b"customer_id,name\n1,kept\n"
    # The copy's own "Object Created" event starts the run, which reads the copy only.
    copy_event = eventbridge_arrival(copy, sequencer="0062E99A88DC4074A0")
    s3.put_object(Bucket="raw-bucket", Key=copy, Body=b'customer_id,Name\n1,"ann, ""a"""\n2,bob\n')
    assert router.handler(sqs_event(copy_event), CONTEXT) == {"batchItemFailures": []}
    (execution,) = executions(aws)
    plan = json.loads(aws["sfn"].describe_execution(executionArn=execution["executionArn"])["input"])["plan"]
    assert plan["raw_key"] == copy and read_files(plan) == [f"s3://raw-bucket/{copy}"]
    # A later version of the original, now in the table's order, replaces the copy's rows through the copy.
    later = eventbridge_arrival(key, sequencer="0062E99A88DC4074B0")
    s3.put_object(Bucket="raw-bucket", Key=key, Body=b"customer_id,name\n3,cid\n")
    assert router.handler(sqs_event(later), CONTEXT) == {"batchItemFailures": []}
    replaced = s3.get_object(Bucket="raw-bucket", Key=copy)
    assert replaced["Body"].read() == b"customer_id,name\r\n3,cid\r\n"
    assert replaced["Metadata"]["lakeline-made-from"] != made_from
    assert len(executions(aws)) == 1 and dead_letters(aws) == []


def started_plans(aws: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The plans of the executions started so far, by the raw key that started each."""
    plans = [
        json.loads(aws["sfn"].describe_execution(executionArn=execution["executionArn"])["input"])["plan"]
        for execution in executions(aws)
    ]
    return {plan["raw_key"]: plan for plan in plans}


def test_a_file_loaded_as_it_was_then_resent_with_moved_columns_is_replaced_by_its_copy(aws: dict[str, Any]) -> None:
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="stage-bucket")
    folder = "engineering/mysql/customers/date=20220120"
    key, copy = f"{folder}/f.csv", f"{folder}/f.lakeline-by-name.csv"
    assert router.handler(sqs_event(eventbridge_arrival(key)), CONTEXT) == {"batchItemFailures": []}
    first = started_plans(aws)[key]
    commit.handler({"plan": first}, CONTEXT)
    post_update.handler({"plan": first}, CONTEXT)  # f.csv's rows are published, the partition released
    resent = eventbridge_arrival(key, sequencer="0062E99A88DC4074B0")
    s3.put_object(Bucket="raw-bucket", Key=key, Body=b"name,customer_id\nbob,2\n")
    assert router.handler(sqs_event(resent), CONTEXT) == {"batchItemFailures": []}
    copy_event = eventbridge_arrival(copy, sequencer="0062E99A88DC4074C0")
    s3.put_object(Bucket="raw-bucket", Key=copy, Body=b"customer_id,name\r\n2,bob\r\n")
    assert router.handler(sqs_event(copy_event), CONTEXT) == {"batchItemFailures": []}
    # The copy's run rewrites the partition without the key it replaces: f.csv now holds the moved
    # columns, and its first version's rows must go.
    plan = started_plans(aws)[copy]
    assert plan["mode"] == "compact"
    assert read_files(plan) == [f"s3://raw-bucket/{copy}"]


def test_an_older_versions_router_never_overwrites_a_newer_versions_copy(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    s3 = boto3.client("s3", region_name=REGION)
    folder = "engineering/mysql/customers/date=20220120"
    key, copy = f"{folder}/f.csv", f"{folder}/f.lakeline-by-name.csv"
    older, newer = eventbridge_arrival(key), eventbridge_arrival(key, sequencer="0062E99A88DC4074B0")
    s3.put_object(Bucket="raw-bucket", Key=key, Body=b"name,customer_id\nnew,2\n")
    assert router.handler(sqs_event(newer), CONTEXT) == {"batchItemFailures": []}
    assert s3.head_object(Bucket="raw-bucket", Key=copy)["Metadata"]["lakeline-made-from"] == "0062E99A88DC4074B0"
    # The older version's event comes late. Its router read the copy's place before the newer one's
    # router wrote there (forced here): its conditional put fails, it reads again and leaves it.
    real = S3RawFiles.existing_copy
    stale = iter([None])
    monkeypatch.setattr(S3RawFiles, "existing_copy", lambda self, *args: next(stale, real(self, *args)))
    s3.put_object(Bucket="raw-bucket", Key=key, Body=b"name,customer_id\nold,1\n")
    assert router.handler(sqs_event(older), CONTEXT) == {"batchItemFailures": []}
    kept = s3.get_object(Bucket="raw-bucket", Key=copy)
    assert kept["Metadata"]["lakeline-made-from"] == "0062E99A88DC4074B0"
    assert kept["Body"].read() == b"customer_id,name\r\n2,new\r\n"
    assert dead_letters(aws) == [] and executions(aws) == []


def test_a_reordered_csv_that_also_breaks_its_contract_is_parked_and_no_copy_is_written(aws: dict[str, Any]) -> None:
    s3 = boto3.client("s3", region_name=REGION)
    key = "engineering/mysql/customers/date=20220120/moved.csv"
    event = eventbridge_arrival(key)
    s3.put_object(Bucket="raw-bucket", Key=key, Body=b"name,customer_id\nann,x\n")
    assert router.handler(sqs_event(event), CONTEXT) == {"batchItemFailures": []}
    (letter,) = dead_letters(aws)
    assert (
        "line 2, column customer_id: 'x' is not bigint" in letter["MessageAttributes"]["lakeline_reason"]["StringValue"]
    )
    listed = s3.list_objects_v2(Bucket="raw-bucket", Prefix="engineering/mysql/customers/date=20220120/")
    assert [item["Key"] for item in listed["Contents"]] == [key]


def test_a_large_reordered_csv_is_streamed_to_its_copy_in_parts_and_one_broken_past_the_sample_is_parked(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The door reads 1,000 characters of each file here, and copies go up in S3's smallest parts: these
    # 6 MB files stand for files of any size.
    monkeypatch.setattr(contract_module, "DOOR_CHECK_CHARACTERS", 1000)
    monkeypatch.setattr(raw_files, "COPY_PART_BYTES", 5 * 1024 * 1024)
    s3 = boto3.client("s3", region_name=REGION)
    folder = "engineering/mysql/customers/date=20220120"
    rows = range(1, 400_000)
    body = b"name,customer_id\n" + b"".join(b"name %d,%d\n" % (n, n) for n in rows)
    assert len(body) > raw_files.COPY_PART_BYTES  # more than one part
    batch = sqs_event(eventbridge_arrival(f"{folder}/big.csv"), eventbridge_arrival(f"{folder}/broken.csv"))
    s3.put_object(Bucket="raw-bucket", Key=f"{folder}/big.csv", Body=body)
    s3.put_object(Bucket="raw-bucket", Key=f"{folder}/broken.csv", Body=body + b"late\n")
    assert router.handler(batch, CONTEXT) == {"batchItemFailures": []}
    copied = s3.get_object(Bucket="raw-bucket", Key=f"{folder}/big.lakeline-by-name.csv")
    expected = b"customer_id,name\r\n" + b"".join(b"%d,name %d\r\n" % (n, n) for n in rows)
    assert copied["Body"].read() == expected and copied["Metadata"]["lakeline-made-from"] == "0062E99A88DC407460"
    # A record past the sample breaks the file: its copy stops there, is parked with the line, and
    # nothing of it is left (the copy's parts are aborted, never completed).
    (letter,) = dead_letters(aws)
    reason = letter["MessageAttributes"]["lakeline_reason"]["StringValue"]
    assert reason == f"s3://raw-bucket/{folder}/broken.csv: line 400001 has 1 fields, the header 2"
    listed = s3.list_objects_v2(Bucket="raw-bucket", Prefix=f"{folder}/broken.")["Contents"]
    assert [item["Key"] for item in listed] == [f"{folder}/broken.csv"]
    assert s3.list_multipart_uploads(Bucket="raw-bucket").get("Uploads", []) == []
    assert executions(aws) == []


def test_a_nested_json_value_of_another_type_is_parked_and_a_good_file_starts(aws: dict[str, Any]) -> None:
    boto3.client("glue", region_name=REGION).create_table(
        DatabaseName="engineering_mysql_raw_dev",
        TableInput={
            "Name": "orders",
            "StorageDescriptor": {
                "Columns": [
                    {"Name": "id", "Type": "bigint"},
                    {"Name": "ship", "Type": "struct<city:string,zip:int>"},
                    {"Name": "lines", "Type": "array<struct<sku:string,qty:int>>"},
                ],
                "SerdeInfo": {"SerializationLibrary": "org.openx.data.jsonserde.JsonSerDe"},
            },
            "PartitionKeys": [{"Name": "date", "Type": "string"}],
        },
    )
    s3 = boto3.client("s3", region_name=REGION)
    folder = "engineering/mysql/orders/date=20220120"
    bad, good = eventbridge_arrival(f"{folder}/bad.json"), eventbridge_arrival(f"{folder}/good.json")
    # OpenX matches keys without their case: City is ship.city; a zip written as text is not an int.
    s3.put_object(
        Bucket="raw-bucket", Key=f"{folder}/bad.json", Body=b'{"id": 1, "ship": {"City": "Rome", "zip": "00100"}}\n'
    )
    s3.put_object(
        Bucket="raw-bucket",
        Key=f"{folder}/good.json",
        Body=b'{"id": 2, "Ship": {"City": "Oslo"}, "lines": [{"sku": "a"}]}\n',
    )
    assert router.handler(sqs_event(bad, good), CONTEXT) == {"batchItemFailures": []}
    (letter,) = dead_letters(aws)
    reason = letter["MessageAttributes"]["lakeline_reason"]["StringValue"]
    assert reason == f"s3://raw-bucket/{folder}/bad.json: line 1, field ship.zip: '\"00100\"' is not int"
    # Spark would read NULL for Ship and City (#36): the good file is read through a copy spelled as the
    # table, whose own "Object Created" event starts the run.
    assert executions(aws) == []
    copy = f"{folder}/good.lakeline-by-name.json"
    written = s3.get_object(Bucket="raw-bucket", Key=copy)["Body"].read()
    assert written == b'{"id":2,"ship":{"city":"Oslo"},"lines":[{"sku":"a"}]}\n'
    copy_event = eventbridge_arrival(copy, sequencer="0062E99A88DC4074A0")
    s3.put_object(Bucket="raw-bucket", Key=copy, Body=written)
    assert router.handler(sqs_event(copy_event), CONTEXT) == {"batchItemFailures": []}
    (execution,) = executions(aws)
    plan = json.loads(aws["sfn"].describe_execution(executionArn=execution["executionArn"])["input"])["plan"]
    assert plan["raw_key"] == copy


def test_add_columns_grows_the_raw_and_stage_tables_in_glue_before_the_run_is_planned(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = {"engineering_mysql_dev.customers": {"bucket_count": 3, "schema_evolution": "add-columns"}}
    use_table_settings(monkeypatch, tmp_path, settings)
    clear_caches()
    glue = boto3.client("glue", region_name=REGION)
    glue.create_database(DatabaseInput={"Name": "engineering_mysql_dev"})
    glue.create_table(
        DatabaseName="engineering_mysql_dev",
        TableInput={
            "Name": "customers",
            "StorageDescriptor": {"Columns": [{"Name": "customer_id", "Type": "bigint"}, {"Name": "name"}]},
            "PartitionKeys": [{"Name": "date", "Type": "string"}],
        },
    )
    key = "engineering/mysql/customers/date=20220120/wide.csv"
    event = eventbridge_arrival(key)
    boto3.client("s3", region_name=REGION).put_object(
        Bucket="raw-bucket", Key=key, Body=b"customer_id,name,email\n1,ann,a@x\n"
    )
    assert router.handler(sqs_event(event), CONTEXT) == {"batchItemFailures": []}
    for database in ("engineering_mysql_raw_dev", "engineering_mysql_dev"):
        columns = glue.get_table(DatabaseName=database, Name="customers")["Table"]["StorageDescriptor"]["Columns"]
        assert [column["Name"] for column in columns] == ["customer_id", "name", "email"]
    (execution,) = executions(aws)
    plan = json.loads(aws["sfn"].describe_execution(executionArn=execution["executionArn"])["input"])["plan"]
    assert '"email"' in plan["ctas"]
    # Its redelivery finds the columns there and adds nothing twice.
    assert router.handler(sqs_event(event), CONTEXT) == {"batchItemFailures": []}
    columns = glue.get_table(DatabaseName="engineering_mysql_dev", Name="customers")["Table"]["StorageDescriptor"]
    assert [column["Name"] for column in columns["Columns"]] == ["customer_id", "name", "email"]


def plan_for(aws: dict[str, Any]) -> dict[str, Any]:
    router.handler(sqs_event(eventbridge_arrival("engineering/mysql/customers/date=20220120/file.csv")), CONTEXT)
    (execution,) = executions(aws)
    return dict(json.loads(aws["sfn"].describe_execution(executionArn=execution["executionArn"])["input"])["plan"])


def test_post_update_sweeps_only_what_nothing_references(aws: dict[str, Any]) -> None:
    plan = plan_for(aws)
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="stage-bucket")
    root = "engineering/mysql/customers/date=20220120/"
    token = plan["run_token"]
    for prefix in (
        "lakeline_run=20200101t000000000000_aaaaaaaaaa",  # a crashed run's leftovers, long ago
        f"lakeline_run={token}",  # this run's, committed
        "lakeline_run=29990101t000000000000_bbbbbbbbbb",  # too recent to be anyone's leftovers yet
    ):
        s3.put_object(Bucket="stage-bucket", Key=f"{root}{prefix}/part-00000.parquet", Body=b"x")
        s3.put_object(Bucket="stage-bucket", Key=f"{root}{prefix}/_SUCCESS", Body=b"")
    commit.handler({"plan": plan}, CONTEXT)
    result = post_update.handler({"plan": plan}, CONTEXT)
    assert result["files"] == 1
    assert result["superseded_deleted"] == [f"s3://stage-bucket/{root}lakeline_run=20200101t000000000000_aaaaaaaaaa/"]
    left = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="stage-bucket")["Contents"])
    assert all("20200101" not in key for key in left)
    # The committed run's and the recent one's files, and the committed version's list of what it holds.
    assert len(without_lists(left)) == 4 and len([key for key in left if f"/{APPLIED_FOLDER}" in key]) == 1


def test_failure_handler_removes_the_partial_ctas_output(aws: dict[str, Any]) -> None:
    plan = plan_for(aws)
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="stage-bucket")
    partial = plan["target_location"].removeprefix("s3://stage-bucket/")
    s3.put_object(Bucket="stage-bucket", Key=f"{partial}part-00000.parquet", Body=b"x")
    s3.put_object(
        Bucket="stage-bucket",
        Key="engineering/mysql/customers/date=20220120/lakeline_run=20200101t000000000000_aaaaaaaaaa/p.parquet",
        Body=b"x",
    )
    error = {"Error": "Athena.QueryFailed", "Cause": "HIVE_BAD_DATA: broken.parquet"}
    result = failure.handler({"plan": plan, "error": error}, CONTEXT)
    # The partial output, the run's manifest (stage_a.manifest) and its batch (lakeline.commits.batch), deleted with
    # the run once its lease is ended.
    assert result["partial_objects_deleted"] == 3
    assert result["parked"] == ["engineering/mysql/customers/date=20220120/file.csv"]
    left = [o["Key"] for o in s3.list_objects_v2(Bucket="stage-bucket")["Contents"]]
    assert left == ["engineering/mysql/customers/date=20220120/lakeline_run=20200101t000000000000_aaaaaaaaaa/p.parquet"]
    (parked,) = dead_letters(aws)
    assert "HIVE_BAD_DATA" in parked["MessageAttributes"]["lakeline_reason"]["StringValue"]
    # The partition is free again: once the failed execution has ended, the redriven arrival runs again.
    (failed,) = executions(aws)
    aws["sfn"].stop_execution(executionArn=failed["executionArn"], error="Athena.QueryFailed")
    router.handler(sqs_event(json.loads(parked["Body"])), CONTEXT)
    assert len(executions(aws)) == 2


def test_a_failure_after_the_quality_step_was_killed_drops_its_table_once_and_again(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Stage A's failure function drops the quality table its killed quality step left (Sandbox.Timedout skips the
    step's ``finally``), named by the plan; a redelivered failure finds it gone."""
    settings = {"engineering_mysql_dev.customers": {"bucket_count": 3, "checks": [{"rule": "RowCount > 0"}]}}
    use_table_settings(monkeypatch, tmp_path, settings)
    clear_caches()
    plan = plan_for(aws)
    gate = plan["quality"]
    glue = boto3.client("glue", region_name=REGION)
    glue.create_database(DatabaseInput={"Name": gate["database"]})
    glue.create_table(
        DatabaseName=gate["database"],
        TableInput={
            "Name": gate["quality_table"],
            "StorageDescriptor": {"Columns": [{"Name": "id", "Type": "bigint"}], "Location": "s3://x/manifest/"},
        },
    )
    boto3.client("s3", region_name=REGION).create_bucket(Bucket="stage-bucket")
    error = {"Error": "Sandbox.Timedout", "Cause": "Task timed out after 900.00 seconds"}
    for _ in range(2):  # the failure, then its redelivery
        failure.handler({"plan": plan, "error": error, "failed_step": "quality"}, CONTEXT)
        tables = glue.get_tables(DatabaseName=gate["database"])["TableList"]
        assert [table["Name"] for table in tables if table["Name"].startswith("lakeline_tmp")] == []


def quality_metric_documents(out: str) -> dict[str, dict[str, Any]]:
    """The quality gates' EMF documents on stdout, by metric name (``lakeline.quality.metrics``)."""
    found = {}
    for line in out.splitlines():
        if '"_aws"' in line:
            document = json.loads(line)
            for directive in document["_aws"]["CloudWatchMetrics"]:
                for metric in directive["Metrics"]:
                    if metric["Name"] in (BLOCKED_VERSIONS, WARNINGS):
                        found[metric["Name"]] = document
    return found


def checked_plan(aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    settings = {"engineering_mysql_dev.customers": {"bucket_count": 3, "checks": [{"rule": "RowCount > 0"}]}}
    use_table_settings(monkeypatch, tmp_path, settings)
    clear_caches()
    plan = plan_for(aws)
    boto3.client("s3", region_name=REGION).create_bucket(Bucket="stage-bucket")
    return plan


def keep_report(plan: dict[str, Any], *results: CheckResult) -> None:
    """The report the quality step keeps beside the run (``stage_end.quality.run_quality``)."""
    report = QualityReport("engineering_mysql_dev.customers (date=20220120)", results)
    S3ObjectStore(boto3.client("s3", region_name=REGION)).write_text(
        report_location(plan["target_location"]), report_to_json(report)
    )


def test_a_version_its_checks_blocked_is_counted_once_by_the_failure_function(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """#41: QualityBlockedVersions, which the alarm watches, from the failure function (both engines end there): 1
    for a blocked version, nothing for a quality step that crashed or a failure elsewhere."""
    plan = checked_plan(aws, monkeypatch, tmp_path)
    keep_report(plan, CheckResult("RowCount > 0", "block", False, 0.0))
    error = {"Error": "QualityBlocked", "Cause": json.dumps({"errorType": "QualityBlocked", "errorMessage": "x"})}
    capsys.readouterr()
    result = failure.handler({"plan": plan, "error": error, "failed_step": "quality"}, CONTEXT)
    assert result["quality_blocked"] is True
    # The arrival's tree ends at the refused version's table: the seed's DQ_CHECK_FAIL, no version.
    records = [(r["action_taken"], r.get("dataset"), r.get("version")) for r in lineage_records(aws)]
    assert records == [
        ("RAW_DATA_INPUT", "engineering_mysql_raw_dev.customers", None),
        ("DQ_CHECK_FAIL", "engineering_mysql_dev.customers", None),
    ]
    document = quality_metric_documents(capsys.readouterr().out)[BLOCKED_VERSIONS]
    assert document[BLOCKED_VERSIONS] == [1.0] and document["service"] == DIMENSIONS["service"]
    assert document["_aws"]["CloudWatchMetrics"][0]["Namespace"] == METRICS_NAMESPACE
    crashed = {"Error": "Athena.QueryFailed", "Cause": "SYNTAX_ERROR"}
    for step in ("quality", "ctas"):
        result = failure.handler({"plan": plan_for(aws), "error": crashed, "failed_step": step}, CONTEXT)
        assert result["quality_blocked"] is False
        assert BLOCKED_VERSIONS not in quality_metric_documents(capsys.readouterr().out)
        assert "DQ_CHECK_FAIL" not in [record["action_taken"] for record in lineage_records(aws)]


def test_the_warn_rules_a_published_version_failed_are_counted_by_the_post_update(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = checked_plan(aws, monkeypatch, tmp_path)
    keep_report(
        plan,
        CheckResult("RowCount > 0", "block", True, 3.0),
        CheckResult('IsComplete "name"', "warn", False, 0.5, ({"name": None},)),
        CheckResult('IsUnique "id"', "warn", False, 0.5),
    )
    commit.handler({"plan": plan}, CONTEXT)
    capsys.readouterr()
    result = post_update.handler({"plan": plan}, CONTEXT)
    assert result["quality_warnings"] == 2
    document = quality_metric_documents(capsys.readouterr().out)[WARNINGS]
    assert document[WARNINGS] == [2.0] and document["service"] == DIMENSIONS["service"]


def test_post_update_rejects_a_tampered_plan(aws: dict[str, Any]) -> None:
    plan = plan_for(aws)
    del plan["ctas"]
    with pytest.raises(Exception, match="missing"):
        post_update.handler({"plan": plan}, CONTEXT)


def test_failure_while_publishing_keeps_the_new_files(aws: dict[str, Any]) -> None:
    plan = plan_for(aws)
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="stage-bucket")
    written = plan["target_location"].removeprefix("s3://stage-bucket/") + "part-00000.parquet"
    s3.put_object(Bucket="stage-bucket", Key=written, Body=b"x")
    commit.handler({"plan": plan}, CONTEXT)  # committed: the swap is what fails
    error = {"Error": "Athena.QueryFailed", "Cause": "partition update failed"}
    result = failure.handler({"plan": plan, "error": error, "failed_step": "publish"}, CONTEXT)
    assert result["partial_objects_deleted"] == 0
    assert without_lists(o["Key"] for o in s3.list_objects_v2(Bucket="stage-bucket")["Contents"]) == [written]


def read_files(plan: dict[str, Any]) -> list[str]:
    """The files a planned run's CTAS reads: the lines of its manifest (``stage_a.manifest``), in moto's S3."""
    bucket, _, folder = plan["source"]["manifest"].removeprefix("s3://").partition("/")
    body = boto3.client("s3", region_name=REGION).get_object(Bucket=bucket, Key=folder + MANIFEST_OBJECT)["Body"]
    return [line for line in body.read().decode().splitlines() if line]


def without_lists(keys: Iterable[str]) -> list[str]:
    """The keys but the lists of what published versions hold (``lakeline.commits.applied``), beside them, and
    the runs' manifests (``stage_a.manifest``) and batches (``lakeline.commits.batch``), in their own run
    prefixes that the sweep removes."""
    return [
        key
        for key in keys
        if f"/{APPLIED_FOLDER}" not in key and f"/{BATCH_FOLDER}" not in key and not key.endswith(f"/{MANIFEST_OBJECT}")
    ]


SEED_ITEM = Path(__file__).resolve().parents[1] / "fixtures" / "dependencies" / "seed_item.json"


def with_seed_targets() -> None:
    """The seed's dependency item (customers → destination_table), in both dependency tables."""
    store = DependencyStore(boto3.client("dynamodb", region_name=REGION))
    store.put_items([parse_dependency_item(json.loads(SEED_ITEM.read_text()))])
    backfill(store)


def test_a_failed_post_update_parks_the_published_arrival_deletes_nothing_and_a_redrive_routes_it(
    aws: dict[str, Any],
) -> None:
    """#20, defect 5: the post-update failed past its retries after the publish. The failure path (the
    Catch marks it ``post_update``) deletes nothing, ends the lease, writes the run's lineage and parks the
    arrival; its redrive plans a run that writes nothing and whose post-update routes the published
    partition onwards under the run that published it (the same message ids: nothing is applied twice)."""
    with_seed_targets()
    plan = plan_for(aws)
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="stage-bucket")
    written = plan["target_location"].removeprefix("s3://stage-bucket/") + "part-00000.parquet"
    s3.put_object(Bucket="stage-bucket", Key=written, Body=b"x")
    commit.handler({"plan": plan}, CONTEXT)
    error = {"Error": "ClientError", "Cause": "not authorized to perform: sqs:SendMessage"}
    result = failure.handler({"plan": plan, "error": error, "failed_step": "post_update"}, CONTEXT)
    assert (result["partial_objects_deleted"], result["parked"]) == (0, [plan["raw_key"]])
    assert without_lists(o["Key"] for o in s3.list_objects_v2(Bucket="stage-bucket")["Contents"]) == [written]
    state = partition_state(plan["lease"]["key"])
    assert "lease_owner" not in state and state["version"]["N"] == "1"  # the partition is free, published
    (letter,) = dead_letters(aws)
    reason = letter["MessageAttributes"]["lakeline_reason"]["StringValue"]
    assert reason == "post_update failed: ClientError: not authorized to perform: sqs:SendMessage"
    lineage = aws["sqs"].receive_message(QueueUrl=aws["lineage"], MaxNumberOfMessages=10).get("Messages", [])
    assert lineage  # the published run's records
    assert queued(aws, "queue_b") == []  # not routed yet

    (first,) = executions(aws)
    aws["sfn"].stop_execution(executionArn=first["executionArn"], error="ClientError")
    aws["sqs"].delete_message(QueueUrl=aws["dlq_url"], ReceiptHandle=letter["ReceiptHandle"])
    router.handler(sqs_event(json.loads(letter["Body"])), CONTEXT)  # the redrive
    (second,) = [e for e in executions(aws) if e["executionArn"] != first["executionArn"]]
    again = json.loads(aws["sfn"].describe_execution(executionArn=second["executionArn"])["input"])["plan"]
    assert (again["mode"], again["applied"], again["run_token"]) == ("none", [], plan["run_token"])
    routed = post_update.handler({"plan": again}, CONTEXT)
    assert routed["triggered"] == ["engineering_analytics_dev.destination_table/date=20220115"]
    (body,) = queued(aws, "queue_b")
    assert body["trigger"]["run"] == plan["run_token"]  # the publishing run's: the same message id
    assert "lease_owner" not in partition_state(plan["lease"]["key"])
    assert dead_letters(aws) == []


def test_a_redrive_after_a_failed_post_update_while_another_run_holds_the_partition_waits_for_it(
    aws: dict[str, Any],
) -> None:
    """Two runs at once: the parked arrival is redriven while a newer file's run holds the lease. It
    waits in the partition's state; that run's post-update routes its version and hands the lease to a
    follow-up that writes nothing for it and routes nothing more (that version is routed), then frees it."""
    with_seed_targets()
    boto3.client("s3", region_name=REGION).create_bucket(Bucket="stage-bucket")
    plan = plan_for(aws)
    commit.handler({"plan": plan}, CONTEXT)
    error = {"Error": "ClientError", "Cause": "not authorized to perform: sqs:SendMessage"}
    failure.handler({"plan": plan, "error": error, "failed_step": "post_update"}, CONTEXT)
    (letter,) = dead_letters(aws)
    aws["sqs"].delete_message(QueueUrl=aws["dlq_url"], ReceiptHandle=letter["ReceiptHandle"])
    (first,) = executions(aws)
    aws["sfn"].stop_execution(executionArn=first["executionArn"], error="ClientError")

    router.handler(sqs_event(eventbridge_arrival("engineering/mysql/customers/date=20220120/file2.csv")), CONTEXT)
    (newer,) = [e for e in executions(aws) if e["executionArn"] != first["executionArn"]]
    router.handler(sqs_event(json.loads(letter["Body"])), CONTEXT)  # the redrive, while it runs
    assert len(executions(aws)) == 2  # it waits
    newer_plan = json.loads(aws["sfn"].describe_execution(executionArn=newer["executionArn"])["input"])["plan"]
    commit.handler({"plan": newer_plan}, CONTEXT)
    assert post_update.handler({"plan": newer_plan}, CONTEXT)["follow_up"] is not None
    (routed,) = queued(aws, "queue_b")
    assert routed["trigger"]["run"] == newer_plan["run_token"]
    (follow_up,) = queued(aws, "follow_ups_a")
    router.handler(sqs_event(follow_up), CONTEXT)
    (third,) = [e for e in executions(aws) if e["executionArn"] not in {first["executionArn"], newer["executionArn"]}]
    follow_plan = json.loads(aws["sfn"].describe_execution(executionArn=third["executionArn"])["input"])["plan"]
    assert (follow_plan["mode"], follow_plan["applied"]) == ("none", [])  # nothing loaded twice
    assert post_update.handler({"plan": follow_plan}, CONTEXT)["follow_up"] is None
    assert queued(aws, "queue_b") == []  # the newer version, which holds the redriven file's rows, is routed
    state = partition_state(plan["lease"]["key"])
    assert "lease_owner" not in state and "pending" not in state and state["version"]["N"] == "2"


def test_a_redelivery_after_its_version_was_routed_routes_nothing_again(aws: dict[str, Any]) -> None:
    """A redelivery after the run ended hands the lease to a run with a token of its own that writes
    nothing; the version it finds published was routed by its run's post-update (``mark_routed``), so
    nothing is sent down the chain again (a failed post-update's redrive does route it: above)."""
    with_seed_targets()
    boto3.client("s3", region_name=REGION).create_bucket(Bucket="stage-bucket")
    event = eventbridge_arrival("engineering/mysql/customers/date=20220120/file.csv")
    router.handler(sqs_event(event), CONTEXT)
    (first,) = executions(aws)
    plan = json.loads(aws["sfn"].describe_execution(executionArn=first["executionArn"])["input"])["plan"]
    commit.handler({"plan": plan}, CONTEXT)
    post_update.handler({"plan": plan}, CONTEXT)
    assert len(queued(aws, "queue_b")) == 1
    assert partition_state(plan["lease"]["key"])["routed"]["S"] == plan["target_location"]
    succeeded(first["executionArn"])
    router.handler(sqs_event(event), CONTEXT)  # redelivered
    (second,) = [e for e in executions(aws) if e["executionArn"] != first["executionArn"]]
    handed = json.loads(aws["sfn"].describe_execution(executionArn=second["executionArn"])["input"])["plan"]
    assert handed["mode"] == "none" and handed["run_token"] != plan["run_token"]
    result = post_update.handler({"plan": handed}, CONTEXT)
    assert queued(aws, "queue_b") == [] and result["triggered"] == [] and result["follow_up"] is None
    assert "lease_owner" not in partition_state(plan["lease"]["key"])


def test_a_redelivery_that_routes_a_version_its_post_update_failed_to_route_hangs_it_under_that_run(
    aws: dict[str, Any],
) -> None:
    """File a is loaded and routed. File b's run publishes the next version, and its post-update fails (the
    failure path writes the run's lineage records and notes where the run sits in them: ``mark_lineage``).
    File a is then delivered again: its run has a token of its own, takes nothing new and routes the
    unrouted version under b's run. The target's message hangs under b's run in b's lineage tree (before:
    it carried none, so the target's run started a tree of its own)."""
    with_seed_targets()
    boto3.client("s3", region_name=REGION).create_bucket(Bucket="stage-bucket")
    first_event = eventbridge_arrival("engineering/mysql/customers/date=20220120/a.csv")
    router.handler(sqs_event(first_event), CONTEXT)
    (first,) = executions(aws)
    plan = json.loads(aws["sfn"].describe_execution(executionArn=first["executionArn"])["input"])["plan"]
    commit.handler({"plan": plan}, CONTEXT)
    post_update.handler({"plan": plan}, CONTEXT)
    succeeded(first["executionArn"])
    assert len(queued(aws, "queue_b")) == 1

    router.handler(sqs_event(eventbridge_arrival("engineering/mysql/customers/date=20220120/b.csv")), CONTEXT)
    (second,) = [e for e in executions(aws) if e["executionArn"] != first["executionArn"]]
    publishing = json.loads(aws["sfn"].describe_execution(executionArn=second["executionArn"])["input"])["plan"]
    commit.handler({"plan": publishing}, CONTEXT)
    error = {"Error": "ClientError", "Cause": "not authorized to perform: sqs:SendMessage"}
    failure.handler({"plan": publishing, "error": error, "failed_step": "post_update"}, CONTEXT)
    aws["sfn"].stop_execution(executionArn=second["executionArn"], error="ClientError")

    router.handler(sqs_event(first_event), CONTEXT)  # a.csv delivered again
    known = {first["executionArn"], second["executionArn"]}
    (third,) = [e for e in executions(aws) if e["executionArn"] not in known]
    again = json.loads(aws["sfn"].describe_execution(executionArn=third["executionArn"])["input"])["plan"]
    assert again["mode"] == "none" and again["run_token"] not in (plan["run_token"], publishing["run_token"])
    post_update.handler({"plan": again}, CONTEXT)
    (body,) = queued(aws, "queue_b")
    assert body["trigger"]["run"] == publishing["run_token"]
    published = StageAPlan.from_dict(publishing)
    root = stage_a_root_id(published)
    raw = deterministic_node_id(root, root, RAW_DATA_INPUT, raw_object_location(published))
    done = deterministic_node_id(root, raw, STAGE_A_COMPLETE, published.target_location)
    assert body["lineage"] == {"root_id": root, "parent_id": done, "table": None, "version": None}
    # The node the failure path noted is the one it wrote (``stage_a_parents`` is ``record_stage_a``'s).
    received = aws["sqs"].receive_message(QueueUrl=aws["lineage"], MaxNumberOfMessages=10)["Messages"]
    written = [json.loads(message["Body"]) for message in received]
    assert {"root_id": root, "node_id": done} in [
        {"root_id": record["root_id"], "node_id": record["node_id"]}
        for record in written
        if record.get("action_taken") == STAGE_A_COMPLETE
    ], written


def test_post_update_routes_the_finished_partition_to_queue_b(aws: dict[str, Any]) -> None:
    with_seed_targets()
    plan = plan_for(aws)
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="stage-bucket")
    result = post_update.handler({"plan": plan}, CONTEXT)
    assert result["triggered"] == ["engineering_analytics_dev.destination_table/date=20220115"]
    sent = aws["sqs"].receive_message(QueueUrl=aws["queue_b"], MaxNumberOfMessages=10)["Messages"]
    (body,) = [json.loads(message["Body"]) for message in sent]
    assert body["target_dataset"] == "engineering_analytics_dev.destination_table"
    assert body["partition"] == {"date": "20220115"}
    assert body["trigger"] == {
        "table": "engineering_mysql_dev.customers",
        "partition": {"date": "20220120"},
        "run": plan["run_token"],
        "version": f"v{plan['lease']['version'] + 1}.{plan['run_token']}",  # the version it committed (#43)
    }


def test_post_update_parks_a_target_it_cannot_route_and_routes_the_others(aws: dict[str, Any]) -> None:
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    store = DependencyStore(dynamodb)
    store.put_items([parse_dependency_item(json.loads(SEED_ITEM.read_text()))])
    backfill(store)
    # A pair stored before today's checks (a shift of 1000 years): it no longer validates when read.
    [edge] = store.edges_from("engineering_mysql_dev.customers")
    broken = edge.to_item() | {"target_dataset": "engineering_analytics_dev.broken"}
    broken["dependency"]["relativedelta_attributes"] = {"years": 1000}
    dynamodb.put_item(TableName=store.by_table_table, Item=to_dynamodb(broken))
    plan = plan_for(aws)
    boto3.client("s3", region_name=REGION).create_bucket(Bucket="stage-bucket")

    # Issue 17: the invalid pair failed the routing of every target of the partition.
    result = post_update.handler({"plan": plan}, CONTEXT)
    assert result["triggered"] == ["engineering_analytics_dev.destination_table/date=20220115"]
    [unrouted] = result["unrouted"]
    assert unrouted.startswith("engineering_mysql_dev.customers/date=20220120 → engineering_analytics_dev.broken: ")
    assert "years: Input should be less than or equal to 100" in unrouted
    sent = aws["sqs"].receive_message(QueueUrl=aws["queue_b"], MaxNumberOfMessages=10)["Messages"]
    assert [json.loads(m["Body"])["target_dataset"] for m in sent] == ["engineering_analytics_dev.destination_table"]
    dlq = aws["sqs"].get_queue_url(QueueName="queue-b-dlq")["QueueUrl"]
    [letter] = aws["sqs"].receive_message(QueueUrl=dlq, MaxNumberOfMessages=10, MessageAttributeNames=["All"])[
        "Messages"
    ]
    assert letter["MessageAttributes"]["lakeline_reason"]["StringValue"] == unrouted
    assert json.loads(letter["Body"])["unrouted"]["target_dataset"] == "engineering_analytics_dev.broken"


def lineage_records(aws: dict[str, Any]) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    while messages := aws["sqs"].receive_message(QueueUrl=aws["lineage"], MaxNumberOfMessages=10).get("Messages"):
        for message in messages:
            records.append(json.loads(message["Body"]))
            aws["sqs"].delete_message(QueueUrl=aws["lineage"], ReceiptHandle=message["ReceiptHandle"])
    return records


def test_every_file_a_follow_up_run_takes_has_its_raw_input_and_reaches_the_new_version(aws: dict[str, Any]) -> None:
    """Before: a follow-up run that took several files recorded the first one's RAW_DATA_INPUT only;
    the others had no tree in the lineage archive, and nothing led from them to the rows they hold."""
    boto3.client("s3", region_name=REGION).create_bucket(Bucket="stage-bucket")
    folder = "engineering/mysql/customers/date=20220120"
    router.handler(sqs_event(eventbridge_arrival(f"{folder}/file.csv")), CONTEXT)
    router.handler(sqs_event(*(eventbridge_arrival(f"{folder}/{name}") for name in ("b.csv", "c.csv"))), CONTEXT)
    (execution,) = executions(aws)
    plan = json.loads(aws["sfn"].describe_execution(executionArn=execution["executionArn"])["input"])["plan"]
    commit.handler({"plan": plan}, CONTEXT)
    post_update.handler({"plan": plan}, CONTEXT)
    lineage_records(aws)  # the first run's
    (follow_up,) = queued(aws, "follow_ups_a")
    router.handler(sqs_event(follow_up), CONTEXT)
    (second,) = [e for e in executions(aws) if e["executionArn"] != execution["executionArn"]]
    follow_plan = json.loads(aws["sfn"].describe_execution(executionArn=second["executionArn"])["input"])["plan"]
    assert follow_plan["applied"] == [] and follow_plan["batch"]["count"] == 2  # named, not listed
    assert len(StageAPlan.from_dict(follow_plan).with_batch(S3ObjectStore(boto3.client("s3"))).applied) == 2
    commit.handler({"plan": follow_plan}, CONTEXT)
    post_update.handler({"plan": follow_plan}, CONTEXT)

    records = lineage_records(aws)
    raw = {r["storage_location"]: r for r in records if r["action_taken"] == RAW_DATA_INPUT}
    assert sorted(raw) == [f"s3://raw-bucket/{folder}/{name}" for name in ("b.csv", "c.csv")]
    for location, record in raw.items():
        # Its own tree, rooted at the file, whose next node is the version the follow-up wrote.
        assert record["parent_id"] == record["root_id"]
        key = location.removeprefix("s3://raw-bucket/")
        assert record["root_id"] == str(uuid.uuid5(ROOT_NAMESPACE, f"{key}@{follow_plan['run_token']}"))
        (done,) = [r for r in records if r["action_taken"] == STAGE_A_COMPLETE and r["parent_id"] == record["node_id"]]
        assert done["storage_location"] == follow_plan["target_location"]


@dataclass
class RunningOut(LambdaContextStub):
    """An invocation whose time runs out as records are handled: each call finds the next of ``left`` (ms)."""

    left: tuple[int, ...] = ()
    calls: int = 0

    def get_remaining_time_in_millis(self) -> int:
        self.calls += 1
        return self.left[min(self.calls, len(self.left)) - 1]


def test_records_the_router_has_no_time_left_for_go_back_to_queue_a_and_are_started_from_there(
    aws: dict[str, Any],
) -> None:
    """A batch of slow records (large files read by name) would outlast the function: cut off by its timeout,
    the whole batch fails, and after a few receives good arrivals are parked with no reason (#39). The router
    sends what it has no time for back to queue A, as new messages, and fails nothing."""
    keys = [f"engineering/mysql/customers/date=2022012{day}/customers.csv" for day in (1, 2, 3)]
    events = [eventbridge_arrival(key) for key in keys]
    for event in events:
        event["detail"]["object"]["size"] = 64 * 1024 * 1024  # as its event says: a record of large files
    # 60 s left for the first record, 40 for the second, 20 for the third; 19 when the first's run is started.
    context = RunningOut(left=(60_000, 40_000, 20_000, 19_000))
    assert router.handler(sqs_event(*events), context) == {"batchItemFailures": []}
    assert len(executions(aws)) == 1, "the records reached with less than RECORD_BUDGET_MS left did not start"
    assert dead_letters(aws) == []
    sent_back = aws["sqs"].receive_message(QueueUrl=aws["queue_a"], MaxNumberOfMessages=10)["Messages"]
    assert sorted(json.loads(m["Body"])["detail"]["object"]["key"] for m in sent_back) == keys[1:]
    assert router.handler(sqs_event(*(json.loads(m["Body"]) for m in sent_back)), CONTEXT) == {"batchItemFailures": []}
    assert len(executions(aws)) == 3


def test_a_run_leased_with_no_time_left_to_start_it_goes_back_to_queue_a_and_its_copy_starts_it(
    aws: dict[str, Any],
) -> None:
    """The second pass (the batch's leased runs planned and started) can find the invocation's time gone: the
    record is sent back to queue A rather than cut off by the timeout, its partition's lease held meanwhile, and
    its copy enters the same arrival again (the run token is the arrival's) and starts the run."""
    key = "engineering/mysql/customers/date=20220121/customers.csv"
    context = RunningOut(left=(60_000, 500))  # enough to enter; half a second when its run would be started
    assert router.handler(sqs_event(eventbridge_arrival(key)), context) == {"batchItemFailures": []}
    assert executions(aws) == [] and dead_letters(aws) == []
    (sent_back,) = aws["sqs"].receive_message(QueueUrl=aws["queue_a"], MaxNumberOfMessages=10)["Messages"]
    assert router.handler(sqs_event(json.loads(sent_back["Body"])), CONTEXT) == {"batchItemFailures": []}
    (plan,) = plans(aws).values()
    assert plan["batch"]["count"] == 1 and read_files(plan) == [f"s3://raw-bucket/{key}"]


def test_a_record_that_fails_after_leasing_a_run_is_received_again_and_never_also_sent_back(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record of two arrivals (an S3 notification): the first leases its partition's run, the second fails (the
    catalog throttled), so the record is reported failed and SQS receives it again. Its leased run is still started
    if there is time; with none left, it is not sent back as well, which would make two live copies of it."""
    folder = "engineering/mysql/customers"
    keys = [f"{folder}/date=20220121/first.csv", f"{folder}/date=20220122/second.csv"]
    for key in keys:
        put_raw_object(key)
    notification = {
        "Records": [
            {
                "eventName": "ObjectCreated:Put",
                "eventTime": "2022-01-20T10:15:00Z",
                "s3": {"bucket": {"name": "raw-bucket"}, "object": {"key": key, "size": 1024, "sequencer": "0A"}},
            }
            for key in keys
        ]
    }
    real = router.enter_arrival
    throttled = ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "GetTable")

    def enter(arrival: Any, *args: Any) -> Any:
        if arrival.key == keys[1]:
            raise throttled
        return real(arrival, *args)

    monkeypatch.setattr(router, "enter_arrival", enter)
    out_of_time = RunningOut(left=(60_000, 500))  # enough to enter; half a second left when its run would start
    with pytest.raises(BatchProcessingError):  # its only record failed: the batch fails, as Lambda sees it
        router.handler(sqs_event(notification), out_of_time)
    assert executions(aws) == [] and dead_letters(aws) == []
    assert aws["sqs"].receive_message(QueueUrl=aws["queue_a"], MaxNumberOfMessages=10).get("Messages", []) == []
    # Received again once the catalog answers: both arrivals enter, and both runs start.
    monkeypatch.setattr(router, "enter_arrival", real)
    assert router.handler(sqs_event(notification), CONTEXT) == {"batchItemFailures": []}
    assert sorted(plans(aws)) == ["date=20220121", "date=20220122"]


def test_an_arrival_behind_a_full_partition_goes_back_to_queue_a_to_wait_and_nothing_is_parked(
    aws: dict[str, Any],
) -> None:
    """As many arrivals wait in the partition's item as it may hold (``MAX_PENDING_BYTES``, #39): the next one is
    sent back to queue A with a delay, not recorded, not failed (which would count towards the DLQ)."""
    from lakeline.commits import MAX_PENDING_BYTES

    plan = plan_for(aws)  # a run holds the partition
    key = plan["lease"]["key"]
    boto3.client("dynamodb", region_name=REGION).update_item(  # what ~400 arrivals waiting behind it hold
        TableName="pipeline-state",
        Key={"target_partition": {"S": key}},
        UpdateExpression="SET pending_bytes = :full",
        ExpressionAttributeValues={":full": {"N": str(MAX_PENDING_BYTES)}},
    )
    later = eventbridge_arrival("engineering/mysql/customers/date=20220120/file2.csv")
    response = router.handler(sqs_event(later), CONTEXT)
    assert response["batchItemFailures"] == []
    # Nothing recorded (the run's own arrival left ``pending`` when the run was planned), nothing parked.
    assert "pending" not in partition_state(key) and dead_letters(aws) == []
    attributes = aws["sqs"].get_queue_attributes(QueueUrl=aws["queue_a"], AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessagesDelayed"] == "1"  # it comes back once a run had time to take some


def test_a_run_past_its_stage_s_runs_in_flight_waits_in_queue_a_and_starts_when_one_ends(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backfill across hundreds of partitions started hundreds of executions at once, throttled by Athena and
    Glue past their retries (#39). A run now takes one of the stage's slots (``RUNS_IN_FLIGHT``) before it
    starts; without one, it keeps its partition and its record waits in queue A."""
    monkeypatch.setenv("RUNS_IN_FLIGHT", "1")
    clear_caches()
    boto3.client("s3", region_name=REGION).create_bucket(Bucket="stage-bucket")
    first = eventbridge_arrival("engineering/mysql/customers/date=20220120/file.csv")
    second = eventbridge_arrival("engineering/mysql/customers/date=20220121/file.csv")
    router.handler(sqs_event(first), CONTEXT)
    response = router.handler(sqs_event(second), CONTEXT)
    assert response["batchItemFailures"] == [] and len(executions(aws)) == 1 and dead_letters(aws) == []
    attributes = aws["sqs"].get_queue_attributes(QueueUrl=aws["queue_a"], AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessagesDelayed"] == "1"
    waiting = partition_state("commit#engineering_mysql_dev.customers/date=20220121")
    assert "lease_owner" in waiting  # it keeps its partition: what arrives there meanwhile waits behind it
    # Its batch is not taken while it waits for a slot (#39): the run takes what waits when it gets one.
    assert "taken_batch" not in waiting and len(waiting["pending"]["SS"]) == 1
    router.handler(sqs_event(eventbridge_arrival("engineering/mysql/customers/date=20220121/file2.csv")), CONTEXT)
    router.handler(sqs_event(second), CONTEXT)  # its record back after the delay: still no slot
    assert len(executions(aws)) == 1
    (execution,) = executions(aws)
    plan = json.loads(aws["sfn"].describe_execution(executionArn=execution["executionArn"])["input"])["plan"]
    commit.handler({"plan": plan}, CONTEXT)
    post_update.handler({"plan": plan}, CONTEXT)  # the first run ends: its slot is free
    router.handler(sqs_event(second), CONTEXT)
    assert len(executions(aws)) == 2
    (started,) = [e for e in executions(aws) if e["executionArn"] != execution["executionArn"]]
    later = json.loads(aws["sfn"].describe_execution(executionArn=started["executionArn"])["input"])["plan"]
    assert later["batch"]["count"] == 2  # both files of its partition in one run


def test_a_run_s_end_hands_its_slot_to_its_partition_s_follow_up_ahead_of_runs_waiting_for_one(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A burst's follow-up run holds its partition's lease: it used to give its slot back and wait in queue A
    behind every partition waiting for one, one full turn of the queue each time (#39: 155 times in the scale
    benchmark). The run's end now hands its slot to the follow-up, which starts at once."""
    monkeypatch.setenv("RUNS_IN_FLIGHT", "1")
    clear_caches()
    boto3.client("s3", region_name=REGION).create_bucket(Bucket="stage-bucket")
    router.handler(sqs_event(eventbridge_arrival("engineering/mysql/customers/date=20220120/file.csv")), CONTEXT)
    later = eventbridge_arrival("engineering/mysql/customers/date=20220120/file2.csv", sequencer="0062E99A88DC407461")
    other = eventbridge_arrival("engineering/mysql/customers/date=20220121/file.csv")
    assert router.handler(sqs_event(later, other), CONTEXT)["batchItemFailures"] == []
    (first,) = executions(aws)  # the later file waits for the run in flight; the other partition for a slot
    plan = json.loads(aws["sfn"].describe_execution(executionArn=first["executionArn"])["input"])["plan"]
    commit.handler({"plan": plan}, CONTEXT)
    post_update.handler({"plan": plan}, CONTEXT)
    (follow_up,) = queued(aws, "follow_ups_a")  # on its own queue, ahead of what waits in queue A
    router.handler(sqs_event(other), CONTEXT)  # the other partition's record back first: the follow-up holds the slot
    assert len(executions(aws)) == 1
    router.handler(sqs_event(follow_up), CONTEXT)
    started = [
        json.loads(aws["sfn"].describe_execution(executionArn=execution["executionArn"])["input"])["plan"]["raw_key"]
        for execution in executions(aws)
    ]
    assert sorted(key.rsplit("/", 2)[-2:] for key in started) == [
        ["date=20220120", "file.csv"],
        ["date=20220120", "file2.csv"],
    ], "the follow-up started with the slot its run's end handed it"
    attributes = aws["sqs"].get_queue_attributes(QueueUrl=aws["queue_a"], AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessagesDelayed"] == "2"  # the other's record sent back twice


def test_a_follow_up_that_finds_no_free_slot_waits_on_the_follow_up_queue_not_behind_queue_a(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A follow-up that finds every slot taken (its handed slot expired and was taken meanwhile) is sent back to the
    follow-up queue, whose mapping the router reads apart from queue A: sent back to queue A, it waited behind a
    burst's whole backlog (#39: 12 minutes in the scale benchmark) while holding its partition's lease."""
    from lakeline.commits.slots import RunSlots

    monkeypatch.setenv("RUNS_IN_FLIGHT", "1")
    clear_caches()
    boto3.client("s3", region_name=REGION).create_bucket(Bucket="stage-bucket")
    plan = committed_run_with_one_waiting(aws)
    post_update.handler({"plan": plan}, CONTEXT)
    (follow_up,) = queued(aws, "follow_ups_a")
    owner = follow_up["lakeline_follow_up"]["owner"]
    assert RunSlots(boto3.client("dynamodb", region_name=REGION), "pipeline-state", "a").release(owner)
    other = eventbridge_arrival("engineering/mysql/customers/date=20220121/file.csv")
    router.handler(sqs_event(other), CONTEXT)  # takes the one slot
    assert len(executions(aws)) == 2

    assert router.handler(sqs_event(follow_up), CONTEXT)["batchItemFailures"] == []
    assert len(executions(aws)) == 2 and dead_letters(aws) == []
    queue_a = aws["sqs"].get_queue_attributes(QueueUrl=aws["queue_a"], AttributeNames=["All"])["Attributes"]
    assert (queue_a["ApproximateNumberOfMessages"], queue_a["ApproximateNumberOfMessagesDelayed"]) == ("0", "0")
    follow_ups = aws["sqs"].get_queue_attributes(QueueUrl=aws["follow_ups_a"], AttributeNames=["All"])["Attributes"]
    assert follow_ups["ApproximateNumberOfMessagesDelayed"] == "1", "the follow-up waits on its own queue"


def test_a_follow_up_of_a_partition_still_receiving_files_waits_its_window(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """#39: a burst uploaded faster than runs end ran as many small runs (24 for 2,000 files on the local
    deployment), each follow-up taking what arrived since the run before. A follow-up whose partition's router
    recorded an arrival within ``STILL_ARRIVING_SECONDS`` waits ``FOLLOW_UP_WINDOW_SECONDS`` (30 s by default) to
    take more, however long ago the file was uploaded (2022 here: a backlog still being recorded)."""
    monkeypatch.setenv("FOLLOW_UP_WINDOW_SECONDS", "30")
    clear_caches()
    plan = committed_run_with_one_waiting(aws)
    assert post_update.handler({"plan": plan}, CONTEXT)["follow_up"] is not None
    follow_ups = aws["sqs"].get_queue_attributes(QueueUrl=aws["follow_ups_a"], AttributeNames=["All"])["Attributes"]
    assert (follow_ups["ApproximateNumberOfMessages"], follow_ups["ApproximateNumberOfMessagesDelayed"]) == ("0", "1")


def test_a_follow_up_whose_partition_s_arrivals_still_come_waits_again_up_to_its_bound(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """#39: one window from the run's end was not enough for a burst the router records for minutes (10 runs for
    2,000 files on the local deployment). The router looks again when the follow-up reaches it: arrivals still
    being recorded and a batch not full send it back for another window, holding its lease (no execution), at most
    ``MAX_FOLLOW_UP_WINDOWS`` times; then it starts with everything waiting."""
    from moto.sqs.models import sqs_backends

    from lakeline.commits import parse_follow_up
    from lambdas.router import WAITS_ATTRIBUTE
    from stage_a.plan import MAX_FOLLOW_UP_WINDOWS

    monkeypatch.setenv("FOLLOW_UP_WINDOW_SECONDS", "30")
    clear_caches()
    plan = committed_run_with_one_waiting(aws)
    owner = post_update.handler({"plan": plan}, CONTEXT)["follow_up"]
    (queued,) = sqs_backends["123456789012"][REGION].get_queue("queue-a-follow-ups")._messages  # delayed: not received
    body = queued.body
    parsed = parse_follow_up(json.loads(body))
    assert parsed is not None and parsed.owner == owner

    assert router.handler(sqs_event(body), CONTEXT)["batchItemFailures"] == []
    assert len(executions(aws)) == 1, "started while its partition's arrivals still came"
    follow_ups = aws["sqs"].get_queue_attributes(QueueUrl=aws["follow_ups_a"], AttributeNames=["All"])["Attributes"]
    assert follow_ups["ApproximateNumberOfMessagesDelayed"] == "2"  # the run end's window, and this one

    bounded = sqs_event(body)
    bounded["Records"][0]["messageAttributes"] = {
        WAITS_ATTRIBUTE: {"stringValue": str(MAX_FOLLOW_UP_WINDOWS), "dataType": "Number"}
    }
    assert router.handler(bounded, CONTEXT)["batchItemFailures"] == []
    (_, second) = sorted(executions(aws), key=lambda run: run["startDate"])
    taken = json.loads(aws["sfn"].describe_execution(executionArn=second["executionArn"])["input"])["plan"]
    assert taken["run_token"] == owner


def test_the_router_parses_an_arrivals_key_once(aws: dict[str, Any]) -> None:
    """The raw key is parsed into its table and partition once per arrival (``Arrival.raw``), whatever reads them
    on the way from the door to the started run."""
    key = "engineering/mysql/customers/date=20220120/file.csv"
    parsed: list[str] = []
    code = parse_raw_key.__code__

    def count(frame: Any, event: str, _argument: Any) -> None:
        if event == "call" and frame.f_code is code:
            parsed.append(frame.f_locals["key"])

    event = sqs_event(eventbridge_arrival(key))
    sys.setprofile(count)
    try:
        response = router.handler(event, CONTEXT)
    finally:
        sys.setprofile(None)
    assert response == {"batchItemFailures": []}
    assert len(executions(aws)) == 1
    assert parsed == [key]
