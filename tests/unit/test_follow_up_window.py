"""A stage A follow-up waits while its partition still receives files (``stage_a.plan.follow_up_window``, #39): a
burst uploaded faster than runs end otherwise runs as many small runs, each taking what arrived since the last."""

from __future__ import annotations

from datetime import UTC, datetime

from lakeline.commits import Lease
from stage_a.arrivals import Arrival, pending_entry
from stage_a.plan import STILL_ARRIVING_SECONDS, follow_up_window

NOW = datetime(2026, 11, 29, 5, 0, tzinfo=UTC).timestamp()


def waiting(*seconds_ago: float) -> Lease:
    entries = tuple(
        pending_entry(
            Arrival(
                bucket="raw",
                key=f"team/db/table/date=20261129/part-{index}.csv",
                sequencer=f"{index:018X}",
                event_time=datetime.fromtimestamp(NOW - ago, UTC),
                size=10,
            )
        )
        for index, ago in enumerate(seconds_ago)
    )
    return Lease("commit#db.table/date=20261129", "owner", "s3://stage/run/", 1, None, 0, entries, frozenset(), 1)


def test_a_follow_up_waits_while_files_still_arrive_and_its_batch_is_not_full() -> None:
    delay = follow_up_window(30, batch=400, clock=lambda: NOW)
    assert delay(waiting(40.0, 0.5)) == 30  # the newest arrived half a second ago: the burst goes on


def test_a_follow_up_starts_at_once_when_its_files_have_all_arrived() -> None:
    delay = follow_up_window(30, batch=400, clock=lambda: NOW)
    assert delay(waiting(9.0, STILL_ARRIVING_SECONDS + 0.1)) == 0  # a run's length after the files: all there


def test_a_full_batch_starts_at_once_and_a_window_of_0_never_waits() -> None:
    assert follow_up_window(30, batch=2, clock=lambda: NOW)(waiting(0.1, 0.2)) == 0
    assert follow_up_window(0, batch=400, clock=lambda: NOW)(waiting(0.1)) == 0
    assert follow_up_window(30, batch=400, clock=lambda: NOW)(waiting()) == 0


def test_an_entry_it_cannot_read_never_keeps_the_follow_up_from_being_queued() -> None:
    """The delay is asked for after the lease was handed over: raising there would leave the follow-up unqueued."""
    lease = waiting(0.1)
    broken = Lease(lease.key, lease.owner, lease.location, 1, None, 0, ("not an entry",), frozenset(), 1)
    assert follow_up_window(30, batch=400, clock=lambda: NOW)(broken) == 0
