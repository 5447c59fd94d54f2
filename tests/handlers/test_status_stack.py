"""``lakeline status --stack``: a deployed pipeline's state, dead letters and failed executions, read
through the stack's outputs (moto: CloudFormation, DynamoDB, SQS, Step Functions)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from typer.testing import CliRunner

from lakeline.cli import app
from lakeline.dependencies.model import parse_dependency_item
from lakeline.dependencies.store import DependencyStore
from lakeline.dependencies.sync import backfill
from lakeline.dependencies.tables import DependencyTableNames, create_dependency_tables
from lakeline.operations.status import LATER_OUTPUTS, STACK_OUTPUTS
from lakeline.quality.evaluate import CheckResult, QualityReport
from stage_end.quality import report_location, report_to_json
from tests.seed_items import seed_item

REGION = "us-east-1"
STACK = "Lakeline-dev-Pipeline"


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("SF_EXECUTION_HISTORY_TYPE", "FAILURE")  # moto's executions fail
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        names = DependencyTableNames()
        create_dependency_tables(dynamodb, names)
        store = DependencyStore(dynamodb, names.dependencies, names.by_table)
        item = parse_dependency_item({**seed_item(), "triggerMode": "all"})
        store.put_items([item])
        backfill(store)
        sqs = boto3.client("sqs", region_name=REGION)
        dlq_a = sqs.create_queue(QueueName="stage-a-dlq")["QueueUrl"]
        queue_a = sqs.create_queue(QueueName="stage-a")["QueueUrl"]
        dlq_b = sqs.create_queue(QueueName="stage-b-dlq")["QueueUrl"]
        queue_b = sqs.create_queue(QueueName="stage-b")["QueueUrl"]
        follow_ups_a = sqs.create_queue(QueueName="stage-a-follow-ups")["QueueUrl"]
        follow_ups_b = sqs.create_queue(QueueName="stage-b-follow-ups")["QueueUrl"]
        dlq_lineage = sqs.create_queue(QueueName="lineage-dlq")["QueueUrl"]
        dlq_stream = sqs.create_queue(QueueName="stream-dlq")["QueueUrl"]
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket="raw")
        sfn = boto3.client("stepfunctions", region_name=REGION)
        definition = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}})
        machines = [
            sfn.create_state_machine(name=name, definition=definition, roleArn="arn:aws:iam::123456789012:role/r")[
                "stateMachineArn"
            ]
            for name in ("stage-a", "stage-b")
        ]
        values = {
            "PipelineStateTable": names.pipeline_state,
            "DependenciesTable": names.dependencies,
            "DependenciesByTableTable": names.by_table,
            "StageAQueueUrl": queue_a,
            "StageADeadLetterQueueUrl": dlq_a,
            "StageBQueueUrl": queue_b,
            "StageBDeadLetterQueueUrl": dlq_b,
            "LineageDeadLetterQueueUrl": dlq_lineage,
            "DependenciesStreamDeadLetterQueueUrl": dlq_stream,
            "StageAStateMachineArn": machines[0],
            "StageBStateMachineArn": machines[1],
            "RawBucket": "raw",
            "StageAFollowUpQueueUrl": follow_ups_a,
            "StageBFollowUpQueueUrl": follow_ups_b,
        }
        assert set(values) == {*STACK_OUTPUTS.values(), *LATER_OUTPUTS.values()}
        template = {
            "Resources": {"Marker": {"Type": "AWS::SQS::Queue"}},
            "Outputs": {name: {"Value": value} for name, value in values.items()},
        }
        boto3.client("cloudformation", region_name=REGION).create_stack(
            StackName=STACK, TemplateBody=json.dumps(template)
        )
        yield {
            "dynamodb": dynamodb,
            "sqs": sqs,
            "s3": s3,
            "sfn": sfn,
            "dlq_a": dlq_a,
            "dlq_b": dlq_b,
            "queue_a": queue_a,
            "dlq_stream": dlq_stream,
            "queue_b": queue_b,
            "follow_ups_b": follow_ups_b,
            "machines": machines,
            "item": item,
        }


def status(*args: str) -> Any:
    return CliRunner().invoke(app, ["status", "--stack", STACK, *args])


def test_a_quiet_stack_reports_its_partitions_and_exits_0(stack: dict[str, Any]) -> None:
    stack["dynamodb"].put_item(
        TableName="pipeline-state",
        Item={"target_partition": {"S": "commit#eng_dev.t/date=20220120"}, "version": {"N": "3"}, "files": {"N": "2"}},
    )
    result = status("--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["where"] == f"stack {STACK}"
    assert [(p["table"], p["partition"], p["version"]) for p in report["partitions"]] == [
        ("eng_dev.t", "date=20220120", 3)
    ]
    assert report["dead_letters"] == {"stage a": 0, "stage b": 0, "lineage": 0, "dependencies stream": 0}
    assert report["failures"] == []


def test_each_published_versions_checks_are_read_from_its_runs_report_in_s3(stack: dict[str, Any]) -> None:
    """#41: the quality step keeps ``quality.json`` beside the run (its manifest prefix); the version that run
    published shows its checks, one published without checks shows none."""
    checked = "s3://stage/eng/t/date=20220120/lakeline_run=20261130t000000000000_aaaaaaaaaa/"
    unchecked = "s3://stage/eng/u/date=20220120/lakeline_run=20261130t000000000000_bbbbbbbbbb/"
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="stage")
    report = QualityReport(
        "eng_dev.t (date=20220120)",
        (
            CheckResult('IsComplete "id"', "block", True, 1.0),
            CheckResult("RowCount > 10", "warn", False, 3.0),
        ),
    )
    where = report_location(checked).removeprefix("s3://stage/")
    s3.put_object(Bucket="stage", Key=where, Body=report_to_json(report).encode())
    for table, published in (("t", checked), ("u", unchecked)):
        stack["dynamodb"].put_item(
            TableName="pipeline-state",
            Item={
                "target_partition": {"S": f"commit#eng_dev.{table}/date=20220120"},
                "version": {"N": "1"},
                "published": {"S": published},
            },
        )
    result = status("--format", "json")
    assert result.exit_code == 0, result.output
    shown = {p["table"]: p["quality"] for p in json.loads(result.output)["partitions"]}
    assert shown == {"eng_dev.t": "1/2 passed; failed: RowCount > 10 (warn)", "eng_dev.u": None}
    table = status()
    assert "RowCount > 10 (warn)" in table.output and "checks" in table.output


def test_what_waits_what_is_parked_and_what_failed_and_exit_1(stack: dict[str, Any]) -> None:
    item = stack["item"]
    target = f"{item.dataset}/date=20220115"
    stack["dynamodb"].put_item(
        TableName="pipeline-state",
        Item={"target_partition": {"S": target}, "arrived_sources": {"SS": [item.source_tables[0]]}},
    )
    stack["sqs"].send_message(QueueUrl=stack["dlq_a"], MessageBody="{}")
    stack["sqs"].send_message(QueueUrl=stack["dlq_stream"], MessageBody="{}")  # a refused dependency item
    stack["sfn"].start_execution(stateMachineArn=stack["machines"][1], name="daily-run-1")
    result = status()
    assert result.exit_code == 1, result.output
    assert "dead letters: stage a 1, stage b 0, lineage 0, dependencies stream 1" in result.output
    assert "stage B daily-run-1 failed at " in result.output
    report = json.loads(status("--format", "json").output)
    (waiting,) = report["waiting_targets"]
    assert waiting["target_partition"] == target
    assert waiting["missing"] == sorted(set(item.source_tables) - {item.source_tables[0]})


def test_a_stack_that_does_not_exist_is_one_line_and_exit_2(stack: dict[str, Any]) -> None:
    result = CliRunner().invoke(app, ["status", "--stack", "Typo"])
    assert result.exit_code == 2, result.output
    assert "cannot read stack Typo:" in result.output and "Traceback" not in result.output


def test_a_stack_of_another_version_says_what_it_lacks(stack: dict[str, Any]) -> None:
    boto3.client("cloudformation", region_name=REGION).create_stack(
        StackName="Old", TemplateBody=json.dumps({"Resources": {"Marker": {"Type": "AWS::SQS::Queue"}}})
    )
    result = CliRunner().invoke(app, ["status", "--stack", "Old"])
    assert result.exit_code == 2
    assert "stack Old has no output PipelineStateTable" in result.output


def test_reprocess_routes_a_range_of_partitions_again_into_queue_b(stack: dict[str, Any]) -> None:
    appended = seed_item(dataset="engineering_analytics_dev.appended")
    appended["dependencies"][0]["Usage"] = "append"
    store = DependencyStore(stack["dynamodb"], "dependencies", "dependencies-by-table")
    store.put_items([parse_dependency_item(appended)])
    backfill(store)
    for day in ("20220118", "20220120", "20220125", "20220201"):
        stack["dynamodb"].put_item(
            TableName="pipeline-state",
            Item={"target_partition": {"S": f"commit#engineering_mysql_dev.customers/date={day}"}},
        )
    args = ["reprocess", "--stack", STACK, "--table", "engineering_mysql_dev.customers"]
    args += ["--from", "20220118", "--to", "20220125"]

    planned = CliRunner().invoke(app, [*args, "--dry-run"])
    assert planned.exit_code == 0, planned.output
    assert "3 partitions routed again; would rebuild 6 targets" in planned.output
    queued = stack["sqs"].receive_message(QueueUrl=stack["queue_b"], MaxNumberOfMessages=10)
    assert queued.get("Messages", []) == []  # a dry run sends nothing

    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    messages = stack["sqs"].receive_message(QueueUrl=stack["queue_b"], MaxNumberOfMessages=10)["Messages"]
    bodies = [json.loads(message["Body"]) for message in messages]
    for target in (stack["item"].dataset, "engineering_analytics_dev.appended"):
        dates = sorted(body["partition"]["date"] for body in bodies if body["target_dataset"] == target)
        assert dates == ["20220115", "20220115", "20220122"], target
    assert all(body["trigger"]["run"].startswith("reprocess-") for body in bodies)
    # The append target is rebuilt too: each run replaces the rows its trigger's partition appended
    # before (stage_b.plan; tests/spark/test_partition_commits.py), so nothing is taken twice...
    stack["sqs"].purge_queue(QueueUrl=stack["queue_b"])
    # ...unless its partition holds files no contribution owns (appended before they were recorded):
    # left out, named, and the command exits 1.
    stack["dynamodb"].put_item(
        TableName="pipeline-state",
        Item={
            "target_partition": {"S": "commit#engineering_analytics_dev.appended/date=20220122"},
            "published": {"S": "s3://analytics/appended/date=20220122/lakeline_run=old/"},
            "files": {"N": "2"},
            "contributions": {"SS": ["k|part-0.parquet"]},
        },
    )
    guarded = CliRunner().invoke(app, args)
    assert guarded.exit_code == 1, guarded.output
    assert "3 partitions routed again; sent 5 targets" in guarded.output
    assert "left out engineering_analytics_dev.appended/date=20220122: 1 of its files were appended before" in (
        " ".join(guarded.output.split())
    )


def test_dlq_list_shows_each_reason_and_leaves_the_queue_as_it_was(stack: dict[str, Any]) -> None:
    from lakeline.aws.sqs import dead_letter

    dead_letter(stack["sqs"], stack["dlq_a"], '{"detail": 1}', "s3://raw/k.csv: header lacks column id", "stage-a")
    result = CliRunner().invoke(app, ["dlq", "list", "--stack", STACK, "--queue", "stage-a"])
    assert result.exit_code == 1, result.output
    assert "stage-a: 1 parked" in result.output and "header lacks column id" in result.output
    again = CliRunner().invoke(app, ["dlq", "list", "--stack", STACK])
    assert "stage-a: 1 parked" in again.output and "stage-b: 0 parked" in again.output  # still there


def test_dlq_redrive_sends_a_stages_messages_back_and_keeps_unroutable_targets(stack: dict[str, Any]) -> None:
    from lakeline.aws.sqs import dead_letter

    dead_letter(stack["sqs"], stack["dlq_a"], '{"detail": 1}', "AccessDenied on glue:GetTable", "stage-a-router")
    dead_letter(stack["sqs"], stack["dlq_a"], '{"detail": 2}', "AccessDenied on glue:GetTable", "stage-a-router")
    dead_letter(stack["sqs"], stack["dlq_b"], '{"unrouted": {"target_dataset": "x.y"}}', "invalid item", "routing")
    result = CliRunner().invoke(app, ["dlq", "redrive", "--stack", STACK, "--queue", "stage-a"])
    assert result.exit_code == 0, result.output
    assert "stage-a: 2 messages sent back to the queue" in result.output
    back = stack["sqs"].receive_message(QueueUrl=stack["queue_a"], MaxNumberOfMessages=10)["Messages"]
    assert sorted(message["Body"] for message in back) == ['{"detail": 1}', '{"detail": 2}']
    assert stack["sqs"].receive_message(QueueUrl=stack["dlq_a"]).get("Messages", []) == []
    kept = CliRunner().invoke(app, ["dlq", "redrive", "--stack", STACK, "--queue", "stage-b"])
    assert "stage-b: 0 messages sent back" in kept.output and "kept" in kept.output and "reprocess" in kept.output
    listed = CliRunner().invoke(app, ["dlq", "list", "--stack", STACK, "--queue", "stage-b"])
    assert "stage-b: 1 parked" in listed.output


def test_a_message_parked_again_during_a_redrive_waits_for_the_next_one(stack: dict[str, Any]) -> None:
    """The deployed router parks a message whose cause is not fixed as soon as it arrives (moto's event
    source mapping does so inside the send): the redrive must not take it again, or it goes round for ever."""
    from lakeline.aws.sqs import dead_letter
    from lakeline.operations.dead_letters import redrive

    sqs = stack["sqs"]
    for number in range(12):  # more than one receive's worth
        dead_letter(sqs, stack["dlq_a"], f'{{"detail": {number}}}', "no raw table x.y in the catalog", "stage-a-router")

    class ParkingAgain:
        """The queue's consumer, still failing: each message sent to queue A is parked again at once."""

        def __init__(self) -> None:
            self.sent: list[str] = []

        def __getattr__(self, name: str) -> Any:
            return getattr(sqs, name)

        def send_message(self, QueueUrl: str, MessageBody: str) -> Any:  # noqa: N803 (boto3's names)
            self.sent.append(MessageBody)
            assert len(self.sent) <= 24, "the redrive takes the messages it sent back, again and again"
            dead_letter(sqs, stack["dlq_a"], MessageBody, "no raw table x.y in the catalog", "stage-a-router")
            return {}

    consumer = ParkingAgain()
    sent, kept = redrive(consumer, stack["dlq_a"], stack["queue_a"])  # type: ignore[arg-type]
    assert (sent, kept) == (12, [])
    assert sorted(consumer.sent) == sorted(f'{{"detail": {number}}}' for number in range(12))
    attributes = sqs.get_queue_attributes(QueueUrl=stack["dlq_a"], AttributeNames=["ApproximateNumberOfMessages"])
    assert attributes["Attributes"]["ApproximateNumberOfMessages"] == "12"  # parked again, for the next redrive


