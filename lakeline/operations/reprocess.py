"""``lakeline reprocess``: rebuild what a range of a table's partitions feeds (a backfill, a target fixed
after it failed, a changed query), locally or deployed.

Each partition of the table whose first partition value lies in ``[first, last]`` (compared as text,
as sortable date masks write them) is routed again exactly as when it was finished: the same
dependencies-by-table pairs, destination partitions (``TargetRange`` included) and trigger modes, as
a new run (``reprocess-<time>``), so the receivers do not take it for a redelivery of the first one.
The stage B messages go to queue B, where the routers and state machines take them as any others,
and their chains follow. An ``append`` target's run replaces the rows the partition's last run
appended (its contribution, ``stage_b.plan``), so it is rebuilt too, never doubled. ``targets``
limits the rebuild to some targets.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from lakeline.commits import COMMIT_PREFIX, PartitionCommits, PartitionState, commit_key, commit_partition
from lakeline.commits.applied import published_ids
from lakeline.dependencies.arrivals import ArrivalTracker
from lakeline.dependencies.resolve import partition_path
from lakeline.dependencies.store import DependencyStore
from lakeline.errors import LakelineError
from lakeline.storage import ObjectStore
from stage_a.by_name import copy_key
from stage_a.keys import InvalidKey, parse_raw_key
from stage_a.plan import arrival_key
from stage_b.dispatch import send_stage_b_messages
from stage_b.messages import SourceArrival, StageBMessage
from stage_b.routing import plan_routes, route_finished_partition

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient

REPROCESSED = "lakeline-reprocessed"  # metadata of a raw object re-sent by `lakeline reprocess --raw`
MAX_COPY_BYTES = 5 * 1024**3  # CopyObject's limit
CONTENT_HEADERS = ("ContentType", "ContentEncoding", "ContentDisposition", "ContentLanguage", "CacheControl")


@dataclass
class Reprocessing:
    """What a reprocess sent, and what it left out or could not route (each with its reason)."""

    partitions: list[str] = field(default_factory=list)
    raw_files: list[str] = field(default_factory=list)  # re-sent through stage A (``--raw``)
    messages: list[StageBMessage] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    unrouted: list[str] = field(default_factory=list)


def _commit_key(item: Mapping[str, Any]) -> str:
    return str(item.get("target_partition", {}).get("S", ""))


def _commit_keys(items: Iterable[Mapping[str, Any]]) -> list[str]:
    return [key for key in map(_commit_key, items) if key.startswith(COMMIT_PREFIX)]


def _in_range(
    items: Iterable[Mapping[str, Any]], table: str, first: str, last: str
) -> list[tuple[dict[str, str], Mapping[str, Any]]]:
    """The partitions of ``table`` (pipeline-state commit items) whose first value is in ``[first, last]``,
    with their items, in partition order."""
    found = []
    for item in items:
        key = _commit_key(item)
        if not key.startswith(COMMIT_PREFIX):
            continue
        of, partition = commit_partition(key)
        if of == table and partition and first <= next(iter(partition.values())) <= last:
            found.append((partition, item))
    return sorted(found, key=lambda pair: list(pair[0].values()))


def table_partitions(items: Iterable[Mapping[str, Any]], table: str, first: str, last: str) -> list[dict[str, str]]:
    """The partitions of ``table`` whose first value is in ``[first, last]``."""
    return [partition for partition, _ in _in_range(items, table, first, last)]


def _loaded_raw_files(in_range: Iterable[tuple[dict[str, str], Mapping[str, Any]]], lists: ObjectStore) -> list[str]:
    """The raw keys whose rows these stage partitions hold (their applied arrivals, read from their lists with
    ``lists``), without an original its by-name copy replaces: what re-sending them through stage A reads."""
    keys = {
        arrival_key(identity)
        for _, item in in_range
        for identity in published_ids(PartitionState.from_item(str(item["target_partition"]["S"]), item), lists)
    }
    keys = {key for key in keys if _is_raw_key(key)}  # a stage B append target's are message ids
    return sorted(keys - {key for key in keys if copy_key(key) in keys})


def _is_raw_key(key: str) -> bool:
    try:
        parse_raw_key(key)
    except InvalidKey:
        return False
    return True


def scan_commit_items(dynamodb: DynamoDBClient, pipeline_state: str, table: str) -> list[Mapping[str, Any]]:
    """The pipeline-state commit items of ``table``'s partitions."""
    items: list[Mapping[str, Any]] = []
    pages = dynamodb.get_paginator("scan").paginate(
        TableName=pipeline_state,
        FilterExpression="begins_with(target_partition, :table)",
        ExpressionAttributeValues={":table": {"S": f"{COMMIT_PREFIX}{table}/"}},
    )
    for page in pages:
        items.extend(page.get("Items", []))
    return items


def scan_table_partitions(
    dynamodb: DynamoDBClient, pipeline_state: str, table: str, first: str, last: str
) -> list[dict[str, str]]:
    return table_partitions(scan_commit_items(dynamodb, pipeline_state, table), table, first, last)


def unowned_files(commits: PartitionCommits, message: StageBMessage) -> int:
    """How many of an append target partition's published files no contribution owns (written before
    contributions were recorded, or by an overwrite rebuild): an append run keeps them as they are."""
    state = commits.read(commit_key(message.target_dataset, partition_path(message.partition)))
    if state.published is None:
        return 0
    return max(0, state.files - state.contributed_files)


