"""The scale tier, stage A (#39): however many arrivals wait on one partition, each run takes a bounded batch,
its state machine input stays under a quarter of Step Functions' 256 KiB, and the follow-up runs the lease's
hand-over starts take every arrival exactly once, through redeliveries and crashes between batches.

Driven through the real router, planning and commit code on moto (``tests/scale/burst.py``)."""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

import pytest

from lakeline.commits import MAX_PENDING_BYTES, Lease
from lakeline.commits.applied import published_ids
from lakeline.commits.slots import RunSlots
from stage_a.arrivals import pending_arrival
from stage_a.plan import MAX_RUN_ARRIVALS, StageAPlan, arrival_id
from tests.scale.burst import STATE_TABLE, Burst, arrival_body, burst_cloud, expected_ids

QUARTER_OF_THE_QUOTA = 256 * 1024 // 4  # bytes: Step Functions' payload quota is 256 KiB


def applied_counts(burst: Burst) -> Counter[str]:
    return Counter(identity for run in burst.runs if run.committed for identity in run.applied)


def assert_bounded(burst: Burst) -> None:
    for run in burst.runs:
        assert run.input_bytes < QUARTER_OF_THE_QUOTA, (run.name, run.input_bytes)
        assert len(run.taken) <= MAX_RUN_ARRIVALS, (run.name, len(run.taken))


def state_client(burst: Burst) -> Any:
    assert burst.commits is not None
    return burst.commits.client


def assert_each_applied_once_and_nothing_waits(burst: Burst, expected: set[str], *, died: int = 0) -> None:
    applied = applied_counts(burst)
    assert set(applied) == expected
    assert max(applied.values()) == 1, [identity for identity, count in applied.items() if count > 1]
    state = burst.state()
    assert state.pending == frozenset() and state.lease_owner is None
    assert published_ids(state, burst.store) == frozenset(expected)
    # Every run that ended gave its slot back; those of runs that died are freed once their lease expired.
    slots = RunSlots(state_client(burst), STATE_TABLE, "a")
    assert slots.in_flight() == died
    later = RunSlots(slots.client, STATE_TABLE, "a", clock=lambda: time.time() + slots.lease_seconds + 1)
    assert len(later.release_expired()) == died and slots.in_flight() == 0


def test_2000_arrivals_waiting_on_one_partition_are_taken_in_bounded_batches_exactly_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with burst_cloud(monkeypatch) as burst:
        burst.send([0])  # the router starts the partition's run
        # The rest of the burst arrives while it is in flight: what the partition's item has no room for waits
        # in queue A, and is recorded as runs take what waits.
        sent_back = burst.wait(range(1, 2_000))
        assert 1_500 < len(sent_back) < 1_700, len(sent_back)
        assert burst.state().pending_bytes <= MAX_PENDING_BYTES
        burst.run_to_the_end(sent_back=sent_back)
        assert_bounded(burst)
        # The first run took its own arrival; each follow-up the next full batch, oldest first.
        full, rest = divmod(1_999, MAX_RUN_ARRIVALS)
        assert [len(run.taken) for run in burst.runs] == [1] + [MAX_RUN_ARRIVALS] * full + ([rest] if rest else [])
        assert burst.runs[1].taken == tuple(sorted(expected_ids(MAX_RUN_ARRIVALS + 1) - expected_ids(1)))
        assert_each_applied_once_and_nothing_waits(burst, expected_ids(2_000))
        assert burst.largest_input > 30_000, "the batches are full: the realistic sizes are measured"


def test_a_plan_carries_each_arrival_and_its_sql_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """No copy of the lease's arrivals (``arrivals``) nor of the SQL (``statements``) travels in the input."""
    with burst_cloud(monkeypatch) as burst:
        burst.send([0])
        burst.wait(range(1, 150))
        (first,) = burst.started()
        plan, _ = burst.take(first)
        burst.end(plan)
        burst.drain()
        (second,) = burst.started()
        text = burst.cloud.sfn.describe_execution(executionArn=second["executionArn"])["input"]
        document = json.loads(text)["plan"]
        assert "arrivals" not in document and "statements" not in document
        follow_up = StageAPlan.from_dict(document)
        assert text.count(json.dumps(follow_up.ctas)[1:-1]) == 1
        # Each arrival's key: once as the arrival the run takes, once in its applied id (and the run's first
        # arrival once more, as the key the run is named by: ``raw_key``); the CTAS and the CSV type check read
        # the files through manifests, never naming them (#39).
        for entry in Lease.from_dict(document["lease"]).pending:
            key = pending_arrival(entry).key
            assert text.count(key) == 2 + (key == follow_up.raw_key), key


def test_redeliveries_of_arrivals_in_a_batch_in_flight_or_applied_are_applied_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with burst_cloud(monkeypatch) as burst:
        burst.send([0])
        burst.wait(range(1, 250))
        (first,) = burst.started()
        plan, _ = burst.take(first)
        burst.end(plan)
        burst.drain()
        (second,) = burst.started()  # the follow-up, with the batch of arrivals 1..100 in flight
        # S3 or SQS delivers again: the applied arrival 0, arrival 50 (in the batch in flight), 200 (waiting).
        burst.send([0, 50, 200])
        assert burst.started() == [], "each waits for the run in flight"
        plan, run = burst.take(second)
        assert arrival_id(*_key_and_sequencer(50)) in run.taken
        burst.end(plan)
        burst.drain()
        burst.run_to_the_end()
        assert_bounded(burst)
        assert_each_applied_once_and_nothing_waits(burst, expected_ids(250))


def test_a_crash_between_batches_loses_and_doubles_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that dies after its commit, and one that dies before it: when their leases expire, the next arrival's
    run takes the partition and the follow-ups take what is left; each arrival is applied exactly once."""
    with burst_cloud(monkeypatch) as burst:
        burst.send([0])
        burst.wait(range(1, 300))
        (first,) = burst.started()
        plan, _ = burst.take(first)
        burst.end(plan)
        burst.drain()
        # The second run commits its batch and dies before it ends its lease: no follow-up is queued.
        (second,) = burst.started()
        plan, committed = burst.take(second)
        assert plan.lease is not None
        burst.end(plan, commit=True, hand_over=False)
        burst.expire_lease()
        burst.send([300])  # an arrival after the lease expired takes the partition
        (third,) = burst.started()
        plan, retaken = burst.take(third)
        assert not set(retaken.taken) & set(committed.taken), "the committed batch left pending with its commit"
        # The third run dies before its commit: its batch still waits, and is taken again, once.
        burst.end(plan, commit=False, hand_over=False)
        burst.expire_lease()
        burst.send([301])
        burst.run_to_the_end()
        runs_after = burst.runs[3:]
        assert set(retaken.taken) <= {identity for run in runs_after for identity in run.taken}
        assert_bounded(burst)
        assert_each_applied_once_and_nothing_waits(burst, expected_ids(302), died=2)


def _key_and_sequencer(index: int) -> tuple[str, str]:
    arrival = json.loads(arrival_body(index))["detail"]["object"]
    return arrival["key"], arrival["sequencer"]