def test_a_redrive_that_fails_part_way_leaves_what_it_did_not_send_visible(stack: dict[str, Any]) -> None:
    from lakeline.aws.sqs import dead_letter
    from lakeline.operations.dead_letters import read_dead_letters, redrive

    sqs = stack["sqs"]
    for number in range(5):
        dead_letter(sqs, stack["dlq_a"], f'{{"detail": {number}}}', "no raw table x.y in the catalog", "stage-a-router")

    class FailingThirdSend:
        def __init__(self) -> None:
            self.sends = 0

        def __getattr__(self, name: str) -> Any:
            return getattr(sqs, name)

        def send_message(self, QueueUrl: str, MessageBody: str) -> Any:  # noqa: N803 (boto3's names)
            self.sends += 1
            if self.sends == 3:
                raise ConnectionError("the network went away")
            return sqs.send_message(QueueUrl=QueueUrl, MessageBody=MessageBody)

    with pytest.raises(ConnectionError):
        redrive(FailingThirdSend(), stack["dlq_a"], stack["queue_a"])  # type: ignore[arg-type]
    # The two sent are gone from the DLQ; the three others can be read (and redriven) at once.
    assert len(read_dead_letters(sqs, stack["dlq_a"])) == 3


def test_dlq_redrive_of_a_queue_without_a_stage_is_refused(stack: dict[str, Any]) -> None:
    result = CliRunner().invoke(app, ["dlq", "redrive", "--stack", STACK, "--queue", "lineage"])
    assert result.exit_code == 2 and "--queue must be stage-a or stage-b" in result.output
    refused = CliRunner().invoke(app, ["dlq", "redrive", "--stack", STACK, "--queue", "dependencies-stream"])
    assert refused.exit_code == 2 and "put a corrected item under the key named" in refused.output


