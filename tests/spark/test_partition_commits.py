"""The partition-commit protocol on real embedded Spark and DynamoDB (moto): every interleaving of two
runs of one partition that used to lose or double rows, forced step by step (a gate between the CTAS
and the publish is simply the test not calling the next step yet), with exact row counts.

The steps are the ones the state machines run, in their order: the router's ``begin`` (lease) and plan,
the SQL (``execute_*``), the commit function (``commit_write``), the catalog swap (``publish_*``) and
the post-update function (``settle_run``, which hands the lease to a follow-up run).
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest

from lakeline.commits import Lease, LeaseLost, PartitionCommits, TakenBatch
from lakeline.commits.applied import published_contributions
from lakeline.dependencies.model import DependencyItem, parse_dependency_item
from lakeline.dependencies.store import DependencyStore
from lakeline.dependencies.sync import backfill
from lakeline.dependencies.tables import DependencyTableNames
from lakeline.engines.base import QueryError
from lakeline.engines.spark import SparkEngine
from lakeline.partitions import abandon_run, commit_write, new_run_token, run_location, settle_run, sweep_state
from lakeline.project.catalog import ensure_tables
from lakeline.project.workspace import Workspace
from lakeline.runtimes.embedded.sample import write_single_parquet
from lakeline.runtimes.embedded.stage_a import partition_row_count
from lakeline.settings import PipelineSettings, TableSettings
from lakeline.storage import LocalObjectStore, local_root, manifest_prefix
from stage_a.arrivals import Arrival
from stage_a.finish import publish_stage_a
from stage_a.keys import parse_raw_key
from stage_a.plan import StageAPlan
from stage_a.raw_files import LocalRawFiles
from stage_a.run import execute_stage_a
from stage_a.start import ReadByName, begin_arrival, plan_follow_up
from stage_b.finish import publish_stage_b
from stage_b.messages import SourceArrival, StageBMessage
from stage_b.plan import StageBPlan
from stage_b.process import StageBServices, plan_local_message
from stage_b.run import execute_stage_b
from stage_b.start import begin_message
from stage_b.start import plan_follow_up as plan_follow_up_b
from tests.conftest import Clock

pytestmark = pytest.mark.spark
_environments = itertools.count()
DAY = "20220120"
T0 = datetime(2022, 1, 20, 10, 0, tzinfo=UTC)


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace.at(tmp_path / "ws")


@dataclass
class StageA:
    """Drives stage A's steps one at a time, as the router, state machine and functions run them."""

    engine: SparkEngine
    workspace: Workspace
    settings: PipelineSettings
    commits: PartitionCommits
    store: LocalObjectStore = field(default_factory=LocalObjectStore)
    runs: int = 0

    def drop(self, name: str, first: int, rows: int) -> str:
        key = f"eng/sales/orders/date={DAY}/{name}.parquet"
        frame = self.engine.session.range(first, first + rows).selectExpr(
            "id AS order_id", "CAST(id * 1.5 AS DOUBLE) AS amount"
        )
        write_single_parquet(frame, self.workspace.raw_dir / key)
        ensure_tables(self.engine, parse_raw_key(key), self.workspace.raw_dir / key, self.settings)
        return key

    def arrive(self, key: str, at: datetime = T0) -> StageAPlan | None:
        content = (self.workspace.raw_dir / key).read_bytes()
        sequencer = hashlib.sha256(content).hexdigest()[:18]
        arrival = Arrival(bucket="raw", key=key, sequencer=sequencer, event_time=at)
        plan = begin_arrival(arrival, self.settings, self.engine, self.commits, LocalRawFiles(self.workspace.raw_dir))
        assert not isinstance(plan, ReadByName)
        return plan

    def write(self, plan: StageAPlan) -> None:
        self.runs += 1
        execute_stage_a(plan, self.engine, self.store)

    def commit(self, plan: StageAPlan) -> None:
        commit_write(self.commits, lease(plan), self.store, carry_from=plan.carry_from, applied=plan.applied)

    def publish(self, plan: StageAPlan) -> None:
        publish_stage_a(plan, self.engine)

    def settle(self, plan: StageAPlan) -> StageAPlan | None:
        follow = settle_run(self.commits, lease(plan), self.store, wrote=plan.writes, root=plan.stage_partition_root)
        if follow.follow_up is None:
            return None
        return plan_follow_up(follow.follow_up, self.settings, self.engine, self.commits)

    def complete(self, plan: StageAPlan | None) -> None:
        """Run ``plan`` and every follow-up to the end."""
        while plan is not None:
            if plan.writes:
                self.write(plan)
                self.commit(plan)
                self.publish(plan)
            plan = self.settle(plan)

    def rows(self) -> int:
        database = self.settings.stage_database("eng", "sales")
        return partition_row_count(self.engine, database, "orders", {"date": DAY})

    def distinct_ids(self) -> int:
        database = self.settings.stage_database("eng", "sales")
        sql = f"SELECT count(DISTINCT order_id) FROM {database}.orders WHERE \"date\" = '{DAY}'"
        return int(self.engine.execute(sql).rows[0][0])

    def files(self) -> int:
        location = self.engine.partition_location(self.settings.stage_database("eng", "sales"), "orders", {"date": DAY})
        assert location is not None
        return len(self.store.list_data_files(location))


