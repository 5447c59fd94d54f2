"""Sending stage B messages to queue B (SQS), in batches of ten, retrying entries SQS refuses."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakeline.errors import LakelineError
from stage_b.messages import StageBMessage

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import SendMessageBatchRequestEntryTypeDef

BATCH_LIMIT = 10
RETRIES = 5


def send_stage_b_messages(
    sqs: SQSClient, queue_url: str, messages: Sequence[StageBMessage], *, sleep: float = 0.2
) -> int:
    """Send every message; raise if SQS still refuses some after retries (the caller then fails and is
    retried itself, and the receivers deduplicate by message id)."""
    sent = 0
    for start in range(0, len(messages), BATCH_LIMIT):
        batch = messages[start : start + BATCH_LIMIT]
        pending: list[SendMessageBatchRequestEntryTypeDef] = [
            {"Id": str(index), "MessageBody": message.model_dump_json()} for index, message in enumerate(batch)
        ]
        for attempt in range(RETRIES + 1):
            response = sqs.send_message_batch(QueueUrl=queue_url, Entries=pending)
            sent += len(response.get("Successful", []))
            failed_ids = {entry["Id"] for entry in response.get("Failed", [])}
            pending = [entry for entry in pending if entry["Id"] in failed_ids]
            if not pending:
                break
            if attempt == RETRIES:
                reasons = "; ".join(f"{f['Id']}: {f.get('Message', f['Code'])}" for f in response.get("Failed", []))
                raise LakelineError(f"queue B refused {len(pending)} stage B messages: {reasons}")
            time.sleep(sleep * 2**attempt)
    return sent
