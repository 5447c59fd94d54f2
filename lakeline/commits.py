"""Partition commits: one protocol for every write of a table partition (stage A and stage B, cloud and
local), kept in DynamoDB (the pipeline-state table) with conditional writes.

One item per partition, key ``commit#<db>.<table>/<col=value/...>``, holds:

- ``version``, ``published``, ``files``: the published version of the partition (its run prefix), which
  only a run holding the lease moves on, one version at a time (compare-and-swap on ``version``);
- ``lease_owner``/``lease_expires``/``lease_location``/``lease_seq``: the one run that may write the
  partition now, until its lease expires (so a crashed run cannot block the partition for ever);
- ``pending`` (a set) and ``arrival_seq``: arrivals waiting for a run. An arrival while a run holds the
  lease is added here and the run's ``finish`` hands the lease to one follow-up run that takes them
  all, so a burst of arrivals costs at most two runs;
- ``applied``: arrival ids whose rows are in the published version (stage A files loaded, stage B
  append messages applied), written in the same conditional update as the publish, so an arrival is
  applied exactly once whatever is redelivered or retried;
- ``retired``: ``<epoch>|<location>`` of superseded versions, deleted only after a grace period and
  only when neither the published version nor a run in flight references them;
- ``contributions``: ``<key>|<file name>`` for the published version of a stage B ``append`` target:
  which of its files hold which contribution's rows, so that a contribution applied again (a new
  version of the partition that triggered it) replaces its own files instead of adding to them.

The commit (DynamoDB) comes before the catalog is pointed at the new prefix, and every run first points
the catalog at the committed version: a crash between the two is repaired by the next run, and the
partition a reader sees never moves backwards.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from lakeline.errors import InvalidInputError, LakelineError
from lakeline.storage import RUN_PREFIX, DeleteRefused, ObjectStore, prefix_uri, table_root_of

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef
    from mypy_boto3_sqs import SQSClient

logger = logging.getLogger(__name__)

COMMIT_PREFIX = "commit#"
DEFAULT_LEASE_SECONDS = 3 * 60 * 60  # longer than a state machine's longest SQL task (2 h)
DEFAULT_GRACE_SECONDS = 3 * 60 * 60  # longer than a query planned before a swap may run
MAX_BEGIN_ATTEMPTS = 20

Clock = Callable[[], float]


@dataclass(frozen=True)
class Finished:
    """What ``finish`` left: the follow-up run's lease (``None``: the lease is released, or another run
    has it), and the partition's state right after, which the sweep works from without reading it again."""

    follow_up: Lease | None
    state: PartitionState


class LeaseLost(LakelineError):
    """The run's lease expired and another run took the partition: this run must not publish."""


def commit_key(table: str, partition_path: str) -> str:
    """The item key of a partition: ``commit#db.table/col=value/...`` (``commit#db.table/`` if unpartitioned)."""
    return f"{COMMIT_PREFIX}{table}/{partition_path.strip('/')}"


def commit_partition(key: str) -> tuple[str, dict[str, str]]:
    """The table and partition ``{column: value}`` of a partition's item key (``commit_key``'s inverse)."""
    table, _, path = key.removeprefix(COMMIT_PREFIX).partition("/")
    folders = [folder.partition("=") for folder in path.split("/") if folder]
    return table, {name: value for name, _, value in folders}


def commit_table_root(key: str, partition_root: str) -> str:
    """The location of the table whose partition ``key`` has its root at ``partition_root``: where the
    partition's run prefixes may be deleted (``ObjectStore.delete_prefix``)."""
    return table_root_of(partition_root, commit_partition(key)[1])


