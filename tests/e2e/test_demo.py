"""``lakeline demo --embedded`` (the runtime ``lakeline run`` uses: the pipeline's code in-process on embedded
Spark) run as a user runs it (a separate process, real Spark, the local AWS endpoint), checked against
figures computed here, independently, from the sample files' definition. The default ``lakeline demo``, on
the deployed system, is checked against the same figures in ``test_deployed_demo.py``."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from lakeline.lineage.openlineage.bound import EVENT_SIZE_LIMIT
from lakeline.lineage.records.archive import bucket_index
from lakeline.runtimes.embedded.demo import BLOCKED_KEY, COUNTRY_RULE
from tests.lineage_endpoint import recording_endpoint
from tests.openlineage_schema import validate_events_file

LAKELINE = [sys.executable, "-m", "lakeline"]
DAYS = ["20220117", "20220118", "20220119", "20220120"]
ORDERS_PER_DAY = 5_000


def run(args: list[str], cwd: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", **variables}
    return subprocess.run([*LAKELINE, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def datazone() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Amazon DataZone's endpoint, as the demo's runs send their events to it (``tests.lineage_endpoint``)."""
    with recording_endpoint() as endpoint:
        yield endpoint


def with_datazone(url: str) -> dict[str, str]:
    """The demo's OpenLineage transport: DataZone, configured by variables the way a user configures it."""
    return {
        "OPENLINEAGE__TRANSPORT__TYPE": "amazon_datazone_api",
        "OPENLINEAGE__TRANSPORT__DOMAINID": "dzd_demo",
        "OPENLINEAGE__TRANSPORT__ENDPOINTOVERRIDE": url,
    }


@pytest.fixture(scope="module")
def demo(
    tmp_path_factory: pytest.TempPathFactory, datazone: tuple[str, list[dict[str, Any]]]
) -> tuple[Path, dict[str, Any], subprocess.CompletedProcess[str]]:
    workspace = tmp_path_factory.mktemp("demo")
    result = run(["demo", "--embedded", "--workspace", str(workspace)], cwd=workspace, **with_datazone(datazone[0]))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return workspace, json.loads((workspace / "summary.json").read_text()), result


def customers(workspace: Path, day: str) -> dict[int, tuple[str, float]]:
    path = workspace / f"raw/engineering/mysql/customers/date={day}/customers_{day}.csv"
    with path.open() as handle:
        return {int(r["customer_id"]): (r["country"], float(r["lifetime_value"])) for r in csv.DictReader(handle)}


def expected_daily_sales(workspace: Path, day: str) -> dict[str, tuple[int, float]]:
    """The orders generator's formula (lakeline/runtimes/embedded/sample.py), joined to the customers file."""
    people = customers(workspace, day)
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for order in range(ORDERS_PER_DAY):
        customer = int(day) % 10_000 * 100_000 + (order * 7919) % ORDERS_PER_DAY
        if customer in people:
            country = people[customer][0]
            totals[country][0] += 1
            totals[country][1] += round(((order * 2654435761) % 100_000) / 100.0, 2)
    return {country: (int(count), round(amount, 2)) for country, (count, amount) in totals.items()}


def test_stage_a_wrote_every_partition_with_its_bucket_count(demo: tuple[Path, dict[str, Any], Any]) -> None:
    _, summary, _ = demo
    tables = {(t["table"], t["partition"]): (t["rows"], t["files"]) for t in summary["tables"]}
    for day in DAYS:
        assert tables[("engineering_mysql_dev.customers", f"date={day}")] == (500, 1)
        assert tables[("engineering_sales_dev.orders", f"date={day}")] == (ORDERS_PER_DAY, 2)
    assert [failure.split(": ")[0] for failure in summary["failures"]] == [BLOCKED_KEY], "the blocked file alone"
    assert summary["stage_a_runs"] == 8, "eight arrivals; the redelivered one does not run again, the blocked fails"
    assert summary["duplicates"][0].startswith("engineering/sales/orders/date=20220120/")


