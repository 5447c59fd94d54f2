"""``lakeline demo``: the pipeline on one machine, on generated sample data, with embedded PySpark."""

from __future__ import annotations

import time
from datetime import date
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from lakeline.engines.spark import SparkEngine
from lakeline.local.sample import SampleFile, daily_partitions, write_customers_csv, write_orders_parquet
from lakeline.local.stage_a import partition_row_count, run_local_arrival
from lakeline.local.workspace import Workspace
from lakeline.settings import TableSettings
from stage_a.runner import StageAResult

DEMO_ENVIRONMENT = "dev"
DEMO_DAYS = 4
DEMO_LAST_DAY = date(2022, 1, 20)


def run_demo(workspace_dir: Path, console: Console) -> list[StageAResult]:
    started = time.monotonic()
    workspace = Workspace.at(workspace_dir)
    settings = workspace.settings(
        environment=DEMO_ENVIRONMENT,
        tables={
            # Orders are larger: two files per partition, bucketed by the order id.
            "engineering_sales_dev.orders": TableSettings(bucketed_by=("order_id",), bucket_count=2),
        },
    )
    console.print(f"[bold]Lakeline demo[/] in {workspace.root}")
    with console.status("starting embedded Spark (local[*], Hive metastore in the workspace)"):
        engine = SparkEngine.local(workspace.root)

    days = daily_partitions(DEMO_LAST_DAY, DEMO_DAYS)
    with console.status("writing the sample raw lake"):
        arrivals: list[SampleFile] = []
        for day in days:
            arrivals.append(write_customers_csv(workspace.raw_dir, day, rows=500))
            arrivals.append(write_orders_parquet(engine.session, workspace.raw_dir, day, rows=5_000))
    console.print(f"sample lake: {len(arrivals)} raw files under {workspace.raw_dir}")

    results: list[StageAResult] = []
    progress_columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    # The last arrival is delivered twice, as SQS may do: the stage partition must not double.
    deliveries = [*arrivals, arrivals[-1]]
    with Progress(*progress_columns, console=console, transient=False) as progress:
        task = progress.add_task("stage A arrivals", total=len(deliveries))
        for arrival in deliveries:
            progress.update(task, description=f"stage A {arrival.key}")
            results.append(run_local_arrival(engine, workspace, arrival.key, settings))
            progress.advance(task)
        progress.update(task, description="stage A arrivals")

    summary = Table(title="stage tables")
    for column in ("table", "partition", "raw rows", "stage rows", "files", "run"):
        summary.add_column(column, overflow="fold")
    raw_rows = {arrival.key: arrival.rows for arrival in arrivals}
    latest = {(r.plan.target_database, r.plan.table, r.plan.stage_partition_root): r for r in results}
    for (database, table, _), result in sorted(latest.items()):
        rows = partition_row_count(engine, database, table, result.plan.partition)
        summary.add_row(
            f"{database}.{table}",
            ",".join(f"{c}={v}" for c, v in result.plan.partition.items()),
            str(raw_rows[result.raw_key]),
            str(rows),
            str(len(result.data_files)),
            result.plan.run_token,
        )
    console.print(summary)
    console.print(
        f"{len(deliveries)} deliveries ({len(arrivals)} arrivals + 1 redelivery) processed in "
        f"{time.monotonic() - started:.1f}s; workspace: {workspace.root}"
    )
    return results
