"""A stage's bound on executions in flight (``lakeline.commits.slots``, #39), on moto's DynamoDB."""

from __future__ import annotations

import pytest

from lakeline.commits import PartitionCommits
from lakeline.commits.slots import NoRunSlot, RunSlots
from tests.conftest import Clock


@pytest.fixture
def slots(commits: PartitionCommits, clock: Clock) -> RunSlots:
    return RunSlots(commits.client, commits.table_name, "a", limit=2, lease_seconds=600, clock=clock)


def test_a_stage_runs_at_most_its_limit_and_a_run_ending_frees_its_slot(slots: RunSlots) -> None:
    slots.take("r1")
    slots.take("r2")
    with pytest.raises(NoRunSlot, match="stage A: 2 runs are in flight"):
        slots.take("r3")
    slots.take("r2")  # a redelivery of a run that holds one: nothing changes
    assert slots.in_flight() == 2
    assert slots.release("r1") and not slots.release("r1")  # given back once, whatever ends it twice
    slots.take("r3")
    assert slots.in_flight() == 2
    other = RunSlots(slots.client, slots.table_name, "b", limit=1, clock=slots.clock)
    other.take("r9")  # another stage's slots are its own
    assert slots.in_flight() == 2 and other.in_flight() == 1


def test_a_slot_no_run_gave_back_is_freed_once_its_lease_expired(slots: RunSlots, clock: Clock) -> None:
    slots.take("r1")
    slots.take("r2")
    clock.now += 300
    assert slots.release_expired() == []  # live runs keep theirs
    slots.release("r2")
    clock.now += 301
    assert slots.release_expired() == ["r1"]
    assert slots.in_flight() == 0
    slots.take("r3")


def scans(slots: RunSlots) -> list[str]:
    """The tables ``slots``' client scans from now on (botocore's own event, on moto's real DynamoDB)."""
    seen: list[str] = []
    slots.client.meta.events.register(
        "provide-client-params.dynamodb.Scan", lambda params, **_: seen.append(params["TableName"])
    )
    return seen


def test_the_sweep_frees_expired_slots_without_reading_the_rest_of_the_table(
    commits: PartitionCommits, slots: RunSlots, clock: Clock
) -> None:
    """The pipeline-state table holds an item per partition the lake ever wrote: the sweep, every few minutes,
    reads the stage's counter item alone (#39), which holds at most ``limit`` slots."""
    for day in range(50):
        commits.begin(f"commit#db.t/date=202201{day:02d}", "r", "s3://stage/db/t/x/", "s3://stage/db/t/")
    slots.take("r1")
    scanned = scans(slots)
    clock.now += 601
    assert slots.release_expired() == ["r1"] and slots.in_flight() == 0
    assert slots.release_expired() == []
    assert scanned == []


def old_slot(slots: RunSlots, token: str) -> None:
    """A slot as the version before the counter's map took it: an item of its own, counted in one transaction."""
    slots.client.transact_write_items(
        TransactItems=[
            {
                "Update": {
                    "TableName": slots.table_name,
                    "Key": {"target_partition": {"S": slots.counter}},
                    "UpdateExpression": "ADD in_flight :one",
                    "ExpressionAttributeValues": {":one": {"N": "1"}},
                }
            },
            {
                "Put": {
                    "TableName": slots.table_name,
                    "Item": {
                        "target_partition": {"S": slots.slot(token)},
                        "expires": {"N": str(slots.expiry())},
                    },
                }
            },
        ]
    )


def test_slots_taken_before_the_counter_had_its_map_are_given_back_and_counted_once(
    slots: RunSlots, clock: Clock
) -> None:
    old_slot(slots, "old1")
    old_slot(slots, "old2")
    with pytest.raises(NoRunSlot):
        slots.take("r1")  # the limit (2) counts the slots taken before
    assert slots.release("old1") and not slots.release("old1")  # its run's end gives it back, once
    slots.take("r1")
    assert slots.in_flight() == 2
    scanned = scans(slots)
    clock.now += 601  # both runs outlived their lease: the sweep frees the old item's slot and the new one
    assert sorted(slots.release_expired()) == ["old2", "r1"] and slots.in_flight() == 0
    assert scanned, "an item from before is found by a scan, while any may be left"
    clock.now += 2 * slots.lease_seconds
    scanned.clear()
    slots.take("r2")
    assert slots.release_expired() == [] and scanned == []  # no slot item from before can be left: no scan


def test_a_run_s_slot_passes_to_its_follow_up_once_and_the_count_does_not_change(slots: RunSlots) -> None:
    """The end of a run whose partition has arrivals waiting hands its slot to the follow-up run (#39), which then
    starts while every slot is held: it does not wait behind partitions that hold none."""
    slots.take("r1")
    slots.take("r2")
    assert slots.hand_over("r1", "f1")
    assert not slots.hand_over("r1", "f1")  # a retried run end: handed over already
    slots.take("f1")  # the follow-up's router: it holds one, so no NoRunSlot although the stage is full
    assert slots.in_flight() == 2
    with pytest.raises(NoRunSlot):
        slots.take("r3")
    assert not slots.release("r1")  # the run's own slot is the follow-up's now
    assert not slots.hand_over("never", "f2")  # a run that held none hands nothing over
    with pytest.raises(NoRunSlot):
        slots.take("f2")
    assert slots.release("f1") and slots.in_flight() == 1


def test_the_handed_over_slot_expires_with_the_follow_up_s_lease(slots: RunSlots, clock: Clock) -> None:
    slots.take("r1")
    clock.now += 500
    slots.hand_over("r1", "f1")
    clock.now += 200  # past r1's expiry, not past the follow-up's own
    assert slots.release_expired() == []
    clock.now += 401
    assert slots.release_expired() == ["f1"] and slots.in_flight() == 0
