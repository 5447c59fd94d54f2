"""The embedded runtime's queue poller (``lakeline.runtimes.embedded.lambda_events.QueuePoller``) builds Lambda's
SQS event, on moto: message attributes spelled as Lambda spells them, which the routers read (``lambdas/router.py``)."""

from __future__ import annotations

import boto3
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from moto import mock_aws

from lakeline.runtimes.embedded.lambda_events import QueuePoller
from lambdas.router import WAITS_ATTRIBUTE, send_back, times_waited


def test_a_record_sent_back_twice_is_read_as_having_waited_twice() -> None:
    """The poller passed ``ReceiveMessage``'s spelling (``StringValue``) into the event, where the router reads
    Lambda's (``stringValue``): every record sent back read as never having waited, so its waits never grew."""
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        queue = sqs.create_queue(QueueName="queue-a")["QueueUrl"]
        send_back(sqs, queue, '{"an": "arrival"}', waited=2)
        poller = QueuePoller(sqs, queue)
        (record,) = poller.event(poller.receive())["Records"]
        assert record["messageAttributes"][WAITS_ATTRIBUTE]["dataType"] == "Number"
        assert times_waited(SQSRecord(record)) == 2
