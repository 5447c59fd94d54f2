"""Quality gates on the embedded runtime (#41), with real Spark and the deployed handlers on a local AWS.

``orders`` (stage A) carries three checks: two ``block`` (no NULL id, ids unique across the partition's version)
and one ``warn`` (amounts under 30). ``orders_daily`` (stage B, built from ``orders``) carries one ``block``.

1. a good file: published with the warn reported (its amounts reach 36), ``orders_daily`` built;
2. a bad file in the same partition (a NULL id, an id the published file holds): blocked by both block rules;
   the partition keeps its version (readers see the first file's rows), the run's prefix is gone, the arrival
   is parked with the rules and failing rows, ``orders_daily`` is not rebuilt;
3. the fixed file sent again under the same key: published, ``orders_daily`` rebuilt;
4. a target whose own check blocks (11 orders in a day): its source published, the target keeps its version,
   its message parked with the reason;
5. ``reprocess`` of that day: the target's run again, checked as any run, blocked again the same way.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lakeline.commits import PartitionCommits, commit_key
from lakeline.dependencies.arrivals import ArrivalTracker
from lakeline.dependencies.model import DependencyItem, parse_dependency_item
from lakeline.engines.spark import SparkEngine
from lakeline.operations.reprocess import reprocess, scan_table_partitions
from lakeline.operations.status import read_items, store_reader
from lakeline.project.workspace import Workspace
from lakeline.quality.checks import Check
from lakeline.quality.evaluate import QualityReport
from lakeline.runtimes.embedded.cloud import LocalCloud
from lakeline.runtimes.embedded.event_flow import EventFlow
from lakeline.runtimes.embedded.handler_caches import reset_handler_caches
from lakeline.settings import TableSettings
from lakeline.storage import LocalObjectStore, local_root
from stage_end.quality import read_report
from tests.rehearsal.support import daily_item

ENV = "qgate"
STAGE = f"eng_shop_{ENV}"
ANALYTICS = f"eng_analytics_{ENV}"
QUERIES = Path(__file__).resolve().parents[2] / "athena_queries"
DAY = "20220120"
NOW = datetime(2026, 11, 30, tzinfo=UTC)
ORDERS = f"{STAGE}.orders/date={DAY}"
DAILY = f"{ANALYTICS}.orders_daily/date={DAY}"
WARNED = '2/3 passed; failed: ColumnValues "amount" < 30 (warn)'
ORDERS_CHECKS = (
    Check(rule='IsComplete "id"'),
    Check(rule='IsUnique "id"'),
    Check(rule='ColumnValues "amount" < 30', severity="warn"),
)


def write(workspace: Workspace, key: str, text: str) -> str:
    path = workspace.raw_dir / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return key


def orders(ids: list[str], day: str = DAY, part: int = 0) -> tuple[str, str]:
    return f"eng/shop/orders/date={day}/part{part}.csv", "id,amount\n" + "".join(
        f"{value},{n * 1.5}\n" for n, value in enumerate(ids, start=20)
    )


def orders_daily(checks: list[dict[str, str]]) -> DependencyItem:
    sql = (
        f"INSERT INTO {ANALYTICS}.orders_daily SELECT count(*), sum(amount), '$day' "
        f"FROM {STAGE}.orders WHERE \"date\" = '$day'"
    )
    item = daily_item(
        f"{ANALYTICS}.orders_daily", "overwrite", [{"db": ANALYTICS, "sql": sql}], source=f"{STAGE}.orders"
    )
    return parse_dependency_item({**item, "checks": checks})


@dataclass
class Phase:
    orders: list[tuple[Any, ...]]
    daily: list[tuple[Any, ...]]
    stage_a: int
    stage_b: int
    failures: list[str]
    parked: list[tuple[str, str]]  # (body, reason) of what queue A's and B's DLQs received in the phase
    orders_report: QualityReport | None  # the report of the orders partition's published version
    prefixes: list[str]
    quality_tables: list[str] = field(default_factory=list)
    checks: dict[str, str | None] = field(default_factory=dict)  # `lakeline status`'s column, by table/partition
    reports: list[dict[str, Any]] = field(default_factory=list)  # the phase's entries of summary.json's quality
    checks_runs: list[tuple[str, str, list[bool]]] = field(default_factory=list)
    """The end events of the phase's checks' runs (OpenLineage): job, state, each assertion's success."""


