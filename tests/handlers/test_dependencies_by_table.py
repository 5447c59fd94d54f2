"""The dependencies-by-table Lambda, fed with real records read from moto's DynamoDB stream."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from botocore.exceptions import ClientError
from moto import mock_aws

from lakeline.dependencies import store as store_module
from lakeline.dependencies import sync as sync_module
from lakeline.dependencies.graph import DependencyCycleError
from lakeline.dependencies.model import parse_dependency_item
from lakeline.dependencies.store import DependencyStore, to_dynamodb
from lakeline.dependencies.sync import backfill
from lakeline.dependencies.tables import DependencyTableNames, create_dependency_tables
from lakeline.errors import ConfigError, LakelineError
from lakeline.operations.dead_letters import read_dead_letters
from lakeline.runtimes.embedded.handler_caches import reset_handler_caches
from lambdas.dependencies_by_table import handler as lambda_module
from tests.seed_items import seed_item

SEED_ITEM = Path(__file__).parents[1] / "fixtures" / "dependencies" / "seed_item.json"
TABLES = DependencyTableNames("deps-test", "deps-by-table-test", "state-test")
TARGET = "engineering_analytics_dev.destination_table"
CUSTOMERS = "engineering_mysql_dev.customers"


@dataclass
class LambdaContext:
    function_name: str = "dependencies-by-table"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:dependencies-by-table"
    aws_request_id: str = "c6af9ac6-7b61-11e6-9a41-93e812345678"


class StreamReader:
    """Reads the dependencies table's stream from where it last stopped, as Lambda's poller does."""

    def __init__(self, stream_arn: str) -> None:
        self.stream_arn = stream_arn
        self.streams = boto3.client("dynamodbstreams", region_name="us-east-1")
        shard = self.streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"][0]
        self.iterator = self.streams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]

    def next_event(self) -> dict[str, Any]:
        """The Lambda event for the records written since the last call."""
        response = self.streams.get_records(ShardIterator=self.iterator)
        self.iterator = response["NextShardIterator"]
        return {"Records": [self._as_lambda_record(dict(record)) for record in response["Records"]]}

    def _as_lambda_record(self, record: dict[str, Any]) -> dict[str, Any]:
        # The poller sends the stream record as JSON: the creation time as epoch seconds, plus the ARN.
        change = dict(record["dynamodb"])
        created = change.get("ApproximateCreationDateTime")
        if isinstance(created, datetime):
            change["ApproximateCreationDateTime"] = created.timestamp()
        return {**record, "dynamodb": change, "eventSourceARN": self.stream_arn}


@dataclass
class Aws:
    client: Any
    store: DependencyStore
    stream: StreamReader
    sqs: Any
    failures: str

    def run_lambda(self) -> dict[str, Any]:
        event = self.stream.next_event()
        assert event["Records"], "no stream records to process"
        result: dict[str, Any] = dict(lambda_module.handler(event, LambdaContext()))  # type: ignore[arg-type]
        return result

    def put_raw(self, item: dict[str, Any]) -> None:
        """Write an item as another tool would: no validation, no cycle check."""
        self.client.put_item(TableName=TABLES.dependencies, Item=to_dynamodb(item))

    def pairs(self) -> dict[tuple[str, str], dict[str, Any]]:
        items = self.client.scan(TableName=TABLES.by_table)["Items"]
        return {(i["source_table"]["S"], i["target_dataset"]["S"]): i for i in items}

    def parked(self) -> list[tuple[dict[str, Any], str, str]]:
        """(the body's refused record, the reason attribute, the source attribute) of every parked message."""
        letters = read_dead_letters(self.sqs, self.failures)
        return [
            (json.loads(letter.body)["refused_dependency_item"], letter.reason, letter.source) for letter in letters
        ]


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Aws]:
    monkeypatch.setenv("DEPENDENCIES_TABLE", TABLES.dependencies)
    monkeypatch.setenv("DEPENDENCIES_BY_TABLE_TABLE", TABLES.by_table)
    reset_handler_caches()
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        stream_arn = create_dependency_tables(client, TABLES)
        store = DependencyStore(client, TABLES.dependencies, TABLES.by_table)
        sqs = boto3.client("sqs", region_name="us-east-1")
        failures = sqs.create_queue(QueueName="dependencies-stream-failures")["QueueUrl"]
        monkeypatch.setenv("DEPENDENCIES_STREAM_DEAD_LETTER_QUEUE_URL", failures)
        yield Aws(client, store, StreamReader(stream_arn), sqs, failures)
    reset_handler_caches()