def test_dlq_list_names_a_refused_dependency_item_and_a_batch_lambda_gave_up_on(stack: dict[str, Any]) -> None:
    from lakeline.dependencies.sync import RefusedChange, park_refused

    reason = "dependency item 'a.b': partitionColumn: 'Not Valid' is not a lowercase identifier"
    park_refused(stack["sqs"], stack["dlq_stream"], RefusedChange("a.b", "INSERT", "1100000000017454423010", reason))
    discarded = {
        "requestContext": {"condition": "RetryAttemptsExhausted", "approximateInvokeCount": 4},
        "DDBStreamBatchInfo": {"batchSize": 2, "startSequenceNumber": "7", "endSequenceNumber": "8"},
    }
    stack["sqs"].send_message(QueueUrl=stack["dlq_stream"], MessageBody=json.dumps(discarded))
    result = CliRunner().invoke(app, ["dlq", "list", "--stack", STACK, "--queue", "dependencies-stream"])
    assert result.exit_code == 1, result.output
    assert "dependencies-stream: 2 parked" in result.output
    assert reason in result.output and '"sequence_number":"1100000000017454423010"' in result.output
    assert "Lambda gave up on 2 stream records, sequence numbers 7..8 (RetryAttemptsExhausted, 4 invocations)" in (
        result.output
    )
    assert "put a corrected item under the key named" in result.output


