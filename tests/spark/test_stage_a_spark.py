"""Stage A on real embedded Spark with real raw files: rows, file counts, redelivery and failure."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from lakeline.engines.base import QueryFailed
from lakeline.engines.spark import SparkEngine
from lakeline.local.sample import write_single_parquet
from lakeline.local.stage_a import partition_row_count, run_local_arrival
from lakeline.local.workspace import Workspace
from lakeline.settings import PipelineSettings, TableSettings
from lakeline.storage import LocalObjectStore, local_root

_environments = itertools.count()


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace.at(tmp_path)


@pytest.fixture
def settings(workspace: Workspace) -> PipelineSettings:
    # A fresh environment suffix per test gives each test its own databases in the shared metastore.
    return workspace.settings(environment=f"sa{next(_environments)}")


def write_orders(engine: SparkEngine, workspace: Workspace, key: str, first_id: int, rows: int) -> str:
    frame = engine.session.range(first_id, first_id + rows).selectExpr(
        "id AS order_id", "id % 13 AS customer_id", "CAST(id * 1.5 AS DOUBLE) AS amount"
    )
    write_single_parquet(frame, workspace.raw_dir / key)
    return key


def stage_files(workspace: Workspace, relative: str) -> list[str]:
    return LocalObjectStore().list_data_files(local_root(workspace.stage_dir / relative))


def test_arrivals_accumulate_the_whole_raw_partition_in_bucket_count_files(
    spark_engine: SparkEngine, workspace: Workspace, settings: PipelineSettings
) -> None:
    settings = settings.model_copy(update={"default_table": TableSettings(bucketed_by=("order_id",), bucket_count=3)})
    first = write_orders(spark_engine, workspace, "eng/sales/orders/date=20220120/a.parquet", 0, 1000)
    result = run_local_arrival(spark_engine, workspace, first, settings)
    stage_db = settings.stage_database("eng", "sales")
    assert partition_row_count(spark_engine, stage_db, "orders", {"date": "20220120"}) == 1000
    assert len(result.data_files) == 3

    second = write_orders(spark_engine, workspace, "eng/sales/orders/date=20220120/b.parquet", 1000, 500)
    result = run_local_arrival(spark_engine, workspace, second, settings)
    assert partition_row_count(spark_engine, stage_db, "orders", {"date": "20220120"}) == 1500
    assert len(result.data_files) == 3
    assert len(result.superseded_deleted) == 1
    # Only the current run's files remain in the stage partition.
    assert stage_files(workspace, "eng/sales/orders/date=20220120") == result.data_files

    # Another partition is independent.
    third = write_orders(spark_engine, workspace, "eng/sales/orders/date=20220121/a.parquet", 5000, 200)
    run_local_arrival(spark_engine, workspace, third, settings)
    assert partition_row_count(spark_engine, stage_db, "orders", {"date": "20220121"}) == 200
    assert partition_row_count(spark_engine, stage_db, "orders", {}) == 1700


def test_redelivery_gives_the_same_rows_not_double(
    spark_engine: SparkEngine, workspace: Workspace, settings: PipelineSettings
) -> None:
    key = write_orders(spark_engine, workspace, "eng/sales/orders/date=20220120/a.parquet", 0, 300)
    stage_db = settings.stage_database("eng", "sales")
    first = run_local_arrival(spark_engine, workspace, key, settings)
    before = sorted(spark_engine.execute(f"SELECT order_id, amount FROM {stage_db}.orders").rows)
    second = run_local_arrival(spark_engine, workspace, key, settings)
    after = sorted(spark_engine.execute(f"SELECT order_id, amount FROM {stage_db}.orders").rows)
    assert before == after
    assert len(after) == 300
    assert first.plan.target_location != second.plan.target_location
    assert len(second.data_files) == 1
    assert not Path(first.plan.target_location.removeprefix("file://")).exists()


def test_csv_arrival_into_an_unpartitioned_table(
    spark_engine: SparkEngine, workspace: Workspace, settings: PipelineSettings
) -> None:
    key = "eng/crm/countries/countries.csv"
    path = workspace.raw_dir / key
    path.parent.mkdir(parents=True)
    path.write_text("code,name,population\nes,Spain,48\nfr,France,68\nde,Germany,84\n")
    result = run_local_arrival(spark_engine, workspace, key, settings)
    stage_db = settings.stage_database("eng", "crm")
    rows = spark_engine.execute(f"SELECT code, name, population FROM {stage_db}.countries ORDER BY code").rows
    assert rows == [("de", "Germany", 84), ("es", "Spain", 48), ("fr", "France", 68)]
    assert len(result.data_files) == 1
    assert result.plan.register_raw is None


def test_multi_level_partitions(spark_engine: SparkEngine, workspace: Workspace, settings: PipelineSettings) -> None:
    key = write_orders(spark_engine, workspace, "eng/sales/orders/year=2022/month=01/a.parquet", 0, 100)
    run_local_arrival(spark_engine, workspace, key, settings)
    stage_db = settings.stage_database("eng", "sales")
    schema = spark_engine.describe_table(stage_db, "orders")
    assert schema.partition_names == ["year", "month"]
    assert partition_row_count(spark_engine, stage_db, "orders", {"year": "2022", "month": "01"}) == 100


def test_failing_ctas_drops_the_temp_table_and_keeps_the_previous_partition(
    spark_engine: SparkEngine, workspace: Workspace, settings: PipelineSettings
) -> None:
    key = write_orders(spark_engine, workspace, "eng/sales/orders/date=20220120/a.parquet", 0, 400)
    good = run_local_arrival(spark_engine, workspace, key, settings)
    stage_db = settings.stage_database("eng", "sales")
    # A corrupt file lands in the same partition: reading the partition fails inside the CTAS.
    corrupt = "eng/sales/orders/date=20220120/broken.parquet"
    (workspace.raw_dir / corrupt).write_bytes(b"this is not parquet")
    with pytest.raises(QueryFailed) as failure:
        run_local_arrival(spark_engine, workspace, corrupt, settings)
    failed_plan_location = Path(
        failure.value.sql.split("external_location = '")[1].split("'")[0].removeprefix("file://")
    )
    temp_tables = [
        t.name for t in spark_engine.session.catalog.listTables(stage_db) if t.name.startswith("lakeline_tmp")
    ]
    assert temp_tables == []
    assert not failed_plan_location.exists()
    assert partition_row_count(spark_engine, stage_db, "orders", {"date": "20220120"}) == 400
    assert stage_files(workspace, "eng/sales/orders/date=20220120") == good.data_files


def test_a_parquet_file_with_a_mismatched_column_type_fails_naming_the_file_column_and_types(
    spark_engine: SparkEngine, workspace: Workspace, settings: PipelineSettings
) -> None:
    key = write_orders(spark_engine, workspace, "eng/sales/orders/date=20220120/a.parquet", 0, 10)
    run_local_arrival(spark_engine, workspace, key, settings)
    bad = "eng/sales/orders/date=20220120/b.parquet"
    frame = spark_engine.session.range(1).selectExpr("id AS order_id", "id AS customer_id", "'lots' AS amount")
    write_single_parquet(frame, workspace.raw_dir / bad)
    with pytest.raises(QueryFailed) as failure:
        run_local_arrival(spark_engine, workspace, bad, settings)
    reason = failure.value.reason
    # Not Py4J's "An error occurred while calling o43.sql.": the cause, in one line, without a Java stack.
    assert str(failure.value) == f"Spark statement failed: {reason}"
    assert "\n" not in reason and "\tat " not in reason and "An error occurred" not in reason, reason
    assert "PARQUET_COLUMN_DATA_TYPE_MISMATCH" in reason and f"{workspace.raw_dir}/{bad}" in reason, reason
    assert "[amount]" in reason and "double" in reason and "BINARY" in reason, reason


def test_bucketed_ctas_writes_exactly_bucket_count_files(spark_engine: SparkEngine, tmp_path: Path) -> None:
    spark_engine.execute("CREATE DATABASE IF NOT EXISTS ctas_files_test")
    spark_engine.session.range(10_000).selectExpr("id", "id % 97 AS k").createOrReplaceTempView("ctas_source")
    for count in (1, 4, 7):
        location = local_root(tmp_path / f"out{count}")
        spark_engine.execute(
            f"CREATE TABLE ctas_files_test.t{count} WITH (format = 'PARQUET', external_location = '{location}', "
            f"bucketed_by = ARRAY['id'], bucket_count = {count}) AS SELECT id, k FROM ctas_source"
        )
        spark_engine.execute(f"DROP TABLE ctas_files_test.t{count}")
        assert len(LocalObjectStore().list_data_files(location)) == count
        assert (tmp_path / f"out{count}").exists(), "DROP TABLE must keep the files of a table with LOCATION"


def test_empty_buckets_still_get_their_file(spark_engine: SparkEngine, tmp_path: Path) -> None:
    spark_engine.execute("CREATE DATABASE IF NOT EXISTS ctas_files_test")
    spark_engine.session.range(3).selectExpr("id", "'x' AS name").createOrReplaceTempView("three_rows")
    location = local_root(tmp_path / "few")
    spark_engine.execute(
        f"CREATE TABLE ctas_files_test.few WITH (format = 'PARQUET', external_location = '{location}', "
        "bucketed_by = ARRAY['id'], bucket_count = 8) AS SELECT id, name FROM three_rows"
    )
    spark_engine.execute("DROP TABLE ctas_files_test.few")
    files = LocalObjectStore().list_data_files(location)
    assert len(files) == 8, "three rows, eight buckets: five empty bucket files"
    rows = spark_engine.session.read.parquet(location.removeprefix("file://")).collect()
    assert sorted(row["id"] for row in rows) == [0, 1, 2]


def test_an_empty_result_still_writes_bucket_count_files(spark_engine: SparkEngine, tmp_path: Path) -> None:
    spark_engine.execute("CREATE DATABASE IF NOT EXISTS ctas_files_test")
    spark_engine.session.range(3).selectExpr("id", "'x' AS name").createOrReplaceTempView("three_rows")
    location = local_root(tmp_path / "none")
    spark_engine.execute(
        f"CREATE TABLE ctas_files_test.none WITH (format = 'PARQUET', external_location = '{location}', "
        "bucketed_by = ARRAY['id'], bucket_count = 2) AS SELECT id, name FROM three_rows WHERE id < 0"
    )
    spark_engine.execute("DROP TABLE ctas_files_test.none")
    assert len(LocalObjectStore().list_data_files(location)) == 2


def test_a_failed_query_is_one_error_and_no_logged_java_stack(
    spark_engine: SparkEngine, capfd: pytest.CaptureFixture[str]
) -> None:
    capfd.readouterr()
    with pytest.raises(QueryFailed) as failure:
        spark_engine.execute("SELECT no_such_column FROM (SELECT 1 AS one)")
    assert "UNRESOLVED_COLUMN" in failure.value.reason
    # PySpark would log the error with its Java stack (~8 KB of JSON on stderr) before raising it.
    printed = capfd.readouterr()
    assert "QueryContextLogger" not in printed.err + printed.out and "\tat org.apache" not in printed.err
