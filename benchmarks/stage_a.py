"""Stage A (partition commits, CTAS-simulated inserts) against a plain INSERT INTO of the same rows, on
embedded Spark, with the partition states in DynamoDB (the embedded runtime's local endpoint, moto's server).

The raw data (default 1.2 million rows in 6 daily partitions) arrives as files, in three scenarios:

- ``4 one by one`` and ``24 one by one``: each partition's files arrive one after another (each run
  finishes before the next file lands), as hourly files of a daily partition do;
- ``24 burst``: all 24 files of a partition land while its first run is in flight; they wait for it and
  its follow-up takes them all.

Stage A runs through the embedded runtime (``EventFlow``: the router's start, the SQL, the partition
commit function, the catalog swap, the post-update function with its follow-up run), with each table's
write policy (``incremental`` by default: an arrival's rows as one file, compaction back to
``bucket_count`` files past ``max_files``; ``--policy rewrite`` for the seed's whole-partition rewrite).
The baseline is the seed's plain ``INSERT INTO stage SELECT ... FROM raw WHERE "$path" = <file>``, which
appends the new file's rows and leaves however many files the engine writes. Both run in the same
SparkSession on the same files. Prints, per scenario: the time ratio, files per partition (the most at
any moment for stage A), runs per partition, and rows lost or doubled against the raw files.

    .venv/bin/python -m benchmarks.stage_a [--rows 1200000] [--partitions 6] [--buckets 2] [--max-files 8]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import tempfile
import time
from contextlib import redirect_stdout
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rich.console import Console
from rich.table import Table

from lakeline.engines.spark import SparkEngine
from lakeline.project.catalog import ensure_tables
from lakeline.project.workspace import Workspace
from lakeline.runtimes.embedded.cloud import LocalCloud
from lakeline.runtimes.embedded.event_flow import LOCAL_RAW_BUCKET, EventFlow
from lakeline.runtimes.embedded.sample import write_single_parquet
from lakeline.runtimes.embedded.stage_a import partition_row_count
from lakeline.settings import TableSettings
from lakeline.storage import LocalObjectStore, local_root, local_uri
from stage_a.arrivals import Arrival
from stage_a.keys import parse_raw_key
from stage_a.plan import StageAPlan
from stage_a.start import begin_arrival

SCENARIOS = (("4 one by one", 4, False), ("24 one by one", 24, False), ("24 burst", 24, True))


@dataclass
class Outcome:
    name: str
    stage_a_seconds: float
    insert_seconds: float
    max_files: int
    insert_files: float
    runs_per_partition: float
    rows_wrong: int


def write_arrival(engine: SparkEngine, workspace: Workspace, key: str, first: int, rows: int) -> None:
    frame = engine.session.range(first, first + rows).selectExpr(
        "id AS order_id",
        "id % 50000 AS customer_id",
        "CAST(id % 1000 AS DOUBLE) / 10 AS amount",
        "uuid() AS note",
    )
    write_single_parquet(frame.repartition(4), workspace.raw_dir / key)


def burst_of(flow: EventFlow, keys: list[str], started_at: datetime) -> None:
    """Every file of a partition lands while its first run is in flight: the first takes the lease, the others
    wait behind it (the router's start); the first run's post-update hands them all to one follow-up run."""
    waiting: list[StageAPlan] = []
    for index, key in enumerate(keys):
        digest = hashlib.sha256((flow.workspace.raw_dir / key).read_bytes()).hexdigest()[:18].upper()
        arrival = Arrival(
            bucket=LOCAL_RAW_BUCKET, key=key, sequencer=digest, event_time=started_at + timedelta(seconds=index)
        )
        plan = begin_arrival(arrival, flow.settings, flow.catalog, flow.commits, flow.raw_files)
        if isinstance(plan, StageAPlan):
            waiting.append(plan)
    for plan in waiting:
        flow.run_started(plan)
    flow.run_until_idle()


def run_scenario(
    flow: EventFlow,
    name: str,
    arrivals: int,
    burst: bool,
    rows: int,
    partitions: int,
) -> Outcome:
    engine, workspace, settings, store = flow.engine, flow.workspace, flow.settings, LocalObjectStore()
    table = f"orders_{arrivals}{'b' if burst else ''}"
    per_file = rows // (partitions * arrivals)
    dates = [f"202201{day + 10:02d}" for day in range(partitions)]
    keys = {
        date: [f"bench/sales/{table}/date={date}/arrival_{i:02d}.parquet" for i in range(arrivals)] for date in dates
    }
    next_id = 0
    for date in dates:
        for key in keys[date]:
            write_arrival(engine, workspace, key, next_id, per_file)
            next_id += per_file
    raw_schema, stage_schema = ensure_tables(
        engine, parse_raw_key(keys[dates[0]][0]), workspace.raw_dir / keys[dates[0]][0], settings
    )
    insert_root = workspace.root / f"insert_into/{table}"
    engine.execute(
        f"CREATE TABLE {stage_schema.database}.{table}_insert (order_id BIGINT, customer_id BIGINT, "
        f"amount DOUBLE, note STRING, `date` STRING) USING parquet PARTITIONED BY (`date`) "
        f"LOCATION '{local_root(insert_root)}'"
    )
    stage_a_seconds = insert_seconds = 0.0
    most_files = runs = 0
    started_at = datetime(2022, 1, 20, tzinfo=UTC)
    for date in dates:
        if burst:
            before, started = len(flow.report.stage_a), time.perf_counter()
            burst_of(flow, keys[date], started_at)
            stage_a_seconds += time.perf_counter() - started
            runs += len(flow.report.stage_a) - before
            location = engine.partition_location(stage_schema.database, table, {"date": date})
            most_files = max(most_files, len(store.list_data_files(location or "")))
        for key in keys[date]:
            if not burst:
                before, started = len(flow.report.stage_a), time.perf_counter()
                flow.arrive(key)
                flow.run_until_idle()
                stage_a_seconds += time.perf_counter() - started
                runs += len(flow.report.stage_a) - before
                location = engine.partition_location(stage_schema.database, table, {"date": date})
                most_files = max(most_files, len(store.list_data_files(location or "")))
            started = time.perf_counter()
            engine.execute(
                f"INSERT INTO {stage_schema.database}.{table}_insert SELECT order_id, customer_id, amount, "
                f'note, "date" FROM {raw_schema.database}.{table} '
                f"WHERE \"date\" = '{date}' AND \"$path\" = '{local_uri(workspace.raw_dir / key)}'"
            )
            insert_seconds += time.perf_counter() - started
    wrong = insert_files = 0
    for date in dates:
        expected = per_file * arrivals
        got = partition_row_count(engine, stage_schema.database, table, {"date": date})
        sql = f"SELECT count(DISTINCT order_id) FROM {stage_schema.database}.{table} WHERE \"date\" = '{date}'"
        distinct = int(engine.execute(sql).rows[0][0])
        wrong += abs(expected - got) + (got - distinct)
        insert_files += len(store.list_data_files(local_root(insert_root / f"date={date}")))
    return Outcome(
        name, stage_a_seconds, insert_seconds, most_files, insert_files / len(dates), runs / len(dates), wrong
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_200_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--buckets", type=int, default=2)
    parser.add_argument("--max-files", type=int, default=8)
    parser.add_argument("--policy", choices=("incremental", "rewrite"), default="incremental")
    parser.add_argument("--only", choices=[name for name, _, _ in SCENARIOS], action="append")
    args = parser.parse_args()
    console = Console()
    outcomes: list[Outcome] = []
    environment = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="lakeline-bench-") as folder:
        workspace = Workspace.at(Path(folder))
        table_settings = TableSettings(
            bucketed_by=("order_id",), bucket_count=args.buckets, max_files=args.max_files, write_policy=args.policy
        )
        settings = workspace.settings(default_table=table_settings)
        engine = SparkEngine.local(workspace.root, master="local[2]", shuffle_partitions=8)
        cloud = LocalCloud.start()
        try:
            flow = EventFlow(cloud, engine, workspace, settings, workspace.root / "queries")
            with console.status("scenarios") as status:
                for name, arrivals, burst in SCENARIOS:
                    if args.only and name not in args.only:
                        continue
                    status.update(f"{name}: {args.partitions} partitions x {arrivals} arrivals")
                    # The functions' metrics lines (stdout, as in Lambda) would bury the table.
                    with redirect_stdout(io.StringIO()):
                        outcomes.append(run_scenario(flow, name, arrivals, burst, args.rows, args.partitions))
        finally:
            cloud.stop()
            engine.stop()
            os.environ.clear()
            os.environ.update(environment)
    table = Table(
        title=f"stage A ({args.policy}, bucket_count={args.buckets}, max_files={args.max_files}) vs INSERT INTO, "
        f"{args.rows:,} rows in {args.partitions} partitions"
    )
    for column in (
        "scenario",
        "stage A s",
        "INSERT s",
        "time ratio",
        "stage A files (most)",
        "INSERT files",
        "runs / partition",
        "rows lost or doubled",
    ):
        table.add_column(column, justify="left" if column == "scenario" else "right")
    for o in outcomes:
        table.add_row(
            o.name,
            f"{o.stage_a_seconds:.1f}",
            f"{o.insert_seconds:.1f}",
            f"{o.stage_a_seconds / o.insert_seconds:.2f}",
            str(o.max_files),
            f"{o.insert_files:.1f}",
            f"{o.runs_per_partition:.1f}",
            str(o.rows_wrong),
        )
    console.print(table)


if __name__ == "__main__":
    main()