def test_dlq_show_prints_one_parked_message_whole_and_leaves_it_there(stack: dict[str, Any]) -> None:
    from lakeline.aws.sqs import dead_letter

    body = json.dumps({"detail": {"object": {"key": "a/b/c/day=2024-03-01/k.csv"}}, "padding": "x" * 300})
    dead_letter(stack["sqs"], stack["dlq_b"], "not json", "x", "stage-b-router")
    dead_letter(stack["sqs"], stack["dlq_a"], body, "s3://raw/k.csv: header lacks column id", "stage-a-router")
    listed = CliRunner().invoke(app, ["dlq", "list", "--stack", STACK, "--queue", "stage-a"])
    message_id = listed.output.split("stage-a: 1 parked")[1].split()[0]

    shown = CliRunner().invoke(app, ["dlq", "show", message_id, "--stack", STACK])
    assert shown.exit_code == 0, shown.output
    assert f"stage-a {message_id}" in shown.output and "reason: s3://raw/k.csv: header lacks column id" in shown.output
    assert "parked by: stage-a-router" in shown.output
    assert json.loads(shown.output[shown.output.index("{") :]) == json.loads(body)  # whole, where list cuts it
    assert "stage-a: 1 parked" in CliRunner().invoke(app, ["dlq", "list", "--stack", STACK]).output

    missing = CliRunner().invoke(app, ["dlq", "show", "no-such-id", "--stack", STACK, "--queue", "stage-b"])
    assert missing.exit_code == 2 and "no parked message no-such-id in stage-b" in missing.output


