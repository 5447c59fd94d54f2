"""How long a record the router sends back waits in its queue (``lambdas.router``, #39)."""

from __future__ import annotations

from typing import Any

import boto3
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from moto import mock_aws

from lakeline.commits import PartitionFull
from lakeline.commits.slots import NoRunSlot
from lambdas.router import (
    MAX_NO_SLOT_DELAY_SECONDS,
    MAX_PARTITION_FULL_DELAY_SECONDS,
    NO_SLOT_DELAY_SECONDS,
    PARTITION_FULL_DELAY_SECONDS,
    WAITS_ATTRIBUTE,
    send_back_to_wait,
    times_waited,
    wait_seconds,
)


def test_a_record_waits_longer_each_time_it_is_sent_back_and_the_count_travels_with_it() -> None:
    """A record sent back is a new message whose receive count starts again: the count of its waits goes with it
    as a message attribute, and each wait doubles, up to SQS's 900 s (a full partition) or 300 s (a run that holds
    its partition's lease while it waits for a slot)."""
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="queue-a")["QueueUrl"]
        sent: list[dict[str, Any]] = []
        sqs.meta.events.register("provide-client-params.sqs.SendMessage", lambda params, **_: sent.append(params))
        record = SQSRecord({"messageId": "m0", "body": '{"arrival": 1}', "messageAttributes": {}})
        for _ in range(6):
            send_back_to_wait(sqs, url, record, PartitionFull("full"))
            # The record Lambda's poller makes of the message once its delay passed: attributes as events spell them.
            attributes = {
                name: {"stringValue": value["StringValue"], "dataType": value["DataType"]}
                for name, value in sent[-1]["MessageAttributes"].items()
            }
            record = SQSRecord({"messageId": "m", "body": sent[-1]["MessageBody"], "messageAttributes": attributes})
            assert times_waited(record) == len(sent)
        assert (
            int(
                sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"][
                    "ApproximateNumberOfMessagesDelayed"
                ]
            )
            == 6
        )
    delays = [params["DelaySeconds"] for params in sent]
    assert delays == sorted(delays) and len(set(delays)) >= 4, delays
    assert PARTITION_FULL_DELAY_SECONDS * 3 // 4 <= delays[0] <= PARTITION_FULL_DELAY_SECONDS
    assert MAX_PARTITION_FULL_DELAY_SECONDS * 3 // 4 <= delays[-1] <= MAX_PARTITION_FULL_DELAY_SECONDS
    assert {params["MessageBody"] for params in sent} == {'{"arrival": 1}'}


def test_waits_are_bounded_and_spread_by_the_record() -> None:
    full, busy = PartitionFull("full"), NoRunSlot("busy")
    assert wait_seconds(busy, 0, "x") <= NO_SLOT_DELAY_SECONDS
    assert all(wait_seconds(busy, waited, "x") <= MAX_NO_SLOT_DELAY_SECONDS for waited in range(100))
    assert all(wait_seconds(full, waited, "x") <= MAX_PARTITION_FULL_DELAY_SECONDS for waited in range(100))
    spread = {wait_seconds(full, 5, f'{{"arrival": {index}}}') for index in range(200)}
    assert len(spread) > 50  # a burst's records found full together come back at many moments, not at one
    assert min(spread) >= MAX_PARTITION_FULL_DELAY_SECONDS * 3 // 4


def test_a_record_not_sent_back_before_or_with_an_attribute_not_ours_counts_no_wait() -> None:
    assert times_waited(SQSRecord({"body": "{}"})) == 0
    odd = {WAITS_ATTRIBUTE: {"stringValue": "many", "dataType": "String"}}
    assert times_waited(SQSRecord({"body": "{}", "messageAttributes": odd})) == 0
