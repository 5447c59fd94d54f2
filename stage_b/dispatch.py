"""Sending stage B messages to queue B, through the one SQS batch sender (``lakeline.aws.sqs``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakeline.aws.retry import Backoff
from lakeline.aws.sqs import send_messages
from stage_b.messages import StageBMessage

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


def send_stage_b_messages(
    sqs: SQSClient, queue_url: str, messages: Sequence[StageBMessage], *, backoff: Backoff | None = None
) -> int:
    """Send every message (batches of 10 entries and 256 KiB); raise ``QueueSendError`` if SQS still
    refuses some after retries, or refuses one as malformed (the caller then fails and is retried
    itself, and the receivers deduplicate by message id)."""
    report = send_messages(sqs, queue_url, [message.model_dump_json() for message in messages], backoff=backoff)
    return report.messages
