"""What SparkEngine remembers about the catalog (table schemas, partitions it registered) is never stale:
a file landing in a partition that was registered earlier is read, a table dropped and created again
gets its partition registered again, and a changed table is described as it is now."""

from __future__ import annotations

import itertools
from pathlib import Path

from lakeline.engines.spark import SparkEngine
from lakeline.local.sample import write_single_parquet
from lakeline.storage import local_root

_tables = itertools.count()


def _table(spark_engine: SparkEngine, folder: Path) -> tuple[str, str]:
    name = f"memo.t{next(_tables)}"
    spark_engine.session.sql("CREATE DATABASE IF NOT EXISTS memo")
    create = (
        f"CREATE TABLE {name} (id BIGINT, d STRING) USING parquet PARTITIONED BY (d) LOCATION '{local_root(folder)}'"
    )
    spark_engine.session.sql(create)
    return name, create


def _write(spark_engine: SparkEngine, path: Path, first: int, rows: int) -> None:
    write_single_parquet(spark_engine.session.range(first, first + rows).selectExpr("id"), path)


def _count(spark_engine: SparkEngine, name: str) -> int:
    return int(spark_engine.execute(f"SELECT count(*) FROM {name} WHERE d = '1'").rows[0][0])


def test_a_file_landing_in_a_registered_partition_is_read(spark_engine: SparkEngine, tmp_path: Path) -> None:
    name, _ = _table(spark_engine, tmp_path)
    add = f"ALTER TABLE {name} ADD IF NOT EXISTS PARTITION (d = '1')"
    _write(spark_engine, tmp_path / "d=1" / "a.parquet", 0, 10)
    spark_engine.execute(add)
    assert _count(spark_engine, name) == 10

    _write(spark_engine, tmp_path / "d=1" / "b.parquet", 10, 5)
    spark_engine.execute(add)  # remembered: not sent to the metastore again
    assert _count(spark_engine, name) == 15


def test_a_table_dropped_and_created_again_gets_its_partition_again(spark_engine: SparkEngine, tmp_path: Path) -> None:
    name, create = _table(spark_engine, tmp_path)
    add = f"ALTER TABLE {name} ADD IF NOT EXISTS PARTITION (d = '1')"
    _write(spark_engine, tmp_path / "d=1" / "a.parquet", 0, 10)
    spark_engine.execute(add)
    spark_engine.execute(f"DROP TABLE {name}")
    spark_engine.session.sql(create)
    spark_engine.execute(add)
    assert _count(spark_engine, name) == 10


def test_a_changed_table_is_described_as_it_is_now(spark_engine: SparkEngine, tmp_path: Path) -> None:
    name, _ = _table(spark_engine, tmp_path)
    database, table = name.split(".")
    assert spark_engine.describe_table(database, table).column_names == ["id"]
    spark_engine.execute(f"ALTER TABLE {name} ADD COLUMNS (amount DOUBLE)")
    assert spark_engine.describe_table(database, table).column_names == ["id", "amount"]
    spark_engine.execute(f"ALTER TABLE {name} SET LOCATION '{local_root(tmp_path / 'moved')}'")
    location = spark_engine.describe_table(database, table).location
    assert location is not None and location.rstrip("/").endswith("moved")
