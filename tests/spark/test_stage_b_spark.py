"""Stage B on real embedded Spark, through the embedded runtime's leased protocol (``EventFlow``, as
``lakeline run --embedded`` and ``lakeline stage-b run`` run it): a two-level chain from raw files,
sql_file, failures, append and overwrite, and redelivery."""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakeline.dependencies.model import parse_dependency_item
from lakeline.engines.spark import SparkEngine
from lakeline.project.workspace import Workspace
from lakeline.runtimes.embedded.cloud import LocalCloud
from lakeline.runtimes.embedded.event_flow import EventFlow
from lakeline.runtimes.embedded.handler_caches import reset_handler_caches
from lakeline.runtimes.embedded.single_stage import run_target
from lakeline.storage import LocalObjectStore, local_root
from stage_b.messages import SourceArrival, StageBMessage

_environments = itertools.count()

CUSTOMERS = """customer_id,name,country,lifetime_value
1,ana,es,100.0
2,bob,fr,50.0
3,cid,es,25.5
4,dan,de,10.0
"""


@pytest.fixture
def env() -> str:
    return f"sb{next(_environments)}"


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace.at(tmp_path / "ws")


@pytest.fixture
def queries_root(tmp_path: Path) -> Path:
    root = tmp_path / "athena_queries"
    (root / "engineering").mkdir(parents=True)
    return root


def create_table(engine: SparkEngine, workspace: Workspace, dataset: str, columns: str) -> None:
    database, table = dataset.split(".")
    engine.execute(f"CREATE DATABASE IF NOT EXISTS {database}")
    location = local_root(workspace.analytics_dir / database / table)
    engine.session.sql(
        f"CREATE TABLE {dataset} ({columns}, `date` STRING) USING parquet PARTITIONED BY (`date`) LOCATION '{location}'"
    )


def item(
    dataset: str, source: str, steps: list[dict[str, str]], usage: str = "overwrite", scratch: tuple[str, ...] = ()
) -> Any:
    return parse_dependency_item(
        {
            "scratchTables": list(scratch),
            "dataset": dataset,
            "dependencies": [
                {
                    "TableName": source,
                    "FieldColumn": "date",
                    "Usage": usage,
                    "DateExpression": "%Y%m%d",
                    "relativedelta_attributes": {"days": 0},
                }
            ],
            "partitionColumn": "date",
            "partitionPythonMask": "%Y%m%d",
            "steps": steps,
            "date_substitutions": [{"token": "$day", "format": "%Y%m%d", "relativedelta_attributes": {"days": 0}}],
        }
    )


@pytest.fixture
def flow(spark_engine: SparkEngine, workspace: Workspace, env: str, queries_root: Path) -> Iterator[EventFlow]:
    environment = dict(os.environ)
    reset_handler_caches()
    cloud = LocalCloud.start()
    try:
        yield EventFlow(cloud, spark_engine, workspace, workspace.settings(environment=env), queries_root)
    finally:
        cloud.stop()
        reset_handler_caches()
        os.environ.clear()
        os.environ.update(environment)


def rows(engine: SparkEngine, sql: str) -> list[tuple[Any, ...]]:
    return sorted(engine.execute(sql).rows)


