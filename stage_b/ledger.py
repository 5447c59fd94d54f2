"""Which stage B messages have been applied, so that an append is never applied twice.

``overwrite`` runs are idempotent by construction (the partition is rebuilt from its sources). An
``append`` adds rows, so a redelivered message must not append them again: its id (the triggering
partition, the run that produced it, and the target partition) is recorded once the run has been
published, and a message whose id is recorded is skipped.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

APPLIED_PREFIX = "applied#"


class AppliedMessages(Protocol):
    def applied_run(self, message_id: str) -> str | None:
        """The run token that applied the message, or ``None`` if it was never applied."""
        ...

    def mark_applied(self, message_id: str, run_token: str) -> None: ...


@dataclass
class DynamoDBAppliedMessages:
    """Kept in the pipeline-state table, next to trigger mode ``all``'s items, under ``applied#<id>``."""

    client: DynamoDBClient
    table_name: str
    key_attribute: str = "target_partition"

    def applied_run(self, message_id: str) -> str | None:
        response = self.client.get_item(
            TableName=self.table_name,
            Key={self.key_attribute: {"S": APPLIED_PREFIX + message_id}},
            ConsistentRead=True,
        )
        item = response.get("Item")
        return str(item["run_token"]["S"]) if item and "run_token" in item else None

    def mark_applied(self, message_id: str, run_token: str) -> None:
        self.client.put_item(
            TableName=self.table_name,
            Item={
                self.key_attribute: {"S": APPLIED_PREFIX + message_id},
                "run_token": {"S": run_token},
                "applied_at": {"S": datetime.now(UTC).isoformat()},
            },
        )


@dataclass
class FileAppliedMessages:
    """The local runtime's ledger: a JSON file in the workspace, replaced atomically on each write."""

    path: Path

    def _read(self) -> dict[str, str]:
        if not self.path.exists():
            return {}
        data = json.loads(self.path.read_text())
        return dict(data) if isinstance(data, dict) else {}

    def applied_run(self, message_id: str) -> str | None:
        return self._read().get(message_id)

    def mark_applied(self, message_id: str, run_token: str) -> None:
        entries = self._read()
        entries[message_id] = run_token
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".ledger-")
        with os.fdopen(handle, "w") as out:
            json.dump(entries, out, indent=1, sort_keys=True)
        Path(temporary).replace(self.path)