def with_sources(*sources: str, **changes: Any) -> dict[str, Any]:
    data = seed_item(**changes)
    template = data["dependencies"][0]
    data["dependencies"] = [dict(template, TableName=source) for source in sources]
    return data


def test_insert_modify_remove(aws: Aws) -> None:
    aws.store.put_items([parse_dependency_item(seed_item())])
    assert aws.run_lambda() == {"batchItemFailures": []}
    pairs = aws.pairs()
    assert list(pairs) == [(CUSTOMERS, TARGET)]
    stored = aws.store.edges_from(CUSTOMERS)[0]
    assert stored.partition_column == "date"
    assert stored.dependency.relativedelta_attributes.weekday == "SA(-1)"

    # another target of the same source: its own pair, untouched by changes of the first item
    aws.store.put_items([parse_dependency_item(seed_item(dataset="engineering_analytics_dev.other"))])
    aws.run_lambda()
    # MODIFY: customers removed, orders and payments added
    orders, payments = "engineering_mysql_dev.orders", "engineering_mysql_dev.payments"
    aws.store.put_items([parse_dependency_item(with_sources(orders, payments))])
    assert aws.run_lambda() == {"batchItemFailures": []}
    assert sorted(aws.pairs()) == [
        (CUSTOMERS, "engineering_analytics_dev.other"),
        (orders, TARGET),
        (payments, TARGET),
    ]
    assert aws.pairs()[(orders, TARGET)]["sources"]["L"] == [{"S": orders}, {"S": payments}]

    aws.client.delete_item(TableName=TABLES.dependencies, Key={"dataset": {"S": TARGET}})
    assert aws.run_lambda() == {"batchItemFailures": []}
    assert sorted(aws.pairs()) == [(CUSTOMERS, "engineering_analytics_dev.other")]


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    """What the Lambda's Powertools logger writes (its handler holds its own stream)."""
    handler = lambda_module.logger.registered_handler
    assert isinstance(handler, logging.StreamHandler)
    buffer = io.StringIO()
    previous = handler.setStream(buffer)
    yield buffer
    handler.setStream(previous)