def test_two_level_chain_from_raw_files(
    flow: EventFlow, spark_engine: SparkEngine, workspace: Workspace, env: str, queries_root: Path
) -> None:
    stage = f"engineering_mysql_{env}.customers"
    by_country = f"engineering_analytics_{env}.customers_by_country"
    top_country = f"engineering_analytics_{env}.top_country"
    create_table(spark_engine, workspace, by_country, "country STRING, customers BIGINT, value DOUBLE")
    create_table(spark_engine, workspace, top_country, "country STRING, value DOUBLE")
    (queries_root / "engineering" / "top_country.sql").write_text(
        f"INSERT INTO {top_country} SELECT country, value, '$day' FROM {by_country} "
        f"WHERE \"date\" = '$partition_value' ORDER BY value DESC LIMIT 1"
    )
    items = [
        item(
            by_country,
            stage,
            [
                {
                    "db": f"engineering_analytics_{env}",
                    "info": "aggregate customers per country",
                    "sql": f"INSERT INTO {by_country} SELECT country, count(*), sum(lifetime_value), '$day' "
                    f"FROM {stage} WHERE \"date\" = '$day' GROUP BY country",
                }
            ],
        ),
        item(top_country, by_country, [{"db": f"engineering_analytics_{env}", "sql_file": "top_country.sql"}]),
    ]
    key = "engineering/mysql/customers/date=20220120/customers.csv"
    (workspace.raw_dir / key).parent.mkdir(parents=True)
    (workspace.raw_dir / key).write_text(CUSTOMERS)
    flow.register(items)
    flow.arrive(key)
    run = flow.run_until_idle()

    assert run.failures == []
    assert [plan.dataset for plan in run.stage_b] == [by_country, top_country]
    assert rows(spark_engine, f"SELECT customer_id, name FROM {stage}") == [
        (1, "ana"),
        (2, "bob"),
        (3, "cid"),
        (4, "dan"),
    ]
    assert rows(spark_engine, f'SELECT country, customers, value, "date" FROM {by_country}') == [
        ("de", 1, 10.0, "20220120"),
        ("es", 2, 125.5, "20220120"),
        ("fr", 1, 50.0, "20220120"),
    ]
    assert rows(spark_engine, f'SELECT country, value, "date" FROM {top_country}') == [("es", 125.5, "20220120")]
    second = run.stage_b[1]
    assert StageBMessage.model_validate(second.message).path == [
        f"{stage}/date=20220120",
        f"{by_country}/date=20220120",
    ]
    assert len(LocalObjectStore().list_data_files(second.target_location)) == 1

    # The same file delivered again changes nothing; sent again as a new version of itself (a new stage A
    # run), the chain rebuilds the same data, not doubled.
    flow.arrive(key)
    assert flow.run_until_idle().duplicates == [key]
    flow.arrive(key, hashlib.sha256(b"the same rows, a new version").hexdigest())
    again = flow.run_until_idle()
    assert again.failures == [] and [plan.dataset for plan in again.stage_b[2:]] == [by_country, top_country]
    assert rows(spark_engine, f"SELECT count(*) FROM {by_country}") == [(3,)]
    assert rows(spark_engine, f"SELECT count(*) FROM {top_country}") == [(1,)]


def message(target: str, source: str, usage: str, run: str) -> StageBMessage:
    return StageBMessage(
        target_dataset=target,
        partition={"date": "20220120"},
        trigger=SourceArrival(table=source, partition={"date": "20220120"}, run=run),
        usage=usage,  # type: ignore[arg-type]
        path=[f"{source}/date=20220120"],
    )


def published_rows(flow: EventFlow, target: str) -> list[tuple[Any, ...]]:
    """The rows of the partition's published version, read from its files (not through the catalog)."""
    database, table = target.split(".")
    location = flow.engine.partition_location(database, table, {"date": "20220120"})
    assert location is not None
    return sorted(tuple(row) for row in flow.engine.session.read.parquet(location.removeprefix("file://")).collect())


@pytest.mark.parametrize("usage", ["append", "overwrite"])
def test_append_keeps_rows_overwrite_replaces_and_redelivery_changes_nothing(
    flow: EventFlow, spark_engine: SparkEngine, workspace: Workspace, env: str, usage: str
) -> None:
    source = f"engineering_src_{env}.events"
    target = f"engineering_analytics_{env}.event_log"
    create_table(spark_engine, workspace, source, "id BIGINT")
    create_table(spark_engine, workspace, target, "id BIGINT, note STRING")
    spark_engine.execute(f"INSERT INTO {source} SELECT 1, '20220120' UNION ALL SELECT 2, '20220120'")
    steps = [
        {
            "db": f"engineering_analytics_{env}",
            "info": "copy events",
            "sql": f"INSERT INTO {target} (id, \"date\") SELECT id, '$day' FROM {source} WHERE \"date\" = '$day'",
        }
    ]
    flow.register([item(target, source, steps, usage)])

    first = run_target(flow, message(target, source, usage, "run1"))
    assert first.failures == [] and [plan.dataset for plan in first.built] == [target]
    assert rows(spark_engine, f"SELECT id, note FROM {target}") == [(1, None), (2, None)]

    # The commit's applied ids know the message: its redelivery runs nothing, whatever its usage.
    redelivered = run_target(flow, message(target, source, usage, "run1"))
    assert rows(spark_engine, f"SELECT id FROM {target}") == [(1,), (2,)]
    assert redelivered.built == [] and redelivered.repeated == [f"{target}/date=20220120"]

    # A new version of the source partition arrives (a different run): an append replaces the rows that
    # source partition contributed before (its contribution), an overwrite rebuilds the partition.
    spark_engine.execute(f"INSERT INTO {source} SELECT 3, '20220120'")
    second = run_target(flow, message(target, source, usage, "run2"))
    assert second.failures == [] and len(second.built) == 1
    assert rows(spark_engine, f"SELECT id FROM {target}") == [(1,), (2,), (3,)]
    assert [row[0] for row in published_rows(flow, target)] == [1, 2, 3]


