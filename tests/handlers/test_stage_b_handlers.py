"""Stage B's Lambda handlers against moto: queue B router, post-update routing and the append ledger."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from harness.faults import create_pass_state_machine
from lakeline.commits import PartitionState
from lakeline.commits.applied import published_ids
from lakeline.dependencies.model import parse_dependency_item
from lakeline.dependencies.store import DependencyStore, to_dynamodb
from lakeline.dependencies.sync import backfill
from lakeline.dependencies.tables import DependencyTableNames, create_dependency_tables
from lakeline.quality.evaluate import CheckResult, QualityReport
from lakeline.quality.metrics import BLOCKED_VERSIONS
from lakeline.storage import SchemeObjectStore
from lambdas.partition_commit import handler as commit
from lambdas.stage_b_failure import handler as failure
from lambdas.stage_b_post_update import handler as post_update
from lambdas.stage_b_router import handler as router
from stage_b.messages import SourceArrival, StageBMessage
from stage_end.quality import report_location, report_to_json
from tests.handlers.test_stage_a_handlers import (
    lineage_records,
    quality_metric_documents,
    sqs_event,
    succeeded,
    without_lists,
)
from tests.lambda_context import LambdaContextStub

REGION = "us-east-1"
CONTEXT = LambdaContextStub()
SEED_ITEM = Path(__file__).resolve().parents[1] / "fixtures" / "dependencies" / "seed_item.json"
TARGET = "engineering_analytics_dev.daily_customers"
CHAINED = "engineering_analytics_dev.weekly_customers"


def item(dataset: str, source: str, sql: str = "", sql_file: str = "", usage: str = "overwrite") -> dict[str, Any]:
    return {
        "dataset": dataset,
        "dependencies": [
            {
                "TableName": source,
                "FieldColumn": "date",
                "Usage": usage,
                "DateExpression": "%Y%m%d",
                "relativedelta_attributes": {"days": 0},
            }
        ],
        "partitionColumn": "date",
        "partitionPythonMask": "%Y%m%d",
        "steps": [{"db": "engineering_analytics_dev", "sql": sql, "sql_file": sql_file, "info": "load"}],
        "date_substitutions": [{"token": "$day", "format": "%Y%m%d", "relativedelta_attributes": {"days": 0}}],
    }


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        dlq = sqs.create_queue(QueueName="queue-b-dlq")["QueueUrl"]
        queue_b = sqs.create_queue(QueueName="queue-b")["QueueUrl"]
        follow_ups_b = sqs.create_queue(QueueName="queue-b-follow-ups")["QueueUrl"]
        lineage_queue = sqs.create_queue(QueueName="lineage")["QueueUrl"]
        sfn = boto3.client("stepfunctions", region_name=REGION)
        machine = create_pass_state_machine(sfn, "stage-b")
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        create_dependency_tables(dynamodb, DependencyTableNames())
        store = DependencyStore(dynamodb)
        store.put_items(
            [
                parse_dependency_item(
                    item(TARGET, "engineering_mysql_dev.customers", sql_file="daily.sql", usage="append")
                ),
                parse_dependency_item(
                    item(CHAINED, TARGET, sql=f"INSERT INTO {CHAINED} SELECT id, '$day' FROM {TARGET}")
                ),
                parse_dependency_item(json.loads(SEED_ITEM.read_text())),
            ]
        )
        backfill(store)
        glue = boto3.client("glue", region_name=REGION)
        glue.create_database(DatabaseInput={"Name": "engineering_analytics_dev"})
        for name in ("daily_customers", "weekly_customers", "destination_table"):
            glue.create_table(
                DatabaseName="engineering_analytics_dev",
                TableInput={
                    "Name": name,
                    "StorageDescriptor": {
                        "Columns": [{"Name": "id", "Type": "bigint"}],
                        "Location": f"s3://analytics-bucket/engineering/{name}/",
                    },
                    "PartitionKeys": [{"Name": "date", "Type": "string"}],
                },
            )
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket="artifacts-bucket")
        s3.create_bucket(Bucket="analytics-bucket")
        s3.put_object(
            Bucket="artifacts-bucket",
            Key="artifacts/athena_queries/engineering/daily.sql",
            Body=f"INSERT INTO {TARGET} SELECT customer_id, '$day' FROM engineering_mysql_dev.customers "
            "WHERE \"date\" = '$day'".encode(),
        )
        environment = {
            "STATE_MACHINE_ARN": machine,
            "DEAD_LETTER_QUEUE_URL": dlq,
            "DEPENDENCIES_TABLE": "dependencies",
            "DEPENDENCIES_BY_TABLE_TABLE": "dependencies-by-table",
            "PIPELINE_STATE_TABLE": "pipeline-state",
            "STAGE_B_QUEUE_URL": queue_b,
            "STAGE_B_FOLLOW_UP_QUEUE_URL": follow_ups_b,
            "STAGE_B_DEAD_LETTER_QUEUE_URL": dlq,
            "LINEAGE_QUEUE_URL": lineage_queue,
            "ARTIFACTS_BUCKET": "artifacts-bucket",
            "STAGE_BUCKET": "stage-bucket",
            "PIPELINE_ENVIRONMENT": "dev",
        }
        for name, value in environment.items():
            monkeypatch.setenv(name, value)
        for cached in (router.runtime, post_update.runtime, failure.runtime, commit.runtime):
            cached.cache_clear()
        yield {
            "sqs": sqs,
            "dlq": dlq,
            "queue_b": queue_b,
            "follow_ups_b": follow_ups_b,
            "lineage": lineage_queue,
            "sfn": sfn,
            "machine": machine,
            "s3": s3,
            "dynamodb": dynamodb,
        }


def message(
    target: str = TARGET, usage: str = "append", source: str = "engineering_mysql_dev.customers"
) -> StageBMessage:
    return StageBMessage.model_validate(
        {
            "target_dataset": target,
            "partition": {"date": "20220120"},
            "trigger": SourceArrival(
                table=source, partition={"date": "20220120"}, run="20220120t000000000000_aaaaaaaaaa"
            ),
            "usage": usage,
            "path": [f"{source}/date=20220120"],
        }
    )


def executions(aws: dict[str, Any]) -> list[dict[str, Any]]:
    return list(aws["sfn"].list_executions(stateMachineArn=aws["machine"])["executions"])


def test_router_plans_with_the_sql_file_from_artifacts_and_starts_once(aws: dict[str, Any]) -> None:
    body = message().model_dump_json()
    assert router.handler(sqs_event(body, body), CONTEXT) == {"batchItemFailures": []}
    (execution,) = executions(aws)
    assert execution["name"].startswith("daily_customers-")
    payload = json.loads(aws["sfn"].describe_execution(executionArn=execution["executionArn"])["input"])
    plan = payload["plan"]
    (step,) = plan["steps"]
    assert step["writes_target"] is True
    # an append writes its own rows; the partition's published files (none yet) are carried in at commit
    assert "UNION ALL" not in step["sql"]
    assert (plan["contribution"], plan["carry_from"], plan["replaces"]) == (message().contribution_key(), None, [])
    assert "WHERE \"date\" = '20220120'" in step["sql"]
    assert plan["target_location"].startswith("s3://analytics-bucket/engineering/daily_customers/date=20220120/")


def test_router_dead_letters_messages_that_can_never_run(aws: dict[str, Any]) -> None:
    # An item stored before its SQL was checked (written around `deps put`) is refused when read.
    weekly = "engineering_analytics_dev.weekly_customers"
    broken = item(weekly, TARGET, sql=f"INSERT INTO {weekly} ( SELECT id, '$day' FROM {TARGET}")
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    dynamodb.put_item(TableName=DependencyTableNames().dependencies, Item=to_dynamodb(broken))
    seed = message(target=weekly, usage="overwrite").model_dump_json()
    no_item = message(target="engineering_analytics_dev.unknown").model_dump_json()
    response = router.handler(sqs_event("{}", seed, no_item), CONTEXT)
    assert response == {"batchItemFailures": []}
    assert executions(aws) == []
    letters = aws["sqs"].receive_message(QueueUrl=aws["dlq"], MaxNumberOfMessages=10, MessageAttributeNames=["All"])
    reasons = sorted(m["MessageAttributes"]["lakeline_reason"]["StringValue"] for m in letters["Messages"])
    assert len(reasons) == 3
    assert any("does not parse" in reason for reason in reasons), reasons
    assert any("no dependency item for engineering_analytics_dev.unknown" in reason for reason in reasons)


def planned(aws: dict[str, Any], body: StageBMessage) -> dict[str, Any]:
    router.handler(sqs_event(body.model_dump_json()), CONTEXT)
    for execution in executions(aws):
        payload = json.loads(aws["sfn"].describe_execution(executionArn=execution["executionArn"])["input"])
        if StageBMessage.model_validate(payload["message"]) == body:
            return dict(payload)
    raise AssertionError(f"no execution for {body.node}")


def test_post_update_records_the_append_and_routes_the_chain(aws: dict[str, Any]) -> None:
    payload = planned(aws, message())
    commit.handler({"plan": payload["plan"]}, CONTEXT)
    result = post_update.handler(payload, CONTEXT)
    assert result["triggered"] == [f"{CHAINED}/date=20220120"]
    sent = aws["sqs"].receive_message(QueueUrl=aws["queue_b"], MaxNumberOfMessages=10)["Messages"]
    (chained,) = [StageBMessage.model_validate_json(m["Body"]) for m in sent]
    assert chained.path == ["engineering_mysql_dev.customers/date=20220120", f"{TARGET}/date=20220120"]
    assert chained.trigger.run == payload["plan"]["run_token"]
    # The append was recorded as applied by the commit, with the version it is in.
    state = aws["dynamodb"].get_item(
        TableName="pipeline-state", Key={"target_partition": {"S": f"commit#{TARGET}/date=20220120"}}
    )["Item"]
    assert applied_ids(aws, state) == {message().deduplication_id()}
    assert state["published"]["S"] == payload["plan"]["target_location"]
    assert "lease_owner" not in state  # released: nothing came while it ran
    # A redelivered message is planned as a run with nothing to apply.
    again = router.handler(sqs_event(message().model_dump_json()), CONTEXT)
    assert again == {"batchItemFailures": []}


def test_a_message_redelivered_after_its_run_ended_hands_the_lease_to_a_run_that_ends_it(
    aws: dict[str, Any],
) -> None:
    """Before: the redelivery took the ended run's lease again and found its execution done; nothing
    ended the lease, and the messages behind it waited for hours."""
    payload = planned(aws, message())
    commit.handler({"plan": payload["plan"]}, CONTEXT)
    post_update.handler(payload, CONTEXT)
    (first,) = executions(aws)
    succeeded(first["executionArn"])
    router.handler(sqs_event(message().model_dump_json()), CONTEXT)  # redelivered
    (second,) = [e for e in executions(aws) if e["executionArn"] != first["executionArn"]]
    handed = json.loads(aws["sfn"].describe_execution(executionArn=second["executionArn"])["input"])
    assert (handed["plan"]["message_ids"], handed["plan"]["steps"]) == ([], [])  # nothing applied twice
    post_update.handler(handed, CONTEXT)
    state = aws["dynamodb"].get_item(
        TableName="pipeline-state", Key={"target_partition": {"S": f"commit#{TARGET}/date=20220120"}}
    )["Item"]
    assert "lease_owner" not in state and "pending" not in state and state["version"]["N"] == "1"


def bucket_objects(aws: dict[str, Any], prefix: str) -> dict[str, bytes]:
    """What the bucket holds under ``prefix``, listed (not what a handler says it did)."""
    s3 = aws["s3"]
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="analytics-bucket", Prefix=prefix).get("Contents", [])]
    return {key: s3.get_object(Bucket="analytics-bucket", Key=key)["Body"].read() for key in keys}


def test_failure_removes_the_runs_partial_output(aws: dict[str, Any]) -> None:
    # A first run publishes a version of the partition.
    first = planned(aws, message())
    published = first["plan"]["target_location"].removeprefix("s3://analytics-bucket/")
    aws["s3"].put_object(Bucket="analytics-bucket", Key=f"{published}part-0.parquet", Body=b"published rows")
    commit.handler({"plan": first["plan"]}, CONTEXT)
    post_update.handler(first, CONTEXT)
    (execution,) = executions(aws)
    succeeded(execution["executionArn"])
    # A later arrival's run writes part of its output to its own fresh prefix, then a step fails.
    later = message().model_copy(
        update={
            "trigger": SourceArrival(
                table="engineering_mysql_dev.customers",
                partition={"date": "20220120"},
                run="20220120t010000000000_bbbbbbbbbb",
            )
        }
    )
    payload = planned(aws, later)
    location = payload["plan"]["target_location"].removeprefix("s3://analytics-bucket/")
    partition_prefix = "engineering/daily_customers/date=20220120/"
    assert location != published and location.startswith(partition_prefix) and published.startswith(partition_prefix)
    for name in ("part-0.parquet", "part-1.parquet"):
        aws["s3"].put_object(Bucket="analytics-bucket", Key=f"{location}{name}", Body=b"partial rows")
    before = bucket_objects(aws, published)
    error = {"Error": "Athena.QueryFailed", "Cause": "COLUMN_NOT_FOUND"}
    result = failure.handler({"plan": payload["plan"], "error": error}, CONTEXT)
    assert bucket_objects(aws, location) == {}, "the failed run's prefix is empty"
    left = bucket_objects(aws, partition_prefix)
    assert without_lists(left) == list(before), "the published version is untouched, nothing else left"
    assert before == {f"{published}part-0.parquet": b"published rows"}
    assert result["partial_objects_deleted"] == 2


def test_a_failure_after_the_quality_step_was_killed_drops_its_table_once_and_again(aws: dict[str, Any]) -> None:
    """The quality step drops its table in its own ``finally``, which a Lambda timeout (Sandbox.Timedout), running
    out of memory or a Glue job stopped at its timeout skip: the failure function drops it (named by the plan),
    and a redelivered failure finds it gone."""
    checked = item(TARGET, "engineering_mysql_dev.customers", sql_file="daily.sql", usage="append")
    checked["checks"] = [{"rule": "RowCount > 0"}]
    DependencyStore(aws["dynamodb"]).put_items([parse_dependency_item(checked)])
    payload = planned(aws, message())
    gate = payload["plan"]["quality"]
    assert gate["quality_table"].startswith("lakeline_tmp_") and gate["quality_table"].endswith("_quality")
    glue = boto3.client("glue", region_name=REGION)
    # What the step's CREATE made before it was killed (a symlink table over the run's manifest).
    glue.create_table(
        DatabaseName=gate["database"],
        TableInput={
            "Name": gate["quality_table"],
            "StorageDescriptor": {"Columns": [{"Name": "id", "Type": "bigint"}], "Location": "s3://x/manifest/"},
        },
    )
    error = {"Error": "Sandbox.Timedout", "Cause": "Task timed out after 900.00 seconds"}
    request = {"plan": payload["plan"], "error": error, "failed_step": "quality"}
    for _ in range(2):  # the failure, then its redelivery
        failure.handler(request, CONTEXT)
        names = [table["Name"] for table in glue.get_tables(DatabaseName=gate["database"])["TableList"]]
        assert [name for name in names if name.startswith("lakeline_tmp")] == []
        assert TARGET.split(".")[1] in names, "the published table stays"


def test_a_version_its_checks_blocked_is_counted_by_the_failure_function_and_so_is_a_redelivery(
    aws: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """#41: a target's blocked version counted in QualityBlockedVersions (the alarm's metric); a redelivered
    failure, whose report went with the run's prefix, still knows it from its reason."""
    checked = item(TARGET, "engineering_mysql_dev.customers", sql_file="daily.sql", usage="append")
    checked["checks"] = [{"rule": "RowCount > 0"}]
    DependencyStore(aws["dynamodb"]).put_items([parse_dependency_item(checked)])
    plan = planned(aws, message())["plan"]
    report = QualityReport(TARGET, (CheckResult("RowCount > 0", "block", False, 0.0),))
    SchemeObjectStore(aws["s3"]).write_text(report_location(plan["target_location"]), report_to_json(report))
    cause = json.dumps({"errorType": "QualityBlocked", "errorMessage": "quality checks blocked ..."})
    request = {"plan": plan, "error": {"Error": "QualityBlocked", "Cause": cause}, "failed_step": "quality"}
    for _ in range(2):  # the failure, then its redelivery (the report gone)
        capsys.readouterr()
        assert failure.handler(request, CONTEXT)["quality_blocked"] is True
        documents = quality_metric_documents(capsys.readouterr().out)
        assert documents[BLOCKED_VERSIONS][BLOCKED_VERSIONS] == [1.0]
        # Where a failed run's STEP_FAILED goes: the seed's DQ_CHECK_FAIL on the target, the same node again.
        (record,) = lineage_records(aws)
        assert (record["action_taken"], record["dataset"], record.get("version")) == ("DQ_CHECK_FAIL", TARGET, None)