def test_a_batch_mixing_good_and_bad_records_parks_the_bad_ones_with_their_reason(
    aws: Aws, log_lines: io.StringIO
) -> None:
    aws.put_raw(seed_item())  # good
    bad_weekday = seed_item(dataset="engineering_analytics_dev.bad_weekday")
    bad_weekday["dependencies"][0]["relativedelta_attributes"] = {"weekday": "Saturday", "dayz": 1}
    aws.put_raw(bad_weekday)
    aws.put_raw(seed_item(dataset="Engineering_Analytics_Dev.Shouting"))  # key not normalised
    aws.put_raw(with_sources("db.b", dataset="db.a"))  # db.a needs db.b ...
    aws.put_raw(with_sources("db.a", dataset="db.b"))  # ... needs db.a: a cycle, both refused
    aws.put_raw(seed_item(dataset="engineering_analytics_dev.also_good"))
    event = aws.stream.next_event()
    sequence = {
        record["dynamodb"]["Keys"]["dataset"]["S"]: record["dynamodb"]["SequenceNumber"] for record in event["Records"]
    }
    # Nothing is left for Lambda to retry: the shard goes on past the refused items.
    assert lambda_module.handler(event, LambdaContext()) == {"batchItemFailures": []}  # type: ignore[arg-type]
    assert sorted(aws.pairs()) == [
        (CUSTOMERS, "engineering_analytics_dev.also_good"),
        (CUSTOMERS, TARGET),
    ]
    parked = {refused["dataset"]: (refused, reason, source) for refused, reason, source in aws.parked()}
    assert sorted(parked) == [
        "Engineering_Analytics_Dev.Shouting",
        "db.a",
        "db.b",
        "engineering_analytics_dev.bad_weekday",
    ]
    for dataset, (refused, reason, source) in parked.items():
        assert (refused["event_name"], refused["sequence_number"], refused["reason"]) == (
            "INSERT",
            sequence[dataset],
            reason,
        )
        assert source == "dependencies-by-table"
    weekday = parked["engineering_analytics_dev.bad_weekday"][1]
    assert "relativedelta_attributes.weekday: 'Saturday' is not a weekday" in weekday
    assert "relativedelta_attributes.dayz: unknown relativedelta attribute" in weekday
    shouting = parked["Engineering_Analytics_Dev.Shouting"][1]
    assert "is not normalised: store it as 'engineering_analytics_dev.shouting'" in shouting
    assert "dependency cycle: db.a needs db.b needs db.a" in parked["db.a"][1]
    assert "dependency cycle: db.b needs db.a needs db.b" in parked["db.b"][1]
    logged = [json.loads(line) for line in log_lines.getvalue().splitlines()]
    reasons = [entry["reason"] for entry in logged if entry.get("message") == "dependency item refused"]
    assert sorted(reasons) == sorted(reason for _, reason, _ in parked.values())


def test_a_batch_where_every_item_is_invalid_is_parked_whole_not_retried(aws: Aws) -> None:
    aws.put_raw(seed_item(dataset="engineering_analytics_dev.bad", partitionColumn="Not Valid"))
    assert aws.run_lambda() == {"batchItemFailures": []}
    assert aws.pairs() == {}
    ((refused, reason, _),) = aws.parked()
    assert refused["dataset"] == "engineering_analytics_dev.bad"
    assert "partitionColumn" in reason


def test_a_transient_error_fails_the_record_for_lambda_to_retry_and_parks_nothing(aws: Aws) -> None:
    """Throttling is no fault of the item: the record fails (Lambda retries the shard from it, then ``on_failure``),
    the records before it are done, and nothing is parked."""
    aws.put_raw(seed_item(dataset="engineering_analytics_dev.first"))
    aws.put_raw(seed_item())
    event = aws.stream.next_event()
    throttled = 0

    def throttle(params: dict[str, Any], **kwargs: Any) -> None:
        nonlocal throttled
        names = [action["Put"]["Item"]["target_dataset"]["S"] for action in params["TransactItems"] if "Put" in action]
        if TARGET in names:
            throttled += 1
            raise ClientError(
                {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}},
                "TransactWriteItems",
            )

    lambda_module._store().client.meta.events.register("provide-client-params.dynamodb.TransactWriteItems", throttle)
    result = lambda_module.handler(event, LambdaContext())  # type: ignore[arg-type]
    assert result == {"batchItemFailures": [{"itemIdentifier": event["Records"][1]["dynamodb"]["SequenceNumber"]}]}
    assert throttled == 1
    assert list(aws.pairs()) == [(CUSTOMERS, "engineering_analytics_dev.first")]
    assert aws.parked() == []