def lease(plan: StageAPlan | StageBPlan) -> Lease:
    assert plan.lease is not None
    return Lease.from_dict(plan.lease)


def stage_a_driver(engine: SparkEngine, workspace: Workspace, commits: PartitionCommits, **table: Any) -> StageA:
    settings = workspace.settings(
        environment=f"pc{next(_environments)}",
        default_table=TableSettings(bucketed_by=("order_id",), **{"bucket_count": 2, **table}),
    )
    return StageA(engine, workspace, settings, commits)


@pytest.mark.parametrize("policy", ["incremental", "rewrite"])
def test_an_arrival_during_a_run_waits_and_the_follow_up_takes_it(
    spark_engine: SparkEngine, workspace: Workspace, commits: PartitionCommits, policy: str
) -> None:
    """Before: run 1 (f1) and run 2 (f1+f2) both ran; run 1 published last onto a prefix run 2 had
    deleted: 0 rows. Now run 2 cannot start while run 1 holds the partition."""
    a = stage_a_driver(spark_engine, workspace, commits, write_policy=policy)
    first = a.arrive(a.drop("f1", 0, 100))
    assert first is not None
    a.write(first)  # run 1's CTAS; the gate holds it before its commit and publish
    assert a.arrive(a.drop("f2", 100, 100)) is None  # waits: no second run in flight
    a.commit(first)
    a.publish(first)
    assert a.rows() == 100
    follow_up = a.settle(first)
    assert follow_up is not None and follow_up.mode in ("append", "rewrite")
    # The catalog is known to point at the committed version: no reconcile, one statement to swap.
    assert follow_up.reconcile == () and len(follow_up.publish) == 1
    a.complete(follow_up)
    assert (a.rows(), a.distinct_ids(), a.runs) == (200, 200, 2)


def test_two_arrivals_in_the_same_second_are_one_run_after_another(
    spark_engine: SparkEngine, workspace: Workspace, commits: PartitionCommits
) -> None:
    """Before: tokens of the same second ordered by a hash tie-break, 100 rows then 0."""
    a = stage_a_driver(spark_engine, workspace, commits)
    f1, f2 = a.drop("f1", 0, 100), a.drop("f2", 100, 100)
    first = a.arrive(f1)
    assert a.arrive(f2) is None
    a.complete(first)
    assert (a.rows(), a.distinct_ids(), a.runs) == (200, 200, 2)