def reprocess_run(now: datetime | None = None) -> str:
    """A reprocess's run id: new each time, so no receiver takes it for a redelivery."""
    return f"reprocess-{(now or datetime.now(UTC)):%Y%m%dt%H%M%S%f}"


def raw_to_resend(
    table: str, items: Iterable[Mapping[str, Any]], first: str, last: str, lists: ObjectStore
) -> Reprocessing:
    """The partitions of stage table ``table`` in the range and the raw files loaded into them: sent
    through stage A again, each partition is rebuilt from its files with the table's settings as they
    are now, and what it feeds follows as for a late file (overwrite targets and their chains)."""
    items = list(items)
    in_range = _in_range(items, table, first, last)
    done = Reprocessing(
        partitions=[partition_path(partition) for partition, _ in in_range],
        raw_files=_loaded_raw_files(in_range, lists),
    )
    if not done.partitions:
        if (table, {}) in (commit_partition(key) for key in _commit_keys(items)):
            raise LakelineError(f"{table} is unpartitioned: --raw takes a range of partitions (send its files again)")
        raise LakelineError(f"{table} has no partition in that range (is it a table stage A or B writes?)")
    if not done.raw_files:
        raise LakelineError(f"no raw file was loaded into {table} in that range: is it a stage B target?")
    return done


GONE = frozenset({"404", "NoSuchKey", "NotFound"})  # head_object says 404, copy_object NoSuchKey


def _error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def resend_raw_files(s3: S3Client, bucket: str, keys: Iterable[str], run: str, skipped: list[str]) -> list[str]:
    """Send raw files through stage A again, deployed: each object is copied onto itself (same bytes,
    content headers and metadata, plus ``lakeline-reprocessed: <run>``), which S3 announces as a new
    version, so the router takes it as a re-sent file and its partition is rebuilt from all its files.
    The copy is of the version looked at (``CopySourceIfMatch``): a file replaced meanwhile is a new
    arrival already. Returns the keys sent; a file gone or replaced meanwhile goes to ``skipped``."""
    sent = []
    for key in keys:
        try:
            head = s3.head_object(Bucket=bucket, Key=key)
        except ClientError as error:
            if _error_code(error) in GONE:
                skipped.append(f"{key}: gone from s3://{bucket} since it was loaded")
                continue
            raise
        if head["ContentLength"] > MAX_COPY_BYTES:
            raise LakelineError(
                f"s3://{bucket}/{key} is larger than 5 GB, which one copy cannot re-send: upload it again instead"
            )
        headers = {name: head[name] for name in CONTENT_HEADERS if name in head}  # type: ignore[literal-required]
        try:
            s3.copy_object(
                Bucket=bucket,
                Key=key,
                CopySource={"Bucket": bucket, "Key": key},
                CopySourceIfMatch=head["ETag"],
                MetadataDirective="REPLACE",
                Metadata={**head.get("Metadata", {}), REPROCESSED: run},
                **headers,
            )
        except ClientError as error:
            if _error_code(error) in {"PreconditionFailed", *GONE}:
                skipped.append(f"{key}: replaced or removed meanwhile (a new version is an arrival of its own)")
                continue
            raise
        sent.append(key)
    return sent


def reprocess(
    table: str,
    partitions: Iterable[Mapping[str, str]],
    dependencies: DependencyStore,
    arrivals: ArrivalTracker,
    sqs: SQSClient,
    queue_url: str,
    *,
    targets: Collection[str] = (),
    dry_run: bool = False,
    now: datetime | None = None,
) -> Reprocessing:
    """Route each partition of ``table`` again and send the targets' messages to queue B."""
    run = reprocess_run(now)
    done = Reprocessing()
    commits = PartitionCommits(arrivals.client, arrivals.table_name)  # the same pipeline-state table
    for partition in partitions:
        done.partitions.append(partition_path(partition))
        if dry_run:  # the routes only: deciding trigger mode all's readiness would record the arrival
            arrival = SourceArrival(table=table, partition=dict(partition), run=run)
            routes, unrouted = plan_routes(arrival, dependencies.edges_from(table))
            messages = [
                StageBMessage(
                    target_dataset=route.edge.target_dataset,
                    partition=route.partition,
                    trigger=arrival,
                    usage=route.edge.dependency.usage,
                )
                for route in routes
            ]
        else:
            routing = route_finished_partition(table, partition, dependencies, arrivals, run=run)
            messages, unrouted = routing.messages, routing.unrouted
        done.unrouted += [target.describe() for target in unrouted]
        for message in messages:
            if targets and message.target_dataset not in targets:
                continue
            unowned = unowned_files(commits, message) if message.usage == "append" else 0
            if unowned:
                done.skipped.append(
                    f"{message.node}: {unowned} of its files were appended before Lakeline recorded whose rows "
                    "each file holds, so a re-run would add rows they may already hold; not rebuilt"
                )
                continue
            done.messages.append(message)
    if not done.partitions:
        raise LakelineError(f"{table} has no partition in that range (is it a table stage A or B writes?)")
    if not dry_run:
        send_stage_b_messages(sqs, queue_url, done.messages)
    return done
