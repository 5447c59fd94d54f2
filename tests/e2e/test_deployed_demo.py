"""``lakeline demo`` (what ``make demo`` runs) as a user runs it: the CDK app synthesized and deployed on a
local AWS endpoint with IAM enforced, the sample files uploaded into its raw bucket, the state machines run
by the ASL interpreter, Athena on embedded Spark (#20). Its results are checked against the figures
``test_demo.py`` computes independently from the sample files' definition."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from lakeline.lineage.records.archive import bucket_index
from lakeline.runtimes.embedded.demo import BLOCKED_KEY, COUNTRY_RULE
from tests.e2e.test_demo import DAYS, ORDERS_PER_DAY, customers, expected_daily_sales, run
from tests.openlineage_schema import validate_events_file

pytestmark = pytest.mark.spark

Demo = tuple[Path, dict[str, Any], Any]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    workspace = tmp_path_factory.mktemp("deployed-demo")
    result = run(["demo", "--workspace", str(workspace)], cwd=workspace)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return workspace, json.loads((workspace / "deployed" / "summary.json").read_text()), result


def test_it_runs_the_synthesized_stacks_and_the_bundled_functions(demo: Demo) -> None:
    workspace, summary, result = demo
    assert "the deployed system" in result.stdout
    manifest = json.loads((workspace / "cdk.out" / "manifest.json").read_text())
    assert {"Lakeline-dev-Storage", "Lakeline-dev-Pipeline"} <= set(manifest["artifacts"])
    # Each function ran from its asset in its own environment, with its log in the workspace.
    logs = [path.name for path in (workspace / "deployed" / "logs").glob("*.log")]
    for function in ("StageARouterFunction", "StageAPostUpdateFunction", "StageBRouterFunction", "LineageTrace"):
        assert any(function in name for name in logs), (function, logs)
    assert summary["uploads"] == 10, "eight files, the last one uploaded twice, then the file to block"
    # The repeated upload either finds its execution running (same name: no new execution) or starts one
    # that writes nothing, depending on when it lands. The blocked file's execution wrote, then failed.
    assert summary["stage_a_runs"] - summary["stage_a_runs_with_nothing_new"] == 9


def test_the_file_breaking_a_check_is_blocked_parked_and_the_previous_version_served(demo: Demo) -> None:
    """The demo's last file breaks the customers table's country rule: its execution fails at the quality step,
    the file is parked in queue A's DLQ with the rule and the row, nothing of it is published; the demo says so
    and exits 0 (its figures, checked below, are the sample files')."""
    _, summary, result = demo
    (failed,) = summary["failed_executions"]
    assert failed["error"] == "QualityBlocked" and COUNTRY_RULE in json.loads(failed["cause"])["errorMessage"]
    assert list(summary["parked"]) == ["StageA"]
    (reason,) = summary["parked"]["StageA"]
    assert reason.startswith("quality failed: QualityBlocked: quality checks blocked engineering_mysql_dev.customers")
    assert '"country":"uk"' in reason
    printed = result.stdout.split("blocked, as expected:")[1]
    assert BLOCKED_KEY in printed and f"rule '{COUNTRY_RULE}' failed" in printed, printed
    assert "parked in StageA's dead-letter queue" in printed and "still serves its previous version" in printed
    tables = {(t["table"], t["partition"]): t["rows"] for t in summary["tables"]}
    assert tables[("engineering_mysql_dev.customers", "date=20220120")] == 500


def test_stage_a_wrote_every_partition_with_its_bucket_count(demo: Demo) -> None:
    _, summary, _ = demo
    tables = {(t["table"], t["partition"]): (t["rows"], t["files"]) for t in summary["tables"]}
    for day in DAYS:
        assert tables[("engineering_mysql_dev.customers", f"date={day}")] == (500, 1)
        assert tables[("engineering_sales_dev.orders", f"date={day}")] == (ORDERS_PER_DAY, 2)


def test_stage_b_results_match_the_raw_files(demo: Demo) -> None:
    workspace, summary, _ = demo
    contents = summary["contents"]
    for day in DAYS:
        expected: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
        for country, value in customers(workspace, day).values():
            expected[country][0] += 1
            expected[country][1] += value
        got = {
            row[0]: (row[1], row[2])
            for row in contents["engineering_analytics_dev.customers_by_country"]
            if row[3] == day
        }
        assert got == {c: (int(n), round(v, 2)) for c, (n, v) in expected.items()}, day
        daily = {
            row[0]: (row[1], round(row[2], 2))
            for row in contents["engineering_analytics_dev.daily_sales"]
            if row[3] == day
        }
        assert daily == expected_daily_sales(workspace, day), day
    weekly: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for day in DAYS:
        for country, (count, amount) in expected_daily_sales(workspace, day).items():
            weekly[country][0] += count
            weekly[country][1] += amount
    got_weekly = {
        row[0]: (row[1], round(row[2], 2), row[3], row[4]) for row in contents["engineering_analytics_dev.weekly_sales"]
    }
    assert got_weekly == {c: (int(n), round(v, 2), 4, "2022-01-22") for c, (n, v) in weekly.items()}
    # The seed's example: the Saturday before, whose window holds no sample data.
    tables = {(t["table"], t["partition"]): t["rows"] for t in summary["tables"]}
    assert tables[("engineering_analytics_dev.destination_table", "date=20220115")] == 0
    assert contents["engineering_analytics_dev.destination_table"] == []


def test_lineage_is_archived_by_the_trace_and_queried_with_athena(demo: Demo) -> None:
    workspace, summary, _ = demo
    lines = [
        json.loads(line)
        for path in sorted((workspace / "deployed" / "lineage-archive").rglob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    # One tree per arrival (the redelivery is the same tree), the blocked file's ending in DQ_CHECK_FAIL.
    assert len({line["root_id"] for line in lines}) == 9
    blocked = [line for line in lines if line["lineage"][-2]["action_taken"] == "DQ_CHECK_FAIL"]
    assert [node["action_taken"] for line in blocked for node in line["lineage"]] == [
        "RAW_DATA_INPUT",
        "DQ_CHECK_FAIL",
        "DATA_COMPACTION",
    ]
    roots = {(line["lineage"][-1]["storage_location"].rsplit("/", 2)[-2], line["root_id"]) for line in lines}
    # The day's lines in its bucket objects (one per bucket the roots hash to), nothing left staged.
    assert summary["archive_objects"] == len({f"{day}/part-{bucket_index(root)}" for day, root in roots})
    actions = {node["action_taken"] for line in lines for node in line["lineage"]}
    assert {"RAW_DATA_INPUT", "STAGE_A_COMPLETE", "STAGE_B_COMPLETE"} <= actions
    assert summary["archived_lineage_rows"] > 0, "the archive table's projected partitions are read"
    stored = workspace / "deployed" / "lineage/openlineage.jsonl"
    events = [json.loads(e) for e in stored.read_text().splitlines()]
    assert len(events) == summary["openlineage_events"] > 0
    # The deployed functions made them in subprocess workers, out of reach of tests/conftest.py's check.
    assert validate_events_file(stored) == len(events)
    started = sorted(e["run"]["runId"] for e in events if e["eventType"] == "START")
    assert started == sorted(e["run"]["runId"] for e in events if e["eventType"] in ("COMPLETE", "FAIL"))
    # The blocked file's run ended FAIL with the rule in its error.
    failed = [e for e in events if e["eventType"] == "FAIL"]
    assert failed and all(COUNTRY_RULE in e["run"]["facets"]["errorMessage"]["message"] for e in failed)
    html = (workspace / "deployed" / "lineage.html").read_text()
    for dataset in ("engineering_analytics_dev.weekly_sales", "engineering_sales_dev.orders"):
        assert dataset in html