def test_failure_parks_the_message_in_the_dlq_and_a_redrive_runs_again(aws: dict[str, Any]) -> None:
    payload = planned(aws, message())
    error = {"Error": "Athena.QueryFailed", "Cause": "COLUMN_NOT_FOUND: no_such_column"}
    failure.handler({"plan": payload["plan"], "error": error}, CONTEXT)
    letters = aws["sqs"].receive_message(QueueUrl=aws["dlq"], MaxNumberOfMessages=10, MessageAttributeNames=["All"])
    (letter,) = letters["Messages"]
    assert "COLUMN_NOT_FOUND" in letter["MessageAttributes"]["lakeline_reason"]["StringValue"]
    assert StageBMessage.model_validate_json(letter["Body"]) == message()
    # The execution ended (here: aborted); redriving the parked message starts a second attempt.
    (first,) = executions(aws)
    aws["sfn"].stop_execution(executionArn=first["executionArn"])
    router.handler(sqs_event(letter["Body"]), CONTEXT)
    names = sorted(e["name"] for e in executions(aws))
    assert names == [first["name"], f"{first['name']}-2"]
    # A redelivery while that attempt runs is still a duplicate.
    router.handler(sqs_event(letter["Body"]), CONTEXT)
    assert len(executions(aws)) == 2


