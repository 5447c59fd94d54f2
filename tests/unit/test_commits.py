"""The partition-commit protocol's conditional writes (DynamoDB on moto), step by step: leases, queued
arrivals, hand-overs and their retries, lost leases, and what the sweep may delete."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakeline.commits import (
    LeaseLost,
    PartitionCommits,
    commit_key,
    contribution_entry,
    finish_run,
    sweep_partition,
)
from lakeline.errors import InvalidInputError
from lakeline.storage import LocalObjectStore, local_root
from tests.conftest import Clock

KEY = commit_key("db.t", "date=20220120/")
ROOT = "s3://stage/db/t/date=20220120/"


def location(owner: str) -> str:
    return f"{ROOT}lakeline_run={owner}/"


def test_commit_key_is_the_same_with_or_without_a_trailing_slash() -> None:
    assert commit_key("db.t", "date=1/") == commit_key("db.t", "date=1") == "commit#db.t/date=1"
    assert commit_key("db.t", "") == "commit#db.t/"


def test_an_arrival_while_the_lease_is_held_waits_and_the_hand_over_takes_it(commits: PartitionCommits) -> None:
    first = commits.begin(KEY, "r1", location("r1"), ROOT, ["a"])
    assert first is not None and first.pending == ("a",) and first.version == 0
    assert commits.begin(KEY, "r2", location("r2"), ROOT, ["b"]) is None
    state = commits.commit(first, publish=True, files=1, applied=["a"])
    assert (state.version, state.published, state.pending, state.applied) == (1, location("r1"), {"b"}, {"a"})
    handed = commits.finish(first, "r3", location("r3"))
    follow = handed.follow_up
    assert handed.state.lease_owner == "r3"  # the state after the hand-over, for the sweep
    assert follow is not None and follow.owner == "r3" and follow.pending == ("b",) and follow.version == 1
    # A retried finish (the post-update task retried after the hand-over) returns the same follow-up.
    again = commits.finish(first, "r4", location("r4")).follow_up
    assert again is not None and again.owner == "r3"
    commits.commit(follow, publish=True, files=2, applied=["b"])
    released = commits.finish(follow, "r5", location("r5"))
    assert released.follow_up is None
    final = commits.read(KEY)
    assert released.state == final
    assert final.lease_owner is None and final.version == 2 and final.retired
    assert commits.begin(KEY, "r6", location("r6"), ROOT, ["c"]) is not None


def test_a_run_that_leaves_some_waiting_hands_the_lease_over_even_with_no_new_arrival(
    commits: PartitionCommits,
) -> None:
    """An append run takes one contribution's messages and leaves the others in ``pending``: releasing
    the lease then would strand them until some later arrival."""
    lease = commits.begin(KEY, "r1", location("r1"), ROOT, ["x", "y"])
    assert lease is not None
    commits.commit(lease, publish=True, files=1, applied=["x"], taken=["x"])
    finished = finish_run(commits, lease, lambda: "r2", ROOT)
    assert finished.follow_up is not None and finished.follow_up.pending == ("y",)
    commits.commit(finished.follow_up, publish=True, files=2, applied=["y"])
    assert finish_run(commits, finished.follow_up, lambda: "r3", ROOT).follow_up is None
    assert commits.read(KEY).lease_owner is None and commits.read(KEY).pending == frozenset()


def test_a_contribution_replaces_its_own_files_and_keeps_the_others(commits: PartitionCommits) -> None:
    def run(owner: str, key: str, files: list[str], version_files: int) -> frozenset[str]:
        lease = commits.begin(KEY, owner, location(owner), ROOT, [owner])
        assert lease is not None
        state = commits.commit(lease, publish=True, files=version_files, contribution=(key, files))
        commits.finish(lease, "next", location("next"))
        return state.contributions

    assert run("r1", "a", ["a1.parquet"], 1) == {"a|a1.parquet"}
    assert run("r2", "b", ["b1.parquet", "b2.parquet"], 3) == {"a|a1.parquet", "b|b1.parquet", "b|b2.parquet"}
    # a again: its file is replaced, b's stay
    assert run("r3", "a", ["a2.parquet"], 3) == {"a|a2.parquet", "b|b1.parquet", "b|b2.parquet"}
    # a publish without a contribution is a rebuild of the whole partition: nobody's files are left
    lease = commits.begin(KEY, "r4", location("r4"), ROOT, ["r4"])
    assert lease is not None
    assert commits.commit(lease, publish=True, files=1).contributions == frozenset()
    with pytest.raises(InvalidInputError, match="a key without"):
        contribution_entry("a|b", "f.parquet")


def test_a_redelivery_takes_the_same_lease_again(commits: PartitionCommits) -> None:
    first = commits.begin(KEY, "r1", location("r1"), ROOT, ["a"])
    again = commits.begin(KEY, "r1", location("r1"), ROOT, ["a"])
    assert first is not None and again is not None
    assert again.pending == ("a",)


def test_a_run_whose_lease_expired_cannot_commit_and_the_next_run_takes_its_arrivals(
    commits: PartitionCommits, clock: Clock
) -> None:
    stalled = commits.begin(KEY, "r1", location("r1"), ROOT, ["a"])
    assert stalled is not None
    clock.now += 601
    taker = commits.begin(KEY, "r2", location("r2"), ROOT, ["b"])
    assert taker is not None and taker.pending == ("a", "b")
    commits.commit(taker, publish=True, files=1, applied=["a", "b"])
    with pytest.raises(LeaseLost, match="no longer holds the lease"):
        commits.commit(stalled, publish=True, files=1, applied=["a"])
    assert commits.read(KEY).published == location("r2")
    assert commits.resume(stalled) is None
    assert commits.finish(stalled, "r9", location("r9")).follow_up is None


def test_a_retried_commit_that_went_through_succeeds(commits: PartitionCommits) -> None:
    lease = commits.begin(KEY, "r1", location("r1"), ROOT, ["a"])
    assert lease is not None
    commits.commit(lease, publish=True, files=1, applied=["a"])
    assert commits.commit(lease, publish=True, files=1, applied=["a"]).version == 1


def test_finish_run_skips_a_hand_over_with_nothing_waiting(commits: PartitionCommits) -> None:
    lease = commits.begin(KEY, "r1", location("r1"), ROOT, ["a"])
    assert lease is not None
    # A redelivery of the run's own arrival while it runs: counted, but nothing new waits after the commit.
    assert commits.begin(KEY, "r2", location("r2"), ROOT, ["a"]) is None
    commits.commit(lease, publish=True, files=1, applied=["a"])
    owners = iter(["r3", "r4"])
    assert finish_run(commits, lease, lambda: next(owners), ROOT).follow_up is None
    assert commits.read(KEY).lease_owner is None


def test_the_sweep_keeps_what_is_referenced_and_deletes_the_rest_after_the_grace_period(
    commits: PartitionCommits, clock: Clock, tmp_path: Path
) -> None:
    root = local_root(tmp_path / "date=20220120")
    store = LocalObjectStore()

    def prefix(token: str) -> str:
        folder = tmp_path / "date=20220120" / f"lakeline_run={token}"
        folder.mkdir(parents=True)
        (folder / "part-0.parquet").write_bytes(b"x")
        return local_root(folder)

    # Run prefixes carry real run tokens: the one delete function refuses anything else.
    old_token, pub_token, live_token = (f"20220120t00000000000{n}_000000000{n}" for n in (1, 2, 4))
    old, published, live = prefix(old_token), prefix(pub_token), prefix(live_token)
    crashed = prefix("20220120t000000000003_0000000003")
    first = commits.begin(KEY, old_token, old, root, ["a"])
    assert first is not None
    commits.commit(first, publish=True, files=1, applied=["a"])
    commits.finish(first, "x", "unused")
    second = commits.begin(KEY, pub_token, published, root, ["b"])
    assert second is not None
    commits.commit(second, publish=True, files=1, applied=["b"])
    commits.finish(second, "x", "unused")
    assert commits.begin(KEY, live_token, live, root, ["c"]) is not None

    def sweep(grace: float) -> list[str]:
        return sweep_partition(
            commits,
            commits.read(KEY),
            store,
            grace_seconds=grace,
            run_prefix="lakeline_run=",
            token_time=lambda token: 0.0,
        )

    assert sweep(3600) == [crashed]  # only the leftovers of a run nobody knows, long ago
    clock.now += 3601
    assert commits.begin(KEY, live_token, live, root) is not None  # the live run renews its lease
    assert sweep(3600) == [old]  # the superseded version, once its grace period is over
    remaining = sorted(p.name for p in (tmp_path / "date=20220120").iterdir())
    assert remaining == [f"lakeline_run={pub_token}", f"lakeline_run={live_token}"]


def test_the_sweep_leaves_a_retired_version_outside_the_tables_location_and_goes_on(
    commits: PartitionCommits, clock: Clock, tmp_path: Path
) -> None:
    """The table moved (its catalog location changed): its old version is no run prefix under the table's
    location any more, so the delete guard refuses it; the sweep leaves it, and the partition's state keeps
    it retired, instead of deleting outside the table or failing the run that swept."""
    store = LocalObjectStore()
    tokens = ("20220120t000000000001_0000000001", "20220120t000000000002_0000000002")
    runs = [
        tmp_path / table / "date=20220120" / f"lakeline_run={token}"
        for table, token in zip(("old", "new"), tokens, strict=True)
    ]
    for run in runs:
        run.mkdir(parents=True)
        (run / "part-0.parquet").write_bytes(b"x")
    for run, token, arrival in zip(runs, tokens, "ab", strict=True):
        lease = commits.begin(KEY, token, local_root(run), local_root(run.parent), [arrival])
        assert lease is not None
        commits.commit(lease, publish=True, files=1, applied=[arrival])
        commits.finish(lease, "x", "unused")
    clock.now += 3601
    state = commits.read(KEY)
    assert (
        sweep_partition(commits, state, store, grace_seconds=3600, run_prefix="lakeline_run=", token_time=float) == []
    )
    assert (runs[0] / "part-0.parquet").exists() and (runs[1] / "part-0.parquet").exists()
    assert commits.read(KEY).retired == state.retired != frozenset()