def test_a_run_whose_lease_expired_cannot_publish_over_the_run_that_took_over(
    spark_engine: SparkEngine, workspace: Workspace, commits: PartitionCommits, clock: Clock
) -> None:
    a = stage_a_driver(spark_engine, workspace, commits)
    stalled = a.arrive(a.drop("f1", 0, 100))
    assert stalled is not None
    a.write(stalled)
    clock.now += 601  # the stalled run outlives its lease
    second = a.arrive(a.drop("f2", 100, 100))
    assert second is not None  # it takes the partition, with f1 still waiting in it
    a.complete(second)
    assert a.rows() == 200
    with pytest.raises(LeaseLost):
        a.commit(stalled)
    # Its output is nobody's (the sweep after the second run removed it already, its lease being over);
    # its failure path parks nothing (f1 was loaded by the run that took over) and deletes nothing else.
    assert not Path(stalled.target_location.removeprefix("file://")).exists()
    abandoned = abandon_run(commits, lease(stalled), a.store, root=stalled.stage_partition_root)
    assert not abandoned.held and abandoned.follow_up is None
    assert (a.rows(), a.distinct_ids()) == (200, 200)


def test_a_crash_between_commit_and_swap_is_repaired_by_the_next_run(
    spark_engine: SparkEngine, workspace: Workspace, commits: PartitionCommits, clock: Clock
) -> None:
    a = stage_a_driver(spark_engine, workspace, commits)
    a.complete(a.arrive(a.drop("f1", 0, 100)))
    crashed = a.arrive(a.drop("f2", 100, 50))
    assert crashed is not None
    a.write(crashed)
    a.commit(crashed)  # committed, then the execution dies before the swap and before releasing
    assert a.rows() == 100
    clock.now += 601
    third = a.arrive(a.drop("f3", 150, 50))
    assert third is not None and third.reconcile  # points the catalog at the committed version first
    a.complete(third)
    assert (a.rows(), a.distinct_ids()) == (200, 200)


def test_a_redelivered_arrival_changes_nothing(
    spark_engine: SparkEngine, workspace: Workspace, commits: PartitionCommits
) -> None:
    a = stage_a_driver(spark_engine, workspace, commits)
    key = a.drop("f1", 0, 100)
    first = a.arrive(key)
    again = a.arrive(key)  # redelivered while its run is in flight: the same run (re-entrant lease)
    assert again is not None and first is not None and again.run_token == first.run_token
    a.complete(first)
    late = a.arrive(key)  # redelivered after it was published
    assert late is not None and late.mode == "none"
    a.complete(late)
    assert (a.rows(), a.runs) == (100, 1)


def test_a_burst_of_24_arrivals_costs_two_runs_and_stays_within_max_files(
    spark_engine: SparkEngine, workspace: Workspace, commits: PartitionCommits
) -> None:
    a = stage_a_driver(spark_engine, workspace, commits, max_files=6)
    keys = [a.drop(f"h{hour:02d}", hour * 10, 10) for hour in range(24)]
    plans = [a.arrive(key) for key in keys]
    assert sum(plan is not None for plan in plans) == 1
    a.complete(plans[0])
    assert (a.rows(), a.distinct_ids(), a.runs) == (240, 240, 2)
    assert a.files() <= 6


def test_incremental_arrivals_append_one_file_and_compact_past_max_files(
    spark_engine: SparkEngine, workspace: Workspace, commits: PartitionCommits
) -> None:
    a = stage_a_driver(spark_engine, workspace, commits, max_files=5)
    counts = []
    for index in range(6):
        plan = a.arrive(a.drop(f"f{index}", index * 10, 10))
        assert plan is not None
        counts.append((plan.mode, None))
        a.complete(plan)
        counts[-1] = (plan.mode, a.files())
    # 2 files (bucket_count), then one file per arrival, compacted back to 2 past max_files (5).
    assert counts == [("compact", 2), ("append", 3), ("append", 4), ("append", 5), ("compact", 2), ("append", 3)]
    assert (a.rows(), a.distinct_ids()) == (60, 60)


