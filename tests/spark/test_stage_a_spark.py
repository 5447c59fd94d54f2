"""Stage A on real embedded Spark with real raw files, one arrival at a time as ``lakeline stage-a run``
runs it (``lakeline.runtimes.embedded.single_stage``: the embedded runtime's leased protocol): rows, file counts,
redelivery and failure."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lakeline.commits import commit_key, parse_retired
from lakeline.dependencies.model import parse_dependency_item
from lakeline.engines.base import QueryFailed, QueryResult
from lakeline.engines.spark import SparkEngine
from lakeline.errors import InvalidInputError
from lakeline.glue_jobs.stage_job import run_job
from lakeline.project.catalog import ensure_tables
from lakeline.project.workspace import Workspace
from lakeline.runtimes.embedded.cloud import LocalCloud
from lakeline.runtimes.embedded.event_flow import EventFlow
from lakeline.runtimes.embedded.handler_caches import reset_handler_caches
from lakeline.runtimes.embedded.sample import write_single_parquet
from lakeline.runtimes.embedded.single_stage import ArrivalRun, run_arrival
from lakeline.runtimes.embedded.stage_a import partition_row_count
from lakeline.settings import PipelineSettings, TableSettings
from lakeline.storage import LocalObjectStore, local_root
from stage_a.keys import parse_raw_key
from stage_a.plan import new_run_token, plan_stage_a
from tests.rehearsal.support import daily_item

_environments = itertools.count()

Arrive = Callable[[str], ArrivalRun]


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace.at(tmp_path)


@pytest.fixture
def settings(workspace: Workspace) -> PipelineSettings:
    # A fresh environment suffix per test gives each test its own databases in the shared metastore.
    return workspace.settings(environment=f"sa{next(_environments)}")


@pytest.fixture
def cloud() -> Iterator[LocalCloud]:
    environment = dict(os.environ)
    reset_handler_caches()
    started = LocalCloud.start()
    try:
        yield started
    finally:
        started.stop()
        reset_handler_caches()
        os.environ.clear()
        os.environ.update(environment)


def arrivals(cloud: LocalCloud, engine: SparkEngine, workspace: Workspace, settings: PipelineSettings) -> Arrive:
    """``lakeline stage-a run``'s run of one arrival, on the shared session and this test's local cloud."""
    flow = EventFlow(cloud, engine, workspace, settings, workspace.root / "queries")
    return lambda key: run_arrival(flow, key)


@pytest.fixture
def arrive(cloud: LocalCloud, spark_engine: SparkEngine, workspace: Workspace, settings: PipelineSettings) -> Arrive:
    return arrivals(cloud, spark_engine, workspace, settings)


def write_orders(engine: SparkEngine, workspace: Workspace, key: str, first_id: int, rows: int) -> str:
    frame = engine.session.range(first_id, first_id + rows).selectExpr(
        "id AS order_id", "id % 13 AS customer_id", "CAST(id * 1.5 AS DOUBLE) AS amount"
    )
    write_single_parquet(frame, workspace.raw_dir / key)
    return key


def stage_files(workspace: Workspace, relative: str) -> list[str]:
    return LocalObjectStore().list_data_files(local_root(workspace.stage_dir / relative))


def temp_tables(engine: SparkEngine, database: str) -> list[str]:
    return [t.name for t in engine.session.catalog.listTables(database) if t.name.startswith("lakeline_tmp")]


def test_arrivals_accumulate_the_whole_raw_partition_in_bucket_count_files(
    cloud: LocalCloud, spark_engine: SparkEngine, workspace: Workspace, settings: PipelineSettings
) -> None:
    table = TableSettings(bucketed_by=("order_id",), bucket_count=3, write_policy="rewrite")
    settings = settings.model_copy(update={"default_table": table})
    arrive = arrivals(cloud, spark_engine, workspace, settings)
    first_key = write_orders(spark_engine, workspace, "eng/sales/orders/date=20220120/a.parquet", 0, 1000)
    first = arrive(first_key)
    stage_db = settings.stage_database("eng", "sales")
    assert partition_row_count(spark_engine, stage_db, "orders", {"date": "20220120"}) == 1000
    assert first.rows == 1000 and len(first.files) == 3 and first.plan is not None

    second = arrive(write_orders(spark_engine, workspace, "eng/sales/orders/date=20220120/b.parquet", 1000, 500))
    assert partition_row_count(spark_engine, stage_db, "orders", {"date": "20220120"}) == 1500
    assert second.rows == 1500 and len(second.files) == 3 and second.location != first.location
    assert spark_engine.partition_location(stage_db, "orders", {"date": "20220120"}) == second.location
    # The version it replaced is retired, not deleted at once: a query planned before the swap may still
    # read it; the post-update's sweep deletes it past its grace period.
    assert second.superseded_deleted == []
    state = EventFlow(cloud, spark_engine, workspace, settings, workspace.root).commits.read(
        commit_key(f"{stage_db}.orders", "date=20220120")
    )
    assert [parse_retired(entry)[1].rstrip("/") for entry in state.retired] == [str(first.location).rstrip("/")]
    assert set(first.files) <= set(stage_files(workspace, "eng/sales/orders/date=20220120"))

    # Another partition is independent.
    arrive(write_orders(spark_engine, workspace, "eng/sales/orders/date=20220121/a.parquet", 5000, 200))
    assert partition_row_count(spark_engine, stage_db, "orders", {"date": "20220121"}) == 200
    assert partition_row_count(spark_engine, stage_db, "orders", {}) == 1700


def test_redelivery_is_a_no_op(
    arrive: Arrive, spark_engine: SparkEngine, workspace: Workspace, settings: PipelineSettings
) -> None:
    key = write_orders(spark_engine, workspace, "eng/sales/orders/date=20220120/a.parquet", 0, 300)
    stage_db = settings.stage_database("eng", "sales")
    first = arrive(key)
    before = sorted(spark_engine.execute(f"SELECT order_id, amount FROM {stage_db}.orders").rows)
    second = arrive(key)
    after = sorted(spark_engine.execute(f"SELECT order_id, amount FROM {stage_db}.orders").rows)
    assert before == after
    assert len(after) == 300
    # The commit's applied ids know the file: nothing runs, the published version stays.
    assert first.plan is not None and second.plan is None and second.to_dict()["duplicate"] is True
    assert second.location == first.location and second.files == first.files and second.rows == 300


def test_csv_arrival_into_an_unpartitioned_table(
    arrive: Arrive, spark_engine: SparkEngine, workspace: Workspace, settings: PipelineSettings
) -> None:
    key = "eng/crm/countries/countries.csv"
    path = workspace.raw_dir / key
    path.parent.mkdir(parents=True)
    path.write_text("code,name,population\nes,Spain,48\nfr,France,68\nde,Germany,84\n")
    result = arrive(key)
    stage_db = settings.stage_database("eng", "crm")
    rows = spark_engine.execute(f"SELECT code, name, population FROM {stage_db}.countries ORDER BY code").rows
    assert rows == [("de", "Germany", 84), ("es", "Spain", 48), ("fr", "France", 68)]
    assert result.rows == 3 and len(result.files) == 1
    assert result.plan is not None and result.plan.register_raw is None


def test_multi_level_partitions(
    arrive: Arrive, spark_engine: SparkEngine, workspace: Workspace, settings: PipelineSettings
) -> None:
    arrive(write_orders(spark_engine, workspace, "eng/sales/orders/year=2022/month=01/a.parquet", 0, 100))
    stage_db = settings.stage_database("eng", "sales")
    schema = spark_engine.describe_table(stage_db, "orders")
    assert schema.partition_names == ["year", "month"]
    assert partition_row_count(spark_engine, stage_db, "orders", {"year": "2022", "month": "01"}) == 100


def test_a_corrupt_file_is_refused_and_the_partition_keeps_its_version(
    arrive: Arrive, spark_engine: SparkEngine, workspace: Workspace, settings: PipelineSettings
) -> None:
    key = write_orders(spark_engine, workspace, "eng/sales/orders/date=20220120/a.parquet", 0, 400)
    good = arrive(key)
    stage_db = settings.stage_database("eng", "sales")
    # A corrupt file lands in the same partition: refused at the door, before any SQL, with the reason.
    corrupt = "eng/sales/orders/date=20220120/broken.parquet"
    (workspace.raw_dir / corrupt).write_bytes(b"this is not parquet")
    with pytest.raises(InvalidInputError, match=r"broken\.parquet"):
        arrive(corrupt)
    assert temp_tables(spark_engine, stage_db) == []
    assert partition_row_count(spark_engine, stage_db, "orders", {"date": "20220120"}) == 400
    assert spark_engine.partition_location(stage_db, "orders", {"date": "20220120"}) == good.location
    assert LocalObjectStore().list_data_files(str(good.location)) == good.files


def test_a_parquet_file_with_a_mismatched_column_type_is_refused_naming_the_file_column_and_types(
    arrive: Arrive, spark_engine: SparkEngine, workspace: Workspace, settings: PipelineSettings
) -> None:
    good = arrive(write_orders(spark_engine, workspace, "eng/sales/orders/date=20220120/a.parquet", 0, 10))
    bad = "eng/sales/orders/date=20220120/b.parquet"
    frame = spark_engine.session.range(1).selectExpr("id AS order_id", "id AS customer_id", "'lots' AS amount")
    write_single_parquet(frame, workspace.raw_dir / bad)
    with pytest.raises(InvalidInputError) as refused:
        arrive(bad)
    reason = str(refused.value)
    assert "\n" not in reason and "\tat " not in reason and "An error occurred" not in reason, reason
    assert f"{workspace.raw_dir}/{bad}" in reason and "column amount is string" in reason, reason
    assert "has double" in reason, reason
    stage_db = settings.stage_database("eng", "sales")
    assert partition_row_count(spark_engine, stage_db, "orders", {"date": "20220120"}) == 10
    assert spark_engine.partition_location(stage_db, "orders", {"date": "20220120"}) == good.location


class CtasFailsAfterWriting(SparkEngine):
    """The shared session, with a fault: the run's CTAS writes its files, then reports failure."""

    def execute(self, sql: str, *, database: str | None = None) -> QueryResult:
        result = super().execute(sql, database=database)
        if sql.startswith("CREATE TABLE") and "lakeline_tmp" in sql and "external_location" in sql:
            raise QueryFailed("Spark statement failed: injected after the CTAS wrote", sql=sql, reason="injected")
        return result


