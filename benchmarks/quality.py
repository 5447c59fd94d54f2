"""What quality checks cost (#41): stage A with five typical rules against stage A without checks, on the same
files, on embedded Spark through the embedded runtime (``EventFlow``: the router's start, the SQL, the quality
step, the partition commit, the post-update), with the partition states on the local endpoint (moto's server).

Two stage tables are loaded from identical files (default 600,000 rows in 6 daily partitions, 2 arrivals each):
``orders_plain`` has no checks, ``orders_checked`` these five ``block`` rules, which every version passes:

- ``IsComplete "order_id"``, ``IsUnique "order_id"``, ``ColumnValues "region" in [...]`` (row-level: a query
  each for the metric),
- ``RowCount > 0``, ``CustomSql "select count(*) from primary where amount < 0" = 0`` (one value each).

The arrivals alternate between the tables (plain, checked, plain, ...) so the machine's drift falls on both; the
first partition of each warms Spark up and is not counted. Prints each side's seconds, the ratio, the seconds
the checks add per run and the rows each table holds (equal, or the checks changed what is published).

    .venv/bin/python -m benchmarks.quality [--rows 600000] [--partitions 6] [--arrivals 2]
"""

from __future__ import annotations

import argparse
import io
import os
import tempfile
import time
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from lakeline.engines.spark import SparkEngine
from lakeline.project.workspace import Workspace
from lakeline.quality.checks import Check
from lakeline.runtimes.embedded.cloud import LocalCloud
from lakeline.runtimes.embedded.event_flow import EventFlow
from lakeline.runtimes.embedded.sample import write_single_parquet
from lakeline.settings import TableSettings

STAGE = "bench_sales"
REGIONS = ("north", "south", "east", "west")
CHECKS = (
    Check(rule='IsComplete "order_id"'),
    Check(rule='IsUnique "order_id"'),
    Check(rule=f'ColumnValues "region" in [{", ".join(f"{chr(34)}{r}{chr(34)}" for r in REGIONS)}]'),
    Check(rule="RowCount > 0"),
    Check(rule='CustomSql "select count(*) from primary where amount < 0" = 0'),
)
TABLES = ("orders_plain", "orders_checked")


@dataclass
class Measured:
    seconds: dict[str, float]
    runs: dict[str, int]
    rows: dict[str, int]
    reports: int  # quality steps that ran (the checked table's runs)
    blocked: int


def write_arrival(engine: SparkEngine, path: Path, first: int, rows: int) -> None:
    regions = ", ".join(f"'{region}'" for region in REGIONS)
    frame = engine.session.range(first, first + rows).selectExpr(
        "id AS order_id",
        "id % 50000 AS customer_id",
        "CAST(id % 1000 AS DOUBLE) / 10 AS amount",
        f"element_at(array({regions}), CAST(id % {len(REGIONS)} AS INT) + 1) AS region",
        "uuid() AS note",
    )
    write_single_parquet(frame.repartition(4), path)


def measure(flow: EventFlow, rows: int, partitions: int, arrivals: int) -> Measured:
    """Load every file into both tables, alternating; time each arrival's runs to rest (the first partition is
    a warm-up, not counted)."""
    engine, workspace = flow.engine, flow.workspace
    per_file = rows // (partitions * arrivals)
    dates = [f"202201{day + 10:02d}" for day in range(partitions + 1)]  # one more: the warm-up
    seconds = dict.fromkeys(TABLES, 0.0)
    runs = dict.fromkeys(TABLES, 0)
    next_id = 0
    for index, date in enumerate(dates):
        for arrival in range(arrivals):
            for table in TABLES:  # the same rows in both
                key = f"bench/sales/{table}/date={date}/arrival_{arrival:02d}.parquet"
                write_arrival(engine, workspace.raw_dir / key, next_id, per_file)
                before, started = len(flow.report.stage_a), time.perf_counter()
                flow.arrive(key)
                flow.run_until_idle()
                if index:
                    seconds[table] += time.perf_counter() - started
                    runs[table] += len(flow.report.stage_a) - before
            next_id += per_file
    counted = {table: int(engine.execute(f"SELECT count(*) FROM {STAGE}.{table}").rows[0][0]) for table in TABLES}
    blocked = sum(1 for report in flow.report.quality if report["blocked"])
    return Measured(seconds, runs, counted, len(flow.report.quality), blocked)


def run(rows: int, partitions: int, arrivals: int, engine: SparkEngine | None = None) -> Measured:
    """Both tables loaded and measured in a fresh workspace, on ``engine`` (default: a Spark of its own, stopped
    after)."""
    environment = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="lakeline-bench-") as folder:
        workspace = Workspace.at(Path(folder))
        settings = workspace.settings(tables={f"{STAGE}.orders_checked": TableSettings(checks=CHECKS)})
        spark = engine or SparkEngine.local(workspace.root, master="local[2]", shuffle_partitions=8)
        cloud = LocalCloud.start()
        try:
            flow = EventFlow(cloud, spark, workspace, settings, workspace.root / "queries")
            # The functions' metrics lines (stdout, as in Lambda) would bury the table.
            with redirect_stdout(io.StringIO()):
                return measure(flow, rows, partitions, arrivals)
        finally:
            cloud.stop()
            if engine is None:
                spark.stop()
            os.environ.clear()
            os.environ.update(environment)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=600_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--arrivals", type=int, default=2, help="files per partition, each a run")
    args = parser.parse_args()
    console = Console()
    with console.status("loading both tables"):
        measured = run(args.rows, args.partitions, args.arrivals)
    plain, checked = (measured.seconds[table] for table in TABLES)
    table = Table(
        title=f"stage A with {len(CHECKS)} block rules vs none, {args.rows:,} rows in {args.partitions} partitions "
        f"x {args.arrivals} arrivals (first partition a warm-up, not counted)"
    )
    for column in ("no checks s", "5 checks s", "time ratio", "added s / run", "runs", "rows", "blocked"):
        table.add_column(column, justify="right")
    table.add_row(
        f"{plain:.1f}",
        f"{checked:.1f}",
        f"{checked / plain:.2f}",
        f"{(checked - plain) / max(1, measured.runs['orders_checked']):.2f}",
        f"{measured.runs['orders_plain']} / {measured.runs['orders_checked']}",
        f"{measured.rows['orders_plain']:,} / {measured.rows['orders_checked']:,}",
        str(measured.blocked),
    )
    console.print(table)


if __name__ == "__main__":
    main()