@dataclass(frozen=True)
class Lease:
    """A run's right to write one partition, and the partition's state when the run took it."""

    key: str
    owner: str
    location: str  # the run's own prefix
    version: int
    published: str | None  # the published prefix, None before the first publish
    files: int
    pending: tuple[str, ...]  # the arrivals this run takes, sorted
    applied: frozenset[str]
    seq: int
    catalog_version: int = 0  # the version the catalog is known to point at (0: unknown)
    contributions: frozenset[str] = frozenset()  # ``key|file`` of the published version (stage B append)
    routed: str | None = None  # the published prefix whose post-update routed it onwards (``mark_routed``)
    published_lineage: tuple[str, str] | None = None
    """(root id, node id) of the published version's run in the lineage records (``mark_lineage``)."""

    def contribution_files(self, key: str) -> tuple[str, ...]:
        """The published version's files that hold contribution ``key``'s rows (sorted)."""
        return contribution_files(self.contributions, key)

    @property
    def catalog_behind(self) -> bool:
        """The committed version is not known to be the catalog's (a crash between commit and swap)."""
        return self.published is not None and self.catalog_version != self.version

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "owner": self.owner,
            "location": self.location,
            "version": self.version,
            "published": self.published,
            "files": self.files,
            "pending": list(self.pending),
            # ``applied`` stays behind: it only decides the plan, and it grows with the partition (a
            # state machine's input is limited to 256 KiB).
            "seq": self.seq,
            "catalog_version": self.catalog_version,
            "routed": self.routed,
            "published_lineage": list(self.published_lineage) if self.published_lineage else None,
            # ``contributions`` stays behind with ``applied``: the plan passes on the files it replaces.
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Lease:
        return cls(
            key=str(data["key"]),
            owner=str(data["owner"]),
            location=str(data["location"]),
            version=int(data["version"]),
            published=data.get("published"),
            files=int(data.get("files", 0)),
            pending=tuple(data.get("pending", ())),
            applied=frozenset(data.get("applied", ())),
            seq=int(data.get("seq", 0)),
            catalog_version=int(data.get("catalog_version", 0)),
            routed=data.get("routed"),
            published_lineage=_pair(data.get("published_lineage")),
        )


def _pair(value: Any) -> tuple[str, str] | None:
    return (str(value[0]), str(value[1])) if value else None


@dataclass(frozen=True)
class PartitionState:
    key: str
    version: int = 0
    published: str | None = None
    files: int = 0
    lease_owner: str | None = None
    lease_location: str | None = None
    lease_expires: float = 0.0
    pending: frozenset[str] = frozenset()
    applied: frozenset[str] = frozenset()
    retired: frozenset[str] = frozenset()
    root: str | None = None
    contributions: frozenset[str] = frozenset()

    def leased(self, now: float) -> bool:
        return self.lease_owner is not None and self.lease_expires >= now


def _strings(item: dict[str, Any], name: str) -> frozenset[str]:
    return frozenset(item.get(name, {}).get("SS", []))


def _number(item: dict[str, Any], name: str, default: float = 0) -> float:
    value = item.get(name, {}).get("N")
    return float(value) if value is not None else default


def _text(item: dict[str, Any], name: str) -> str | None:
    value = item.get(name, {}).get("S")
    return str(value) if value is not None else None


def _state(key: str, item: dict[str, Any]) -> PartitionState:
    return PartitionState(
        key=key,
        version=int(_number(item, "version")),
        published=_text(item, "published"),
        files=int(_number(item, "files")),
        lease_owner=_text(item, "lease_owner"),
        lease_location=_text(item, "lease_location"),
        lease_expires=_number(item, "lease_expires"),
        pending=_strings(item, "pending"),
        applied=_strings(item, "applied"),
        retired=_strings(item, "retired"),
        root=_text(item, "root"),
        contributions=_strings(item, "contributions"),
    )


def _lineage_pair(item: dict[str, Any]) -> tuple[str, str] | None:
    noted = item.get("published_lineage", {}).get("M")
    if not noted:
        return None
    return str(noted["root_id"]["S"]), str(noted["node_id"]["S"])


def _conditional_failed(error: ClientError) -> bool:
    return error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


def contribution_entry(key: str, file_name: str) -> str:
    if "|" in key or "/" in file_name or not key or not file_name:
        raise InvalidInputError(f"contribution {key!r} file {file_name!r}: a key without '|' and a bare file name")
    return f"{key}|{file_name}"


def contribution_files(entries: Iterable[str], key: str) -> tuple[str, ...]:
    """The files of contribution ``key`` among ``key|file`` entries (sorted)."""
    return tuple(sorted(entry.partition("|")[2] for entry in entries if entry.partition("|")[0] == key))


def retired_entry(location: str, at: float) -> str:
    return f"{int(at)}|{location}"


