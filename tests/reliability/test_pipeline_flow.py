"""A burst of arrivals through the whole local pipeline, with faults, on real Spark: exact afterwards.

The deployed handlers run against a local AWS endpoint (``LocalCloud``: moto's server), stage A and
stage B run on the shared SparkSession through ``EventFlow``. Three phases, one workspace:

1. a burst: raw files over two partitions of ``orders`` and one of ``returns``, each file delivered
   twice (as S3 and SQS may); ``orders`` feeds a stage B target, ``returns`` one whose SQL step fails;
2. a corrupt file lands in a partition that already has data, delivered twice, together with a file
   of a new partition: it is refused at the door (``stage_a.contract``), before any SQL;
3. recovery: the corrupt file is removed and a new file arrives in that partition.

Expected figures are computed here from the files written, independently of the pipeline.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lakeline.commits import PartitionCommits, PartitionState, commit_key, parse_retired, with_manifests
from lakeline.dependencies.model import parse_dependency_item
from lakeline.engines.spark import SparkEngine
from lakeline.project.workspace import Workspace
from lakeline.runtimes.embedded.cloud import LINEAGE_TABLE_NAME, LocalCloud
from lakeline.runtimes.embedded.event_flow import EventFlow, FlowReport
from lakeline.runtimes.embedded.handler_caches import reset_handler_caches
from lakeline.storage import LocalObjectStore, local_root
from stage_lineage.records import RAW_DATA_INPUT, STAGE_A_COMPLETE, STAGE_B_COMPLETE, STEP_FAILED

ENV = "relflow"
STAGE = f"eng_shop_{ENV}"
ANALYTICS = f"eng_analytics_{ENV}"
ROWS_PER_FILE = 25
QUERIES = Path(__file__).resolve().parents[2] / "athena_queries"
PHASE_1 = [("20220120", 0), ("20220121", 0), ("20220121", 1)]  # orders files: (date, part)
PHASE_2 = [("20220122", 0)]
RECOVERY = ("20220121", 3)


def orders_file(workspace: Workspace, day: str, part: int) -> str:
    key = f"eng/shop/orders/date={day}/part{part}.csv"
    path = workspace.raw_dir / key
    path.parent.mkdir(parents=True, exist_ok=True)
    first = int(day[-2:]) * 1000 + part * 100
    path.write_text("id,amount\n" + "".join(f"{first + i},{i * 1.5}\n" for i in range(ROWS_PER_FILE)))
    return key


def returns_file(workspace: Workspace, day: str) -> str:
    key = f"eng/shop/returns/date={day}/returns.csv"
    path = workspace.raw_dir / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("id,reason\n1,damaged\n2,late\n")
    return key


def stage_b_item(target: str, source: str, sql: str) -> Any:
    return parse_dependency_item(
        {
            "dataset": f"{ANALYTICS}.{target}",
            "dependencies": [
                {
                    "TableName": f"{STAGE}.{source}",
                    "FieldColumn": "date",
                    "Usage": "overwrite",
                    "DateExpression": "%Y%m%d",
                    "relativedelta_attributes": {"days": 0},
                }
            ],
            "partitionColumn": "date",
            "partitionPythonMask": "%Y%m%d",
            "steps": [{"db": ANALYTICS, "info": f"build {target}", "sql": sql}],
            "date_substitutions": [{"token": "$day", "format": "%Y%m%d", "relativedelta_attributes": {"days": 0}}],
        }
    )


def create_analytics_table(engine: SparkEngine, workspace: Workspace, table: str, columns: str) -> None:
    engine.execute(f"CREATE DATABASE IF NOT EXISTS {ANALYTICS}")
    location = local_root(workspace.analytics_dir / ANALYTICS / table)
    engine.session.sql(
        f"CREATE TABLE {ANALYTICS}.{table} ({columns}, `date` STRING) USING parquet PARTITIONED BY (`date`) "
        f"LOCATION '{location}'"
    )


def rows(engine: SparkEngine, sql: str) -> list[tuple[Any, ...]]:
    return sorted(engine.execute(sql).rows)


@dataclass
class Phase:
    """What one phase did (counts of this phase only) and the state after it."""

    stage_a: int
    stage_b: int
    duplicates: int
    failures: list[str]
    quarantined: list[str]
    lineage_records_loaded: int
    orders: list[tuple[Any, ...]]
    orders_daily: list[tuple[Any, ...]]
    lineage_actions: Counter[str]
    lineage_roots: int
    queue_depths: dict[str, int]


@dataclass
class Scenario:
    phases: list[Phase]
    workspace: Workspace
    temp_tables: list[str]
    stage_prefixes: dict[str, list[str]]
    openlineage_states: Counter[str]
    partition_states: dict[str, PartitionState]


def lineage_items(cloud: LocalCloud) -> list[dict[str, Any]]:
    paginator = cloud.dynamodb.get_paginator("scan")
    items = [item for page in paginator.paginate(TableName=LINEAGE_TABLE_NAME) for item in page["Items"]]
    return [item for item in items if not item["root_id"]["S"].startswith("_")]


def snapshot(flow: EventFlow, engine: SparkEngine, cloud: LocalCloud) -> Phase:
    """Run the flow until every queue is idle; what this phase added to the (cumulative) report."""
    report: FlowReport = flow.report
    before = (len(report.stage_a), len(report.stage_b), len(report.duplicates), len(report.failures))
    quarantined_before = len(report.quarantined)
    loaded_before = report.lineage_records
    flow.run_until_idle()
    items = lineage_items(cloud)
    depths = {}
    for name in ("queue-a", "queue-b", "lineage", "queue-a-dlq", "queue-b-dlq", "lineage-dlq"):
        attributes = cloud.sqs.get_queue_attributes(
            QueueUrl=cloud.queue_urls[name],
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        depths[name] = int(attributes["ApproximateNumberOfMessages"]) + int(
            attributes["ApproximateNumberOfMessagesNotVisible"]
        )
    return Phase(
        stage_a=len(report.stage_a) - before[0],
        stage_b=len(report.stage_b) - before[1],
        duplicates=len(report.duplicates) - before[2],
        failures=list(report.failures[before[3] :]),
        quarantined=list(report.quarantined[quarantined_before:]),
        lineage_records_loaded=report.lineage_records - loaded_before,
        orders=rows(engine, f'SELECT "date", count(*), sum(amount) FROM {STAGE}.orders GROUP BY "date"'),
        orders_daily=rows(engine, f'SELECT "date", orders, amount FROM {ANALYTICS}.orders_daily'),
        lineage_actions=Counter(item["action_taken"]["S"] for item in items),
        lineage_roots=len({item["root_id"]["S"] for item in items}),
        queue_depths=depths,
    )


def expected(files: list[tuple[str, int]]) -> dict[str, tuple[int, float]]:
    totals: dict[str, tuple[int, float]] = {}
    for day, _ in files:
        count, amount = totals.get(day, (0, 0.0))
        totals[day] = (count + ROWS_PER_FILE, amount + sum(i * 1.5 for i in range(ROWS_PER_FILE)))
    return totals


@pytest.fixture(scope="module")
def scenario(spark_engine: SparkEngine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    workspace = Workspace.at(tmp_path_factory.mktemp("reliability-flow"))
    settings = workspace.settings(environment=ENV)
    create_analytics_table(spark_engine, workspace, "orders_daily", "orders BIGINT, amount DOUBLE")
    create_analytics_table(spark_engine, workspace, "returns_broken", "id BIGINT")
    items = [
        stage_b_item(
            "orders_daily",
            "orders",
            f"INSERT INTO {ANALYTICS}.orders_daily SELECT count(*), sum(amount), '$day' "
            f"FROM {STAGE}.orders WHERE \"date\" = '$day'",
        ),
        stage_b_item(
            "returns_broken",
            "returns",
            f"INSERT INTO {ANALYTICS}.returns_broken SELECT no_such_column, '$day' "
            f"FROM {STAGE}.returns WHERE \"date\" = '$day'",
        ),
    ]
    environment = dict(os.environ)
    reset_handler_caches()
    cloud = LocalCloud.start()
    try:
        flow = EventFlow(cloud, spark_engine, workspace, settings, QUERIES)
        flow.register(items)
        phases: list[Phase] = []

        # 1. the burst: every file delivered twice, the duplicates interleaved.
        keys = [orders_file(workspace, day, part) for day, part in PHASE_1]
        keys.append(returns_file(workspace, "20220120"))
        for key in keys:
            flow.arrive(key)
        for key in keys:
            flow.arrive(key)
        phases.append(snapshot(flow, spark_engine, cloud))

        # 2. a corrupt file in a partition with data (Spark fails mid-CTAS), and a new partition.
        corrupt = "eng/shop/orders/date=20220121/part9.csv.gz"
        (workspace.raw_dir / corrupt).write_bytes(b"this is not gzip data")
        for key in [corrupt, *(orders_file(workspace, day, part) for day, part in PHASE_2), corrupt]:
            flow.arrive(key)
        phases.append(snapshot(flow, spark_engine, cloud))

        # 3. recovery: the operator removes the corrupt file; the next file of the partition rebuilds it.
        (workspace.raw_dir / corrupt).unlink()
        flow.arrive(orders_file(workspace, *RECOVERY))
        phases.append(snapshot(flow, spark_engine, cloud))

        temp_tables = [
            f"{database}.{t.name}"
            for database in (STAGE, ANALYTICS)
            for t in spark_engine.session.catalog.listTables(database)
            if t.name.startswith("lakeline_tmp")
        ]
        store = LocalObjectStore()
        prefixes = {
            day: store.list_child_prefixes(local_root(workspace.stage_dir / f"eng/shop/orders/date={day}"))
            for day in ("20220120", "20220121", "20220122")
        }
        states = Counter(str(event["eventType"]) for event in flow.events)
        commits = PartitionCommits(cloud.dynamodb, cloud.names.pipeline_state, lists=store)
        yield Scenario(
            phases=phases,
            workspace=workspace,
            temp_tables=temp_tables,
            stage_prefixes=prefixes,
            openlineage_states=states,
            partition_states={day: commits.read(commit_key(f"{STAGE}.orders", f"date={day}")) for day in prefixes},
        )
    finally:
        cloud.stop()
        reset_handler_caches()
        os.environ.clear()
        os.environ.update(environment)


def as_rows(totals: dict[str, tuple[int, float]], days: list[str]) -> list[tuple[Any, ...]]:
    return [(day, *totals[day]) for day in days]


def test_the_burst_runs_each_file_once_and_the_rows_are_exact(scenario: Scenario) -> None:
    first = scenario.phases[0]
    files = len(PHASE_1) + 1  # and the returns file
    assert first.stage_a == files
    # Each file's second delivery. The failed stage B message is not redelivered: its execution started
    # (the router's work is done) and the failure function parked it in queue B's DLQ.
    assert first.duplicates == files
    assert first.orders == as_rows(expected(PHASE_1), ["20220120", "20220121"])
    assert first.orders_daily == first.orders, "stage B rebuilt each date from the whole stage partition"
    assert first.stage_b == len(PHASE_1), "one orders_daily run per orders arrival"


def test_a_failing_sql_step_fails_alone_and_is_recorded(scenario: Scenario) -> None:
    first = scenario.phases[0]
    (failure,) = first.failures
    assert f"stage B {ANALYTICS}.returns_broken" in failure
    assert "steps[0] (build returns_broken) failed: Spark statement failed" in failure
    assert "no_such_column" in failure
    assert first.lineage_actions[STEP_FAILED] == 1
    # Its neighbours: every stage A run and every orders_daily run completed.
    runs = len(PHASE_1) + 1
    assert first.lineage_actions[RAW_DATA_INPUT] == first.lineage_actions[STAGE_A_COMPLETE] == runs
    assert first.lineage_actions[STAGE_B_COMPLETE] == len(PHASE_1)
    assert first.lineage_records_loaded == 2 * runs + len(PHASE_1) + 1


def test_a_corrupt_file_is_refused_at_the_door_and_the_partition_keeps_its_data(scenario: Scenario) -> None:
    first, second = scenario.phases[0], scenario.phases[1]
    # The corrupt file's two deliveries were each refused before any SQL, and parked with the reason.
    assert second.failures == []
    assert len(second.quarantined) == 2
    for refused in second.quarantined:
        assert refused.startswith("eng/shop/orders/date=20220121/part9.csv.gz: ")
        assert "cannot be read" in refused or "is not valid" in refused
    assert second.queue_depths["queue-a-dlq"] == 2
    assert second.stage_a == len(PHASE_2)
    assert second.duplicates == 0
    # date=20220121 still holds exactly what phase 1 published; the new partition is complete.
    assert second.orders == as_rows(expected(PHASE_1 + PHASE_2), ["20220120", "20220121", "20220122"])
    assert second.orders[:2] == first.orders
    assert second.orders_daily == second.orders
    # The refused file recorded no lineage; the new file did, and so did its stage B run.
    assert second.lineage_records_loaded == 3 * len(PHASE_2)
    # Only the failed SQL step of phase 1 failed (the step and its execution; its root is the arrival
    # upstream, which completed): nothing of the refused file ran.
    assert scenario.openlineage_states["FAIL"] == 2


def test_after_recovery_every_count_is_exact(scenario: Scenario) -> None:
    last = scenario.phases[-1]
    assert last.failures == []
    assert last.stage_a == last.stage_b == 1
    days = ["20220120", "20220121", "20220122"]
    assert last.orders == as_rows(expected([*PHASE_1, *PHASE_2, RECOVERY]), days)
    assert last.orders_daily == last.orders
    stage_a_runs = sum(phase.stage_a for phase in scenario.phases)
    orders_runs = len(PHASE_1) + len(PHASE_2) + 1
    assert stage_a_runs == orders_runs + 1
    assert last.lineage_actions == Counter(
        {RAW_DATA_INPUT: stage_a_runs, STAGE_A_COMPLETE: stage_a_runs, STAGE_B_COMPLETE: orders_runs, STEP_FAILED: 1}
    )
    assert last.lineage_roots == stage_a_runs, "one lineage tree per stage A run"
    assert sum(phase.lineage_records_loaded for phase in scenario.phases) == sum(last.lineage_actions.values())


def test_nothing_is_left_behind(scenario: Scenario) -> None:
    for phase in scenario.phases:
        depths = dict(phase.queue_depths)
        # The failure functions park a failed run's arrivals (queue A's DLQ) and messages (queue B's), with
        # their reason.
        parked_b = depths.pop("queue-b-dlq", 0)
        depths.pop("queue-a-dlq", 0)
        assert set(depths.values()) == {0}, phase.queue_depths
        assert parked_b <= 1, phase.queue_depths
    assert scenario.temp_tables == []
    # Every run prefix is the partition's published version or a superseded one kept for its grace period
    # (readers that planned before a swap still read it): none is a failed or abandoned run's.
    for day, prefixes in scenario.stage_prefixes.items():
        state = scenario.partition_states[day]
        assert state.published in prefixes
        retired = {location for _, location in map(parse_retired, state.retired)}
        # With the versions' lists of what they hold, beside them (lakeline.commits.applied).
        assert {state.published} | retired <= set(prefixes), f"date={day}: {prefixes}"
        assert set(prefixes) <= with_manifests({state.published} | retired), f"date={day}: {prefixes}"
        assert len(retired) == state.version - 1
