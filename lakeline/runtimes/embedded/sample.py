"""A small, deterministic sample lake for the demo and the tests."""

from __future__ import annotations

import csv
import random
import shutil
import tempfile
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

COUNTRIES = ("es", "fr", "de", "it", "pt", "us")
ORDER_STATUSES = ("placed", "shipped", "delivered", "returned")


@dataclass(frozen=True)
class SampleFile:
    key: str
    rows: int


def daily_partitions(last_day: date, days: int) -> list[str]:
    return [(last_day - timedelta(days=offset)).strftime("%Y%m%d") for offset in reversed(range(days))]


def write_customers_csv(raw_dir: Path, day: str, rows: int, seed: int = 7) -> SampleFile:
    """engineering/mysql/customers/date=<day>/customers_<day>.csv"""
    rng = random.Random(f"{seed}-{day}")
    key = f"engineering/mysql/customers/date={day}/customers_{day}.csv"
    path = raw_dir / key
    if path.exists():  # the sample is deterministic: an existing file is already this one
        return SampleFile(key, rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["customer_id", "name", "country", "lifetime_value"])
        for index in range(rows):
            customer_id = int(day) % 10_000 * 100_000 + index
            writer.writerow(
                [
                    customer_id,
                    f"customer {customer_id}",
                    rng.choice(COUNTRIES),
                    round(rng.uniform(0, 5000), 2),
                ]
            )
    return SampleFile(key, rows)


def write_orders_parquet(spark: SparkSession, raw_dir: Path, day: str, rows: int) -> SampleFile:
    """engineering/sales/orders/date=<day>/orders_<day>.parquet, one Parquet file written by Spark."""
    key = f"engineering/sales/orders/date={day}/orders_{day}.parquet"
    target = raw_dir / key
    if target.exists():
        return SampleFile(key, rows)
    statuses = ", ".join(f"'{status}'" for status in ORDER_STATUSES)
    frame = spark.range(rows).selectExpr(
        f"CAST({day} AS BIGINT) * 100000 + id AS order_id",
        f"CAST({int(day) % 10_000} AS BIGINT) * 100000 + (id * 7919) % {max(rows, 1)} AS customer_id",
        "ROUND(((id * 2654435761) % 100000) / 100.0, 2) AS amount",
        f"element_at(array({statuses}), CAST(id % {len(ORDER_STATUSES)} AS INT) + 1) AS status",
    )
    write_single_parquet(frame, target)
    return SampleFile(key, rows)


def write_single_parquet(frame: DataFrame, target: Path) -> None:
    """Write ``frame`` as exactly one Parquet file at ``target`` (Spark itself writes a folder)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent.parent) as scratch:
        frame.coalesce(1).write.mode("overwrite").parquet(scratch + "/out")
        (part,) = [p for p in Path(scratch, "out").iterdir() if p.name.startswith("part-")]
        shutil.move(str(part), target)
