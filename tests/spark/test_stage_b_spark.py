"""Stage B on real embedded Spark: a two-level chain from raw files, sql_file, failures, append and
overwrite, and redelivery."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from lakeline.dependencies.model import parse_dependency_item
from lakeline.engines.spark import SparkEngine
from lakeline.local.dependencies import LocalDependencies
from lakeline.local.pipeline import LocalPipeline
from lakeline.local.workspace import Workspace
from lakeline.settings import PipelineSettings
from lakeline.storage import LocalObjectStore, local_root
from stage_b.ledger import FileAppliedMessages
from stage_b.messages import SourceArrival, StageBMessage
from stage_b.process import StageBServices, process_stage_b
from stage_b.run import StageBStepFailed

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


def services(
    engine: SparkEngine, workspace: Workspace, env: str, queries_root: Path, items: list[Any]
) -> StageBServices:
    settings: PipelineSettings = workspace.settings(environment=env)
    return StageBServices(
        engine=engine,
        store=LocalObjectStore(),
        settings=settings,
        dependencies=LocalDependencies(items),
        ledger=FileAppliedMessages(workspace.root / "state" / "applied.json"),
        queries_root=queries_root,
    )


def rows(engine: SparkEngine, sql: str) -> list[tuple[Any, ...]]:
    return sorted(engine.execute(sql).rows)


def test_two_level_chain_from_raw_files(
    spark_engine: SparkEngine, workspace: Workspace, env: str, queries_root: Path
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
    pipeline = LocalPipeline(spark_engine, workspace, services(spark_engine, workspace, env, queries_root, items))
    run = pipeline.process_arrival(key)

    assert run.failed == []
    assert [outcome.message.target_dataset for outcome in run.stage_b] == [by_country, top_country]
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
    assert second.message.path == [
        f"{stage}/date=20220120",
        f"{by_country}/date=20220120",
    ]
    assert second.plan is not None and second.result is not None
    assert len(second.result.data_files) == 1

    # The same arrival again (a new stage A run): the chain rebuilds the same data, not doubled.
    again = pipeline.process_arrival(key)
    assert again.failed == []
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


@pytest.mark.parametrize("usage", ["append", "overwrite"])
def test_append_keeps_rows_overwrite_replaces_and_redelivery_changes_nothing(
    spark_engine: SparkEngine, workspace: Workspace, env: str, queries_root: Path, usage: str
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
    svc = services(spark_engine, workspace, env, queries_root, [item(target, source, steps, usage)])

    first = process_stage_b(message(target, source, usage, "run1"), svc)
    assert first.result is not None
    assert rows(spark_engine, f"SELECT id, note FROM {target}") == [(1, None), (2, None)]

    redelivered = process_stage_b(message(target, source, usage, "run1"), svc)
    assert rows(spark_engine, f"SELECT id FROM {target}") == [(1,), (2,)]
    assert redelivered.skipped is (usage == "append")

    # A new version of the source partition arrives (a different run).
    spark_engine.execute(f"INSERT INTO {source} SELECT 3, '20220120'")
    process_stage_b(message(target, source, usage, "run2"), svc)
    expected = [(1,), (1,), (2,), (2,), (3,)] if usage == "append" else [(1,), (2,), (3,)]
    assert rows(spark_engine, f"SELECT id FROM {target}") == expected
    partition_dir = workspace.analytics_dir / target.split(".")[0] / target.split(".")[1] / "date=20220120"
    assert len(list(partition_dir.iterdir())) == 1, "superseded run prefixes are cleaned"


def test_failing_step_stops_the_run_and_keeps_the_partition(
    spark_engine: SparkEngine, workspace: Workspace, env: str, queries_root: Path
) -> None:
    source = f"engineering_src_{env}.events"
    target = f"engineering_analytics_{env}.event_log"
    create_table(spark_engine, workspace, source, "id BIGINT")
    create_table(spark_engine, workspace, target, "id BIGINT")
    spark_engine.execute(f"INSERT INTO {source} SELECT 1, '20220120'")
    good = [{"db": f"engineering_analytics_{env}", "sql": f"INSERT INTO {target} SELECT id, '$day' FROM {source}"}]
    process_stage_b(
        message(target, source, "overwrite", "run1"),
        services(spark_engine, workspace, env, queries_root, [item(target, source, good)]),
    )

    scratch = f"engineering_analytics_{env}.scratch_after_failure"
    broken = [
        {
            "db": f"engineering_analytics_{env}",
            "info": "the broken step",
            "sql": f"INSERT INTO {target} SELECT no_such_column, '$day' FROM {source}",
        },
        {"db": f"engineering_analytics_{env}", "info": "never runs", "sql": f"CREATE TABLE {scratch} AS SELECT 1 AS x"},
    ]
    svc = services(spark_engine, workspace, env, queries_root, [item(target, source, broken, scratch=(scratch,))])
    with pytest.raises(StageBStepFailed, match=r"steps\[0\] \(the broken step\) failed") as failure:
        process_stage_b(message(target, source, "overwrite", "run2"), svc)
    assert failure.value.step.index == 0
    assert not spark_engine.table_exists(f"engineering_analytics_{env}", "scratch_after_failure")
    database = target.split(".")[0]
    temps = [t.name for t in spark_engine.session.catalog.listTables(database) if t.name.startswith("lakeline_tmp")]
    assert temps == []
    assert rows(spark_engine, f"SELECT id FROM {target}") == [(1,)]


def test_unknown_token_stops_the_plan_before_anything_runs(
    spark_engine: SparkEngine, workspace: Workspace, env: str, queries_root: Path
) -> None:
    source = f"engineering_src_{env}.events"
    target = f"engineering_analytics_{env}.event_log"
    create_table(spark_engine, workspace, source, "id BIGINT")
    create_table(spark_engine, workspace, target, "id BIGINT")
    # Inline, the unknown token is refused when the item is validated; a sql_file is checked at planning.
    (queries_root / "engineering" / "nope.sql").write_text(f"INSERT INTO {target} SELECT id, '$nope' FROM {source}")
    steps = [{"db": f"engineering_analytics_{env}", "sql_file": "nope.sql"}]
    svc = services(spark_engine, workspace, env, queries_root, [item(target, source, steps)])
    with pytest.raises(Exception, match=r"no value for \$nope"):
        process_stage_b(message(target, source, "overwrite", "run1"), svc)
    assert rows(spark_engine, f"SELECT count(*) FROM {target}") == [(0,)]