def test_a_resent_file_with_new_content_replaces_its_rows(
    spark_engine: SparkEngine, workspace: Workspace, commits: PartitionCommits
) -> None:
    a = stage_a_driver(spark_engine, workspace, commits)
    a.complete(a.arrive(a.drop("f1", 0, 100)))
    a.complete(a.arrive(a.drop("f2", 100, 100)))
    resent = a.arrive(a.drop("f1", 0, 30))  # the same key, new content: a compaction, not an append
    assert resent is not None and resent.mode == "compact"
    a.complete(resent)
    assert (a.rows(), a.distinct_ids()) == (130, 130)


def test_readers_of_the_superseded_version_keep_their_files_until_the_grace_period_ends(
    spark_engine: SparkEngine, workspace: Workspace, commits: PartitionCommits, clock: Clock
) -> None:
    """Before: a query planned before a swap failed with FILE_NOT_EXIST (the old prefix went at once)."""
    a = stage_a_driver(spark_engine, workspace, commits)
    first = a.arrive(a.drop("f1", 0, 100))
    assert first is not None
    a.complete(first)
    planned_files = a.store.list_data_files(first.target_location)  # a reader planned its query here
    a.complete(a.arrive(a.drop("f2", 100, 100)))
    assert all(Path(uri.removeprefix("file://")).exists() for uri in planned_files)
    frame = spark_engine.session.read.parquet(*planned_files)
    assert frame.count() == 100  # the planned query still reads its files
    key = lease(first).key
    assert sweep_state(commits, commits.read(key), a.store, grace_seconds=3600) == []
    clock.now += 3601
    # The superseded version goes, and with it its list of what it held (lakeline.commits.applied).
    swept = [first.target_location, manifest_prefix(first.target_location)]
    assert sweep_state(commits, commits.read(key), a.store, grace_seconds=3600) == swept
    assert not Path(first.target_location.removeprefix("file://")).exists()
    assert a.rows() == 200  # the published version is never swept


def test_the_sweep_removes_what_a_crashed_run_left_and_nothing_in_flight(
    spark_engine: SparkEngine, workspace: Workspace, commits: PartitionCommits, clock: Clock
) -> None:
    a = stage_a_driver(spark_engine, workspace, commits)
    a.complete(a.arrive(a.drop("f1", 0, 100)))
    in_flight = a.arrive(a.drop("f2", 100, 100), at=datetime.now(UTC) - timedelta(days=1))
    assert in_flight is not None
    a.write(in_flight)
    clock.now = datetime.now(UTC).timestamp()
    key = lease(in_flight).key
    # The run's token is a day old, but its lease is live: its prefix is not touched.
    commits.begin(key, in_flight.run_token, in_flight.target_location, in_flight.stage_partition_root)
    assert sweep_state(commits, commits.read(key), a.store, grace_seconds=3600) == []
    clock.now += 601  # the run crashed: its lease expired
    # Its batch left ``pending`` when it was planned (#39): its prefix keeps the batch's only record until a run
    # takes the batch over (the stranded sweep's follow-up); from then on it is nobody's, nor its manifests'.
    assert sweep_state(commits, commits.read(key), a.store, grace_seconds=3600) == []
    token = new_run_token()
    root = in_flight.stage_partition_root
    follow = commits.begin(key, token, run_location(root, token), root)
    assert follow is not None and follow.taken is not None
    adopted = TakenBatch(token, f"{manifest_prefix(follow.location)}batch/0000000000000000", follow.location, 1)
    commits.take(follow, adopted, [])
    swept = sweep_state(commits, commits.read(key), a.store, grace_seconds=3600)
    assert sorted(swept) == sorted([in_flight.target_location, manifest_prefix(in_flight.target_location)])
    assert a.rows() == 100


# --- stage B -----------------------------------------------------------------------------------------