def test_failing_ctas_deletes_its_output_drops_the_temp_table_and_keeps_the_previous_version(
    cloud: LocalCloud, spark_engine: SparkEngine, workspace: Workspace, settings: PipelineSettings
) -> None:
    good = arrivals(cloud, spark_engine, workspace, settings)(
        write_orders(spark_engine, workspace, "eng/sales/orders/date=20220120/a.parquet", 0, 400)
    )
    partition_dir = workspace.stage_dir / "eng/sales/orders/date=20220120"
    before = sorted(path.name for path in partition_dir.iterdir())
    faulty = arrivals(cloud, CtasFailsAfterWriting(spark_engine.session), workspace, settings)
    second = "eng/sales/orders/date=20220120/b.parquet"
    failed = faulty(write_orders(spark_engine, workspace, second, 400, 100))
    assert failed.failures == [f"{second}: Spark statement failed: injected after the CTAS wrote"]
    assert failed.plan is None and failed.to_dict()["duplicate"] is False
    stage_db = settings.stage_database("eng", "sales")
    assert temp_tables(spark_engine, stage_db) == []
    assert partition_row_count(spark_engine, stage_db, "orders", {"date": "20220120"}) == 400
    assert failed.location == good.location and failed.files == good.files
    assert sorted(path.name for path in partition_dir.iterdir()) == before  # the failed run's output is gone


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