def test_failing_step_stops_the_run_and_keeps_the_partition(
    flow: EventFlow, spark_engine: SparkEngine, workspace: Workspace, env: str
) -> None:
    source = f"engineering_src_{env}.events"
    target = f"engineering_analytics_{env}.event_log"
    create_table(spark_engine, workspace, source, "id BIGINT")
    create_table(spark_engine, workspace, target, "id BIGINT")
    spark_engine.execute(f"INSERT INTO {source} SELECT 1, '20220120'")
    good = [{"db": f"engineering_analytics_{env}", "sql": f"INSERT INTO {target} SELECT id, '$day' FROM {source}"}]
    flow.register([item(target, source, good)])
    assert run_target(flow, message(target, source, "overwrite", "run1")).failures == []
    published = flow.engine.partition_location(*target.split("."), {"date": "20220120"})

    scratch = f"engineering_analytics_{env}.scratch_after_failure"
    broken = [
        {
            "db": f"engineering_analytics_{env}",
            "info": "the broken step",
            "sql": f"INSERT INTO {target} SELECT no_such_column, '$day' FROM {source}",
        },
        {"db": f"engineering_analytics_{env}", "info": "never runs", "sql": f"CREATE TABLE {scratch} AS SELECT 1 AS x"},
    ]
    flow.register([item(target, source, broken, scratch=(scratch,))])
    failed = run_target(flow, message(target, source, "overwrite", "run2"))
    (failure,) = failed.failures
    assert failure.startswith(f"{target}/date=20220120: ") and "steps[0] (the broken step) failed" in failure
    assert failed.to_dict()["failed"][0]["node"] == f"{target}/date=20220120"
    assert not spark_engine.table_exists(f"engineering_analytics_{env}", "scratch_after_failure")
    database = target.split(".")[0]
    temps = [t.name for t in spark_engine.session.catalog.listTables(database) if t.name.startswith("lakeline_tmp")]
    assert temps == []
    assert rows(spark_engine, f"SELECT id FROM {target}") == [(1,)]
    assert flow.engine.partition_location(*target.split("."), {"date": "20220120"}) == published


def test_unknown_token_stops_the_plan_before_anything_runs(
    flow: EventFlow, spark_engine: SparkEngine, workspace: Workspace, env: str, queries_root: Path
) -> None:
    source = f"engineering_src_{env}.events"
    target = f"engineering_analytics_{env}.event_log"
    create_table(spark_engine, workspace, source, "id BIGINT")
    create_table(spark_engine, workspace, target, "id BIGINT")
    # Inline, the unknown token is refused when the item is validated; a sql_file is checked at planning.
    (queries_root / "engineering" / "nope.sql").write_text(f"INSERT INTO {target} SELECT id, '$nope' FROM {source}")
    steps = [{"db": f"engineering_analytics_{env}", "sql_file": "nope.sql"}]
    flow.register([item(target, source, steps)])
    refused = run_target(flow, message(target, source, "overwrite", "run1"))
    (failure,) = refused.failures
    assert "cannot be planned" in failure and "no value for $nope" in failure
    assert refused.refused == [failure]  # what stage-b run refuses with exit 2, keeping nothing unresolved
    assert refused.built == []
    assert rows(spark_engine, f"SELECT count(*) FROM {target}") == [(0,)]