@dataclass
class StageB:
    engine: SparkEngine
    services: StageBServices
    commits: PartitionCommits
    target: str
    runs: int = 0

    def message(self, source: str, run: str, usage: str) -> StageBMessage:
        return StageBMessage(
            target_dataset=self.target,
            partition={"date": DAY},
            trigger=SourceArrival(table=source, partition={"date": DAY}, run=run),
            usage=usage,  # type: ignore[arg-type]
        )

    def plan(self, message: StageBMessage, run_token: str, lease: Lease | None) -> StageBPlan:
        return plan_local_message(message, self.services, run_token, lease=lease)

    def arrive(self, message: StageBMessage) -> StageBPlan | None:
        return begin_message(message, self.plan, self.commits)

    def write(self, plan: StageBPlan) -> None:
        self.runs += 1
        execute_stage_b(plan, self.engine, self.services.store)

    def commit(self, plan: StageBPlan) -> None:
        commit_write(
            self.commits,
            lease(plan),
            self.services.store,
            carry_from=plan.carry_from,
            applied=plan.applied,
            contribution=plan.contribution,
            replaces=plan.replaces,
        )

    def complete(self, plan: StageBPlan | None, *, written: bool = False) -> None:
        """Run ``plan`` (from its commit on, if ``written``) and every follow-up to the end."""
        while plan is not None:
            if plan.writes:
                if not written:
                    self.write(plan)
                written = False
                self.commit(plan)
                publish_stage_b(plan, self.engine)
            settled = settle_run(
                self.commits, lease(plan), self.services.store, wrote=plan.writes, root=plan.partition_root
            )
            plan = plan_follow_up_b(settled.follow_up, self.plan, self.commits) if settled.follow_up else None

    def rows(self) -> int:
        return int(self.engine.execute(f"SELECT count(*) FROM {self.target} WHERE \"date\" = '{DAY}'").rows[0][0])

    def add_source_rows(self, first: int, last: int) -> None:
        """More rows in the source's partition (ids ``first`` to ``last - 1``), as a new version would bring."""
        source = self.target.replace("eng_out_", "eng_src_").replace(".copies", ".events")
        self.engine.session.sql(f"INSERT INTO {source} SELECT id, '{DAY}' FROM range({first}, {last})")

    def contributions(self) -> dict[str, int]:
        """``{contribution key: files}`` of the published version."""
        state = self.commits.read(f"commit#{self.target}/date={DAY}")
        counts: dict[str, int] = {}
        for entry in published_contributions(state, self.commits.lists):
            key = entry.partition("|")[0]
            counts[key] = counts.get(key, 0) + 1
        return counts


def dependency_store(items: list[DependencyItem]) -> DependencyStore:
    """``items`` in the dependencies table on moto (the ``commits`` fixture's), dependencies-by-table rebuilt
    from them as the stream function keeps it."""
    names = DependencyTableNames()
    store = DependencyStore(boto3.client("dynamodb", region_name="us-east-1"), names.dependencies, names.by_table)
    store.put_items(items)
    backfill(store)
    return store


def stage_b_driver(
    engine: SparkEngine, workspace: Workspace, commits: PartitionCommits, tmp_path: Path, usage: str
) -> StageB:
    env = f"pcb{next(_environments)}"
    source, target = f"eng_src_{env}.events", f"eng_out_{env}.copies"
    for dataset, columns in ((source, "id BIGINT"), (target, "id BIGINT")):
        database, table = dataset.split(".")
        engine.execute(f"CREATE DATABASE IF NOT EXISTS {database}")
        location = local_root(workspace.analytics_dir / database / table)
        engine.session.sql(
            f"CREATE TABLE {dataset} ({columns}, `date` STRING) USING parquet PARTITIONED BY (`date`) "
            f"LOCATION '{location}'"
        )
    engine.session.sql(f"INSERT INTO {source} SELECT id, '{DAY}' FROM range(10)")
    item = parse_dependency_item(
        {
            "dataset": target,
            "dependencies": [
                {
                    "TableName": source,
                    "FieldColumn": "date",
                    "Usage": usage,
                    "DateExpression": "%Y%m%d",
                    "relativedelta_attributes": {"days": 0},
                }
            ],
            "partitionColumn": "date",
            "partitionPythonMask": "%Y%m%d",
            "steps": [{"db": target.split(".")[0], "sql": f"INSERT INTO {target} SELECT id, '$day' FROM {source}"}],
            "date_substitutions": [{"token": "$day", "format": "%Y%m%d", "relativedelta_attributes": {"days": 0}}],
        }
    )
    services = StageBServices(
        engine=engine,
        store=LocalObjectStore(),
        settings=workspace.settings(environment=env),
        dependencies=dependency_store([item]),
        queries_root=tmp_path,
    )
    return StageB(engine, services, commits, target)