def test_customers_by_country_matches_the_raw_files(demo: tuple[Path, dict[str, Any], Any]) -> None:
    workspace, summary, _ = demo
    rows = summary["contents"]["engineering_analytics_dev.customers_by_country"]
    for day in DAYS:
        expected: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
        for country, value in customers(workspace, day).values():
            expected[country][0] += 1
            expected[country][1] += value
        got = {row[0]: (row[1], row[2]) for row in rows if row[3] == day}
        assert got == {c: (int(n), round(v, 2)) for c, (n, v) in expected.items()}, day


def test_daily_sales_joins_orders_and_customers_once_both_arrived(demo: tuple[Path, dict[str, Any], Any]) -> None:
    workspace, summary, _ = demo
    rows = summary["contents"]["engineering_analytics_dev.daily_sales"]
    for day in DAYS:
        got = {row[0]: (row[1], round(row[2], 2)) for row in rows if row[3] == day}
        assert got == expected_daily_sales(workspace, day), day


def test_weekly_sales_chains_from_daily_sales_into_the_saturday_partition(
    demo: tuple[Path, dict[str, Any], Any],
) -> None:
    workspace, summary, _ = demo
    rows = summary["contents"]["engineering_analytics_dev.weekly_sales"]
    expected: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for day in DAYS:
        for country, (count, amount) in expected_daily_sales(workspace, day).items():
            expected[country][0] += count
            expected[country][1] += amount
    got = {row[0]: (row[1], round(row[2], 2), row[3], row[4]) for row in rows}
    assert got == {c: (int(n), round(v, 2), 4, "2022-01-22") for c, (n, v) in expected.items()}


def test_the_seeds_example_lands_in_the_saturday_before(demo: tuple[Path, dict[str, Any], Any]) -> None:
    _, summary, _ = demo
    tables = {(t["table"], t["partition"]) for t in summary["tables"]}
    assert ("engineering_analytics_dev.destination_table", "date=20220115") in tables
    # 20220115 - 1 day and - 5 days: the window holds no sample data, so the partition is empty.
    assert summary["contents"]["engineering_analytics_dev.destination_table"] == []


def test_the_file_breaking_a_check_is_blocked_and_the_previous_version_served(
    demo: tuple[Path, dict[str, Any], Any],
) -> None:
    """The demo's last file breaks the customers table's country rule: blocked, said with the rule and the row,
    nothing of it published, its targets not rebuilt (their figures are the sample files', checked above); the
    demo exits 0, the block being what it shows."""
    _, summary, result = demo
    assert f"blocked, as expected: {BLOCKED_KEY}" in result.stdout
    printed = result.stdout.split("blocked, as expected:")[1]
    assert f"rule '{COUNTRY_RULE}' failed" in printed and '"country":"uk"' in printed, printed
    assert "still serves its previous version (500 rows)" in printed
    (failure,) = summary["failures"]  # summary.json keeps it
    assert failure.startswith(f"{BLOCKED_KEY}: quality checks blocked engineering_mysql_dev.customers (date=20220120)")
    reports = [(report["table"], report["blocked"]) for report in summary["quality"]]
    assert reports == [(f"engineering_mysql_dev.customers (date={day})", False) for day in DAYS] + [
        ("engineering_mysql_dev.customers (date=20220120)", True)
    ]
    tables = {(t["table"], t["partition"]): t["rows"] for t in summary["tables"]}
    assert tables[("engineering_mysql_dev.customers", "date=20220120")] == 500


