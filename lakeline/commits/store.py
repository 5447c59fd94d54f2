"""The partition-commit protocol's store: every read and conditional write of the pipeline-state table.

Expression values are written with boto3's ``TypeSerializer`` and items read back with its
``TypeDeserializer`` (``lakeline.aws.dynamodb``), not marshalled by hand.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from lakeline.aws.dynamodb import attribute_values
from lakeline.commits.keys import COMMIT_PREFIX, contribution_entry, retired_entry
from lakeline.commits.state import Finished, Lease, LeaseLost, PartitionState, previous_owner
from lakeline.errors import LakelineError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef

DEFAULT_LEASE_SECONDS = 3 * 60 * 60  # longer than a state machine's longest SQL task (2 h)
MAX_BEGIN_ATTEMPTS = 20

Clock = Callable[[], float]


def _conditional_failed(error: ClientError) -> bool:
    return error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


@dataclass
class PartitionCommits:
    """The partition-commit protocol over the pipeline-state table (any DynamoDB endpoint)."""

    client: DynamoDBClient
    table_name: str
    lease_seconds: float = DEFAULT_LEASE_SECONDS
    clock: Clock = field(default=time.time)
    key_attribute: str = "target_partition"

    def _key(self, key: str) -> dict[str, AttributeValueTypeDef]:
        return {self.key_attribute: {"S": key}}

    def read(self, key: str) -> PartitionState:
        item = self.client.get_item(TableName=self.table_name, Key=self._key(key), ConsistentRead=True).get("Item")
        return PartitionState.from_item(key, item or {})

    def begin(self, key: str, owner: str, location: str, root: str, arrivals: Sequence[str] = ()) -> Lease | None:
        """Record ``arrivals`` for the partition and take its lease for run ``owner`` (writing into
        ``location`` under the partition's ``root``). ``None``: another run holds the lease; the arrivals
        wait in ``pending`` and that run's ``finish`` hands them to a follow-up run."""
        values = attribute_values(
            owner=owner,
            location=location,
            root=root,
            expires=self.clock() + self.lease_seconds,
            zero=0,
            one=1 if arrivals else 0,
        )
        add = ""
        if arrivals:
            values |= attribute_values(arrivals=set(arrivals))
            add = " ADD pending :arrivals"
        for _ in range(MAX_BEGIN_ATTEMPTS):
            values |= attribute_values(now=self.clock())
            try:
                response = self.client.update_item(
                    TableName=self.table_name,
                    Key=self._key(key),
                    UpdateExpression=(
                        "SET lease_owner = :owner, lease_expires = :expires, lease_location = :location, "
                        "root = :root, version = if_not_exists(version, :zero), "
                        "arrival_seq = if_not_exists(arrival_seq, :zero) + :one, "
                        "lease_seq = if_not_exists(arrival_seq, :zero) + :one" + add
                    ),
                    ConditionExpression=(
                        "attribute_not_exists(lease_owner) OR lease_expires < :now OR lease_owner = :owner"
                    ),
                    ExpressionAttributeValues=values,
                    ReturnValues="ALL_NEW",
                )
            except ClientError as error:
                if not _conditional_failed(error):
                    raise
            else:
                return self._lease(key, owner, location, response.get("Attributes", {}))
            if not arrivals:
                return None  # a follow-up with nothing new: whoever holds the lease has it all
            try:
                self.client.update_item(
                    TableName=self.table_name,
                    Key=self._key(key),
                    UpdateExpression="SET arrival_seq = arrival_seq + :one ADD pending :arrivals",
                    ConditionExpression="attribute_exists(lease_owner) AND lease_expires >= :now",
                    ExpressionAttributeValues={
                        ":arrivals": values[":arrivals"],
                        **attribute_values(one=1, now=self.clock()),
                    },
                )
                return None
            except ClientError as error:
                if not _conditional_failed(error):
                    raise
            # The lease was released (or expired) between the two writes: try to take it again.
        raise LakelineError(f"could not take or queue behind the lease of {key} in {MAX_BEGIN_ATTEMPTS} attempts")

    def resume(self, lease: Lease) -> Lease | None:
        """The lease as its run starts (a follow-up run, from its queue message): re-read from the
        partition's state, with every arrival waiting now and what the published version holds, and
        renewed. ``None`` if the run no longer holds it."""
        try:
            response = self.client.update_item(
                TableName=self.table_name,
                Key=self._key(lease.key),
                UpdateExpression="SET lease_expires = :expires, lease_seq = arrival_seq",
                ConditionExpression="lease_owner = :owner",
                ExpressionAttributeValues=attribute_values(
                    owner=lease.owner, expires=self.clock() + self.lease_seconds
                ),
                ReturnValues="ALL_NEW",
            )
        except ClientError as error:
            if not _conditional_failed(error):
                raise
            return None
        return self._lease(lease.key, lease.owner, lease.location, response.get("Attributes", {}))

    def _lease(self, key: str, owner: str, location: str, item: Mapping[str, Any]) -> Lease:
        return Lease.from_item(key, owner, location, item)

    def commit(
        self,
        lease: Lease,
        *,
        publish: bool,
        files: int = 0,
        applied: Iterable[str] = (),
        taken: Iterable[str] | None = None,
        contribution: tuple[str, Sequence[str]] | None = None,
    ) -> PartitionState:
        """End the run's write: with ``publish``, the partition's next version is the run's prefix
        (``files`` files, with ``applied`` arrivals in it); the arrivals it took (default: all of
        ``lease.pending``) leave ``pending`` either way. Raises ``LeaseLost`` if the lease is no longer
        the run's or the partition moved on: nothing is published then.

        ``contribution`` (a stage B append): ``(key, files)``, the files the run wrote for contribution
        ``key``; they replace whatever files that key had, and the other contributions' files are
        kept. A publish without it is a rebuild of the whole partition: no contribution is left."""
        taken_ids = sorted(set(lease.pending if taken is None else taken))
        applied_ids = sorted(set(applied))
        values = attribute_values(owner=lease.owner, version=lease.version)
        sets: list[str] = []
        adds: list[str] = []
        removes: list[str] = []
        if publish:
            entries: set[str] = set()
            if contribution is not None:
                key, written = contribution
                # Read here, not taken from the lease (a plan passes its lease without them): the
                # condition on ``version`` below makes sure no other commit changed them since.
                entries = {e for e in self.read(lease.key).contributions if e.partition("|")[0] != key}
                entries |= {contribution_entry(key, name) for name in written}
            if entries:
                values |= attribute_values(contributions=entries)
                sets.append("contributions = :contributions")
            else:
                removes.append("contributions")
            values |= attribute_values(next=lease.version + 1, location=lease.location, files=files, now=self.clock())
            sets += ["version = :next", "published = :location", "files = :files", "published_at = :now"]
            removes.append("published_lineage")  # the new version's run notes its own (``mark_lineage``)
            if lease.published:
                values |= attribute_values(retired={retired_entry(lease.published, self.clock())})
                adds.append("retired :retired")
            if applied_ids:
                values |= attribute_values(applied=set(applied_ids))
                adds.append("applied :applied")
        expression = ("SET " + ", ".join(sets)) if sets else ""
        if removes:
            expression += " REMOVE " + ", ".join(removes)
        if adds:
            expression += " ADD " + ", ".join(adds)
        if taken_ids:
            values |= attribute_values(taken=set(taken_ids))
            expression += " DELETE pending :taken"
        if not expression:
            return self.read(lease.key)
        try:
            response = self.client.update_item(
                TableName=self.table_name,
                Key=self._key(lease.key),
                UpdateExpression=expression.strip(),
                ConditionExpression="lease_owner = :owner AND version = :version",
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        except ClientError as error:
            if not _conditional_failed(error):
                raise
            current = self.read(lease.key)
            if publish and current.published == lease.location:
                return current  # a retry of a commit that went through
            raise LeaseLost(
                f"{lease.key}: run {lease.owner} no longer holds the lease (held by {current.lease_owner}, "
                f"version {current.version}, the run started from {lease.version}); not publishing"
            ) from error
        return PartitionState.from_item(lease.key, response.get("Attributes", {}))

    def mark_routed(self, key: str, published: str) -> bool:
        """Note that the post-update of the version published at ``published`` routed it onwards, so a
        run that takes nothing new (a redelivery) need not route it again; a run that finds it unnoted (its
        post-update failed before routing, and its input was parked) routes it. False if a newer version
        is published already (its own post-update routes that one)."""
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key=self._key(key),
                UpdateExpression="SET routed = :published",
                ConditionExpression="published = :published",
                ExpressionAttributeValues=attribute_values(published=published),
            )
        except ClientError as error:
            if not _conditional_failed(error):
                raise
            return False
        return True

    def mark_lineage(self, key: str, published: str, root_id: str, node_id: str) -> bool:
        """Note where the run that published ``published`` sits in the lineage records (its tree's root and its
        own node), before its post-update routes the version onwards: a run that routes it again later (its
        post-update failed, its input was parked and redriven) hangs the targets' runs under that run, not
        under roots of their own. False if a newer version is published already."""
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key=self._key(key),
                UpdateExpression="SET published_lineage = :lineage",
                ConditionExpression="published = :published",
                ExpressionAttributeValues=attribute_values(
                    published=published, lineage={"root_id": root_id, "node_id": node_id}
                ),
            )
        except ClientError as error:
            if not _conditional_failed(error):
                raise
            return False
        return True

    def finish(
        self, lease: Lease, next_owner: str, next_location: str, *, catalog_version: int | None = None
    ) -> Finished:
        """Release the lease, unless arrivals came while the run held it or some wait that the run did not
        take: then hand the lease to one follow-up run (``next_owner`` writing ``next_location``) that
        takes every pending arrival.
        ``catalog_version``: the version the run left the catalog pointing at, if it knows.
        Idempotent: a retry after the hand-over returns the follow-up's lease again."""
        known = attribute_values(catalog=catalog_version) if catalog_version is not None else {}
        noted = "SET catalog_version = :catalog " if catalog_version is not None else ""
        try:
            released = self.client.update_item(
                TableName=self.table_name,
                Key=self._key(lease.key),
                UpdateExpression=noted + "REMOVE lease_owner, lease_expires, lease_location, lease_seq",
                ConditionExpression=(
                    "lease_owner = :owner AND arrival_seq = lease_seq AND attribute_not_exists(pending)"
                ),
                ExpressionAttributeValues={**attribute_values(owner=lease.owner), **known},
                ReturnValues="ALL_NEW",
            )
            return Finished(None, PartitionState.from_item(lease.key, released.get("Attributes", {})))
        except ClientError as error:
            if not _conditional_failed(error):
                raise
        try:
            response = self.client.update_item(
                TableName=self.table_name,
                Key=self._key(lease.key),
                UpdateExpression=(
                    "SET lease_owner = :next, lease_location = :location, lease_expires = :expires, "
                    "lease_seq = arrival_seq, lease_previous = :owner"
                    + (", catalog_version = :catalog" if catalog_version is not None else "")
                ),
                ConditionExpression="lease_owner = :owner",
                ExpressionAttributeValues={
                    **attribute_values(
                        owner=lease.owner,
                        next=next_owner,
                        location=next_location,
                        expires=self.clock() + self.lease_seconds,
                    ),
                    **known,
                },
                ReturnValues="ALL_NEW",
            )
        except ClientError as error:
            if not _conditional_failed(error):
                raise
            item = self.client.get_item(TableName=self.table_name, Key=self._key(lease.key), ConsistentRead=True).get(
                "Item", {}
            )
            current = PartitionState.from_item(lease.key, item)
            if previous_owner(item) == lease.owner and current.lease_owner and current.lease_location:
                return Finished(
                    self._lease(lease.key, current.lease_owner, current.lease_location, dict(item)), current
                )
            # Released, or the lease expired and another run took it with the pending arrivals.
            return Finished(None, current)
        item = response.get("Attributes", {})
        return Finished(
            self._lease(lease.key, next_owner, next_location, item), PartitionState.from_item(lease.key, item)
        )

    def forget_retired(self, key: str, entries: Iterable[str]) -> None:
        entries = sorted(set(entries))
        if entries:
            self.client.update_item(
                TableName=self.table_name,
                Key=self._key(key),
                UpdateExpression="DELETE retired :entries",
                ExpressionAttributeValues=attribute_values(entries=set(entries)),
            )

    def partitions(self) -> list[PartitionState]:
        """Every partition's state (the sweep's work list)."""
        states: list[PartitionState] = []
        paginator = self.client.get_paginator("scan")
        for page in paginator.paginate(
            TableName=self.table_name,
            FilterExpression="begins_with(#key, :prefix)",
            ExpressionAttributeNames={"#key": self.key_attribute},
            ExpressionAttributeValues=attribute_values(prefix=COMMIT_PREFIX),
            ConsistentRead=True,
        ):
            for item in page.get("Items", []):
                states.append(PartitionState.from_item(str(item[self.key_attribute]["S"]), item))
        return states
