"""The partition-commit protocol's conditional writes (DynamoDB on moto), step by step: leases, queued
arrivals, hand-overs and their retries, lost leases, and what the sweep may delete."""

from __future__ import annotations

import re
import uuid
from dataclasses import replace
from pathlib import Path

import boto3
import pytest

from lakeline.commits import (
    LeaseLost,
    PartitionCommits,
    PartitionFull,
    commit_key,
    contribution_entry,
    finish_run,
    sweep_partition,
)
from lakeline.commits.applied import published_contributions, published_ids
from lakeline.errors import InvalidInputError, LakelineError
from lakeline.storage import LocalObjectStore, S3Location, local_root, manifest_prefix
from tests.conftest import Clock

KEY = commit_key("db.t", "date=20220120/")
ROOT = "s3://stage/db/t/date=20220120/"


def location(owner: str) -> str:
    """Run ``owner``'s prefix, with a run token of the real form (its manifests' prefix is named by it)."""
    return f"{ROOT}lakeline_run=20220120t000000000000_{uuid.uuid5(uuid.NAMESPACE_URL, owner).hex[:10]}/"


def test_commit_key_is_the_same_with_or_without_a_trailing_slash() -> None:
    assert commit_key("db.t", "date=1/") == commit_key("db.t", "date=1") == "commit#db.t/date=1"
    assert commit_key("db.t", "") == "commit#db.t/"


def test_an_arrival_while_the_lease_is_held_waits_and_the_hand_over_takes_it(commits: PartitionCommits) -> None:
    first = commits.begin(KEY, "r1", location("r1"), ROOT, ["a"])
    assert first is not None and first.pending == ("a",) and first.version == 0
    assert commits.begin(KEY, "r2", location("r2"), ROOT, ["b"]) is None
    state = commits.commit(first, publish=True, files=1, applied=["a"])
    assert (state.version, state.published, state.pending) == (1, location("r1"), {"b"})
    assert published_ids(state, commits.lists) == {"a"} and not state.applied  # in the version's list
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


def test_the_follow_up_s_lease_says_when_the_newest_arrival_waiting_for_it_was_recorded(
    commits: PartitionCommits, clock: Clock
) -> None:
    """``stage_a.plan.follow_up_window`` reads it: arrivals still being recorded mean a burst goes on (#39)."""
    first = commits.begin(KEY, "r1", location("r1"), ROOT, ["a"])
    assert first is not None and first.last_waiting == 0.0  # nothing waits behind it
    clock.now += 5
    assert commits.begin(KEY, "r2", location("r2"), ROOT, ["b"]) is None
    clock.now += 5
    assert commits.begin(KEY, "r3", location("r3"), ROOT, ["c"]) is None
    recorded = clock.now
    clock.now += 7
    commits.commit(first, publish=True, files=1, applied=["a"])
    follow = commits.finish(first, "r4", location("r4")).follow_up
    assert follow is not None and follow.pending == ("b", "c") and follow.last_waiting == recorded
    assert "last_waiting" not in follow.to_dict()  # read from the item where it is needed, never passed on


def test_a_run_that_leaves_some_waiting_hands_the_lease_over_even_with_no_new_arrival(
    commits: PartitionCommits,
) -> None:
    """An append run takes one contribution's messages and leaves the others in ``pending``: releasing
    the lease then would strand them until some later arrival."""
    lease = commits.begin(KEY, "r1", location("r1"), ROOT, ["x", "y"])
    assert lease is not None
    commits.commit(lease, publish=True, files=1, applied=["x"], taken=["x"])
    finished = finish_run(commits, lease, lambda: "20220120t000000000002_0000000002", ROOT)
    assert finished.follow_up is not None and finished.follow_up.pending == ("y",)
    commits.commit(finished.follow_up, publish=True, files=2, applied=["y"])
    assert finish_run(commits, finished.follow_up, lambda: "20220120t000000000003_0000000003", ROOT).follow_up is None
    assert commits.read(KEY).lease_owner is None and commits.read(KEY).pending == frozenset()