def test_lineage_is_archived_and_queried(demo: tuple[Path, dict[str, Any], Any]) -> None:
    workspace, summary, _ = demo
    archive = workspace / "lineage-archive"
    objects = {path.relative_to(archive).as_posix(): path for path in sorted(archive.rglob("*.jsonl"))}
    lines = [(key, json.loads(line)) for key, path in objects.items() for line in path.read_text().splitlines()]
    roots = {line["root_id"] for _, line in lines}
    blocked = {line["root_id"] for _, line in lines if line["lineage"][-2]["action_taken"] == "DQ_CHECK_FAIL"}
    # One tree per arrival (the redelivered arrival is the same tree); the blocked file's ends in DQ_CHECK_FAIL.
    assert (len(roots), len(blocked)) == (9, 1), (len(roots), blocked)
    # The day's lines in its bucket objects (one per bucket the roots hash to), nothing left staged.
    assert all(key.endswith(f"/part-{bucket_index(line['root_id'])}.jsonl") for key, line in lines), objects
    assert summary["archive_objects"] == len(objects) == len({key for key, _ in lines})
    actions = {node["action_taken"] for _, line in lines for node in line["lineage"]}
    assert {"RAW_DATA_INPUT", "STAGE_A_COMPLETE", "STAGE_B_COMPLETE", "DQ_CHECK_FAIL"} <= actions
    [blocked_line] = [line for _, line in lines if line["root_id"] in blocked]
    assert [node["action_taken"] for node in blocked_line["lineage"]] == [
        "RAW_DATA_INPUT",
        "DQ_CHECK_FAIL",
        "DATA_COMPACTION",
    ], blocked_line
    for key, line in lines:
        lineage = line["lineage"]
        # A finished run's path from its root to its leaf (the record), then the archive (trace) step.
        assert line["status"] == "complete", line
        assert lineage[0]["parent_id"] == line["root_id"], line
        assert all(node["root_id"] == line["root_id"] for node in lineage), line
        assert all(child["parent_id"] == parent["node_id"] for parent, child in pairwise(lineage)), line
        assert lineage[-2]["node_id"] == line["record_id"], line
        assert lineage[-2]["action_taken"] in ("STAGE_A_COMPLETE", "STAGE_B_COMPLETE", "DQ_CHECK_FAIL"), line
        assert lineage[-1]["action_taken"] == "DATA_COMPACTION", line
        assert lineage[-1]["storage_location"].endswith(f"/archive/{key}"), line
    # The archive query gives one row per archived step: every line's lineage, nothing lost or added.
    assert summary["archived_lineage_rows"] == sum(len(line["lineage"]) for _, line in lines)
    every_event = [json.loads(e) for e in (workspace / "lineage/openlineage.jsonl").read_text().splitlines()]
    assert {event["eventType"] for event in every_event} == {"START", "COMPLETE", "FAIL"}
    # The blocked file's arrival, its stage A run and the run of its checks end FAIL, with the rule in their error;
    # nothing else fails.
    failed = [e for e in every_event if e["eventType"] == "FAIL"]
    checks_job = "stage_a.engineering_mysql_dev.customers.quality"
    assert sorted(e["job"]["name"] for e in failed) == ["pipeline", "stage_a", checks_job]
    assert all(COUNTRY_RULE in e["run"]["facets"]["errorMessage"]["message"] for e in failed)

    # The runs of the executions (jobs stage_a / stage_b.<target>) and of the arrivals (job pipeline)
    # have their own START and COMPLETE, as the steps do.
    def parent_job(event: dict[str, Any]) -> str | None:
        parent = event["run"]["facets"].get("parent")
        return str(parent["job"]["name"]) if parent else None

    assert {e["job"]["name"] for e in every_event if parent_job(e) is None} == {"pipeline"}
    executions = {e["job"]["name"].split(".")[0] for e in every_event if parent_job(e) == "pipeline"}
    assert executions == {"stage_a", "stage_b"}
    events = [e for e in every_event if parent_job(e) not in (None, "pipeline")]
    starts = sorted(e["run"]["runId"] for e in every_event if e["eventType"] == "START")
    assert starts == sorted(e["run"]["runId"] for e in every_event if e["eventType"] in ("COMPLETE", "FAIL"))
    # Every step's parent is its execution; the root is the arrival its chain started from.
    parents = {event["run"]["facets"]["parent"]["job"]["name"].split(".")[0] for event in events}
    assert parents == {"stage_a", "stage_b"}
    assert {event["run"]["facets"]["parent"]["root"]["job"]["name"] for event in events} == {"pipeline"}
    # The archived lineage records name the same executions and arrivals as the events; the blocked file's tree
    # is its arrival's, which ended FAIL.
    ended = {e["run"]["runId"] for e in failed}
    events = [e for e in events if e["run"]["facets"]["parent"]["run"]["runId"] not in ended]
    finished = [
        node
        for _, line in lines
        for node in line["lineage"]
        if node["action_taken"].endswith(("_A_COMPLETE", "_B_COMPLETE"))
    ]
    assert {node["run_id"] for node in finished} == {e["run"]["facets"]["parent"]["run"]["runId"] for e in events}
    assert roots - blocked == {event["run"]["facets"]["parent"]["root"]["run"]["runId"] for event in events}
    assert blocked <= ended and not (roots - blocked) & ended
    html = (workspace / "lineage.html").read_text()
    for dataset in ("engineering_analytics_dev.weekly_sales", "engineering_sales_dev.orders"):
        assert dataset in html