def test_reprocess_raw_sends_the_raw_files_loaded_into_a_range_through_stage_a_again(stack: dict[str, Any]) -> None:
    s3, prefix = stack["s3"], "engineering/mysql/customers"
    loaded = {
        "20220118": ["a.csv", "b.csv.gz"],
        # Loaded in its own order first, then read by name: only the copy is sent again.
        "20220120": ["moved.csv", "moved.lakeline-by-name.csv"],
        "20220201": ["later.csv"],  # out of the range
    }
    for day, names in loaded.items():
        keys = [f"{prefix}/date={day}/{name}" for name in names]
        for key in keys:
            made_from = {"lakeline-made-from": "0055AED6DCD90281E5"} if "by-name" in key else {}
            encoding = {"ContentEncoding": "gzip"} if key.endswith(".gz") else {}
            s3.put_object(
                Bucket="raw", Key=key, Body=b"id\n1\n", ContentType="text/csv", Metadata=made_from, **encoding
            )
        stack["dynamodb"].put_item(
            TableName="pipeline-state",
            Item={
                "target_partition": {"S": f"commit#engineering_mysql_dev.customers/date={day}"},
                "applied": {"SS": [f"{key}@0055AED6DCD9028{n}" for n, key in enumerate(keys)]},
            },
        )
    args = ["reprocess", "--stack", STACK, "--table", "engineering_mysql_dev.customers", "--raw"]
    args += ["--from", "20220118", "--to", "20220125"]
    sent = [
        f"{prefix}/date=20220118/a.csv",
        f"{prefix}/date=20220118/b.csv.gz",
        f"{prefix}/date=20220120/moved.lakeline-by-name.csv",
    ]

    def metadata(key: str) -> dict[str, str]:
        return dict(s3.head_object(Bucket="raw", Key=key)["Metadata"])

    planned = CliRunner().invoke(app, [*args, "--dry-run"])
    assert planned.exit_code == 0, planned.output
    assert "2 partitions; would send 3 raw files through stage A again" in planned.output
    assert [line.strip() for line in planned.output.splitlines()[-3:]] == sent
    assert all("lakeline-reprocessed" not in metadata(key) for key in sent)  # a dry run copies nothing

    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "2 partitions; sent 3 raw files through stage A again" in result.output
    for key in sent:
        head = s3.head_object(Bucket="raw", Key=key)
        # A new version of the same bytes and headers, which S3 announces as a new arrival.
        assert head["Metadata"]["lakeline-reprocessed"].startswith("reprocess-")
        assert head["ContentType"] == "text/csv"
        assert s3.get_object(Bucket="raw", Key=key)["Body"].read() == b"id\n1\n"
    assert s3.head_object(Bucket="raw", Key=f"{prefix}/date=20220118/b.csv.gz")["ContentEncoding"] == "gzip"
    assert metadata(f"{prefix}/date=20220120/moved.lakeline-by-name.csv")["lakeline-made-from"] == "0055AED6DCD90281E5"
    for untouched in (f"{prefix}/date=20220120/moved.csv", f"{prefix}/date=20220201/later.csv"):
        assert "lakeline-reprocessed" not in metadata(untouched)

    # A file removed since it was loaded is named and left out; the others go (exit 1: something was left).
    s3.delete_object(Bucket="raw", Key=sent[0])
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 1, again.output
    assert "sent 2 raw files" in again.output and f"left out {sent[0]}: gone from s3://raw" in again.output

    # An append target reached from the table does not stop it: the rebuilt partitions replace the
    # rows they appended before (stage_b.plan), they do not add them again.
    appended = seed_item(dataset="engineering_analytics_dev.appended")
    appended["dependencies"][0]["Usage"] = "append"
    store = DependencyStore(stack["dynamodb"], "dependencies", "dependencies-by-table")
    store.put_items([parse_dependency_item(appended)])
    backfill(store)
    accepted = CliRunner().invoke(app, args)
    assert accepted.exit_code == 1 and "sent 2 raw files" in accepted.output, accepted.output

    mixed = CliRunner().invoke(app, [*args, "--target", "engineering_analytics_dev.x"])
    assert mixed.exit_code == 2 and "give no --target" in mixed.output
    target = CliRunner().invoke(
        app,
        [
            "reprocess",
            "--stack",
            STACK,
            "--table",
            "engineering_mysql_dev.nothing",
            "--raw",
            "--from",
            "1",
            "--to",
            "9",
        ],
    )
    assert target.exit_code == 2 and "has no partition in that range" in target.output


