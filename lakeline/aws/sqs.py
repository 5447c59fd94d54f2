"""Sending messages to SQS: the one batch sender, and dead-lettering with a reason; and a received message's
attributes as Lambda's SQS event spells them.

``SendMessageBatch`` takes at most 10 entries and 256 KiB of message bodies per call. Entries that
fail through no fault of the sender (throttling, an internal error) are sent again with backoff;
entries refused as malformed are not retried and raise, naming the entry.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from lakeline.aws.retry import Backoff, is_retryable
from lakeline.errors import InvalidInputError, LakelineError

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import SendMessageBatchRequestEntryTypeDef

MAX_BATCH_ENTRIES = 10
MAX_BATCH_BYTES = 256 * 1024


class QueueSendError(LakelineError):
    """Some messages could not be sent; ``unsent`` holds their bodies."""

    def __init__(self, message: str, unsent: Sequence[str]) -> None:
        super().__init__(message)
        self.unsent = list(unsent)


@dataclass(frozen=True)
class SendReport:
    messages: int
    calls: int


def message_batches(bodies: Sequence[str]) -> Iterator[list[int]]:
    """Indexes of ``bodies`` grouped into batches of at most 10 entries and 256 KiB."""
    batch: list[int] = []
    size = 0
    for index, body in enumerate(bodies):
        length = len(body.encode())
        if length > MAX_BATCH_BYTES:
            raise InvalidInputError(
                f"message {index} is {length} bytes; SQS takes at most {MAX_BATCH_BYTES} bytes per message"
            )
        if batch and (len(batch) == MAX_BATCH_ENTRIES or size + length > MAX_BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(index)
        size += length
    if batch:
        yield batch


def send_messages(
    sqs: SQSClient, queue_url: str, bodies: Sequence[str], *, backoff: Backoff | None = None
) -> SendReport:
    """Send every body, or raise ``QueueSendError`` naming the ones that could not be sent."""
    backoff = backoff or Backoff()
    calls = 0
    for batch in message_batches(bodies):
        pending = batch
        retry = 0
        while pending:
            entries: list[SendMessageBatchRequestEntryTypeDef] = [
                {"Id": str(index), "MessageBody": bodies[index]} for index in pending
            ]
            calls += 1
            # (entry id, sender's fault, reason) of every entry SQS did not take
            failed: list[tuple[str, bool, str]]
            try:
                response = sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
                failed = [
                    (entry["Id"], entry["SenderFault"], f"{entry['Code']} {entry.get('Message', '')}".strip())
                    for entry in response.get("Failed", [])
                ]
            except ClientError as error:
                if not is_retryable(error):
                    raise
                code = error.response.get("Error", {}).get("Code", "throttled")
                failed = [(str(index), False, code) for index in pending]
            refused = [entry for entry in failed if entry[1]]
            if refused:
                raise QueueSendError(
                    f"SQS refused message {refused[0][0]}: {refused[0][2]}",
                    [bodies[int(entry[0])] for entry in failed],
                )
            pending = [int(entry[0]) for entry in failed]
            if pending:
                retry += 1
                if retry >= backoff.attempts:
                    raise QueueSendError(
                        f"{len(pending)} messages still not accepted by SQS after {retry} attempts",
                        [bodies[index] for index in pending],
                    )
                backoff.wait(retry)
    return SendReport(messages=len(bodies), calls=calls)


def json_body(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"), sort_keys=False)


def dead_letter(sqs: SQSClient, queue_url: str, body: str, reason: str, source: str) -> None:
    """Park a message that can never succeed in the DLQ at once, with why, instead of retrying it."""
    sqs.send_message(
        QueueUrl=queue_url,
        MessageBody=body,
        MessageAttributes={
            "lakeline_reason": {"DataType": "String", "StringValue": reason[:1000]},
            "lakeline_source": {"DataType": "String", "StringValue": source},
        },
    )


def lambda_message_attribute(value: dict[str, Any]) -> dict[str, Any]:
    """A message attribute as ``ReceiveMessage`` returns it (``StringValue``, ``BinaryValue``, ``DataType``) spelled
    as Lambda's SQS event spells it (``stringValue``, ..., ``dataType``), which the handlers read."""
    binary = value.get("BinaryValue")
    if isinstance(binary, bytes):
        binary = base64.b64encode(binary).decode()
    return {
        "stringValue": value.get("StringValue"),
        "binaryValue": binary,
        "stringListValues": [],
        "binaryListValues": [],
        "dataType": value["DataType"],
    }