def test_a_column_is_followed_back_to_raw_columns_from_the_stored_events(
    demo: tuple[Path, dict[str, Any], Any],
) -> None:
    workspace, _, _ = demo
    events = workspace / "lineage/openlineage.jsonl"
    result = run(
        [
            "lineage",
            "column",
            "engineering_analytics_dev.weekly_sales.revenue",
            "--events",
            str(events),
            "--direct-only",
        ],
        cwd=workspace,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0] == "engineering_analytics_dev.weekly_sales.revenue"
    assert "engineering_analytics_dev.daily_sales.revenue  DIRECT AGGREGATION" in lines[1]
    # Through stage B's steps and stage A, down to a column of a raw table, which nothing wrote.
    assert any("stage_a." in line for line in lines), lines
    assert "_raw_dev." in lines[-1], lines


def test_a_second_run_in_the_same_workspace_changes_nothing(
    demo: tuple[Path, dict[str, Any], Any], datazone: tuple[str, list[dict[str, Any]]]
) -> None:
    workspace, first, _ = demo
    events = (workspace / "lineage/openlineage.jsonl").read_text().splitlines()

    def archived() -> dict[str, list[str]]:
        """Each archived line's path of actions, by its root and record."""
        return {
            f"{line['root_id']}/{line['record_id']}": [node["action_taken"] for node in line["lineage"]]
            for path in (workspace / "lineage-archive").rglob("*.jsonl")
            for line in map(json.loads, path.read_text().splitlines())
        }

    before = archived()
    again = run(["demo", "--embedded", "--workspace", str(workspace)], cwd=workspace, **with_datazone(datazone[0]))
    assert again.returncode == 0, again.stderr[-3000:]
    second = json.loads((workspace / "summary.json").read_text())
    # The lineage outputs keep the first run's events (the second run appends its own, if any).
    assert (workspace / "lineage/openlineage.jsonl").read_text().splitlines()[: len(events)] == events
    assert "engineering_analytics_dev.weekly_sales" in (workspace / "lineage.html").read_text()
    assert second["contents"] == first["contents"]
    assert second["tables"] == first["tables"]
    assert second["stage_a_runs"] == 0, "every arrival is a redelivery of one already processed"
    assert len(second["duplicates"]) == 9
    # Nothing new archived but the tree of the blocked file, which the demo sends again and its checks block again
    # (a new arrival: a new tree). A day's objects are its buckets, which the roots hash to.
    after = archived()
    assert before.items() <= after.items()
    new = [actions for key, actions in after.items() if key not in before]
    assert new == [["RAW_DATA_INPUT", "DQ_CHECK_FAIL", "DATA_COMPACTION"]], new


