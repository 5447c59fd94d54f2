"""SparkEngine writes a CTAS with its own location before (and mostly instead of) registering it, and
publishes a partition through the catalog API. Both must behave as the SQL they stand for: the same
files, the same errors, and a table that any later statement can read."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from lakeline.engines.base import QueryFailed
from lakeline.engines.spark import SparkEngine
from lakeline.storage import local_root

_names = itertools.count()


def _ctas(
    table: str, location: Path, *, buckets: int = 3, select: str = "SELECT id, id % 7 AS k FROM range(100)"
) -> str:
    return (
        f"CREATE TABLE {table} WITH (format = 'PARQUET', external_location = '{local_root(location)}', "
        f"bucketed_by = ARRAY['id'], bucket_count = {buckets}, write_compression = 'SNAPPY') AS {select}"
    )


@pytest.fixture
def database(spark_engine: SparkEngine) -> str:
    spark_engine.session.sql("CREATE DATABASE IF NOT EXISTS ctas")
    return "ctas"


def _files(location: Path) -> list[str]:
    return sorted(p.name for p in location.iterdir() if not p.name.startswith(("_", ".")))


def test_a_ctas_writes_one_file_per_bucket_and_registers_the_table_only_when_read(
    spark_engine: SparkEngine, database: str, tmp_path: Path
) -> None:
    table = f"{database}.t{next(_names)}"
    location = tmp_path / "t"
    spark_engine.execute(_ctas(table, location, buckets=3))

    files = _files(location)
    assert len(files) == 3
    assert sorted(name.split("_")[-1].split(".")[0] for name in files) == ["00000", "00001", "00002"]
    assert not spark_engine.session.catalog.tableExists(table)  # not registered: nothing read it yet
    assert spark_engine.table_exists(*table.split("."))

    rows = spark_engine.execute(f"SELECT count(*), count(DISTINCT id) FROM {table}").rows
    assert rows == [(100, 100)]
    assert spark_engine.session.catalog.tableExists(table)
    assert [c.name for c in spark_engine.describe_table(*table.split(".")).columns] == ["id", "k"]


def test_each_bucket_file_holds_the_rows_spark_buckets_there(
    spark_engine: SparkEngine, database: str, tmp_path: Path
) -> None:
    table = f"{database}.t{next(_names)}"
    location = tmp_path / "t"
    spark_engine.execute(_ctas(table, location, buckets=4))
    for name in _files(location):
        bucket = int(name.split("_")[-1].split(".")[0])
        wrong = spark_engine.session.read.parquet(local_root(location / name)).where(f"pmod(hash(id), 4) != {bucket}")
        assert wrong.count() == 0, name


def test_a_ctas_table_dropped_unread_leaves_its_files_and_no_catalog_entry(
    spark_engine: SparkEngine, database: str, tmp_path: Path
) -> None:
    table = f"{database}.t{next(_names)}"
    location = tmp_path / "t"
    spark_engine.execute(_ctas(table, location, buckets=2))
    spark_engine.execute(f"DROP TABLE IF EXISTS {table}")
    assert not spark_engine.table_exists(*table.split("."))
    assert len(_files(location)) == 2
    # The name is free again, as after Spark's own DROP TABLE of an external table.
    spark_engine.execute(_ctas(table, tmp_path / "again", buckets=2))
    assert spark_engine.execute(f"SELECT count(*) FROM {table}").rows == [(100,)]


def test_an_empty_result_still_gives_one_file_per_bucket(
    spark_engine: SparkEngine, database: str, tmp_path: Path
) -> None:
    table = f"{database}.t{next(_names)}"
    location = tmp_path / "t"
    spark_engine.execute(_ctas(table, location, buckets=2, select="SELECT id, id AS k FROM range(10) WHERE id < 0"))
    assert len(_files(location)) == 2
    assert spark_engine.execute(f"SELECT count(*) FROM {table}").rows == [(0,)]


def test_a_ctas_refuses_a_taken_name_and_a_location_with_files(
    spark_engine: SparkEngine, database: str, tmp_path: Path
) -> None:
    table = f"{database}.t{next(_names)}"
    spark_engine.execute(_ctas(table, tmp_path / "a"))
    with pytest.raises(QueryFailed, match="TABLE_OR_VIEW_ALREADY_EXISTS"):
        spark_engine.execute(_ctas(table, tmp_path / "b"))  # written, not registered: still taken
    spark_engine.execute(f"SELECT * FROM {table}")
    with pytest.raises(QueryFailed, match="TABLE_OR_VIEW_ALREADY_EXISTS"):
        spark_engine.execute(_ctas(table, tmp_path / "c"))  # registered
    with pytest.raises(QueryFailed, match="non-empty directory"):
        spark_engine.execute(_ctas(f"{database}.t{next(_names)}", tmp_path / "a"))
    assert not (tmp_path / "b").exists() and not (tmp_path / "c").exists()


def test_a_statement_writing_into_a_written_table_finds_it(
    spark_engine: SparkEngine, database: str, tmp_path: Path
) -> None:
    """Stage B's steps INSERT into the temp table their CTAS made."""
    table = f"{database}.t{next(_names)}"
    spark_engine.execute(_ctas(table, tmp_path / "t", buckets=1))
    spark_engine.execute(f"INSERT INTO {table} SELECT id, 0 AS k FROM range(100, 105)")
    assert spark_engine.execute(f"SELECT count(*) FROM {table}").rows == [(105,)]
    assert spark_engine.session.catalog.tableExists(table)