def parse_retired(entry: str) -> tuple[float, str]:
    at, _, location = entry.partition("|")
    return float(at), location


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
        return _state(key, dict(item or {}))

    def begin(self, key: str, owner: str, location: str, root: str, arrivals: Sequence[str] = ()) -> Lease | None:
        """Record ``arrivals`` for the partition and take its lease for run ``owner`` (writing into
        ``location`` under the partition's ``root``). ``None``: another run holds the lease; the arrivals
        wait in ``pending`` and that run's ``finish`` hands them to a follow-up run."""
        values: dict[str, AttributeValueTypeDef] = {
            ":owner": {"S": owner},
            ":location": {"S": location},
            ":root": {"S": root},
            ":expires": {"N": str(self.clock() + self.lease_seconds)},
            ":now": {"N": str(self.clock())},
            ":zero": {"N": "0"},
            ":one": {"N": "1" if arrivals else "0"},
        }
        add = ""
        if arrivals:
            values[":arrivals"] = {"SS": sorted(set(arrivals))}
            add = " ADD pending :arrivals"
        for _ in range(MAX_BEGIN_ATTEMPTS):
            values[":now"] = {"N": str(self.clock())}
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
                        ":one": {"N": "1"},
                        ":now": {"N": str(self.clock())},
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
                ExpressionAttributeValues={
                    ":owner": {"S": lease.owner},
                    ":expires": {"N": str(self.clock() + self.lease_seconds)},
                },
                ReturnValues="ALL_NEW",
            )
        except ClientError as error:
            if not _conditional_failed(error):
                raise
            return None
        return self._lease(lease.key, lease.owner, lease.location, dict(response.get("Attributes", {})))

    def _lease(self, key: str, owner: str, location: str, item: dict[str, Any]) -> Lease:
        state = _state(key, item)
        return Lease(
            key=key,
            owner=owner,
            location=location,
            version=state.version,
            published=state.published,
            files=state.files,
            pending=tuple(sorted(state.pending)),
            applied=state.applied,
            seq=int(_number(item, "lease_seq")),
            catalog_version=int(_number(item, "catalog_version")),
            contributions=state.contributions,
            routed=_text(item, "routed"),
            published_lineage=_lineage_pair(item),
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
        values: dict[str, AttributeValueTypeDef] = {":owner": {"S": lease.owner}, ":version": {"N": str(lease.version)}}
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
                values[":contributions"] = {"SS": sorted(entries)}
                sets.append("contributions = :contributions")
            else:
                removes.append("contributions")
            values |= {
                ":next": {"N": str(lease.version + 1)},
                ":location": {"S": lease.location},
                ":files": {"N": str(files)},
                ":now": {"N": str(self.clock())},
            }
            sets += ["version = :next", "published = :location", "files = :files", "published_at = :now"]
            removes.append("published_lineage")  # the new version's run notes its own (``mark_lineage``)
            if lease.published:
                values[":retired"] = {"SS": [retired_entry(lease.published, self.clock())]}
                adds.append("retired :retired")
            if applied_ids:
                values[":applied"] = {"SS": applied_ids}
                adds.append("applied :applied")
        expression = ("SET " + ", ".join(sets)) if sets else ""
        if removes:
            expression += " REMOVE " + ", ".join(removes)
        if adds:
            expression += " ADD " + ", ".join(adds)
        if taken_ids:
            values[":taken"] = {"SS": taken_ids}
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
        return _state(lease.key, dict(response.get("Attributes", {})))

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
                ExpressionAttributeValues={":published": {"S": published}},
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
                ExpressionAttributeValues={
                    ":published": {"S": published},
                    ":lineage": {"M": {"root_id": {"S": root_id}, "node_id": {"S": node_id}}},
                },
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
        known = {":catalog": {"N": str(catalog_version)}} if catalog_version is not None else {}
        noted = "SET catalog_version = :catalog " if catalog_version is not None else ""
        try:
            released = self.client.update_item(
                TableName=self.table_name,
                Key=self._key(lease.key),
                UpdateExpression=noted + "REMOVE lease_owner, lease_expires, lease_location, lease_seq",
                ConditionExpression=(
                    "lease_owner = :owner AND arrival_seq = lease_seq AND attribute_not_exists(pending)"
                ),
                ExpressionAttributeValues={":owner": {"S": lease.owner}, **known},
                ReturnValues="ALL_NEW",
            )
            return Finished(None, _state(lease.key, dict(released.get("Attributes", {}))))
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
                    ":owner": {"S": lease.owner},
                    ":next": {"S": next_owner},
                    ":location": {"S": next_location},
                    ":expires": {"N": str(self.clock() + self.lease_seconds)},
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
            current = _state(lease.key, dict(item))
            if _text(dict(item), "lease_previous") == lease.owner and current.lease_owner and current.lease_location:
                return Finished(
                    self._lease(lease.key, current.lease_owner, current.lease_location, dict(item)), current
                )
            # Released, or the lease expired and another run took it with the pending arrivals.
            return Finished(None, current)
        item = dict(response.get("Attributes", {}))
        return Finished(self._lease(lease.key, next_owner, next_location, item), _state(lease.key, item))

    def forget_retired(self, key: str, entries: Iterable[str]) -> None:
        entries = sorted(set(entries))
        if entries:
            self.client.update_item(
                TableName=self.table_name,
                Key=self._key(key),
                UpdateExpression="DELETE retired :entries",
                ExpressionAttributeValues={":entries": {"SS": entries}},
            )

    def partitions(self) -> list[PartitionState]:
        """Every partition's state (the sweep's work list)."""
        states: list[PartitionState] = []
        paginator = self.client.get_paginator("scan")
        for page in paginator.paginate(
            TableName=self.table_name,
            FilterExpression="begins_with(#key, :prefix)",
            ExpressionAttributeNames={"#key": self.key_attribute},
            ExpressionAttributeValues={":prefix": {"S": COMMIT_PREFIX}},
            ConsistentRead=True,
        ):
            for item in page.get("Items", []):
                states.append(_state(str(item[self.key_attribute]["S"]), dict(item)))
        return states


FOLLOW_UP = "lakeline_follow_up"


def follow_up_body(lease: Lease) -> str:
    """The queue message that starts a follow-up run holding ``lease`` (what ``finish`` handed over)."""
    return json.dumps({FOLLOW_UP: lease.to_dict()}, sort_keys=True)


def send_follow_up(sqs: SQSClient, queue_url: str, lease: Lease) -> None:
    """Queue the follow-up run of a partition on its stage's queue (the stage's router plans and starts it)."""
    sqs.send_message(QueueUrl=queue_url, MessageBody=follow_up_body(lease))


def parse_follow_up(event: Any) -> Lease | None:
    """The lease of a follow-up message, or ``None`` for any other message."""
    if isinstance(event, dict) and isinstance(event.get(FOLLOW_UP), dict):
        try:
            return Lease.from_dict(event[FOLLOW_UP])
        except (KeyError, TypeError, ValueError) as error:
            raise InvalidInputError(f"follow-up message is malformed: {error}") from error
    return None


def finish_run(
    commits: PartitionCommits,
    lease: Lease,
    next_owner: Callable[[], str],
    root: str,
    *,
    catalog_version: int | None = None,
) -> Finished:
    """``finish`` the run; a hand-over with nothing waiting is finished at once, so the follow-up lease
    returned (if any) has arrivals for its run. ``next_owner`` makes a follow-up run token and ``root``
    is the partition root its prefix goes under."""
    while True:
        owner = next_owner()
        location = f"{root.rstrip('/')}/{RUN_PREFIX}{owner}/"
        finished = commits.finish(lease, owner, location, catalog_version=catalog_version)
        if finished.follow_up is None or finished.follow_up.pending:
            return finished
        lease = finished.follow_up


def referenced(state: PartitionState, now: float) -> set[str]:
    """Prefixes nobody may delete: the published one and a live run's."""
    keep = {state.published} if state.published else set()
    if state.lease_location and state.leased(now):
        keep.add(state.lease_location)
    return {prefix_uri(location) for location in keep}


def sweep_partition(
    commits: PartitionCommits,
    state: PartitionState,
    store: ObjectStore,
    *,
    grace_seconds: float,
    run_prefix: str,
    token_time: Callable[[str], float | None],
) -> list[str]:
    """Delete what no reader or writer can need any more under one partition: versions retired more
    than ``grace_seconds`` ago, and run prefixes (``<run_prefix><token>``) that are neither published,
    nor a live run's, nor retired, once their token is older than the grace period (a crashed run's
    output). Returns the deleted prefixes."""
    now = commits.clock()
    keep = referenced(state, now)
    deleted: list[str] = []
    done: list[str] = []
    retired_locations: set[str] = set()

    def delete(location: str) -> bool:
        """Delete one of the partition's run prefixes; one the delete guard refuses (the table moved, a
        damaged state item) stays where it is, logged, and the sweep goes on."""
        try:
            if not state.root:
                raise InvalidInputError(f"partition {state.key} has no root recorded")
            store.delete_prefix(
                location, table_root=commit_table_root(state.key, state.root), table=commit_partition(state.key)[0]
            )
        except (InvalidInputError, DeleteRefused) as refused:
            logger.warning("the sweep of %s leaves %s: %s", state.key, location, refused)
            return False
        deleted.append(location)
        return True

    for entry in state.retired:
        at, location = parse_retired(entry)
        location = prefix_uri(location)
        retired_locations.add(location)
        if now - at < grace_seconds:
            continue
        if location in keep or delete(location):
            done.append(entry)
    commits.forget_retired(state.key, done)
    if state.root:
        for prefix in store.list_child_prefixes(state.root):
            name = prefix.rstrip("/").rsplit("/", 1)[-1]
            if not name.startswith(run_prefix) or prefix_uri(prefix) in keep | retired_locations:
                continue
            started = token_time(name[len(run_prefix) :])
            if started is not None and now - started >= grace_seconds:
                delete(prefix)
    return deleted