def test_a_late_file_reaches_the_all_target_and_the_chain_after_it(
    demo: tuple[Path, dict[str, Any], Any], datazone: tuple[str, list[dict[str, Any]]]
) -> None:
    """After the demo (and its rerun), a second orders file lands in a day already processed, and the
    user runs ``lakeline run`` over the same workspace: daily_sales (``triggerMode: all``, complete
    since the first run) is rebuilt with the late rows, and the weekly rollup after it follows."""
    workspace, _, _ = demo
    day = "20220118"
    partition = workspace / f"raw/engineering/sales/orders/date={day}"
    shutil.copyfile(partition / f"orders_{day}.parquet", partition / f"orders_{day}_late.parquet")
    (workspace / "raw" / BLOCKED_KEY).unlink()  # the demo's file to block: this project has no checks
    examples = Path(__file__).resolve().parents[2] / "examples" / "demo"
    (workspace / "lakeline.yml").write_text(
        "workspace: .\nraw: raw\nenvironment: dev\n"
        f"dependencies: ['{examples / 'dependencies.json'}']\ntables: ['{examples / 'tables.sql'}']\n"
        "tables_settings:\n  engineering_sales_dev.orders: {bucketed_by: [order_id], bucket_count: 2}\n"
    )
    config = str(workspace / "lakeline.yml")
    result = run(["run", "--embedded", "--config", config], cwd=workspace, **with_datazone(datazone[0]))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # Re-adding the partitions the first runs made is no error, and says nothing.
    assert (
        "AlreadyExistsException" not in result.stdout + result.stderr + (workspace / "state" / "spark.log").read_text()
    )
    # Spark's own start-up chatter is in its log, not on the console.
    assert "Setting default log level" not in result.stderr and "Using incubator modules" not in result.stderr
    summary = json.loads((workspace / "summary.json").read_text())
    assert summary["failures"] == []
    assert summary["stage_a_runs"] == 1, "only the late file is new"
    daily = summary["contents"]["engineering_analytics_dev.daily_sales"]
    for each in DAYS:
        times = 2 if each == day else 1  # the late file holds the same orders again
        got = {row[0]: (row[1], round(row[2], 2)) for row in daily if row[3] == each}
        expected = {c: (n * times, round(v * times, 2)) for c, (n, v) in expected_daily_sales(workspace, each).items()}
        assert got == expected, each
    weekly: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for country, count, revenue, _ in daily:
        weekly[country][0] += count
        weekly[country][1] += revenue
    got_weekly = {
        row[0]: (row[1], round(row[2], 2)) for row in summary["contents"]["engineering_analytics_dev.weekly_sales"]
    }
    assert got_weekly == {c: (int(n), round(v, 2)) for c, (n, v) in weekly.items()}


