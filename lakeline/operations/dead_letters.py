"""``lakeline dlq``: what waits in a deployed pipeline's dead-letter queues, and why; and sending it back
once the cause is fixed.

Messages are read without being taken: each is received and made visible again at once, so a listing
changes nothing. A redrive sends each message of a stage's DLQ back to that stage's queue, without
the reason it was parked with (a new failure gives a new one), and deletes it from the DLQ only once
sent; a message that was parked because its target could not be routed (an ``unrouted`` body) is
not a stage B message: fix the dependency item and use ``lakeline reprocess`` instead, so those stay.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

REASON = "lakeline_reason"
SOURCE = "lakeline_source"
MAX_MESSAGES = 1000  # a listing stops there; SQS gives at most 10 per receive
REDRIVE_HIDDEN_SECONDS = 900  # how long a redrive keeps the messages it took from other readers


@dataclass(frozen=True)
class DeadLetter:
    message_id: str
    reason: str
    source: str
    body: str
    receipt: str = ""

    @property
    def json_body(self) -> bool:
        try:
            json.loads(self.body)
        except ValueError:
            return False
        return True

    @property
    def redrivable(self) -> bool:
        try:
            return "unrouted" not in json.loads(self.body)
        except ValueError:
            return True  # not JSON: the stage's router parks it again, with its reason


def parked_reason(attributes: Mapping[str, Any], body: str) -> str:
    """Why a message was parked: the reason Lakeline's function recorded with it; for the record Lambda sends to a
    stream's on-failure queue once it gave up on a batch (it records none), what that batch was."""
    recorded = attributes.get(REASON, {}).get("StringValue")
    if recorded is not None:
        return str(recorded)
    try:
        discarded = json.loads(body)
        batch, context = discarded["DDBStreamBatchInfo"], discarded.get("requestContext", {})
        return (
            f"Lambda gave up on {batch['batchSize']} stream records, sequence numbers {batch['startSequenceNumber']}"
            f"..{batch['endSequenceNumber']} ({context.get('condition', 'no condition given')}, "
            f"{context.get('approximateInvokeCount', '?')} invocations): the stream function's log says why; once "
            "fixed, put those items again"
        )
    except (ValueError, TypeError, KeyError):
        return "(no reason recorded)"


def _reasons(message: dict[str, object]) -> tuple[str, str]:
    attributes = message.get("MessageAttributes") or {}
    assert isinstance(attributes, dict)
    return (
        parked_reason(attributes, str(message.get("Body", ""))),
        str(attributes.get(SOURCE, {}).get("StringValue", "")),
    )


def _receive(sqs: SQSClient, queue_url: str, *, hidden_for: int = 60) -> list[DeadLetter]:
    response = sqs.receive_message(
        QueueUrl=queue_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], VisibilityTimeout=hidden_for
    )
    letters = []
    for message in response.get("Messages", []):
        reason, source = _reasons(dict(message))
        letters.append(DeadLetter(message["MessageId"], reason, source, message["Body"], message["ReceiptHandle"]))
    return letters


def _release(sqs: SQSClient, queue_url: str, letters: list[DeadLetter]) -> None:
    """Make read messages visible again at once: reading a DLQ leaves it as it was."""
    for start in range(0, len(letters), 10):
        sqs.change_message_visibility_batch(
            QueueUrl=queue_url,
            Entries=[
                {"Id": str(index), "ReceiptHandle": letter.receipt, "VisibilityTimeout": 0}
                for index, letter in enumerate(letters[start : start + 10])
            ],
        )


def read_dead_letters(sqs: SQSClient, queue_url: str, *, limit: int = MAX_MESSAGES) -> list[DeadLetter]:
    """The messages in a DLQ (up to ``limit``), left there."""
    found: dict[str, DeadLetter] = {}
    while len(found) < limit:
        new = [letter for letter in _receive(sqs, queue_url) if letter.message_id not in found]
        if not new:
            break
        found.update((letter.message_id, letter) for letter in new)
    letters = list(found.values())
    _release(sqs, queue_url, letters)
    return letters


def redrive(sqs: SQSClient, dead_letter_queue_url: str, queue_url: str) -> tuple[int, list[DeadLetter]]:
    """Send every redrivable message of the DLQ back to ``queue_url`` (each deleted from the DLQ once
    sent: a crash in between sends it twice, which the stages take as a redelivery); the number sent,
    and the messages kept.

    The messages are those in the DLQ when the redrive starts: all are taken (hidden for the redrive's
    time) before any is sent, so a message the stage parks again at once, because its cause is not
    fixed, waits in the DLQ for the next redrive instead of going round for ever."""
    taken: dict[str, DeadLetter] = {}
    while True:
        new = [letter for letter in _receive(sqs, dead_letter_queue_url, hidden_for=REDRIVE_HIDDEN_SECONDS)]
        new = [letter for letter in new if letter.message_id not in taken]
        if not new:
            break
        taken.update((letter.message_id, letter) for letter in new)
    sent, kept = 0, []
    waiting = list(taken.values())
    try:
        while waiting:
            letter = waiting[0]
            if letter.redrivable:
                sqs.send_message(QueueUrl=queue_url, MessageBody=letter.body)
                sqs.delete_message(QueueUrl=dead_letter_queue_url, ReceiptHandle=letter.receipt)
                sent += 1
            else:
                kept.append(letter)
            waiting.pop(0)
    finally:  # what was not sent (an error, an interrupt) is visible again at once, not in 15 minutes
        _release(sqs, dead_letter_queue_url, kept + waiting)
    return sent, kept
