"""The scale tier, stage A (#39): however many arrivals wait on one partition, each run takes a bounded batch,
kept as an object its state machine input names (``lakeline.commits.batch``): the input and every statement stay
the same size whatever the batch, under a quarter of their quotas, and the follow-up runs the lease's hand-over
starts take every arrival exactly once, through redeliveries and crashes between batches.

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
from lakeline.errors import InvalidInputError
from stage_a.arrivals import pending_arrival
from stage_a.plan import MAX_RUN_ARRIVALS, StageAPlan, arrival_id
from tests.scale.burst import STATE_TABLE, Burst, arrival_body, burst_cloud, burst_key, expected_ids

QUARTER_OF_THE_QUOTA = 256 * 1024 // 4  # bytes: Step Functions' payload quota is 256 KiB
QUARTER_OF_A_STATEMENT = 262_144 // 4  # bytes: Athena's query string quota


def applied_counts(burst: Burst) -> Counter[str]:
    return Counter(identity for run in burst.runs if run.committed for identity in run.applied)


def assert_bounded(burst: Burst) -> None:
    for run in burst.runs:
        assert run.input_bytes < QUARTER_OF_THE_QUOTA, (run.name, run.input_bytes)
        assert run.largest_statement < QUARTER_OF_A_STATEMENT, (run.name, run.largest_statement)
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
        # The first run took its own arrival; each follow-up the next full batch, oldest first: the burst is
        # committed in a handful of executions.
        full, rest = divmod(1_999, MAX_RUN_ARRIVALS)
        assert [len(run.taken) for run in burst.runs] == [1] + [MAX_RUN_ARRIVALS] * full + ([rest] if rest else [])
        assert len(burst.runs) <= 8
        assert burst.runs[1].taken == tuple(sorted(expected_ids(MAX_RUN_ARRIVALS + 1) - expected_ids(1)))
        assert_each_applied_once_and_nothing_waits(burst, expected_ids(2_000))
        # A full batch costs the input nothing: a run of 1 and a run of 400 have inputs of the same size.
        assert max(run.input_bytes for run in burst.runs) - min(run.input_bytes for run in burst.runs) < 200
        assert burst.largest_input < 8 * 1024


def test_a_plan_names_its_batch_and_carries_its_sql_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither the lease's arrivals nor their applied ids nor a copy of the SQL (``statements``) travels in the
    input: it names the run's batch object, which holds exactly what the run takes."""
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
        assert document["applied"] == [] and document["lease"]["pending"] == []
        follow_up = StageAPlan.from_dict(document)
        assert text.count(json.dumps(follow_up.ctas)[1:-1]) == 1
        assert follow_up.batch is not None and follow_up.batch.count == 149
        with pytest.raises(InvalidInputError, match="read it first"):
            follow_up.arrivals  # noqa: B018 - what a function ending the run would get without reading its batch
        read = follow_up.with_batch(burst.store)
        taken = [pending_arrival(entry).key for entry in Lease.from_dict(read.lease or {}).pending]
        assert sorted(taken) == sorted(burst_key(index) for index in range(1, 150))
        assert len(read.applied) == 149
        # No key but the one the run is named by (``raw_key``, its oldest arrival): the CTAS and the CSV type
        # check read the files through manifests, the commit and the failure path the batch object (#39).
        assert [key for key in taken if key in text] == [follow_up.raw_key]
        assert text.count(follow_up.raw_key) == 1


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