def test_lineage_show_names_both_versions_of_the_partition_the_late_file_rebuilt(
    demo: tuple[Path, dict[str, Any], Any],
) -> None:
    """#43's done-when: after the late file (the test above), ``lineage show`` answers which run wrote each
    version of the rebuilt partitions, from which input versions and raw files, and what came before and after."""
    workspace, _, _ = demo
    day = "20220118"

    def show(*args: str) -> subprocess.CompletedProcess[str]:
        return run(["lineage", "show", "--workspace", str(workspace), "--embedded", *args], cwd=workspace)

    orders = show("--table", "engineering_sales_dev.orders", "--partition", f"date={day}", "--json")
    assert orders.returncode == 0, orders.stdout[-3000:] + orders.stderr[-3000:]
    newest = json.loads(orders.stdout)
    assert len(newest["versions"]) == 2 and newest["after"] is None
    late, first = newest["version"], newest["before"]
    assert (late["number"], first["number"]) == (2, 1)
    assert [Path(raw).name for raw in late["raw_files"]] == [f"orders_{day}_late.parquet"]
    assert [Path(raw).name for raw in first["raw_files"]] == [f"orders_{day}.parquet"]
    assert late["location"].endswith(f"/date={day}/lakeline_run={late['version'].split('.', 1)[1]}/")
    # The first version by its number, as `lakeline status` shows it: the late one after it.
    older = json.loads(
        show("--table", "engineering_sales_dev.orders", "--partition", f"date={day}", "--version", "1", "--json").stdout
    )
    assert older["version"]["version"] == first["version"] and older["after"]["version"] == late["version"]
    status = json.loads(
        run(["status", "--workspace", str(workspace), "--embedded", "--format", "json"], workspace).stdout
    )
    [row] = [
        p
        for p in status["partitions"]
        if (p["table"], p["partition"]) == ("engineering_sales_dev.orders", f"date={day}")
    ]
    assert row["version"] == late["number"]

    # daily_sales (triggerMode all) was rebuilt from the late version of orders: its inputs say so.
    daily = show("--table", "engineering_analytics_dev.daily_sales", "--partition", f"date={day}")
    assert daily.returncode == 0, daily.stdout[-3000:] + daily.stderr[-3000:]
    assert f"engineering_sales_dev.orders {late['version']}" in daily.stdout
    assert "before: v1." in daily.stdout and "after: none archived" in daily.stdout
    assert f"orders_{day}_late.parquet" in daily.stdout
    # Each of its runs read both sources, and its events say which version of each: not only of the source
    # whose arrival triggered the run (orders' late file), also of the other one (customers).
    events = [json.loads(line) for line in (workspace / "lineage/openlineage.jsonl").read_text().splitlines()]
    steps = [
        e
        for e in events
        if e["job"]["name"] == "stage_b.engineering_analytics_dev.daily_sales.step0" and e["eventType"] == "COMPLETE"
    ]
    assert steps
    for step in steps:
        read = {
            ".".join(i["name"].split(".")[-2:]): i["facets"].get("version", {}).get("datasetVersion")
            for i in step["inputs"]
        }
        assert set(read) == {"engineering_sales_dev.orders", "engineering_mysql_dev.customers"}, read
        assert all(version and version.startswith("v") for version in read.values()), read
    late_run = [s for s in steps if s["inputs"] and late["version"] in json.dumps(s["inputs"])]
    assert late_run, "the late version of orders is named as the input of a run of daily_sales"

    # What is not there is an error naming what is (exit 1); what cannot be a version is a usage error (exit 2).
    missing = show("--table", "engineering_sales_dev.orders", "--partition", "date=19990101")
    assert missing.returncode == 1 and f"date={day}" in missing.stderr, missing.stderr
    unknown = show("--table", "engineering_sales_dev.orders", "--partition", f"date={day}", "--version", "9")
    assert unknown.returncode == 1 and late["version"] in unknown.stderr, unknown.stderr
    assert (
        show("--table", "engineering_sales_dev.orders", "--partition", f"date={day}", "--version", "x").returncode == 2
    )


def test_every_stored_event_follows_the_openlineage_schemas(
    demo: tuple[Path, dict[str, Any], Any], datazone: tuple[str, list[dict[str, Any]]]
) -> None:
    # Last in the module: the runs above add their events to the same file. They are made in a subprocess,
    # out of reach of the check every in-process event goes through (tests/conftest.py).
    workspace, _, _ = demo
    stored = workspace / "lineage/openlineage.jsonl"
    assert validate_events_file(stored) > 0  # the schemas and the 300,000 bound
    # With DataZone configured, every event stored was posted to the domain, each with its own client token,
    # and what was posted is what is stored but the client's tags.
    _, requests = datazone
    assert {request["path"] for request in requests} == {"/v2/domains/dzd_demo/lineage/events"}
    tokens = [request["headers"]["Client-Token"] for request in requests]
    assert len(set(tokens)) == len(tokens)
    posted = []
    for request in requests:
        assert len(request["raw"]) <= EVENT_SIZE_LIMIT
        sent = request["body"]
        sent["run"]["facets"].pop("tags")
        posted.append(json.dumps(sent, sort_keys=True))
    kept = [json.dumps(json.loads(line), sort_keys=True) for line in stored.read_text().splitlines()]
    assert sorted(posted) == sorted(kept)
