"""A run's batch leaves ``pending`` when the run is planned (#39, ``PartitionCommits.take``): the item notes where
the batch is instead, so arrivals keep being recorded behind a run of a full batch. Step by step on moto: the take,
a redelivery that races it, the run's end (and its retry), a run that ends without ending its batch, and the sweep.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import replace

import pytest

from lakeline.commits import (
    MAX_PENDING_BYTES,
    Lease,
    LeaseLost,
    PartitionCommits,
    PartitionFull,
    TakenBatch,
    finish_run,
    referenced,
)
from lakeline.commits.batch import RunBatch, write_batch
from lakeline.commits.stranded import sweep_stranded, take_stranded
from tests.conftest import Clock
from tests.unit.test_commits import KEY, ROOT


def token(name: str) -> str:
    """A run token of the real form, fixed by ``name``."""
    return f"20220120t000000000000_{uuid.uuid5(uuid.NAMESPACE_URL, name).hex[:10]}"


R1, R2, R3, R4, R_LATE = (token(name) for name in ("r1", "r2", "r3", "r4", "late"))


def location(owner: str) -> str:
    """Run ``owner``'s prefix (``owner`` a run token, as ``finish_run`` makes them)."""
    return f"{ROOT}lakeline_run={owner}/"


def entry(index: int) -> str:
    """A ``pending`` entry of the size of a realistic one (~200 bytes)."""
    return json.dumps([f"raw/team/dataset/table/dt=2026-11-29/file-{index:06d}.csv", f"{index:018d}", "x" * 60])


def taken_by(commits: PartitionCommits, owner: str, entries: list[str]) -> TakenBatch:
    """The batch of ``owner``'s run as its plan writes it (``lakeline.commits.batch``)."""
    assert commits.lists is not None
    ref = write_batch(commits.lists, location(owner), RunBatch(tuple(sorted(entries)), ()))
    return TakenBatch(owner, ref.location, location(owner), ref.count)


def test_a_taken_batch_leaves_pending_so_the_next_one_fills_behind_its_run(commits: PartitionCommits) -> None:
    per_batch = MAX_PENDING_BYTES // len(entry(0).encode())
    first = [entry(i) for i in range(per_batch)]
    lease = commits.begin(KEY, R1, location(R1), ROOT, first)
    assert lease is not None and commits.read(KEY).pending_bytes > MAX_PENDING_BYTES * 0.9
    batch = taken_by(commits, R1, first)
    assert commits.take(lease, batch, first) == batch
    state = commits.read(KEY)
    assert (state.pending, state.pending_bytes, state.taken) == (frozenset(), 0, batch)
    # The item has room for a whole batch more while the run works: nothing is refused.
    for index in range(per_batch, 2 * per_batch):
        assert commits.begin(KEY, token(f"a{index}"), location(token(f"a{index}")), ROOT, [entry(index)]) is None
    with pytest.raises(PartitionFull):
        commits.begin(KEY, R_LATE, location(R_LATE), ROOT, [entry(10_000)])


def test_a_redelivery_that_took_the_run_s_batch_first_is_planned_from_and_the_second_take_changes_nothing(
    commits: PartitionCommits,
) -> None:
    lease = commits.begin(KEY, R1, location(R1), ROOT, [entry(1), entry(2)])
    assert lease is not None
    earlier = taken_by(commits, R1, [entry(1)])  # a redelivery planned while only one waited
    assert commits.take(lease, earlier, [entry(1)]) == earlier
    later = taken_by(commits, R1, [entry(1), entry(2)])
    assert commits.take(lease, later, [entry(1), entry(2)]) == earlier  # plan that one
    state = commits.read(KEY)
    assert state.pending == {entry(2)} and state.pending_bytes == len(entry(2).encode()) and state.taken == earlier


def test_a_run_that_no_longer_holds_the_lease_takes_nothing(commits: PartitionCommits, clock: Clock) -> None:
    lease = commits.begin(KEY, R1, location(R1), ROOT, [entry(1)])
    assert lease is not None
    clock.now += commits.lease_seconds + 1
    assert commits.begin(KEY, R2, location(R2), ROOT, [entry(2)]) is not None
    with pytest.raises(LeaseLost):
        commits.take(lease, taken_by(commits, R1, [entry(1)]), [entry(1)])
    assert commits.read(KEY).pending == {entry(1), entry(2)}


def test_the_run_s_end_ends_its_batch_once_and_a_retry_leaves_a_batch_taken_since(commits: PartitionCommits) -> None:
    lease = commits.begin(KEY, R1, location(R1), ROOT, [entry(1)])
    assert lease is not None
    batch = taken_by(commits, R1, [entry(1)])
    commits.take(lease, batch, [entry(1)])
    run = Lease.from_dict({**lease.to_dict(), "taken": batch.to_dict()})  # as the plan passes it on
    assert commits.commit(run, publish=False).taken is None
    # A redelivery of the run's arrival re-took the lease after the end and took what waited then.
    commits.begin(KEY, R1, location(R1), ROOT, [entry(2)])
    again = taken_by(commits, R1, [entry(2)])
    commits.take(run, again, [entry(2)])
    assert commits.commit(run, publish=False).taken == again  # the retried end leaves it
    # The lease is not released while a batch is taken: it goes to a follow-up, which adopts the batch.
    follow = finish_run(commits, run, lambda: R3, ROOT).follow_up
    assert follow is not None and follow.owner == R3 and follow.taken == again and not follow.pending
    adopted = taken_by(commits, R3, [entry(2)])
    assert commits.take(follow, adopted, [entry(2)]) == adopted
    assert commits.read(KEY).taken == adopted
    published = commits.commit(replace(follow, taken=adopted), publish=True, files=1, applied=["2"])
    assert published.taken is None and published.version == 1
    assert finish_run(commits, follow, lambda: R4, ROOT).follow_up is None


def test_a_batch_whose_run_ended_without_ending_it_is_found_by_the_sweep_and_its_run_prefix_kept(
    commits: PartitionCommits, clock: Clock
) -> None:
    lease = commits.begin(KEY, R1, location(R1), ROOT, [entry(1)])
    assert lease is not None
    batch = taken_by(commits, R1, [entry(1)])
    commits.take(lease, batch, [entry(1)])
    clock.now += commits.lease_seconds + 1  # the run died and nothing ended it
    state = commits.read(KEY)
    assert not state.pending and state.waiting
    assert location(R1).rstrip("/") + "/" in {p.rstrip("/") + "/" for p in referenced(state, clock())}
    started: list[Lease] = []
    report = sweep_stranded(commits, lambda: R2, started.append)
    assert report.stranded == [KEY] and len(started) == 1
    (follow,) = started
    assert follow.taken == batch and follow.owner == R2


def test_take_stranded_hands_a_lease_with_only_a_taken_batch_to_a_run(commits: PartitionCommits, clock: Clock) -> None:
    lease = commits.begin(KEY, R1, location(R1), ROOT, [entry(1)])
    assert lease is not None
    commits.take(lease, taken_by(commits, R1, [entry(1)]), [entry(1)])
    clock.now += commits.lease_seconds + 1
    taken, follow = take_stranded(commits, commits.read(KEY), lambda: R2)
    assert taken and follow is not None and follow.taken is not None and follow.taken.owner == R1