def test_append_messages_of_overlapping_runs_are_each_applied_once(
    spark_engine: SparkEngine, workspace: Workspace, commits: PartitionCommits, tmp_path: Path
) -> None:
    """Before: two sources (``any``), overlapping appends: 20 rows, both marked applied, never repaired.
    Then: a second version of eng_a.x's partition appended its rows again (30 rows where 20 belong)."""
    b = stage_b_driver(spark_engine, workspace, commits, tmp_path, "append")
    b.complete(b.arrive(b.message("eng_a.x", "20220120t100000000000_aaaaaaaaaa", "append")))
    assert b.rows() == 10
    first = b.arrive(b.message("eng_a.x", "20220120t110000000000_bbbbbbbbbb", "append"))
    assert first is not None
    b.write(first)  # in flight: eng_a.x's partition again, a new version
    assert b.arrive(b.message("eng_b.y", "20220120t110000000001_cccccccccc", "append")) is None
    b.complete(first, written=True)
    # eng_a.x's rows once (its second version replaced its first), and eng_b.y's: one contribution each.
    assert (b.rows(), b.runs) == (20, 3)
    # Redelivering any of them adds nothing.
    b.complete(b.arrive(b.message("eng_b.y", "20220120t110000000001_cccccccccc", "append")))
    assert b.rows() == 20


def test_an_older_append_run_whose_lease_expired_publishes_nothing(
    spark_engine: SparkEngine, workspace: Workspace, commits: PartitionCommits, tmp_path: Path, clock: Clock
) -> None:
    """Before: the older run published last: 0 rows, including the 10 that were there before."""
    b = stage_b_driver(spark_engine, workspace, commits, tmp_path, "append")
    b.complete(b.arrive(b.message("eng_a.x", "20220120t100000000000_aaaaaaaaaa", "append")))
    older = b.arrive(b.message("eng_a.x", "20220120t110000000000_bbbbbbbbbb", "append"))
    assert older is not None
    b.write(older)
    clock.now += 601
    newer = b.arrive(b.message("eng_b.y", "20220120t120000000000_cccccccccc", "append"))
    # It takes the stalled run's message first (one contribution per append run), then its own.
    assert newer is not None and newer.message_ids == older.message_ids
    b.complete(newer)
    assert (b.rows(), b.runs) == (20, 4)
    with pytest.raises(LeaseLost):
        b.commit(older)
    assert b.rows() == 20


def test_a_stale_overwrite_run_cannot_empty_the_partition(
    spark_engine: SparkEngine, workspace: Workspace, commits: PartitionCommits, tmp_path: Path, clock: Clock
) -> None:
    """Before: a stale overwrite run published last: 0 rows until a new trigger."""
    b = stage_b_driver(spark_engine, workspace, commits, tmp_path, "overwrite")
    stale = b.arrive(b.message("eng_a.x", "20220120t100000000000_aaaaaaaaaa", "overwrite"))
    assert stale is not None
    b.write(stale)
    clock.now += 601
    fresh = b.arrive(b.message("eng_a.x", "20220120t110000000000_bbbbbbbbbb", "overwrite"))
    b.complete(fresh)
    assert b.rows() == 10
    with pytest.raises(LeaseLost):
        b.commit(stale)
    assert b.rows() == 10


