"""The partition-commit protocol's store: every read and conditional write of the pipeline-state table.

Expression values are written with boto3's ``TypeSerializer`` and items read back with its
``TypeDeserializer`` (``lakeline.aws.dynamodb``), not marshalled by hand.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from lakeline.aws.dynamodb import attribute_values
from lakeline.commits.applied import published_contributions, published_ids, write_list
from lakeline.commits.keys import COMMIT_PREFIX, contribution_entry, retired_entry
from lakeline.commits.state import (
    Finished,
    Lease,
    LeaseLost,
    PartitionFull,
    PartitionState,
    TakenBatch,
    previous_owner,
)
from lakeline.errors import InvalidInputError, LakelineError
from lakeline.storage import ObjectStore

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef

# Longer than a state machine's longest run (its 6 h timeout), so a live run never loses its lease; a run that
# ends sooner ends its lease then, its Catch or the status-change function (lakeline.commits.stranded) included.
DEFAULT_LEASE_SECONDS = 7 * 60 * 60
MAX_BEGIN_ATTEMPTS = 20
MAX_PENDING_BYTES = 80 * 1024
"""The most the arrivals waiting behind a run may hold in the partition's item (``pending``, ~200 bytes each with a
70-character key): with the rest of the item, under a quarter of DynamoDB's 400 KB. Past it, ``begin`` refuses
to record an arrival (``PartitionFull``) and the router sends it back to its queue to wait there (#39)."""

Clock = Callable[[], float]
TAKEN_ATTRIBUTES = ("taken_owner", "taken_batch", "taken_run", "taken_count")
"""The partition item's note of a batch taken out of ``pending`` (``lakeline.commits.TakenBatch``)."""
CHECKED_CHARS = 1_000
"""Of the last checked version's summary in the partition's item (``checked``): a table's rules may hold 64,000
bytes, which the item need not repeat; the whole report is beside the run (``stage_end.quality``)."""


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _entry_bytes(entries: Iterable[str]) -> int:
    """What ``pending`` entries count towards ``pending_bytes``: added and taken away by the same measure."""
    return sum(len(entry.encode()) for entry in entries)


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
    lists: ObjectStore | None = None
    """Where the published versions' applied ids are kept (``lakeline.commits.applied``): needed to take or
    resume a lease on a partition that has a list, and to publish a version that applies anything."""
    max_pending_bytes: int = MAX_PENDING_BYTES

    def _key(self, key: str) -> dict[str, AttributeValueTypeDef]:
        return {self.key_attribute: {"S": key}}

    def read(self, key: str) -> PartitionState:
        return PartitionState.from_item(key, self._item(key))

    def _item(self, key: str) -> dict[str, Any]:
        """The partition's item as it is now (consistent read; empty for a partition never written)."""
        return dict(
            self.client.get_item(TableName=self.table_name, Key=self._key(key), ConsistentRead=True).get("Item", {})
        )

    def begin(
        self, key: str, owner: str, location: str, root: str, arrivals: Sequence[str] = (), *, plans: bool = True
    ) -> Lease | None:
        """Record ``arrivals`` for the partition and take its lease for run ``owner`` (writing into
        ``location`` under the partition's ``root``). ``None``: another run holds the lease; the arrivals
        wait in ``pending`` and that run's ``finish`` hands them to a follow-up run. ``plans``: the lease is
        for a plan, with every id the published version holds (else they are not read)."""
        values = attribute_values(
            owner=owner,
            location=location,
            root=root,
            expires=self.clock() + self.lease_seconds,
            zero=0,
            one=1 if arrivals else 0,
        )
        add = ""
        entries = set(arrivals)
        if entries:
            size = _entry_bytes(entries)
            values |= attribute_values(arrivals=entries, bytes=size)
            add = " ADD pending :arrivals, pending_bytes :bytes"
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
                return self._lease(key, owner, location, response.get("Attributes", {}), load=plans)
            if not arrivals:
                return None  # a follow-up with nothing new: whoever holds the lease has it all
            try:
                self.client.update_item(
                    TableName=self.table_name,
                    Key=self._key(key),
                    UpdateExpression=(
                        "SET arrival_seq = arrival_seq + :one, last_waiting = :now "
                        "ADD pending :arrivals, pending_bytes :bytes"
                    ),
                    # Room for them, and not one already waiting (a redelivery: counted once).
                    ConditionExpression=(
                        "attribute_exists(lease_owner) AND lease_expires >= :now "
                        "AND (attribute_not_exists(pending_bytes) OR pending_bytes <= :room)"
                        + ("" if len(entries) > 1 else " AND NOT contains(pending, :entry)")
                    ),
                    ExpressionAttributeValues={
                        ":arrivals": values[":arrivals"],
                        ":bytes": values[":bytes"],
                        **attribute_values(one=1, now=self.clock(), room=self.max_pending_bytes - size),
                        **(attribute_values(entry=next(iter(entries))) if len(entries) == 1 else {}),
                    },
                )
                return None
            except ClientError as error:
                if not _conditional_failed(error):
                    raise
            state = self.read(key)
            if state.leased(self.clock()):
                if entries <= state.pending:
                    return None  # they wait already
                raise PartitionFull(
                    f"{key}: {state.pending_bytes:,} bytes of arrivals wait for run {state.lease_owner} already "
                    f"(at most {self.max_pending_bytes:,}, so that the partition's item stays small); this one waits "
                    "to be recorded"
                )
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
        return self._lease(lease.key, lease.owner, lease.location, response.get("Attributes", {}), load=True)

    def take(self, lease: Lease, batch: TakenBatch, entries: Sequence[str]) -> TakenBatch:
        """Take the run's batch out of the partition's ``pending`` as it is planned (#39): its ``entries`` leave
        the item, which notes where they are instead (``batch``), so arrivals keep being recorded while the run
        works and the next batch fills behind it. ``lease.taken`` set by another run (one that ended without ending
        it): the run adopts that batch (``entries`` are its, read from its object) and ``pending`` is left alone.
        Returns the batch the lease's run holds taken now: another than ``batch`` when a redelivery of the same
        run took one first (plan that one). ``LeaseLost`` if the run no longer holds the lease."""
        values = attribute_values(
            owner=batch.owner, batch=batch.location, run=batch.run, count=batch.count, now=self.clock()
        )
        expression = "SET taken_owner = :owner, taken_batch = :batch, taken_run = :run, taken_count = :count"
        if lease.taken is not None and lease.taken.owner != batch.owner:
            values |= attribute_values(adopted=lease.taken.location)
            condition = "taken_batch = :adopted"
        else:
            taken = sorted(set(entries))
            values |= attribute_values(entries=set(taken), untaken=-_entry_bytes(taken))
            expression += " ADD pending_bytes :untaken DELETE pending :entries"
            condition = "attribute_not_exists(taken_batch)"
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key=self._key(lease.key),
                UpdateExpression=expression,
                ConditionExpression=f"lease_owner = :owner AND lease_expires >= :now AND {condition}",
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            if not _conditional_failed(error):
                raise
            current = self.read(lease.key)
            if current.lease_owner != batch.owner or not current.leased(self.clock()):
                raise LeaseLost(
                    f"{lease.key}: run {batch.owner} no longer holds the lease (held by {current.lease_owner}); "
                    "it takes no batch"
                ) from error
            if current.taken is not None and current.taken.owner == batch.owner:
                return current.taken  # a redelivery of the same run took its batch first
            raise LakelineError(
                f"{lease.key}: run {batch.owner} could not take its batch: the partition's item holds "
                f"{current.taken} taken, not what the run was planned from ({lease.taken})"
            ) from error
        return batch

    def forget_waiting(self, lease: Lease, taken: Iterable[str]) -> None:
        """Take out of ``pending`` what the run's own batch holds already: a redelivery of the arrival that started
        the run (a record back after ``NoRunSlot``, or SQS's) records it again after the batch took it, and a
        follow-up would run for it once more (#39). One conditional write per entry, so each is counted once."""
        own = lease.taken if lease.takes_own_batch else None
        if own is None:
            return
        for entry in sorted(set(taken) & set(lease.pending)):
            try:
                self.client.update_item(
                    TableName=self.table_name,
                    Key=self._key(lease.key),
                    UpdateExpression="ADD pending_bytes :untaken DELETE pending :entries",
                    ConditionExpression="lease_owner = :owner AND taken_batch = :own AND contains(pending, :entry)",
                    ExpressionAttributeValues=attribute_values(
                        owner=lease.owner,
                        own=own.location,
                        entry=entry,
                        entries={entry},
                        untaken=-_entry_bytes([entry]),
                    ),
                )
            except ClientError as error:
                if not _conditional_failed(error):
                    raise

    def drop_taken(self, lease: Lease) -> Lease:
        """End the note of the batch ``lease`` would take over when its object is gone (deleted by hand): nothing
        can name its arrivals, and a note nobody can end would hold the partition for good. Returns the lease as
        the item holds it then; ``LeaseLost`` if the run no longer holds it."""
        if lease.taken is None:
            return lease
        try:
            response = self.client.update_item(
                TableName=self.table_name,
                Key=self._key(lease.key),
                UpdateExpression="REMOVE " + ", ".join(TAKEN_ATTRIBUTES),
                ConditionExpression="lease_owner = :owner AND taken_batch = :batch",
                ExpressionAttributeValues=attribute_values(owner=lease.owner, batch=lease.taken.location),
                ReturnValues="ALL_NEW",
            )
        except ClientError as error:
            if not _conditional_failed(error):
                raise
            item = self._item(lease.key)  # ended already (a retry), or the lease is another run's
            if PartitionState.from_item(lease.key, item).lease_owner != lease.owner:
                raise LeaseLost(f"{lease.key}: run {lease.owner} no longer holds the lease") from error
            return self._lease(lease.key, lease.owner, lease.location, item, load=True)
        return self._lease(lease.key, lease.owner, lease.location, response.get("Attributes", {}), load=True)

    def _lease(self, key: str, owner: str, location: str, item: Mapping[str, Any], *, load: bool = False) -> Lease:
        """The lease as ``item`` holds it; with ``load``, with every id its published version holds."""
        lease = Lease.from_item(key, owner, location, item)
        if not load:
            return replace(lease, applied=frozenset(), contributions=frozenset())
        state = PartitionState.from_item(key, item)
        return replace(
            lease,
            applied=published_ids(state, self.lists),
            contributions=published_contributions(state, self.lists),
        )

    def commit(
        self,
        lease: Lease,
        *,
        publish: bool,
        files: int = 0,
        applied: Iterable[str] = (),
        taken: Iterable[str] | None = None,
        contribution: tuple[str, Sequence[str]] | None = None,
        checked: str | None = None,
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
            # The contributions and applied ids are read here, not taken from the lease (a plan passes its lease
            # on without them): the condition on ``version`` below makes sure no other commit changed them since.
            current = self.read(lease.key) if contribution is not None or applied_ids else None
            if current is not None and (current.version != lease.version or current.lease_owner != lease.owner):
                return self._not_committed(lease, publish, current)
            entries: set[str] = set()
            if contribution is not None and current is not None:
                key, written = contribution
                entries = {e for e in published_contributions(current, self.lists) if e.partition("|")[0] != key}
                entries |= {contribution_entry(key, name) for name in written}
            if entries:
                # Kept beside the version, as its applied ids are: one entry per file the target ever took
                # would pass DynamoDB's 400 KB (lakeline.commits.applied).
                listed = write_list(self._lists(lease), lease.location, entries, "contribution")
                values |= attribute_values(contributions_list=listed, contributed=len(entries))
                sets += ["contributions_list = :contributions_list", "contributed = :contributed"]
            else:
                removes += ["contributions_list", "contributed"]
            removes.append("contributions")  # an item from before the lists: its entries are in the list now
            values |= attribute_values(next=lease.version + 1, location=lease.location, files=files, now=self.clock())
            sets += ["version = :next", "published = :location", "files = :files", "published_at = :now"]
            removes.append("published_lineage")  # the new version's run notes its own (``mark_lineage``)
            if checked is not None:
                values |= attribute_values(checked=_cut(checked, CHECKED_CHARS))
                sets += ["checked_version = :next", "checked = :checked"]
            if lease.published:
                values |= attribute_values(retired={retired_entry(lease.published, self.clock())})
                adds.append("retired :retired")
            if applied_ids and current is not None:
                held = published_ids(current, self.lists) | set(applied_ids)
                values |= attribute_values(applied_list=write_list(self._lists(lease), lease.location, held))
                sets.append("applied_list = :applied_list")
                removes.append("applied")  # an item from before the lists: its ids are in the list now
        condition = "lease_owner = :owner AND version = :version"
        own = lease.taken if lease.takes_own_batch else None
        if own is not None:
            # Its batch left ``pending`` when it was planned (``take``): the item's note of it goes now.
            removes += TAKEN_ATTRIBUTES
            values |= attribute_values(own_batch=own.location)
            condition += " AND taken_batch = :own_batch"
            taken_ids = []
        elif taken_ids:
            values |= attribute_values(taken=set(taken_ids), untaken=-_entry_bytes(taken_ids))
            adds.append("pending_bytes :untaken")
        expression = ("SET " + ", ".join(sets)) if sets else ""
        if removes:
            expression += " REMOVE " + ", ".join(removes)
        if adds:
            expression += " ADD " + ", ".join(adds)
        if taken_ids:
            expression += " DELETE pending :taken"
        if not expression:
            return self.read(lease.key)
        try:
            response = self.client.update_item(
                TableName=self.table_name,
                Key=self._key(lease.key),
                UpdateExpression=expression.strip(),
                ConditionExpression=condition,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        except ClientError as error:
            if not _conditional_failed(error):
                raise
            current = self.read(lease.key)
            if (
                own is not None
                and not publish
                and (current.lease_owner, current.version) == (lease.owner, lease.version)
                and (current.taken is None or current.taken.location != own.location)
            ):
                return current  # a retry of an end that went through (a batch taken since is a later plan's)
            return self._not_committed(lease, publish, current, error)
        return PartitionState.from_item(lease.key, response.get("Attributes", {}))

    def _lists(self, lease: Lease) -> ObjectStore:
        if self.lists is None:
            raise InvalidInputError(f"{lease.key}: publishing what run {lease.owner} applied needs a store")
        return self.lists

    def _not_committed(
        self, lease: Lease, publish: bool, current: PartitionState, error: Exception | None = None
    ) -> PartitionState:
        """A commit whose condition does not hold: a retry of one that went through, or the lease is lost."""
        if publish and current.published == lease.location:
            return current  # a retry of a commit that went through
        raise LeaseLost(
            f"{lease.key}: run {lease.owner} no longer holds the lease (held by {current.lease_owner}, "
            f"version {current.version}, the run started from {lease.version}); not publishing"
        ) from error

    def mark_routed(self, key: str, published: str) -> bool:
        """Note that the post-update of the version published at ``published`` routed it onwards, so a
        run that takes nothing new (a redelivery) need not route it again; a run that finds it unnoted (its
        post-update failed before routing, and its input was parked) routes it. False if a newer version
        is published already (its own post-update routes that one)."""
        return self._update_if(key, "SET routed = :published", "published = :published", published=published)

    def forget_routed(self, key: str, published: str) -> bool:
        """Undo ``mark_routed`` of ``published``: its routing left out dependency items the pipeline has (a
        single-stage command's), so the next run that takes the partition routes it. False if it is not the
        version noted routed."""
        return self._update_if(key, "REMOVE routed", "routed = :published", published=published)

    def mark_lineage(self, key: str, published: str, root_id: str, node_id: str) -> bool:
        """Note where the run that published ``published`` sits in the lineage records (its tree's root and its
        own node), before its post-update routes the version onwards: a run that routes it again later (its
        post-update failed, its input was parked and redriven) hangs the targets' runs under that run, not
        under roots of their own. False if a newer version is published already."""
        lineage = {"root_id": root_id, "node_id": node_id}
        return self._update_if(
            key, "SET published_lineage = :lineage", "published = :published", published=published, lineage=lineage
        )

    def _update_if(self, key: str, update: str, condition: str, **values: Any) -> bool:
        """Update the partition's item with ``update`` if ``condition`` holds (``values`` its ``:names``);
        False if it does not."""
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key=self._key(key),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeValues=attribute_values(**values),
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
                # Nothing waits: the count of what waits starts again from zero (a re-sent arrival counted twice).
                UpdateExpression=noted + "REMOVE lease_owner, lease_expires, lease_location, lease_seq, pending_bytes",
                # A batch still taken (a redelivery planned it after the run's commit) waits for the follow-up.
                ConditionExpression=(
                    "lease_owner = :owner AND arrival_seq = lease_seq AND attribute_not_exists(pending) "
                    "AND attribute_not_exists(taken_batch)"
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
            item = self._item(lease.key)
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