def test_the_glue_job_refuses_a_plan_without_a_lease_before_anything_runs(
    spark_engine: SparkEngine, workspace: Workspace, settings: PipelineSettings
) -> None:
    """Nothing would commit such a run (only the pipeline's routers plan, under a lease): its output would be a
    version no reader finds and no sweep knows."""
    key = write_orders(spark_engine, workspace, "eng/sales/orders/date=20220120/a.parquet", 0, 10)
    raw = parse_raw_key(key)
    raw_schema, _ = ensure_tables(spark_engine, raw, workspace.raw_dir / key, settings)
    plan = plan_stage_a(raw, settings, raw_schema, run_token=new_run_token())
    arguments = {"mode": "stage_a", "plan": json.dumps(plan.to_dict())}
    with pytest.raises(InvalidInputError, match="holds no lease"):
        run_job(arguments, spark_engine.session, LocalObjectStore())
    assert not Path(plan.target_location.removeprefix("file://")).exists()
    assert spark_engine.partition_location(plan.target_database, plan.table, plan.partition) is None


def test_a_partition_stage_a_run_published_is_routed_by_the_next_run_of_the_pipeline(
    cloud: LocalCloud, spark_engine: SparkEngine, workspace: Workspace, settings: PipelineSettings
) -> None:
    """``stage-a run`` registers no dependency item, so its post-update routes to nothing: the version is left
    unrouted, and the pipeline's next run of the file (nothing new to load) builds the targets it feeds."""
    key = write_orders(spark_engine, workspace, "eng/sales/orders/date=20220120/a.parquet", 0, 30)
    stage_db = settings.stage_database("eng", "sales")
    flow = EventFlow(cloud, spark_engine, workspace, settings, workspace.root / "queries")
    assert run_arrival(flow, key).plan is not None
    analytics = f"eng_analytics_{settings.environment}"
    spark_engine.execute(f"CREATE DATABASE IF NOT EXISTS {analytics}")
    location = local_root(workspace.analytics_dir / analytics / "orders_daily")
    spark_engine.session.sql(
        f"CREATE TABLE {analytics}.orders_daily (orders BIGINT, `date` STRING) USING parquet "
        f"PARTITIONED BY (`date`) LOCATION '{location}'"
    )
    sql = f"INSERT INTO {analytics}.orders_daily SELECT count(*), '$day' FROM {stage_db}.orders WHERE \"date\" = '$day'"
    step = {"db": analytics, "info": "count the day's orders", "sql": sql}
    try:
        item = daily_item(f"{analytics}.orders_daily", "overwrite", [step], source=f"{stage_db}.orders")
        flow.register([parse_dependency_item(item)])
        flow.arrive(key)  # the pipeline's next run sends every raw file again
        report = flow.run_until_idle()
        assert report.failures == []
        assert [plan.dataset for plan in report.stage_b] == [f"{analytics}.orders_daily"]
        assert spark_engine.execute(f"SELECT orders FROM {analytics}.orders_daily").rows == [(30,)]
    finally:
        spark_engine.execute(f"DROP DATABASE IF EXISTS {analytics} CASCADE")
