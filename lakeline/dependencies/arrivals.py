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
target is written into every source's tree, not only into the tree of the arrival that completed it. Beside it,
``version@<table>``: the partition version that arrival published (a map: its ``token``,
``lakeline.commits.versions``, its ``number`` and the source partition, ``node``), set by the same UpdateItem,
so the run's lineage names the version it read of every source, not only of the completing one. Both are the
source's *latest recorded* arrival's: a redelivered arrival sets the same values again; an arrival that names no
version (a re-routed partition, ``lakeline reprocess``) leaves the last known version, which is still the one
the catalog points at. An older version of the partition whose newer version is recorded (its routing retried
after the newer one's) fails the UpdateItem's condition and is recorded again without its position and version
(the one case of a second write), so it counts as an arrival but does not replace them. Versions of different
partitions of a source are not ordered: the latest arrival's is kept.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from lakeline.commits.versions import version_number

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef, UpdateItemInputTypeDef


@dataclass(frozen=True)
class SourcePosition:
    """A source's latest recorded arrival for a target partition: where it sits in the lineage records
    (``root_id``, ``node_id``) and the partition version it published, each where known."""

    table: str
    root_id: str | None = None
    node_id: str | None = None
    version: str | None = None


@dataclass(frozen=True)
class ArrivalDecision:
    target_partition: str
    arrived: frozenset[str]
    missing: frozenset[str]
    triggers: bool
    completed_by: str | None
    # the latest arrival of each *other* source: where else the run belongs, and which version it reads
    sources_lineage: tuple[SourcePosition, ...] = ()


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
        version: str | None = None,
    ) -> ArrivalDecision:
        """Record that ``source_table`` arrived for ``target_partition``; decide whether it triggers.

        ``arrival`` identifies this arrival (source table and partition), so that its redelivery is
        recognised as the same arrival. ``lineage``: its (root id, node id) in the lineage records;
        ``version``: the token of the partition version it published.
        """
        now = datetime.now(UTC).isoformat()
        try:
            image = self._add_source(target_partition, source_table, now, arrival, lineage, version)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            # An older version of the partition whose newer version is recorded (its routing retried late):
            # the arrival counts, its position and version do not replace the newer one's.
            image = self._add_source(target_partition, source_table, now, arrival, None, None)
        arrived = frozenset(image.get("arrived_sources", {}).get("SS", []))
        missing = frozenset(required) - arrived
        completed_by = image.get("completed_by", {}).get("S")
        # a source no longer in the item (its dependency was removed) is not read any more
        others = tuple(source for source in sources_lineage(image, source_table) if source.table in required)
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

    def _add_source(
        self,
        target_partition: str,
        source_table: str,
        now: str,
        arrival: str,
        lineage: tuple[str, str] | None,
        version: str | None,
    ) -> dict[str, Any]:
        """The first write: ``source_table`` into the set, with the arrival's position and version (refused,
        ``ConditionalCheckFailedException``, if a newer version of the same source partition is recorded)."""
        values: dict[str, AttributeValueTypeDef] = {":source": {"SS": [source_table]}, ":now": {"S": now}}
        names = {"#sources": "arrived_sources"}  # never empty, which DynamoDB refuses
        sets = "updated_at = :now"
        condition = None
        if lineage is not None:
            names["#lineage"] = f"{LINEAGE_ATTRIBUTE}{source_table}"
            values[":lineage"] = {"S": "|".join(lineage)}
            sets += ", #lineage = :lineage"
        if version is not None:
            names.update({"#version": f"{VERSION_ATTRIBUTE}{source_table}", "#node": "node", "#number": "number"})
            number: AttributeValueTypeDef = {"N": str(version_number(version))}
            values.update({":node": {"S": arrival}, ":number": number})
            values[":version"] = {"M": {"token": {"S": version}, "node": {"S": arrival}, "number": number}}
            sets += ", #version = :version"
            condition = "attribute_not_exists(#version) OR #version.#node <> :node OR #version.#number <= :number"
        request: UpdateItemInputTypeDef = {
            "TableName": self.table_name,
            "Key": {"target_partition": {"S": target_partition}},
            "UpdateExpression": f"ADD #sources :source SET {sets}",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "ReturnValues": "ALL_NEW",
        }
        if condition is not None:
            request["ConditionExpression"] = condition
        response = self.client.update_item(**request)
        return dict(response.get("Attributes", {}))


LINEAGE_ATTRIBUTE = "lineage@"
VERSION_ATTRIBUTE = "version@"


def _by_source(image: Mapping[str, Any], prefix: str, field: str | None = None) -> dict[str, str]:
    """The ``prefix<table>`` attributes' string values by table (of their map's ``field``, if given)."""
    found = {}
    for name, value in image.items():
        if name.startswith(prefix) and isinstance(value, Mapping):
            if field is not None:
                value = value.get("M", {}).get(field, {})
            found[name.removeprefix(prefix)] = str(value.get("S", ""))
    return found


def sources_lineage(image: Mapping[str, Any], besides: str) -> tuple[SourcePosition, ...]:
    """The last recorded arrival of each source but ``besides`` (its lineage position and version, where
    known), by source name; a source with neither is left out."""
    lineage, versions = _by_source(image, LINEAGE_ATTRIBUTE), _by_source(image, VERSION_ATTRIBUTE, "token")
    found = []
    for table in sorted((lineage.keys() | versions.keys()) - {besides}):
        root, _, node = lineage.get(table, "").partition("|")
        known = bool(root and node)
        version = versions.get(table) or None
        if known or version is not None:
            found.append(SourcePosition(table, root if known else None, node if known else None, version))
    return tuple(found)