def test_a_refused_item_whose_parking_fails_is_retried_not_lost(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEPENDENCIES_STREAM_DEAD_LETTER_QUEUE_URL", aws.failures + "-gone")
    reset_handler_caches()
    aws.put_raw(seed_item(dataset="engineering_analytics_dev.bad", partitionColumn="Not Valid"))
    with pytest.raises(BatchProcessingError, match="All records failed"):
        aws.run_lambda()
    assert aws.parked() == []


def test_redelivered_records_are_idempotent(aws: Aws) -> None:
    aws.store.put_items([parse_dependency_item(with_sources(CUSTOMERS, "engineering_mysql_dev.orders"))])
    event = aws.stream.next_event()
    for _ in range(2):
        assert lambda_module.handler(event, LambdaContext()) == {"batchItemFailures": []}  # type: ignore[arg-type]
    assert len(aws.pairs()) == 2


def test_no_pair_is_orphaned_after_a_refused_version(aws: Aws) -> None:
    aws.store.put_items([parse_dependency_item(seed_item())])  # v1: customers
    aws.run_lambda()
    invalid = with_sources("engineering_mysql_dev.orders")
    invalid["partitionPythonMask"] = "%Y/%m/%d"
    aws.put_raw(invalid)  # v2: refused and parked; the customers pair stays
    assert aws.run_lambda() == {"batchItemFailures": []}
    assert list(aws.pairs()) == [(CUSTOMERS, TARGET)]
    ((refused, reason, _),) = aws.parked()
    assert (refused["dataset"], refused["event_name"]) == (TARGET, "MODIFY")
    assert "partitionPythonMask" in reason
    # v3 replaces v2 (its old image never named customers), yet the v1 pair is removed
    aws.store.put_items([parse_dependency_item(with_sources("engineering_mysql_dev.payments"))])
    assert aws.run_lambda() == {"batchItemFailures": []}
    assert list(aws.pairs()) == [("engineering_mysql_dev.payments", TARGET)]


def test_removing_a_refused_key_keeps_the_pairs_of_the_item_under_its_normalised_key(aws: Aws) -> None:
    aws.store.put_items([parse_dependency_item(seed_item())])
    shouting = seed_item(dataset=TARGET.upper())
    aws.put_raw(shouting)  # refused: never paired
    assert aws.run_lambda() == {"batchItemFailures": []}
    aws.client.delete_item(TableName=TABLES.dependencies, Key={"dataset": {"S": TARGET.upper()}})
    assert aws.run_lambda() == {"batchItemFailures": []}
    assert list(aws.pairs()) == [(CUSTOMERS, TARGET)]
    assert [refused["dataset"] for refused, _, _ in aws.parked()] == [TARGET.upper()]


def test_missing_configuration_fails_clearly(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEPENDENCIES_BY_TABLE_TABLE")
    reset_handler_caches()
    aws.put_raw(seed_item())
    with pytest.raises(BatchProcessingError):
        aws.run_lambda()
    with pytest.raises(ConfigError, match="DEPENDENCIES_BY_TABLE_TABLE: required field is missing"):
        lambda_module._store()


def test_backfill_and_cycle_reads_resend_what_dynamodb_left_unprocessed(
    aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Throttling: the first two BatchWriteItem / BatchGetItem answers leave everything unprocessed."""
    waits: list[float] = []
    aws.store.unprocessed_backoff = dataclasses.replace(
        store_module.UNPROCESSED_BACKOFF, sleep=waits.append, jitter=lambda: 1.0
    )
    throttled = {"BatchWriteItem": 0, "BatchGetItem": 0}

    def remember(params: dict[str, Any], context: dict[str, Any], **kwargs: Any) -> None:
        context["request_items"] = params["RequestItems"]

    def throttle(parsed: dict[str, Any], model: Any, context: dict[str, Any], **kwargs: Any) -> None:
        if model.name in throttled and throttled[model.name] < 2:
            throttled[model.name] += 1
            if model.name == "BatchWriteItem":
                parsed["UnprocessedItems"] = context["request_items"]
            else:
                parsed["UnprocessedKeys"] = context["request_items"]
                parsed["Responses"] = {}

    for operation in throttled:
        aws.client.meta.events.register(f"provide-client-params.dynamodb.{operation}", remember)
    aws.client.meta.events.register("after-call.dynamodb", throttle)

    for n in range(30):  # more than one BatchWriteItem request of 25
        aws.put_raw(seed_item(dataset=f"engineering_analytics_dev.t{n}"))
    report = backfill(aws.store)
    assert (report.written, report.invalid) == (30, {})
    assert len(aws.pairs()) == 30
    assert throttled["BatchWriteItem"] == 2

    # the cycle check's reads are retried too: customers needing t1 (which needs customers) is refused
    cyclic = parse_dependency_item(with_sources("engineering_analytics_dev.t1", dataset=CUSTOMERS))
    with pytest.raises(DependencyCycleError, match=f"{CUSTOMERS} needs engineering_analytics_dev.t1 needs"):
        aws.store.put_items([cyclic])
    assert throttled["BatchGetItem"] == 2
    assert waits == [0.05, 0.1, 0.05, 0.1]


def test_unprocessed_entries_that_never_clear_are_an_error(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    aws.store.unprocessed_backoff = dataclasses.replace(store_module.UNPROCESSED_BACKOFF, sleep=lambda _s: None)

    def remember(params: dict[str, Any], context: dict[str, Any], **kwargs: Any) -> None:
        context["request_items"] = params["RequestItems"]

    def throttle(parsed: dict[str, Any], context: dict[str, Any], **kwargs: Any) -> None:
        parsed["UnprocessedItems"] = context["request_items"]

    aws.client.meta.events.register("provide-client-params.dynamodb.BatchWriteItem", remember)
    aws.client.meta.events.register("after-call.dynamodb.BatchWriteItem", throttle)
    aws.put_raw(seed_item())
    with pytest.raises(LakelineError, match="still not done after 9 attempts"):
        backfill(aws.store)


def test_a_refused_items_long_reason_is_cut_in_the_message_body_and_whole_in_the_log(
    aws: Aws, log_lines: io.StringIO
) -> None:
    """An item's every problem can be longer than an SQS message (256 KiB): the body keeps a capped reason, says so."""
    data = seed_item(dataset="engineering_analytics_dev.many_problems")
    data["dependencies"][0]["relativedelta_attributes"] = {f"unknown_{n:04d}_" + "x" * 150: 1 for n in range(600)}
    aws.put_raw(data)
    assert aws.run_lambda() == {"batchItemFailures": []}
    (letter,) = read_dead_letters(aws.sqs, aws.failures)
    body = json.loads(letter.body)
    reason = body["refused_dependency_item"]["reason"]
    logged = [json.loads(line) for line in log_lines.getvalue().splitlines()]
    (whole,) = [entry["reason"] for entry in logged if entry.get("message") == "dependency item refused"]
    assert len(whole) > 100_000  # the item's every problem, as the log keeps it
    assert len(reason) == sync_module.BODY_REASON_LIMIT and len(letter.body) < 20_000
    assert reason.startswith(whole[:10_000]) and f"(cut: {len(whole):,} characters in all" in reason
    assert "lakeline deps backfill" in body["fix"]


def test_an_item_refused_for_a_cycle_is_applied_by_backfill_once_the_cycle_is_broken(aws: Aws) -> None:
    """Putting the identical item again writes no stream record on DynamoDB (moto writes one: not modelled here), so
    the fix names ``lakeline deps backfill``, which applies it."""
    aws.store.put_items([parse_dependency_item(with_sources("db.b", dataset="db.a"))])
    aws.run_lambda()
    aws.put_raw(with_sources("db.a", dataset="db.b"))  # closes db.a -> db.b -> db.a: refused
    aws.run_lambda()
    assert sorted(aws.pairs()) == [("db.b", "db.a")]
    ((refused, _, _),) = aws.parked()
    assert refused["dataset"] == "db.b"
    aws.store.put_items([parse_dependency_item(with_sources("db.c", dataset="db.a"))])  # the cycle broken elsewhere
    aws.run_lambda()
    assert sorted(aws.pairs()) == [("db.c", "db.a")]  # still not applied
    assert backfill(aws.store).invalid == {}
    assert sorted(aws.pairs()) == [("db.a", "db.b"), ("db.c", "db.a")]
