"""A stage A follow-up waits while its partition still receives files (``stage_a.plan.follow_up_window``, #39): a
burst uploaded faster than runs end otherwise runs as many small runs, each taking what arrived since the last."""

from __future__ import annotations

from datetime import UTC, datetime

from lakeline.commits import Lease, PartitionState
from stage_a.arrivals import Arrival, pending_entry
from stage_a.plan import (
    FULL_BATCH_BYTES,
    MAX_FOLLOW_UP_WINDOWS,
    STILL_ARRIVING_SECONDS,
    filling,
    follow_up_window,
)
from stage_a.start import follow_up_wait

NOW = datetime(2026, 11, 29, 5, 0, tzinfo=UTC).timestamp()
LONG_AGO = datetime(2026, 11, 29, 4, 0, tzinfo=UTC)
KEY = "commit#db.table/date=20261129"


def waiting(count: int, recorded_ago: float | None) -> Lease:
    """A follow-up's lease with ``count`` arrivals waiting, the newest recorded ``recorded_ago`` seconds before
    ``NOW`` (``None``: an item from before the routers noted it). Every file was uploaded an hour before."""
    entries = tuple(
        pending_entry(
            Arrival(
                bucket="raw",
                key=f"team/db/table/date=20261129/part-{index}.csv",
                sequencer=f"{index:018X}",
                event_time=LONG_AGO,
                size=10,
            )
        )
        for index in range(count)
    )
    last = 0.0 if recorded_ago is None else NOW - recorded_ago
    return Lease(
        "commit#db.table/date=20261129",
        "owner",
        "s3://stage/run/",
        1,
        None,
        0,
        entries,
        frozenset(),
        1,
        last_waiting=last,
    )


def test_a_follow_up_waits_while_its_partition_s_arrivals_are_still_being_recorded() -> None:
    """Uploaded an hour ago, recorded half a second ago: a backlog of the burst is still coming through."""
    delay = follow_up_window(30, batch=400, clock=lambda: NOW)
    assert delay(waiting(2, 0.5)) == 30


def test_a_follow_up_starts_at_once_when_its_files_have_all_been_recorded() -> None:
    delay = follow_up_window(30, batch=400, clock=lambda: NOW)
    assert delay(waiting(2, STILL_ARRIVING_SECONDS + 0.1)) == 0
    assert delay(waiting(2, None)) == 0  # an item written before the routers noted the time: no wait


def test_a_full_batch_starts_at_once_and_a_window_of_0_never_waits() -> None:
    assert follow_up_window(30, batch=2, clock=lambda: NOW)(waiting(2, 0.1)) == 0
    assert follow_up_window(0, batch=400, clock=lambda: NOW)(waiting(1, 0.1)) == 0
    assert follow_up_window(30, batch=400, clock=lambda: NOW)(waiting(0, 0.1)) == 0


def test_arrivals_that_fill_a_batch_by_their_bytes_start_at_once() -> None:
    """The router stops recording near ``MAX_PENDING_BYTES``: waiting longer for a count never reached gains nothing."""
    long_keys = tuple("x" * 1000 + str(index) for index in range(FULL_BATCH_BYTES // 1000 + 1))
    assert not filling(long_keys, NOW - 0.1, NOW, batch=400)
    assert filling(long_keys[:10], NOW - 0.1, NOW, batch=400)


class _State:
    def __init__(self, owner: str, pending: int, recorded_ago: float) -> None:
        self.state = PartitionState(
            KEY,
            lease_owner=owner,
            pending=frozenset(f"entry-{index}" for index in range(pending)),
            last_waiting=NOW - recorded_ago,
        )

    def read(self, key: str) -> PartitionState:
        assert key == KEY
        return self.state


def test_the_router_sends_a_follow_up_back_for_another_window_only_while_its_partition_fills_and_its_bound_allows() -> (
    None
):
    follow_up = waiting(1, 0.1)
    clock = lambda: NOW  # noqa: E731
    still = _State("owner", 5, 0.5)
    assert follow_up_wait(follow_up, 0, still, 30, clock=clock) == 30
    assert follow_up_wait(follow_up, MAX_FOLLOW_UP_WINDOWS, still, 30, clock=clock) == 0
    assert follow_up_wait(follow_up, 0, still, 0, clock=clock) == 0
    assert follow_up_wait(follow_up, 0, _State("owner", 5, 9.0), 30, clock=clock) == 0
    assert follow_up_wait(follow_up, 0, _State("owner", 400, 0.5), 30, clock=clock) == 0
    # Its lease expired and another run took the partition: no wait, its router lets it go at once.
    assert follow_up_wait(follow_up, 0, _State("another", 5, 0.5), 30, clock=clock) == 0