def test_a_failed_post_update_parks_the_applied_message_keeps_its_output_and_a_redrive_routes_the_chain(
    aws: dict[str, Any],
) -> None:
    """#20, defect 5, in stage B: after the publish, the failure path (``post_update``) deletes nothing,
    ends the lease, records the run's lineage and parks the message; its redrive applies nothing again
    and its post-update routes the chain under the run that published."""
    payload = planned(aws, message())
    location = payload["plan"]["target_location"].removeprefix("s3://analytics-bucket/")
    aws["s3"].put_object(Bucket="analytics-bucket", Key=f"{location}part-0.parquet", Body=b"x")
    commit.handler({"plan": payload["plan"]}, CONTEXT)
    error = {"Error": "ClientError", "Cause": "not authorized to perform: sqs:SendMessage"}
    result = failure.handler({"plan": payload["plan"], "error": error, "failed_step": "post_update"}, CONTEXT)
    assert result["partial_objects_deleted"] == 0
    listed = aws["s3"].list_objects_v2(Bucket="analytics-bucket", Prefix=location)["Contents"]
    assert [o["Key"] for o in listed] == [f"{location}part-0.parquet"]
    state = aws["dynamodb"].get_item(
        TableName="pipeline-state", Key={"target_partition": {"S": f"commit#{TARGET}/date=20220120"}}
    )["Item"]
    assert "lease_owner" not in state and applied_ids(aws, state) == {message().deduplication_id()}
    letters = aws["sqs"].receive_message(QueueUrl=aws["dlq"], MaxNumberOfMessages=10, MessageAttributeNames=["All"])
    (letter,) = letters["Messages"]
    assert letter["MessageAttributes"]["lakeline_reason"]["StringValue"].startswith("post_update failed: ")
    assert StageBMessage.model_validate_json(letter["Body"]) == message()
    assert "Messages" not in aws["sqs"].receive_message(QueueUrl=aws["queue_b"])  # not routed yet

    (first,) = executions(aws)
    aws["sfn"].stop_execution(executionArn=first["executionArn"])
    router.handler(sqs_event(letter["Body"]), CONTEXT)  # the redrive
    (second,) = [e for e in executions(aws) if e["executionArn"] != first["executionArn"]]
    again = json.loads(aws["sfn"].describe_execution(executionArn=second["executionArn"])["input"])
    assert (again["plan"]["message_ids"], again["plan"]["steps"]) == ([], [])  # nothing applied twice
    assert post_update.handler(again, CONTEXT)["triggered"] == [f"{CHAINED}/date=20220120"]
    sent = aws["sqs"].receive_message(QueueUrl=aws["queue_b"], MaxNumberOfMessages=10)["Messages"]
    (chained,) = [StageBMessage.model_validate_json(m["Body"]) for m in sent]
    assert chained.trigger.run == payload["plan"]["run_token"]