def commit_item(partition: str, *keys: str) -> dict[str, Any]:
    return {"target_partition": {"S": f"commit#{partition}"}, "applied": {"SS": [f"{key}@1" for key in keys]}}


def test_reprocess_raw_of_an_unpartitioned_table_or_a_stack_without_the_raw_bucket_says_so(
    stack: dict[str, Any],
) -> None:
    countries = commit_item("engineering_mysql_dev.countries/", "engineering/mysql/countries/x.csv")
    stack["dynamodb"].put_item(TableName="pipeline-state", Item=countries)
    args = ["reprocess", "--raw", "--from", "1", "--to", "9", "--table"]
    unpartitioned = CliRunner().invoke(app, [*args, "engineering_mysql_dev.countries", "--stack", STACK])
    assert unpartitioned.exit_code == 2
    assert "is unpartitioned: --raw takes a range of partitions" in unpartitioned.output

    # A stack deployed before the RawBucket output: status works, --raw says what it lacks.
    cloudformation = boto3.client("cloudformation", region_name=REGION)
    template = cloudformation.get_template(StackName=STACK)["TemplateBody"]
    template = json.loads(template) if isinstance(template, str) else dict(template)
    del template["Outputs"]["RawBucket"]
    cloudformation.create_stack(StackName="Old", TemplateBody=json.dumps(template))
    assert "no output" not in CliRunner().invoke(app, ["status", "--stack", "Old"]).output
    customers = commit_item("engineering_mysql_dev.customers/date=5", "engineering/mysql/customers/date=5/x.csv")
    stack["dynamodb"].put_item(TableName="pipeline-state", Item=customers)
    old = CliRunner().invoke(app, [*args, "engineering_mysql_dev.customers", "--stack", "Old"])
    assert old.exit_code == 2 and "has no output RawBucket: deploy this version of Lakeline for --raw" in old.output