def test_a_contribution_replaces_its_own_files_and_keeps_the_others(commits: PartitionCommits) -> None:
    def run(owner: str, key: str, files: list[str], version_files: int) -> frozenset[str]:
        lease = commits.begin(KEY, owner, location(owner), ROOT, [owner])
        assert lease is not None
        state = commits.commit(lease, publish=True, files=version_files, contribution=(key, files))
        commits.finish(lease, "next", location("next"))
        assert not state.contributions  # kept beside the version, not in the item
        assert state.contributed_files == len(published_contributions(state, commits.lists))
        return published_contributions(state, commits.lists)

    assert run("r1", "a", ["a1.parquet"], 1) == {"a|a1.parquet"}
    assert run("r2", "b", ["b1.parquet", "b2.parquet"], 3) == {"a|a1.parquet", "b|b1.parquet", "b|b2.parquet"}
    # a again: its file is replaced, b's stay
    assert run("r3", "a", ["a2.parquet"], 3) == {"a|a2.parquet", "b|b1.parquet", "b|b2.parquet"}
    # a publish without a contribution is a rebuild of the whole partition: nobody's files are left
    lease = commits.begin(KEY, "r4", location("r4"), ROOT, ["r4"])
    assert lease is not None
    rebuilt = commits.commit(lease, publish=True, files=1)
    assert published_contributions(rebuilt, commits.lists) == frozenset() and rebuilt.contributed_files == 0
    with pytest.raises(InvalidInputError, match="a key without"):
        contribution_entry("a|b", "f.parquet")


def test_contributions_kept_in_an_item_from_before_the_lists_move_into_the_list_at_the_next_commit(
    commits: PartitionCommits,
) -> None:
    commits.client.put_item(
        TableName=commits.table_name,
        Item={
            "target_partition": {"S": KEY},
            "version": {"N": "1"},
            "published": {"S": location("r0")},
            "files": {"N": "3"},
            "contributions": {"SS": ["a|a1.parquet", "b|b1.parquet"]},
        },
    )
    assert commits.read(KEY).contributed_files == 2
    lease = commits.begin(KEY, "r1", location("r1"), ROOT, ["r1"])
    assert lease is not None and lease.contribution_files("a") == ("a1.parquet",)
    state = commits.commit(lease, publish=True, files=3, contribution=("a", ["a2.parquet"]))
    assert not state.contributions and state.contributions_list is not None
    assert published_contributions(state, commits.lists) == {"a|a2.parquet", "b|b1.parquet"}


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
    # The superseded version once its grace period is over, and with it its list of what it held.
    assert sweep(3600) == [old, manifest_prefix(old)]
    remaining = sorted(local_root(p) for p in (tmp_path / "date=20220120").iterdir())
    assert remaining == sorted([published, manifest_prefix(published), live])


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


def test_the_sweep_keeps_the_manifests_of_the_published_and_the_live_run_and_deletes_a_crashed_runs(
    commits: PartitionCommits, clock: Clock, tmp_path: Path
) -> None:
    """A run's manifests (``lakeline.storage.manifest_prefix``, #39) live beside its prefix: kept while its run
    is published or live, deleted past the grace period otherwise (a run that crashed after planning)."""
    root = local_root(tmp_path / "date=20220120")
    store = LocalObjectStore()
    pub_token, live_token, crashed_token = (f"20220120t00000000000{n}_000000000{n}" for n in (1, 2, 3))
    folder = tmp_path / "date=20220120"
    runs = {token: local_root(folder / f"lakeline_run={token}") for token in (pub_token, live_token, crashed_token)}
    published, live = runs[pub_token], runs[live_token]
    manifests = {token: manifest_prefix(run) for token, run in runs.items()}
    for where in manifests.values():
        store.write_text(f"{where}0123456789abcdef/manifest", "s3://raw/a.csv\n")
    done = commits.begin(KEY, pub_token, published, root, ["a"])
    assert done is not None
    commits.commit(done, publish=True, files=1, applied=["a"])
    commits.finish(done, "x", "unused")
    assert commits.begin(KEY, live_token, live, root, ["b"]) is not None
    swept = sweep_partition(
        commits, commits.read(KEY), store, grace_seconds=3600, run_prefix="lakeline_run=", token_time=lambda _: 0.0
    )
    assert swept == [manifests[crashed_token]]
    remaining = sorted(local_root(path) for path in folder.iterdir())
    assert remaining == sorted([manifests[pub_token], manifests[live_token]])