def test_a_partition_published_through_the_catalog_is_read_at_its_new_location(
    spark_engine: SparkEngine, database: str, tmp_path: Path
) -> None:
    table = f"{database}.p{next(_names)}"
    spark_engine.session.sql(
        f"CREATE TABLE {table} (id BIGINT, d STRING) USING parquet PARTITIONED BY (d) "
        f"LOCATION '{local_root(tmp_path / 'p')}'"
    )
    for run, rows in (("one", 3), ("two", 5)):
        spark_engine.session.range(rows).write.parquet(local_root(tmp_path / "p" / "d=1" / run))
    name = "`" + table.replace(".", "`.`") + "`"
    spark_engine.execute(
        f"ALTER TABLE {name} ADD IF NOT EXISTS PARTITION (`d`='1') LOCATION "
        f"'{local_root(tmp_path / 'p' / 'd=1' / 'one')}'"
    )
    assert spark_engine.execute(f"SELECT count(*) FROM {table} WHERE d = '1'").rows == [(3,)]
    spark_engine.execute(
        f"ALTER TABLE {name} PARTITION (`d`='1') SET LOCATION '{local_root(tmp_path / 'p' / 'd=1' / 'two')}'"
    )
    assert spark_engine.execute(f"SELECT count(*) FROM {table} WHERE d = '1'").rows == [(5,)]
    assert spark_engine.partition_location(*table.split("."), {"d": "1"}) == local_root(tmp_path / "p" / "d=1" / "two")
    # A partition that does not exist: Spark's own command runs, and says so.
    with pytest.raises(QueryFailed, match=r"PARTITIONS_NOT_FOUND|not found|does not exist"):
        spark_engine.execute(f"ALTER TABLE {name} PARTITION (`d`='2') SET LOCATION '{local_root(tmp_path / 'x')}'")


def test_padding_files_have_the_table_compression(spark_engine: SparkEngine, database: str, tmp_path: Path) -> None:
    table = f"{database}.t{next(_names)}"
    location = tmp_path / "t"
    ctas = _ctas(table, location, buckets=3, select="SELECT id, id AS k FROM range(10) WHERE id < 0")
    spark_engine.execute(ctas.replace("'SNAPPY'", "'GZIP'"))
    files = _files(location)
    assert len(files) == 3
    assert all(name.endswith(".gz.parquet") for name in files), files
