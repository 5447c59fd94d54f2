"""Trigger mode ``all``: run a target partition once every source has arrived for it.

State lives in a pipeline-state table, one item per target partition (key ``target_partition`` =
``db.table/col=value``), with the set of sources that have arrived and the arrival that completed it.
Two DynamoDB writes decide, without locks, which arrival triggers:

1. ``ADD arrived_sources :source`` (atomic, idempotent) returning the new image. Whichever arrival's
   update makes the set complete sees it complete; DynamoDB serialises updates of one item, so when two
   sources finish together the later update sees both, and neither can miss.
2. If complete: ``SET completed_by = :arrival`` on condition that ``completed_by`` is absent or already
   this arrival. Exactly one arrival wins; a second arrival that also saw a complete set (another
   partition of a source mapping to the same target partition) fails the condition and does not
   trigger. A redelivery of the winning arrival wins again, so a trigger lost after step 2 (a crash
   before the stage B message was sent) is re-sent on retry: at least once for the winner, never
   for anyone else.

Once the set has completed, a target whose dependency is used ``overwrite`` behaves as in mode
``any``: every later arrival (a late file re-running a source partition, another source partition
mapping to the same target partition, a re-sent one) triggers a rebuild from the sources as they are
now, so late data reaches the target. An ``append`` target does not: its step appends the partition's
whole result each time, so a second trigger would add the rows again; the decision says the arrival
was late, and the caller reports it. The item keeps the set, so readiness survives restarts.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


@dataclass(frozen=True)
class ArrivalDecision:
    target_partition: str
    arrived: frozenset[str]
    missing: frozenset[str]
    triggers: bool
    completed_by: str | None
    late: bool = False  # the set had completed before this arrival


@dataclass
class ArrivalTracker:
    client: DynamoDBClient
    table_name: str

    def record_arrival(
        self,
        target_partition: str,
        source_table: str,
        arrival: str,
        required: Collection[str],
        *,
        late_triggers: bool = True,
    ) -> ArrivalDecision:
        """Record that ``source_table`` arrived for ``target_partition``; decide whether it triggers.

        ``arrival`` identifies this arrival (source table and partition), so that its redelivery is
        recognised as the same arrival. ``late_triggers``: an arrival after the set completed triggers
        (an overwrite target; not an append one).
        """
        now = datetime.now(UTC).isoformat()
        response = self.client.update_item(
            TableName=self.table_name,
            Key={"target_partition": {"S": target_partition}},
            UpdateExpression="ADD arrived_sources :source SET updated_at = :now",
            ExpressionAttributeValues={":source": {"SS": [source_table]}, ":now": {"S": now}},
            ReturnValues="ALL_NEW",
        )
        image = response.get("Attributes", {})
        arrived = frozenset(image.get("arrived_sources", {}).get("SS", []))
        missing = frozenset(required) - arrived
        completed_by = image.get("completed_by", {}).get("S")
        if missing:
            return ArrivalDecision(target_partition, arrived, missing, False, completed_by)
        if completed_by is not None and completed_by != arrival:
            return ArrivalDecision(target_partition, arrived, missing, late_triggers, completed_by, late=True)
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key={"target_partition": {"S": target_partition}},
                UpdateExpression=("SET completed_by = :arrival, completed_at = if_not_exists(completed_at, :now)"),
                ConditionExpression="attribute_not_exists(completed_by) OR completed_by = :arrival",
                ExpressionAttributeValues={":arrival": {"S": arrival}, ":now": {"S": now}},
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            return ArrivalDecision(target_partition, arrived, missing, False, None)
        return ArrivalDecision(target_partition, arrived, missing, True, arrival)