def test_what_a_version_holds_is_in_its_list_and_an_item_from_before_moves_its_ids_there(
    commits: PartitionCommits,
) -> None:
    """The applied ids live in a list beside the version (``lakeline.commits.applied``, #39): the item holds its
    location only, and an item from before the lists (its ids in ``applied``) moves them at its next commit."""
    commits.client.put_item(
        TableName=commits.table_name,
        Item={"target_partition": {"S": KEY}, "version": {"N": "3"}, "applied": {"SS": ["old-1", "old-2"]}},
    )
    lease = commits.begin(KEY, "r1", location("r1"), ROOT, ["new"])
    assert lease is not None and lease.applied == {"old-1", "old-2"}
    state = commits.commit(lease, publish=True, files=1, applied=["new"])
    assert not state.applied and state.applied_list is not None
    assert state.applied_list.startswith(manifest_prefix(location("r1")))  # it goes with the version
    assert published_ids(state, commits.lists) == {"old-1", "old-2", "new"}
    commits.finish(lease, "r2", location("r2"))
    again = commits.begin(KEY, "r3", location("r3"), ROOT, ["later"])
    assert again is not None and again.applied == {"old-1", "old-2", "new"}
    assert "applied" not in again.to_dict() and again.to_dict()["applied_list"] == state.applied_list


def test_a_partition_whose_list_is_gone_cannot_be_planned_and_says_which_object(commits: PartitionCommits) -> None:
    """Planning with an empty set instead would load every file the partition holds a second time."""
    lease = commits.begin(KEY, "r1", location("r1"), ROOT, ["a"])
    assert lease is not None
    state = commits.commit(lease, publish=True, files=1, applied=["a"])
    commits.finish(lease, "r2", location("r2"))
    assert state.applied_list is not None
    where = S3Location.parse(state.applied_list)
    boto3.client("s3", region_name="us-east-1").delete_object(Bucket=where.bucket, Key=where.key)  # moto's
    with pytest.raises(LakelineError, match=f"{re.escape(state.applied_list)}, is missing"):
        commits.begin(KEY, "r3", location("r3"), ROOT, ["b"])


def test_a_retried_commit_that_went_through_leaves_the_version_s_list_as_it_was(commits: PartitionCommits) -> None:
    lease = commits.begin(KEY, "r1", location("r1"), ROOT, ["a", "b"])
    assert lease is not None
    first = commits.commit(lease, publish=True, files=1, applied=["a", "b"])
    retried = commits.commit(lease, publish=True, files=1, applied=["a", "b"])
    assert retried.applied_list == first.applied_list and retried.version == 1
    assert published_ids(retried, commits.lists) == {"a", "b"}


def test_arrivals_wait_in_the_item_up_to_its_cap_then_are_refused_and_a_redelivery_counts_once(
    commits: PartitionCommits,
) -> None:
    """``pending`` grew with every arrival behind a run: a burst of ~2,000 files passed DynamoDB's 400 KB and no
    arrival of the partition could be recorded any more (#39). Now what waits is counted and capped."""
    capped = replace(commits, max_pending_bytes=100)
    first = capped.begin(KEY, "r1", location("r1"), ROOT, ["a" * 10])
    assert first is not None
    waiting = [f"{n}" * 30 for n in range(4)]  # 30 bytes each: three fit behind the run's own 10
    for entry in waiting[:3]:
        assert capped.begin(KEY, "r2", location("r2"), ROOT, [entry]) is None
    assert capped.read(KEY).pending_bytes == 100
    with pytest.raises(PartitionFull, match="100 bytes of arrivals wait for run r1"):
        capped.begin(KEY, "r2", location("r2"), ROOT, [waiting[3]])
    assert waiting[3] not in capped.read(KEY).pending  # refused: not recorded (its queue keeps it)
    # A redelivery of one that waits is not refused, and not counted again.
    assert capped.begin(KEY, "r2", location("r2"), ROOT, [waiting[1]]) is None
    assert capped.read(KEY).pending_bytes == 100
    # The run takes its own; the follow-up the three; then there is room.
    capped.commit(first, publish=True, files=1, applied=["a" * 10])
    assert capped.read(KEY).pending_bytes == 90
    follow_up = capped.finish(first, "r3", location("r3")).follow_up
    assert follow_up is not None
    resumed = capped.resume(follow_up)
    assert resumed is not None and set(resumed.pending) == set(waiting[:3])
    capped.commit(resumed, publish=True, files=1, applied=waiting[:3])
    assert capped.read(KEY).pending_bytes == 0
    assert capped.begin(KEY, "r4", location("r4"), ROOT, [waiting[3]]) is None
    # Released with nothing waiting, the count starts again (a drifted count never outlives a release).
    last = capped.resume(resumed)
    assert last is not None and last.pending == (waiting[3],)
    capped.commit(last, publish=False)
    assert capped.finish(last, "r5", location("r5")).follow_up is None
    assert (
        "pending_bytes"
        not in capped.client.get_item(TableName=capped.table_name, Key={"target_partition": {"S": KEY}})["Item"]
    )
