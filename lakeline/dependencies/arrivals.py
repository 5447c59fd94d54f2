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

Once the set has completed, the target behaves as in mode ``any``: every later arrival (a late file
re-running a source partition, another source partition mapping to the same target partition, a
re-sent one) triggers a run from the sources as they are now, so late data reaches the target. An
``append`` target's run replaces the rows its last run for the set appended (``stage_b.plan``), so
they are not added twice. The item keeps the set, so readiness survives restarts.

The item also keeps, per source, where its last recorded arrival sits in the lineage trees (an
attribute ``lineage@<table>`` = ``<root id>|<node id>``, one per source, so the item does not grow
with arrivals): the lineage archive's records form a tree per arrival, and the run of an ``all``
target is written into every source's tree, not only into the tree of the arrival that completed it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef


@dataclass(frozen=True)
class ArrivalDecision:
    target_partition: str
    arrived: frozenset[str]
    missing: frozenset[str]
    triggers: bool
    completed_by: str | None
    # (root id, node id) of the latest arrival of each *other* source: where else the run belongs
    sources_lineage: tuple[tuple[str, str], ...] = ()


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
        lineage: tuple[str, str] | None = None,
    ) -> ArrivalDecision:
        """Record that ``source_table`` arrived for ``target_partition``; decide whether it triggers.

        ``arrival`` identifies this arrival (source table and partition), so that its redelivery is
        recognised as the same arrival. ``lineage``: its (root id, node id) in the lineage records.
        """
        now = datetime.now(UTC).isoformat()
        values: dict[str, AttributeValueTypeDef] = {":source": {"SS": [source_table]}, ":now": {"S": now}}
        names = {"#sources": "arrived_sources"}  # never empty, which DynamoDB refuses
        sets = "updated_at = :now"
        if lineage is not None:
            names["#lineage"] = f"{LINEAGE_ATTRIBUTE}{source_table}"
            values[":lineage"] = {"S": "|".join(lineage)}
            sets += ", #lineage = :lineage"
        response = self.client.update_item(
            TableName=self.table_name,
            Key={"target_partition": {"S": target_partition}},
            UpdateExpression=f"ADD #sources :source SET {sets}",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            ReturnValues="ALL_NEW",
        )
        image = response.get("Attributes", {})
        arrived = frozenset(image.get("arrived_sources", {}).get("SS", []))
        missing = frozenset(required) - arrived
        completed_by = image.get("completed_by", {}).get("S")
        others = sources_lineage(image, source_table)
        if missing:
            return ArrivalDecision(target_partition, arrived, missing, False, completed_by)
        if completed_by is not None and completed_by != arrival:
            # The set had completed before this arrival: it triggers a run with the late data.
            return ArrivalDecision(target_partition, arrived, missing, True, completed_by, sources_lineage=others)
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
        return ArrivalDecision(target_partition, arrived, missing, True, arrival, sources_lineage=others)


LINEAGE_ATTRIBUTE = "lineage@"


def sources_lineage(image: Mapping[str, Any], besides: str) -> tuple[tuple[str, str], ...]:
    """(root id, node id) of the last recorded arrival of each source but ``besides``, by source."""
    found = []
    for name in sorted(image):
        if name.startswith(LINEAGE_ATTRIBUTE) and name != f"{LINEAGE_ATTRIBUTE}{besides}":
            root, _, node = str(image[name].get("S", "")).partition("|")
            if root and node:
                found.append((root, node))
    return tuple(found)
