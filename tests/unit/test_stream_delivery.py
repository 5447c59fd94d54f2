"""The rehearsal's DynamoDB stream poller (``lakeline.runtimes.deployed.local_aws.streams``) against a function
scripted to fail, as Lambda's poller handles it: retries, bisection, partial batch responses, the on-failure
record, and the records behind a failing one delivered, none lost."""

from __future__ import annotations

import json
from typing import Any

from lakeline.runtimes.deployed.local_aws.streams import BatchAnswer, StreamMapping, deliver_stream, outcome_of

STREAM = "arn:aws:dynamodb:us-east-1:123456789012:table/deps/stream/2026-11-29T00:00:00.000"
QUEUE = "arn:aws:sqs:us-east-1:123456789012:stream-failures"


def records(count: int) -> list[dict[str, Any]]:
    return [
        {"eventName": "INSERT", "dynamodb": {"SequenceNumber": str(100 + n), "ApproximateCreationDateTime": 1.8e9}}
        for n in range(count)
    ]


def mapping(**settings: Any) -> StreamMapping:
    values: dict[str, Any] = {
        "function_arn": "arn:aws:lambda:us-east-1:123456789012:function:deps",
        "stream_arn": STREAM,
        "batch_size": 100,
        "max_retries": 3,
        "bisect": True,
        "report_item_failures": True,
        "on_failure": QUEUE,
    }
    return StreamMapping(**(values | settings))


class Function:
    """Fails every batch holding a record of ``failing`` (whole, or reporting it when ``partial``)."""

    def __init__(self, settings: StreamMapping, failing: set[str], *, partial: bool) -> None:
        self.settings, self.failing, self.partial = settings, failing, partial
        self.batches: list[list[str]] = []
        self.done: list[str] = []

    def __call__(self, batch: list[dict[str, Any]]) -> BatchAnswer:
        numbers = [record["dynamodb"]["SequenceNumber"] for record in batch]
        self.batches.append(numbers)
        bad = [number for number in numbers if number in self.failing]
        if not bad:
            self.done += numbers
            return outcome_of(self.settings, batch, False, {"batchItemFailures": []})
        if not self.partial:
            return outcome_of(self.settings, batch, True, None)
        self.done += numbers[: numbers.index(bad[0])]
        reply = {"batchItemFailures": [{"itemIdentifier": number} for number in bad]}
        return outcome_of(self.settings, batch, False, reply)


def run(settings: StreamMapping, count: int, failing: set[str], *, partial: bool) -> tuple[Function, list[Any]]:
    function = Function(settings, failing, partial=partial)
    sent: list[Any] = []

    def send(arn: str, body: str) -> None:
        sent.append((arn, json.loads(body)))

    deliver_stream(settings, "shard-1", records(count), function, send)
    return function, sent


def test_a_reported_record_is_retried_from_then_sent_on_and_the_records_behind_it_are_delivered() -> None:
    function, sent = run(mapping(), 5, {"102"}, partial=True)
    # the first try, then three retries from the failed record; the rest after it once it is given up on
    assert function.batches == [["100", "101", "102", "103", "104"], *[["102", "103", "104"]] * 3]
    ((arn, record),) = sent
    assert arn == QUEUE
    assert record["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert record["requestContext"]["approximateInvokeCount"] == 4
    info = record["DDBStreamBatchInfo"]
    assert (info["startSequenceNumber"], info["endSequenceNumber"], info["batchSize"]) == ("102", "104", 3)
    assert (info["shardId"], info["streamArn"]) == ("shard-1", STREAM)
    assert function.done == ["100", "101"]  # 103 and 104 were discarded with 102, as Lambda discards the batch


def test_a_failed_batch_is_bisected_until_the_failing_record_alone_is_sent_on() -> None:
    function, sent = run(mapping(), 4, {"101"}, partial=False)
    assert function.batches[:3] == [["100", "101", "102", "103"], ["100", "101"], ["100"]]
    assert sorted(function.done) == ["100", "102", "103"]
    assert [record["DDBStreamBatchInfo"]["startSequenceNumber"] for _, record in sent] == ["101"]


def test_without_bisection_or_retries_the_batch_goes_to_the_destination_at_once() -> None:
    function, sent = run(mapping(bisect=False, max_retries=0, batch_size=2), 4, {"100"}, partial=False)
    assert function.batches == [["100", "101"], ["102", "103"]]
    assert function.done == ["102", "103"]
    batches = [record["DDBStreamBatchInfo"] for _, record in sent]
    assert [(batch["startSequenceNumber"], batch["batchSize"]) for batch in batches] == [("100", 2)]


def test_a_reply_naming_no_record_of_the_batch_fails_it_whole() -> None:
    settings = mapping()
    batch = records(2)
    assert outcome_of(settings, batch, False, {"batchItemFailures": [{"itemIdentifier": "999"}]}) == BatchAnswer(
        0, whole=True
    )
    assert outcome_of(settings, batch, False, {"batchItemFailures": [{"itemIdentifier": "101"}]}) == BatchAnswer(1)
    # without ReportBatchItemFailures on the mapping, a reply's failures are not read
    unread = outcome_of(mapping(report_item_failures=False), batch, False, {"batchItemFailures": [{}]})
    assert unread == BatchAnswer(None)


class Mapping:
    """moto's ``EventSourceMapping`` as CloudFormation made the stream's."""

    function_arn = "arn:aws:lambda:us-east-1:123456789012:function:deps"
    event_source_arn = STREAM
    batch_size = 100
    max_retry_attempts = 3
    bisect_on_error = "true"
    function_response_types = ["ReportBatchItemFailures"]
    destination_config = {"OnFailure": {"Destination": QUEUE}}


def test_the_settings_are_read_from_the_mapping() -> None:
    assert StreamMapping.of(Mapping()) == mapping()
