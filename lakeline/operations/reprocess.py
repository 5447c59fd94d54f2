"""``lakeline reprocess``: rebuild what a range of a table's partitions feeds (a backfill, a target fixed
after it failed, a changed query), locally or deployed.

Each partition of the table whose first partition value lies in ``[first, last]`` (compared as text,
as sortable date masks write them) is routed again exactly as when it was finished: the same
dependencies-by-table pairs, destination partitions (``TargetRange`` included) and trigger modes, as
a new run (``reprocess-<time>``), so the receivers do not take it for a redelivery of the first one.
The stage B messages go to queue B, where the routers and state machines take them as any others,
and their chains follow. Only targets used ``overwrite`` are rebuilt: an ``append`` target would add
its rows a second time, so it is left out and named. ``targets`` limits the rebuild to some targets.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from lakeline.commits import COMMIT_PREFIX, commit_partition
from lakeline.dependencies.arrivals import ArrivalTracker
from lakeline.dependencies.resolve import partition_path
from lakeline.dependencies.store import DependencyStore
from lakeline.errors import LakelineError
from stage_b.dispatch import send_stage_b_messages
from stage_b.messages import SourceArrival, StageBMessage
from stage_b.routing import plan_routes, route_finished_partition

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient


@dataclass
class Reprocessing:
    """What a reprocess sent, and what it left out or could not route (each with its reason)."""

    partitions: list[str] = field(default_factory=list)
    messages: list[StageBMessage] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    unrouted: list[str] = field(default_factory=list)


def table_partitions(items: Iterable[Mapping[str, Any]], table: str, first: str, last: str) -> list[dict[str, str]]:
    """The partitions of ``table`` (pipeline-state commit items) whose first value is in ``[first, last]``."""
    found = []
    for item in items:
        key = str(item.get("target_partition", {}).get("S", ""))
        if not key.startswith(COMMIT_PREFIX):
            continue
        of, partition = commit_partition(key)
        if of == table and partition and first <= next(iter(partition.values())) <= last:
            found.append(partition)
    return sorted(found, key=lambda partition: list(partition.values()))


def scan_table_partitions(
    dynamodb: DynamoDBClient, pipeline_state: str, table: str, first: str, last: str
) -> list[dict[str, str]]:
    items: list[Mapping[str, Any]] = []
    pages = dynamodb.get_paginator("scan").paginate(
        TableName=pipeline_state,
        FilterExpression="begins_with(target_partition, :table)",
        ExpressionAttributeValues={":table": {"S": f"{COMMIT_PREFIX}{table}/"}},
    )
    for page in pages:
        items.extend(page.get("Items", []))
    return table_partitions(items, table, first, last)


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
    """Route each partition of ``table`` again and send the overwrite targets' messages to queue B."""
    run = f"reprocess-{(now or datetime.now(UTC)):%Y%m%dt%H%M%S%f}"
    done = Reprocessing()
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
            if message.usage == "append":
                done.skipped.append(f"{message.node}: an append target would add its rows again; not rebuilt")
                continue
            done.messages.append(message)
    if not done.partitions:
        raise LakelineError(f"{table} has no partition in that range (is it a table stage A or B writes?)")
    if not dry_run:
        send_stage_b_messages(sqs, queue_url, done.messages)
    return done
