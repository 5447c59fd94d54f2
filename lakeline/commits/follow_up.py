"""A run's hand-over: finishing a run hands the partition's lease to one follow-up run when arrivals
waited, and the follow-up is started by a message on the stage's own queue."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lakeline.commits.state import Finished, Lease
from lakeline.commits.store import PartitionCommits
from lakeline.errors import InvalidInputError
from lakeline.storage import RUN_PREFIX

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

FOLLOW_UP = "lakeline_follow_up"


def follow_up_body(lease: Lease) -> str:
    """The queue message that starts a follow-up run holding ``lease`` (what ``finish`` handed over). The
    follow-up re-reads its lease from the partition's state (``PartitionCommits.resume``), so the message
    carries the lease without what waits: with every waiting arrival in it, a burst of 2,000 made it 111 KB,
    and a few thousand more would pass SQS's 256 KiB, failing the hand-over (#39)."""
    return json.dumps({FOLLOW_UP: {**lease.to_dict(), "pending": []}}, sort_keys=True)


def send_follow_up(sqs: SQSClient, queue_url: str, lease: Lease, *, delay_seconds: int = 0) -> None:
    """Queue the follow-up run of a partition on its stage's follow-up queue (the stage's router plans and starts
    it), to be delivered after ``delay_seconds``."""
    sqs.send_message(QueueUrl=queue_url, MessageBody=follow_up_body(lease), DelaySeconds=delay_seconds)


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
        if finished.follow_up is None or finished.follow_up.waiting:
            return finished
        lease = finished.follow_up