def test_runs_in_flight_and_records_waiting_out_a_delay_are_shown(stack: dict[str, Any]) -> None:
    """Back-pressure (#39): the run slots each stage's executions hold, and the records the routers sent back to
    their queue to wait (a partition's waiting list full, no free slot), which no other count shows."""
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

    from lakeline.commits import PartitionFull
    from lakeline.commits.slots import NoRunSlot, RunSlots
    from lambdas.router import send_back_to_wait

    for token in ("20220120t000000000000_0000000001", "20220120t000000000000_0000000002"):
        RunSlots(stack["dynamodb"], "pipeline-state", "a").take(token)
    RunSlots(stack["dynamodb"], "pipeline-state", "b").take("20220120t000000000000_0000000003")
    record = SQSRecord({"body": "{}", "messageAttributes": {}})
    send_back_to_wait(stack["sqs"], stack["queue_a"], record, PartitionFull("full"))
    send_back_to_wait(stack["sqs"], stack["follow_ups_b"], record, NoRunSlot("no slot"))  # a follow-up run
    send_back_to_wait(stack["sqs"], stack["queue_b"], record, PartitionFull("full"))
    report = json.loads(status("--format", "json").output)
    assert report["runs_in_flight"] == {"stage a": 2, "stage b": 1}
    assert report["delayed"] == {"stage a": 1, "stage b": 2}
    shown = " ".join(status().output.split())
    assert "runs in flight: stage a 2, stage b 1 (executions started and not yet ended" in shown
    assert "waiting out a delay in their queue: stage a 1, stage b 2 (sent back because" in shown
