"""``lakeline demo``: the whole pipeline on one machine, with no AWS account.

1. starts embedded Spark and a local AWS endpoint (moto's server on 127.0.0.1);
2. writes a sample lake (CSV customers and Parquet orders, four daily partitions) and creates the
   analytics tables stage B writes (``examples/demo/tables.sql``);
3. registers the dependency items of ``examples/demo/dependencies.json`` (the seed's example among
   them); the dependencies stream function builds dependencies-by-table;
4. drops the sample files as arrivals and runs the event flow: stage A, routing, stage B chains, and
   lineage through the lineage queue into the lineage table;
5. traces the lineage into the archive and queries it with the seed's UNNEST query on Spark;
6. prints a summary and writes ``lineage.html``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import sqlglot
from rich.console import Console
from rich.table import Table

from lakeline.dependencies.files import load_items_file
from lakeline.engines.spark import SparkEngine
from lakeline.lineage.html import write_lineage_html
from lakeline.lineage.query import load_query, query_local_archive
from lakeline.local.cloud import LocalCloud
from lakeline.local.event_flow import EventFlow, FlowReport
from lakeline.local.sample import SampleFile, daily_partitions, write_customers_csv, write_orders_parquet
from lakeline.local.stage_a import partition_row_count
from lakeline.local.workspace import Workspace
from lakeline.names import ddl_name
from lakeline.settings import TableSettings
from lakeline.storage import LocalObjectStore

DEMO_ENVIRONMENT = "dev"
DEMO_DAYS = 4
DEMO_LAST_DAY = date(2022, 1, 20)
REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples" / "demo"
QUERIES = REPO_ROOT / "athena_queries"


@dataclass
class DemoResult:
    workspace: Workspace
    report: FlowReport
    tables: list[dict[str, Any]]
    archive_objects: int
    archive_rows: int
    html: Path
    seconds: float


def create_analytics_tables(engine: SparkEngine, workspace: Workspace) -> None:
    text = (EXAMPLES / "tables.sql").read_text().replace("$analytics_root", str(workspace.analytics_dir))
    for statement in sqlglot.parse(text, read="athena"):
        if statement is not None:
            engine.execute(statement.sql("athena"))


def table_summary(engine: SparkEngine, database: str, table: str) -> list[dict[str, Any]]:
    """Rows and data files of every partition of a table."""
    store = LocalObjectStore()
    rows: list[dict[str, Any]] = []
    for (spec,) in engine.session.sql(f"SHOW PARTITIONS {ddl_name(database, table)}").collect():
        partition = dict(part.split("=", 1) for part in str(spec).split("/"))
        count = partition_row_count(engine, database, table, partition)
        location = engine.partition_location(database, table, partition)
        files = store.list_data_files(location) if location else []
        rows.append({"table": f"{database}.{table}", "partition": str(spec), "rows": count, "files": len(files)})
    return rows


def run_demo(workspace_dir: Path, console: Console) -> DemoResult:
    started = time.monotonic()
    workspace = Workspace.at(workspace_dir)
    settings = workspace.settings(
        environment=DEMO_ENVIRONMENT,
        # Orders are larger: two files per partition, bucketed by the order id.
        tables={"engineering_sales_dev.orders": TableSettings(bucketed_by=("order_id",), bucket_count=2)},
    )
    console.print(f"[bold]Lakeline demo[/] in {workspace.root}")
    with console.status("starting embedded Spark and a local AWS endpoint (moto server on 127.0.0.1)"):
        engine = SparkEngine.local(workspace.root)
        cloud = LocalCloud.start()
    try:
        flow = EventFlow(
            cloud, engine, workspace, settings, QUERIES, listener=lambda stage, what: console.log(f"{stage}: {what}")
        )
        with console.status("writing the sample lake and the analytics tables"):
            arrivals: list[SampleFile] = []
            for day in daily_partitions(DEMO_LAST_DAY, DEMO_DAYS):
                arrivals.append(write_customers_csv(workspace.raw_dir, day, rows=500))
                arrivals.append(write_orders_parquet(engine.session, workspace.raw_dir, day, rows=5_000))
            create_analytics_tables(engine, workspace)
        items = load_items_file(EXAMPLES / "dependencies.json")
        flow.register(items)
        console.print(f"registered {len(items)} dependency items; dependencies-by-table built by the stream function")
        for arrival in arrivals:
            flow.arrive(arrival.key)
        # The last arrival is delivered twice, as S3 and SQS may do: nothing may change because of it.
        flow.arrive(arrivals[-1].key)
        console.print(f"{len(arrivals) + 1} arrival events sent to queue A")
        report = flow.run_until_idle()
        with console.status("nightly trace: lineage table → archive"):
            archived = flow.trace()
            flow.write_openlineage()
        with console.status("querying the archived lineage (athena_queries/lineage/lineage_records.sql on Spark)"):
            result = query_local_archive(engine, workspace.root / "lineage-archive", load_query())
        html = write_lineage_html(flow.events, workspace.root / "lineage.html", title="Lakeline demo lineage")
        contents = {
            item.dataset: [list(row) for row in engine.execute(f"SELECT * FROM {item.dataset} ORDER BY 1, 2").rows]
            for item in items
        }
        tables: list[dict[str, Any]] = []
        for dataset in (
            "engineering_mysql_dev.customers",
            "engineering_sales_dev.orders",
            *(item.dataset for item in items),
        ):
            database, table = dataset.split(".")
            tables.extend(table_summary(engine, database, table))
    finally:
        cloud.stop()
    summary = Table(title="tables")
    for column in ("table", "partition", "rows", "files"):
        summary.add_column(column, justify="right" if column in ("rows", "files") else "left")
    for row in tables:
        summary.add_row(row["table"], row["partition"], str(row["rows"]), str(row["files"]))
    console.print(summary)
    seconds = time.monotonic() - started
    summary_file = workspace.root / "summary.json"
    summary_file.write_text(
        json.dumps(
            {
                "tables": tables,
                "contents": contents,
                "stage_a_runs": len(report.stage_a),
                "stage_b_runs": len(report.stage_b),
                "duplicates": report.duplicates,
                "failures": report.failures,
                "lineage_records": report.lineage_records,
                "archive_objects": len(archived),
                "archived_lineage_rows": len(result.rows),
                "seconds": round(seconds, 1),
            },
            indent=1,
            default=str,
        )
    )
    console.print(
        f"stage A runs: {len(report.stage_a)}, stage B runs: {len(report.stage_b)}, "
        f"duplicates skipped: {len(report.duplicates)}, "
        f"failed: {len(report.failures)}, lineage records loaded: {report.lineage_records}, "
        f"archive objects: {len(archived)}, archived lineage rows queried: {len(result.rows)}"
    )
    console.print(f"open {html} in a browser; OpenLineage events in {workspace.root / 'lineage' / 'openlineage.jsonl'}")
    console.print(f"done in {seconds:.0f}s")
    return DemoResult(workspace, report, tables, len(archived), len(result.rows), html, seconds)
