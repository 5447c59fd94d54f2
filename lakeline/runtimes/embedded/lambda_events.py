"""What Lambda's pollers do, for the embedded runtime: turn queue messages and stream records into the
events the handlers receive, and act on the partial batch failures they report."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lakeline.aws.sqs import lambda_message_attribute
from lakeline.runtimes.embedded.cloud import REGION

if TYPE_CHECKING:
    from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient
    from mypy_boto3_sqs import SQSClient

Handler = Callable[[dict[str, Any], Any], Any]


class LambdaContext:
    """The context attributes Powertools reads."""

    def __init__(self, function_name: str) -> None:
        self.function_name = function_name
        self.memory_limit_in_mb = 512
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:123456789012:function:{function_name}"
        self.aws_request_id = "00000000-0000-0000-0000-000000000000"

    def get_remaining_time_in_millis(self) -> int:
        return 300_000


class QueuePoller:
    """Receives batches from an SQS queue, hands each to a handler as Lambda's SQS event, and deletes
    the messages the handler did not report as failed (failed ones return after their visibility
    timeout, and reach the DLQ after the redrive policy's receives)."""

    def __init__(self, sqs: SQSClient, queue_url: str, *, visibility_timeout: int = 1) -> None:
        self.sqs = sqs
        self.queue_url = queue_url
        self.visibility_timeout = visibility_timeout
        attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]
        self.arn = attributes["QueueArn"]

    def receive(self, max_messages: int = 10) -> list[dict[str, Any]]:
        response = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=max_messages,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
            VisibilityTimeout=self.visibility_timeout,
        )
        return [dict(message) for message in response.get("Messages", [])]

    def event(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "Records": [
                {
                    "messageId": message["MessageId"],
                    "receiptHandle": message["ReceiptHandle"],
                    "body": message["Body"],
                    "attributes": message.get("Attributes", {}),
                    "messageAttributes": {
                        name: lambda_message_attribute(value)
                        for name, value in message.get("MessageAttributes", {}).items()
                    },
                    "md5OfBody": message.get("MD5OfBody", ""),
                    "eventSource": "aws:sqs",
                    "eventSourceARN": self.arn,
                    "awsRegion": REGION,
                }
                for message in messages
            ]
        }

    def deliver(self, handler: Handler, function_name: str, max_messages: int = 10) -> tuple[int, int]:
        """One batch through ``handler``; returns (messages processed, messages failed)."""
        messages = self.receive(max_messages)
        if not messages:
            return 0, 0
        response = handler(self.event(messages), LambdaContext(function_name)) or {}
        failed = {item["itemIdentifier"] for item in response.get("batchItemFailures", [])}
        for message in messages:
            if message["MessageId"] not in failed:
                self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])
        return len(messages), len(failed)

    def depth(self) -> int:
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


class StreamPoller:
    """Reads a DynamoDB stream from where it last stopped and hands new records to a handler."""

    def __init__(self, streams: DynamoDBStreamsClient, stream_arn: str) -> None:
        self.streams = streams
        self.stream_arn = stream_arn
        self.iterators: dict[str, str] = {}

    def _refresh_shards(self) -> None:
        description = self.streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"]
        for shard in description["Shards"]:
            if shard["ShardId"] not in self.iterators:
                self.iterators[shard["ShardId"]] = self.streams.get_shard_iterator(
                    StreamArn=self.stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]

    def deliver(self, handler: Handler, function_name: str) -> tuple[int, int]:
        self._refresh_shards()
        processed = failed = 0
        for shard, iterator in list(self.iterators.items()):
            response = self.streams.get_records(ShardIterator=iterator)
            self.iterators[shard] = response["NextShardIterator"]
            records = [self._as_lambda_record(dict(record)) for record in response["Records"]]
            if records:
                result = handler({"Records": records}, LambdaContext(function_name)) or {}
                processed += len(records)
                failed += len(result.get("batchItemFailures", []))
        return processed, failed

    def _as_lambda_record(self, record: dict[str, Any]) -> dict[str, Any]:
        change = dict(record["dynamodb"])
        created = change.get("ApproximateCreationDateTime")
        if isinstance(created, datetime):
            change["ApproximateCreationDateTime"] = created.timestamp()
        return {**record, "dynamodb": change, "eventSourceARN": self.stream_arn}