@dataclass
class Scenario:
    phases: list[Phase]


def drain(cloud: LocalCloud, name: str) -> list[tuple[str, str]]:
    found = []
    while True:
        answer = cloud.sqs.receive_message(
            QueueUrl=cloud.queue_urls[name], MaxNumberOfMessages=10, MessageAttributeNames=["All"]
        )
        messages = answer.get("Messages", [])
        if not messages:
            return found
        for message in messages:
            reason = message.get("MessageAttributes", {}).get("lakeline_reason", {}).get("StringValue", "")
            found.append((message["Body"], reason))
            cloud.sqs.delete_message(QueueUrl=cloud.queue_urls[name], ReceiptHandle=message["ReceiptHandle"])


@pytest.fixture(scope="module")
def scenario(spark_engine: SparkEngine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    workspace = Workspace.at(tmp_path_factory.mktemp("quality-gates"))
    settings = workspace.settings(environment=ENV, tables={f"{STAGE}.orders": TableSettings(checks=ORDERS_CHECKS)})
    spark_engine.execute(f"CREATE DATABASE IF NOT EXISTS {ANALYTICS}")
    location = local_root(workspace.analytics_dir / ANALYTICS / "orders_daily")
    spark_engine.session.sql(
        f"CREATE TABLE {ANALYTICS}.orders_daily (orders BIGINT, amount DOUBLE, `date` STRING) USING parquet "
        f"PARTITIONED BY (`date`) LOCATION '{location}'"
    )
    environment = dict(os.environ)
    reset_handler_caches()
    cloud = LocalCloud.start()
    store = LocalObjectStore()
    try:
        flow = EventFlow(cloud, spark_engine, workspace, settings, QUERIES)
        # orders_daily must have one row per day: a second (impossible) row would be blocked.
        flow.register([orders_daily([{"rule": "RowCount = 1"}, {"rule": 'ColumnValues "orders" < 10'}])])
        commits = PartitionCommits(cloud.dynamodb, cloud.names.pipeline_state, lists=store)
        phases: list[Phase] = []

        def phase(*files: tuple[str, str], then: Callable[[], object] = lambda: None) -> None:
            before = (
                len(flow.report.stage_a),
                len(flow.report.stage_b),
                len(flow.report.failures),
                len(flow.report.quality),
                len(flow.events),
            )
            for key, text in files:
                flow.arrive(write(workspace, key, text))
            then()
            flow.run_until_idle()
            published = commits.read(commit_key(f"{STAGE}.orders", f"date={DAY}")).published
            items = cloud.dynamodb.scan(TableName=cloud.names.pipeline_state)["Items"]
            partitions, _ = read_items(items, lambda target: frozenset(), NOW, store_reader(store))
            phases.append(
                Phase(
                    orders=sorted(spark_engine.execute(f"SELECT id, amount FROM {STAGE}.orders").rows),
                    daily=sorted(spark_engine.execute(f"SELECT * FROM {ANALYTICS}.orders_daily").rows),
                    stage_a=len(flow.report.stage_a) - before[0],
                    stage_b=len(flow.report.stage_b) - before[1],
                    failures=flow.report.failures[before[2] :],
                    parked=drain(cloud, "queue-a-dlq") + drain(cloud, "queue-b-dlq"),
                    orders_report=read_report(store, published) if published else None,
                    prefixes=store.list_child_prefixes(local_root(workspace.stage_dir / f"eng/shop/orders/date={DAY}")),
                    quality_tables=[
                        f"{database}.{t.name}"
                        for database in (STAGE, ANALYTICS)
                        for t in spark_engine.session.catalog.listTables(database)
                        if t.name.startswith("lakeline_tmp")
                    ],
                    checks={f"{p.table}/{p.partition}": p.quality for p in partitions},
                    reports=flow.report.quality[before[3] :],
                    checks_runs=[
                        (
                            event["job"]["name"],
                            event["eventType"],
                            [
                                assertion["success"]
                                for dataset in event["inputs"]
                                for assertion in dataset["inputFacets"]["dataQualityAssertions"]["assertions"]
                            ],
                        )
                        for event in flow.events[before[4] :]
                        if event["job"]["name"].endswith(".quality") and event["eventType"] != "START"
                    ],
                )
            )

        phase(orders(["1", "2", "3"]))  # 1. good (amounts 30, 31.5, 33: the warn rule fails)
        phase(orders(["4", "", "1"], part=1))  # 2. a NULL id and id 1 again
        phase(orders(["4", "5", "6"], part=1))  # 3. the fixed file, the same key
        phase(orders(["7", "8", "9", "10", "11"], part=2))  # 4. fine for orders; orders_daily's 11 orders are not
        # 5. `lakeline reprocess` of the day, as its embedded path does: the target's message sent again, its run
        # checked as any: blocked again by its own check.
        state = cloud.names.pipeline_state
        phase(
            then=lambda: reprocess(
                f"{STAGE}.orders",
                scan_table_partitions(cloud.dynamodb, state, f"{STAGE}.orders", DAY, DAY),
                flow.store,
                ArrivalTracker(cloud.dynamodb, state),
                cloud.sqs,
                cloud.queue_urls["queue-b"],
            )
        )
        yield Scenario(phases)
    finally:
        cloud.stop()
        reset_handler_caches()
        os.environ.clear()
        os.environ.update(environment)


def test_a_good_file_is_published_and_a_failed_warn_rule_reported(scenario: Scenario) -> None:
    first = scenario.phases[0]
    assert first.failures == [] and first.parked == []
    assert first.orders == [(1, 30.0), (2, 31.5), (3, 33.0)]
    assert first.daily == [(3, 94.5, DAY)]
    assert first.stage_a == 1 and first.stage_b == 1
    report = first.orders_report
    assert report is not None and not report.blocked
    verdicts = {result.rule: result.passed for result in report.results}
    assert verdicts == {'IsComplete "id"': True, 'IsUnique "id"': True, 'ColumnValues "amount" < 30': False}
    warned = next(result for result in report.results if not result.passed)
    assert warned.severity == "warn" and warned.metric == 0.0 and len(warned.sample) == 3
    # `lakeline status` shows each published version's checks; the run's summary carries each report.
    assert first.checks == {ORDERS: WARNED, DAILY: "2/2 passed"}
    assert [(r["table"], r["blocked"], len(r["results"])) for r in first.reports] == [
        (f"{STAGE}.orders (date={DAY})", False, 3),
        (f"{ANALYTICS}.orders_daily (date={DAY})", False, 2),
    ]
    # In the lineage: each version's checks as a run of its own, their results on the dataset they read (#41).
    assert first.checks_runs == [
        (f"stage_a.{STAGE}.orders.quality", "COMPLETE", [True, True, False]),
        (f"stage_b.{ANALYTICS}.orders_daily.quality", "COMPLETE", [True, True]),
    ]


def test_a_bad_file_is_blocked_and_readers_still_see_the_previous_version(scenario: Scenario) -> None:
    first, second = scenario.phases[:2]
    assert second.stage_a == 0 and second.stage_b == 0, "nothing published, no target routed"
    assert second.orders == first.orders and second.daily == first.daily
    assert second.orders_report == first.orders_report  # the published version is the first one
    assert second.prefixes == first.prefixes, "the blocked run's prefix is deleted"
    assert second.quality_tables == []
    [(body, reason)] = second.parked
    assert "eng/shop/orders/date=20220120/part1.csv" in body
    assert reason.startswith(f"quality failed: QualityBlocked: quality checks blocked {STAGE}.orders (date={DAY}): ")
    assert """rule 'IsComplete "id"' failed (metric 0.833333), failing rows: [{"id":null,"amount":"31.5"}]""" in reason
    assert """rule 'IsUnique "id"' failed (metric 0.5)""" in reason
    assert '{"id":"1","amount":"30.0"}' in reason and '{"id":"1","amount":"33.0"}' in reason
    assert "amount" not in reason.split("IsUnique")[0].split("IsComplete")[0]  # the warn rule is not a reason
    assert [failure.split(":")[0] for failure in second.failures] == ["eng/shop/orders/date=20220120/part1.csv"]
    assert second.checks == first.checks, "status shows the checks of the version still published"
    ((table, blocked, failed),) = [
        (r["table"], r["blocked"], [x["rule"] for x in r["results"] if not x["passed"]]) for r in second.reports
    ]
    assert (table, blocked) == (f"{STAGE}.orders (date={DAY})", True)
    assert failed == ['IsComplete "id"', 'IsUnique "id"', 'ColumnValues "amount" < 30']
    assert second.checks_runs == [(f"stage_a.{STAGE}.orders.quality", "FAIL", [False, False, False])]


def test_the_fixed_file_sent_again_is_published_and_the_target_rebuilt(scenario: Scenario) -> None:
    third = scenario.phases[2]
    assert third.failures == [] and third.parked == []
    assert third.stage_a == 1 and third.stage_b == 1
    assert third.orders == [(1, 30.0), (2, 31.5), (3, 33.0), (4, 30.0), (5, 31.5), (6, 33.0)]
    assert third.daily == [(6, 189.0, DAY)]
    report = third.orders_report
    assert report is not None and [r.passed for r in report.results] == [True, True, False]
    assert json.loads(json.dumps([r.metric for r in report.results])) == [1.0, 1.0, 0.0]


def test_a_target_whose_own_check_blocks_keeps_its_version(scenario: Scenario) -> None:
    third, fourth = scenario.phases[2:4]
    assert fourth.stage_a == 1 and fourth.stage_b == 0
    assert len(fourth.orders) == 11, "the source is published"
    assert fourth.daily == third.daily == [(6, 189.0, DAY)], "the target keeps its previous version"
    assert fourth.checks[DAILY] == third.checks[DAILY] == "2/2 passed"
    assert [(r["table"].split(" ")[0], r["blocked"]) for r in fourth.reports] == [
        (f"{STAGE}.orders", False),
        (f"{ANALYTICS}.orders_daily", True),
    ]
    [(body, reason)] = fourth.parked
    assert json.loads(body)["target_dataset"] == f"{ANALYTICS}.orders_daily"
    assert reason.startswith(f"quality failed: QualityBlocked: quality checks blocked {ANALYTICS}.orders_daily")
    assert """rule 'ColumnValues "orders" < 10' failed (metric 0), failing rows: [{"orders":"11",""" in reason
    assert fourth.quality_tables == []
    assert fourth.checks_runs == [
        (f"stage_a.{STAGE}.orders.quality", "COMPLETE", [True, True, False]),
        (f"stage_b.{ANALYTICS}.orders_daily.quality", "FAIL", [True, False]),
    ]


def test_a_reprocess_rebuilds_through_the_targets_checks_and_is_blocked_the_same_way(scenario: Scenario) -> None:
    fourth, fifth = scenario.phases[3:]
    assert fifth.stage_a == 0 and fifth.stage_b == 0
    assert fifth.daily == fourth.daily and fifth.checks[DAILY] == "2/2 passed", "nothing published"
    [(body, reason)] = fifth.parked
    assert json.loads(body)["trigger"]["run"].startswith("reprocess-")
    assert reason.startswith(f"quality failed: QualityBlocked: quality checks blocked {ANALYTICS}.orders_daily")
    assert [(r["table"].split(" ")[0], r["blocked"]) for r in fifth.reports] == [(f"{ANALYTICS}.orders_daily", True)]
    assert len(fifth.failures) == 1 and fifth.quality_tables == []
