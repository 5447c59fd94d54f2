"""Stage A (CTAS-simulated insert) against a plain INSERT INTO of the same rows, on embedded Spark.

The raw data (default 1.2 million rows in 6 daily partitions) arrives as several files per partition,
one at a time, as it does in a data lake. For every arrival:

- stage A re-reads the whole raw partition and CTAS-swaps it into ``bucket_count`` files;
- the baseline is the seed's plain ``INSERT INTO stage SELECT ... FROM raw WHERE "$path" = <file>``,
  which appends the new file's rows and leaves however many files the engine writes.

Both run in the same SparkSession on the same files. Prints output files per partition for both,
rows for both (they must match) and the time ratio.

    .venv/bin/python -m benchmarks.stage_a [--rows 1200000] [--partitions 6] [--arrivals 4] [--buckets 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from lakeline.engines.spark import SparkEngine
from lakeline.local.catalog import ensure_tables
from lakeline.local.sample import write_single_parquet
from lakeline.local.stage_a import partition_row_count
from lakeline.local.workspace import Workspace
from lakeline.settings import TableSettings
from lakeline.storage import LocalObjectStore, local_root, local_uri
from stage_a.keys import parse_raw_key
from stage_a.plan import new_run_token, plan_stage_a
from stage_a.runner import run_stage_a


def write_arrival(engine: SparkEngine, workspace: Workspace, key: str, first: int, rows: int) -> None:
    frame = engine.session.range(first, first + rows).selectExpr(
        "id AS order_id",
        "id % 50000 AS customer_id",
        "CAST(id % 1000 AS DOUBLE) / 10 AS amount",
        "uuid() AS note",
    )
    write_single_parquet(frame.repartition(4), workspace.raw_dir / key)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_200_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--arrivals", type=int, default=4, help="files arriving per partition")
    parser.add_argument("--buckets", type=int, default=2)
    args = parser.parse_args()
    console = Console()
    store = LocalObjectStore()
    per_file = args.rows // (args.partitions * args.arrivals)
    dates = [f"202201{day + 10:02d}" for day in range(args.partitions)]
    with tempfile.TemporaryDirectory(prefix="lakeline-bench-") as folder:
        workspace = Workspace.at(Path(folder))
        settings = workspace.settings(default_table=TableSettings(bucketed_by=("order_id",), bucket_count=args.buckets))
        engine = SparkEngine.local(workspace.root, master="local[2]", shuffle_partitions=8)
        # Both sides start from the same catalog: raw table, stage table, and an INSERT INTO twin.
        first_key = f"bench/sales/orders/date={dates[0]}/arrival_0.parquet"
        write_arrival(engine, workspace, first_key, 0, per_file)
        raw_schema, stage_schema = ensure_tables(
            engine, parse_raw_key(first_key), workspace.raw_dir / first_key, settings
        )
        insert_root = workspace.root / "insert_into/orders"
        engine.execute(
            f"CREATE TABLE {stage_schema.database}.orders_insert (order_id BIGINT, customer_id BIGINT, "
            f"amount DOUBLE, note STRING, `date` STRING) USING parquet PARTITIONED BY (`date`) "
            f"LOCATION '{local_root(insert_root)}'"
        )
        stage_a_seconds = insert_seconds = 0.0
        next_id = per_file
        with console.status("arrivals") as status:
            for date in dates:
                for arrival in range(args.arrivals):
                    key = f"bench/sales/orders/date={date}/arrival_{arrival}.parquet"
                    status.update(f"arrival {key}")
                    if key != first_key:
                        write_arrival(engine, workspace, key, next_id, per_file)
                        next_id += per_file
                    raw = parse_raw_key(key)
                    started = time.perf_counter()
                    run_stage_a(plan_stage_a(raw, settings, raw_schema, run_token=new_run_token()), engine, store)
                    stage_a_seconds += time.perf_counter() - started
                    started = time.perf_counter()
                    engine.execute(
                        f"INSERT INTO {stage_schema.database}.orders_insert SELECT order_id, customer_id, amount, "
                        f'note, "date" FROM {raw_schema.database}.orders '
                        f"WHERE \"date\" = '{date}' AND \"$path\" = '{local_uri(workspace.raw_dir / key)}'"
                    )
                    insert_seconds += time.perf_counter() - started

        table = Table(title=f"stage A vs INSERT INTO: {args.partitions} partitions x {args.arrivals} arrivals")
        for column in (
            "partition",
            "stage A rows",
            "INSERT rows",
            f"stage A files (buckets={args.buckets})",
            "INSERT files",
        ):
            table.add_column(column, justify="right")
        files_a = files_i = 0
        for date in dates:
            rows_a = partition_row_count(engine, stage_schema.database, "orders", {"date": date})
            rows_i = partition_row_count(engine, stage_schema.database, "orders_insert", {"date": date})
            count_a = len(store.list_data_files(local_root(workspace.stage_dir / f"bench/sales/orders/date={date}")))
            count_i = len(store.list_data_files(local_root(insert_root / f"date={date}")))
            files_a, files_i = files_a + count_a, files_i + count_i
            table.add_row(date, f"{rows_a:,}", f"{rows_i:,}", str(count_a), str(count_i))
        engine.stop()
    console.print(table)
    console.print(f"stage A {stage_a_seconds:.1f}s, INSERT INTO {insert_seconds:.1f}s")
    console.print(f"time ratio stage A / INSERT INTO: {stage_a_seconds / insert_seconds:.2f}")
    console.print(
        f"files per partition: stage A {files_a / len(dates):.1f}, INSERT INTO {files_i / len(dates):.1f} "
        f"(ratio {files_a / files_i:.2f})"
    )


if __name__ == "__main__":
    main()