@pytest.mark.parametrize("odd", ["#v2", "?v=2"])
def test_a_failure_under_a_table_location_with_a_hash_or_a_question_mark_deletes_only_its_run(
    aws: dict[str, Any], odd: str
) -> None:
    """A Glue location may hold '#' or '?'. Parsed as a URL, the failed run's prefix was cut there and the
    failure function deleted the whole table, and every table whose folder starts with the same name."""
    root = f"engineering/daily_customers{odd}/"
    boto3.client("glue", region_name=REGION).update_table(
        DatabaseName="engineering_analytics_dev",
        TableInput={
            "Name": "daily_customers",
            "StorageDescriptor": {
                "Columns": [{"Name": "id", "Type": "bigint"}],
                "Location": f"s3://analytics-bucket/{root}",
            },
            "PartitionKeys": [{"Name": "date", "Type": "string"}],
        },
    )
    kept = sorted(
        [
            f"{root}date=20220119/lakeline_run=20220119t000000000000_aaaaaaaaaa/part-0.parquet",
            f"{root}date=20220120/lakeline_run=20220120t000000000000_aaaaaaaaaa/part-0.parquet",
            "engineering/daily_customers/date=20220120/lakeline_run=20220120t000000000000_bbbbbbbbbb/part-0.parquet",
            "engineering/daily_customers_v1/date=20220120/part-0.parquet",
        ]
    )
    for key in kept:
        aws["s3"].put_object(Bucket="analytics-bucket", Key=key, Body=b"kept")
    payload = planned(aws, message())
    location = payload["plan"]["target_location"]
    assert location.startswith(f"s3://analytics-bucket/{root}date=20220120/lakeline_run=")
    aws["s3"].put_object(Bucket="analytics-bucket", Key=location.split("/", 3)[3] + "part-0.parquet", Body=b"x")
    error = {"Error": "Athena.QueryFailed", "Cause": "COLUMN_NOT_FOUND"}
    result = failure.handler({"plan": payload["plan"], "error": error}, CONTEXT)
    assert result["partial_objects_deleted"] == 1
    left = aws["s3"].list_objects_v2(Bucket="analytics-bucket")["Contents"]
    assert sorted(item["Key"] for item in left) == kept


def applied_ids(aws: dict[str, Any], item: dict[str, Any]) -> frozenset[str]:
    """What the partition's published version holds, from its list beside it (``lakeline.commits.applied``)."""
    state = PartitionState.from_item(item["target_partition"]["S"], item)
    assert state.applied_list is not None and not state.applied  # in the list, not the item
    return published_ids(state, SchemeObjectStore(aws["s3"]))
