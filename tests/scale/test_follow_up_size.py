"""The message that hands a partition's lease to its follow-up run stays small whatever waits (#39): the follow-up
re-reads its lease from the partition's state, so the message names the lease and carries none of the waiting
arrivals. It carried them all: 111 KB after a burst of 2,000 files (``benchmarks/scale.py``), past SQS's 256 KiB
a few thousand later, where the hand-over would fail."""

from __future__ import annotations

import json

from lakeline.commits import Lease, follow_up_body, parse_follow_up
from stage_a.arrivals import Arrival, pending_entry
from tests.scale.burst import LONG_BUCKET, burst_key, sequencer

TIME = "2022-01-20T10:00:00Z"


def test_a_follow_up_message_names_its_lease_and_carries_none_of_what_waits() -> None:
    waiting = tuple(
        sorted(
            pending_entry(
                Arrival.model_validate(
                    {"bucket": LONG_BUCKET, "key": burst_key(i), "sequencer": sequencer(i), "event_time": TIME}
                )
            )
            for i in range(5_000)
        )
    )
    location = "s3://stage/eng/mysql/customers/date=20220120/lakeline_run=20220120t101500000000_abcdef0123/"
    lease = Lease("commit#eng_mysql_dev.customers/date=20220120", "20220120t101500000000_abcdef0123", location, 3,
                  None, 0, waiting, frozenset(), 7)  # fmt: skip
    body = follow_up_body(lease)
    assert len(body.encode()) < 2_048
    handed = parse_follow_up(json.loads(body))
    assert handed is not None and (handed.key, handed.owner, handed.location) == (lease.key, lease.owner, location)