def test_a_new_version_of_a_trigger_replaces_its_rows_and_the_others_stay_as_they_were(
    spark_engine: SparkEngine, workspace: Workspace, commits: PartitionCommits, tmp_path: Path
) -> None:
    """Before: each version of a trigger's partition appended the steps' rows again (a second file in a
    day doubled the day's rows). A recompute of every contribution would not keep eng_b.y's 15 rows."""
    b = stage_b_driver(spark_engine, workspace, commits, tmp_path, "append")
    a_v1, a_v2 = (b.message("eng_a.x", f"20220120t1{n}0000000000_aaaaaaaaaa", "append") for n in (0, 2))
    y = b.message("eng_b.y", "20220120t110000000000_bbbbbbbbbb", "append")
    b.complete(b.arrive(a_v1))
    b.add_source_rows(10, 15)
    b.complete(b.arrive(y))
    assert b.rows() == 10 + 15
    b.add_source_rows(15, 20)
    b.complete(b.arrive(a_v2))  # eng_a.x's partition again: its 10 rows become the 20 there are now
    assert b.rows() == 20 + 15
    assert b.contributions() == {a_v2.contribution_key(): 1, y.contribution_key(): 1}
    b.complete(b.arrive(a_v2))  # redelivered: nothing changes
    assert (b.rows(), b.runs) == (35, 3)


def test_a_new_version_that_arrives_while_the_last_is_appended_replaces_it(
    spark_engine: SparkEngine, workspace: Workspace, commits: PartitionCommits, tmp_path: Path
) -> None:
    """A gate between the run's write and its commit: the next version waits, then replaces it."""
    b = stage_b_driver(spark_engine, workspace, commits, tmp_path, "append")
    first = b.arrive(b.message("eng_a.x", "20220120t100000000000_aaaaaaaaaa", "append"))
    assert first is not None
    b.write(first)
    b.add_source_rows(10, 12)
    assert b.arrive(b.message("eng_a.x", "20220120t110000000000_bbbbbbbbbb", "append")) is None  # waits
    b.complete(first, written=True)
    assert (b.rows(), b.runs) == (12, 2)


def test_a_commit_retried_after_a_crash_between_the_carry_and_the_commit_records_only_its_own_files(
    spark_engine: SparkEngine, workspace: Workspace, commits: PartitionCommits, tmp_path: Path
) -> None:
    b = stage_b_driver(spark_engine, workspace, commits, tmp_path, "append")
    b.complete(b.arrive(b.message("eng_a.x", "20220120t100000000000_aaaaaaaaaa", "append")))
    y = b.message("eng_b.y", "20220120t110000000000_bbbbbbbbbb", "append")
    plan = b.arrive(y)
    assert plan is not None and plan.carry_from is not None
    b.write(plan)
    commit = commits.commit

    def crash(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("the function died after carrying the files")

    commits.commit = crash  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        b.commit(plan)
    commits.commit = commit  # type: ignore[method-assign]
    b.complete(plan, written=True)  # the retry: carries again (idempotent) and commits
    assert b.rows() == 20
    assert b.contributions() == {
        b.message("eng_a.x", "", "append").contribution_key(): 1,
        y.contribution_key(): 1,
    }


def test_a_lost_state_item_never_costs_the_published_version(
    spark_engine: SparkEngine, workspace: Workspace, commits: PartitionCommits
) -> None:
    """#37: the partition's state item is lost (deleted, or restored from a copy older than the first load),
    then its file arrives again. The run token comes from the arrival, so the new run's CTAS lands on
    the published prefix and fails there; its failure path used to delete that prefix (the state no longer
    said it was published): 100 rows, then 0. The catalog points at it, so nothing deletes it now."""
    a = stage_a_driver(spark_engine, workspace, commits)
    key = a.drop("f1", 0, 100)
    first = a.arrive(key)
    assert first is not None
    a.complete(first)
    assert a.rows() == 100
    commits.client.delete_item(TableName=commits.table_name, Key={commits.key_attribute: {"S": lease(first).key}})
    again = a.arrive(key)
    assert again is not None and again.writes and again.target_location == first.target_location
    with pytest.raises(QueryError):
        a.write(again)  # Spark, like Athena, refuses a CTAS into a non-empty location
    abandoned = abandon_run(commits, lease(again), a.store, root=again.stage_partition_root)
    assert abandoned.deleted == 0 and "the catalog points" in abandoned.left
    assert (a.rows(), a.distinct_ids(), a.files()) == (100, 100, 2)
