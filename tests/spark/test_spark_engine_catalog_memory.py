"""What SparkEngine remembers about the catalog (table schemas, partitions it registered or moved) is never
stale: a file landing in a partition that was registered earlier is read, a table dropped and created
again gets its partition registered again, a changed table is described as it is now, and a partition
moved or dropped by another writer is published where the statement says, or not at all."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from lakeline.engines.base import QueryFailed
from lakeline.engines.spark import SparkEngine
from lakeline.runtimes.embedded.sample import write_single_parquet
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


def _quoted(name: str) -> str:
    return "`" + name.replace(".", "`.`") + "`"


def _run_folder(spark_engine: SparkEngine, folder: Path, rows: int) -> str:
    spark_engine.session.range(rows).selectExpr("id").write.parquet(local_root(folder))
    return local_root(folder)


def test_a_partition_added_then_published_is_where_the_last_statement_put_it(
    spark_engine: SparkEngine, tmp_path: Path
) -> None:
    name, _ = _table(spark_engine, tmp_path)
    one, two, three = (
        _run_folder(spark_engine, tmp_path / "d=1" / run, rows) for run, rows in (("a", 3), ("b", 5), ("c", 7))
    )
    add = f"ALTER TABLE {_quoted(name)} ADD IF NOT EXISTS PARTITION (`d`='1') LOCATION "
    move = f"ALTER TABLE {_quoted(name)} PARTITION (`d`='1') SET LOCATION "
    spark_engine.execute(add + f"'{one}'")
    spark_engine.execute(move + f"'{one}'")  # where the ADD just put it: nothing to write
    assert _count(spark_engine, name) == 3
    spark_engine.execute(add + f"'{two}'")  # there already: left where it is, as IF NOT EXISTS says
    assert _count(spark_engine, name) == 3
    spark_engine.execute(move + f"'{two}'")
    assert _count(spark_engine, name) == 5
    # Moved behind the engine's back (another writer): the next publish still lands where it says.
    spark_engine.session.sql(f"ALTER TABLE {name} PARTITION (d='1') SET LOCATION '{three}'")
    spark_engine.execute(move + f"'{one}'")
    assert _count(spark_engine, name) == 3
    assert spark_engine.partition_location(*name.split("."), {"d": "1"}) == one
    # The next run's engine (a new process) knows nothing of it: its ADD leaves it where it is, and the
    # publish after it moves it.
    fresh = SparkEngine(spark_engine.session)
    fresh.execute(add + f"'{two}'")
    assert _count(fresh, name) == 3
    fresh.execute(move + f"'{two}'")
    assert _count(fresh, name) == 5


def test_a_partition_dropped_behind_the_engine_is_not_published_into_thin_air(
    spark_engine: SparkEngine, tmp_path: Path
) -> None:
    name, _ = _table(spark_engine, tmp_path)
    one, two = (_run_folder(spark_engine, tmp_path / "d=1" / run, rows) for run, rows in (("a", 3), ("b", 5)))
    move = f"ALTER TABLE {_quoted(name)} PARTITION (`d`='1') SET LOCATION "
    spark_engine.execute(f"ALTER TABLE {_quoted(name)} ADD IF NOT EXISTS PARTITION (`d`='1') LOCATION '{one}'")
    spark_engine.execute(move + f"'{two}'")
    spark_engine.session.sql(f"ALTER TABLE {name} DROP PARTITION (d='1')")
    with pytest.raises(QueryFailed, match=r"PARTITIONS_NOT_FOUND|NoSuchObjectException|not found|does not exist"):
        spark_engine.execute(move + f"'{one}'")
    assert spark_engine.session.sql(f"SHOW PARTITIONS {name}").collect() == []
    # Added again, it is published again.
    spark_engine.session.sql(f"ALTER TABLE {name} ADD PARTITION (d='1') LOCATION '{two}'")
    spark_engine.execute(move + f"'{one}'")
    assert _count(spark_engine, name) == 3


def test_a_partition_of_a_typed_column_is_added_as_spark_stores_it(spark_engine: SparkEngine, tmp_path: Path) -> None:
    name = f"memo.t{next(_tables)}"
    spark_engine.session.sql("CREATE DATABASE IF NOT EXISTS memo")
    spark_engine.session.sql(
        f"CREATE TABLE {name} (id BIGINT, n INT) USING parquet PARTITIONED BY (n) LOCATION '{local_root(tmp_path)}'"
    )
    one = _run_folder(spark_engine, tmp_path / "n=1" / "a", 4)
    # Spark casts '01' to the column's type and stores n=1; the catalog API would store '01' as written.
    spark_engine.execute(f"ALTER TABLE {_quoted(name)} ADD IF NOT EXISTS PARTITION (`n`='01') LOCATION '{one}'")
    assert spark_engine.execute(f"SELECT count(*) FROM {name} WHERE n = 1").rows == [(4,)]
    assert [row[0] for row in spark_engine.session.sql(f"SHOW PARTITIONS {name}").collect()] == ["n=1"]


def test_a_partition_of_a_char_column_is_added_as_spark_pads_it(spark_engine: SparkEngine, tmp_path: Path) -> None:
    name = f"memo.t{next(_tables)}"
    spark_engine.session.sql("CREATE DATABASE IF NOT EXISTS memo")
    spark_engine.session.sql(
        f"CREATE TABLE {name} (id BIGINT, code CHAR(2)) USING parquet PARTITIONED BY (code) "
        f"LOCATION '{local_root(tmp_path)}'"
    )
    one = _run_folder(spark_engine, tmp_path / "code=a" / "run", 4)
    # Spark stores 'a ' (padded to CHAR(2)); the catalog API would store 'a', which SQL then cannot find.
    spark_engine.execute(f"ALTER TABLE {_quoted(name)} ADD IF NOT EXISTS PARTITION (`code`='a') LOCATION '{one}'")
    assert spark_engine.partition_location(*name.split("."), {"code": "a"}) == one
    assert [row[0] for row in spark_engine.session.sql(f"SHOW PARTITIONS {name}").collect()] == ["code=a "]
