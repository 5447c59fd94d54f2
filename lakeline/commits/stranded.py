"""Stranded partitions: arrivals waiting in ``pending`` behind a lease that expired (its run ended with nothing to
end the lease: a crash, or a status-change function that failed too) or that nobody holds. Their follow-up would
only start with the next arrival, which for a closed partition never comes; the scheduled sweep
(``lambdas/stranded_sweep``) takes each such lease for a follow-up run and queues it, as ``finish`` would have.

Bounded: each invocation reads at most ``max_items`` items of the pipeline-state table, continuing where the
last one stopped (a cursor item in the same table), and starts at most ``max_starts`` follow-ups. A live run's
lease is never taken: the take is ``PartitionCommits.begin``'s conditional write (free or expired only), so
two sweeps, or a sweep and a router, cannot both start a follow-up of one partition.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lakeline.aws.dynamodb import attribute_values
from lakeline.commits.follow_up import finish_run
from lakeline.commits.keys import COMMIT_PREFIX
from lakeline.commits.state import Lease, PartitionState
from lakeline.commits.store import PartitionCommits
from lakeline.errors import InvalidInputError
from lakeline.storage import RUN_PREFIX

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef, ScanInputTypeDef

CURSOR_KEY = "sweep#stranded"
"""The pipeline-state item holding where the last sweep stopped (not a ``commit#`` key: no partition's)."""
PAGE_ITEMS = 100


@dataclass(frozen=True)
class SweepLimits:
    """How much one invocation may do: items read, follow-ups started."""

    max_items: int = 2_000
    max_starts: int = 50

    def __post_init__(self) -> None:
        if self.max_items < 1 or self.max_starts < 1:
            raise InvalidInputError(f"sweep limits must be positive: {self.max_items} items, {self.max_starts} starts")


@dataclass
class SweepReport:
    """What one sweep did: items read, the stranded partitions it found, the follow-ups it took and which a live
    run had taken meanwhile; ``finished``: it reached the table's end (the next sweep starts over)."""

    read: int = 0
    handled: list[str] = field(default_factory=list)
    stranded: list[str] = field(default_factory=list)
    started: list[Lease] = field(default_factory=list)
    taken_meanwhile: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    """Stranded partitions whose follow-up could not be started, and why (``check``)."""
    finished: bool = False


def stranded(state: PartitionState, now: float) -> bool:
    """Arrivals wait (in ``pending``, or in a batch an ended run took) and no live run holds the lease."""
    return state.waiting and not state.leased(now)


def take_stranded(
    commits: PartitionCommits, state: PartitionState, next_owner: Callable[[], str]
) -> tuple[bool, Lease | None]:
    """Take a stranded partition's lease for a follow-up run: (taken, the follow-up's lease, ``None`` when
    nothing waited once taken, and the lease was released again). Not taken: a live run holds it now."""
    if not state.root:
        raise InvalidInputError(f"partition {state.key} has arrivals waiting but no root recorded")
    owner = next_owner()
    location = f"{state.root.rstrip('/')}/{RUN_PREFIX}{owner}/"
    # Its run is planned by the stage's router, from the follow-up message: no plan here.
    lease = commits.begin(state.key, owner, location, state.root, plans=False)
    if lease is None:
        return False, None
    if lease.waiting:
        return True, lease
    # A run took them between the scan and the take: hand on or release as ``finish`` does.
    return True, finish_run(commits, lease, next_owner, state.root).follow_up


def sweep_stranded(
    commits: PartitionCommits,
    next_owner: Callable[[], str],
    start: Callable[[Lease], None],
    limits: SweepLimits = SweepLimits(),
    *,
    check: Callable[[PartitionState], object] = lambda state: None,
) -> SweepReport:
    """Find stranded partitions, from where the last sweep stopped, and ``start`` a follow-up of each (its
    stage's queue message); at most ``limits`` of work. The cursor is saved after each page, so a sweep that
    fails part way resumes there. ``check`` raises ``InvalidInputError`` for a partition whose follow-up could
    not be started (its waiting entries name no stage): it is reported and its lease left alone, not taken for
    a run nobody would start."""
    report = SweepReport()
    cursor = _load_cursor(commits)
    while report.read < limits.max_items and len(report.started) < limits.max_starts:
        now = commits.clock()
        request: ScanInputTypeDef = {
            "TableName": commits.table_name,
            "Limit": min(PAGE_ITEMS, limits.max_items - report.read),
            "ConsistentRead": True,
            "FilterExpression": (
                "begins_with(#key, :prefix) AND (attribute_exists(pending) OR attribute_exists(taken_batch)) "
                "AND (attribute_not_exists(lease_owner) OR lease_expires < :now)"
            ),
            "ExpressionAttributeNames": {"#key": commits.key_attribute},
            "ExpressionAttributeValues": attribute_values(prefix=COMMIT_PREFIX, now=now),
        }
        if cursor:
            request["ExclusiveStartKey"] = cursor
        page = commits.client.scan(**request)
        report.read += int(page.get("ScannedCount", 0))
        cursor = page.get("LastEvaluatedKey")
        for item in page.get("Items", []):
            if len(report.started) >= limits.max_starts:
                # The rest of the page is the next sweep's: it starts after the last partition handled here.
                cursor = {commits.key_attribute: {"S": report.handled[-1]}}
                break
            state = PartitionState.from_item(str(item[commits.key_attribute]["S"]), item)
            report.handled.append(state.key)
            if not stranded(state, now):
                continue
            report.stranded.append(state.key)
            try:
                check(state)
            except InvalidInputError as error:
                report.refused[state.key] = str(error)
                continue
            taken, lease = take_stranded(commits, state, next_owner)
            if not taken:
                report.taken_meanwhile.append(state.key)
            elif lease is not None:
                start(lease)
                report.started.append(lease)
        _save_cursor(commits, cursor)
        if not cursor:
            report.finished = True
            break
    return report


def _load_cursor(commits: PartitionCommits) -> dict[str, AttributeValueTypeDef] | None:
    item = commits.client.get_item(
        TableName=commits.table_name, Key={commits.key_attribute: {"S": CURSOR_KEY}}, ConsistentRead=True
    ).get("Item")
    after = (item or {}).get("after", {}).get("S")
    return {commits.key_attribute: {"S": after}} if after else None


def _save_cursor(commits: PartitionCommits, cursor: dict[str, AttributeValueTypeDef] | None) -> None:
    key = {commits.key_attribute: {"S": CURSOR_KEY}}
    after = (cursor or {}).get(commits.key_attribute, {}).get("S")
    if after:
        commits.client.put_item(TableName=commits.table_name, Item={**key, "after": {"S": str(after)}})
    else:
        commits.client.delete_item(TableName=commits.table_name, Key=key)
