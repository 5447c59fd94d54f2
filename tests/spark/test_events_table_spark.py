"""The OpenLineage events table over events stored as the stage functions store them, read by local Spark
with the same definition Glue gets, and the column lineage query (athena_queries/lineage) run on it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from openlineage.client.event_v2 import RunEvent, RunState

from lakeline.catalog_json import CatalogFile
from lakeline.lineage.openlineage.archive import EventArchive
from lakeline.lineage.openlineage.bound import in_order, split_event
from lakeline.lineage.openlineage.config import OpenLineageSettings, RunReference
from lakeline.lineage.openlineage.events import event_to_dict, run_event, sql_step_run
from lakeline.lineage.openlineage.table import COLUMN_LINEAGE_QUERY, bind_column_lineage_query, register_local_events
from lakeline.lineage.records.archive import LocalArchiveStore

if TYPE_CHECKING:
    from lakeline.engines.spark import SparkEngine

pytestmark = pytest.mark.spark

CATALOG = CatalogFile.load(Path(__file__).parents[1] / "unit" / "data" / "column_lineage_catalog.json")
NAMESPACE = "lakeline-dev"
DATASETS = "awsathena://athena.eu-west-1.amazonaws.com"
ROOT = RunReference(NAMESPACE, "pipeline", "01930000-0000-7000-8000-0000000000aa")
TOTALS_BY_REGION = (
    "INSERT INTO mart.customer_totals SELECT o.customer_id, c.region, SUM(o.amount), COUNT(*), o.dt "
    "FROM sales.orders o JOIN sales.customers c ON o.customer_id = c.customer_id "
    "WHERE o.status = 'paid' GROUP BY o.customer_id, c.region, o.dt"
)
TOTALS_PER_ORDER = "INSERT INTO mart.customer_totals SELECT customer_id, 'all', amount, 1, dt FROM sales.orders"
TOTALS_BY_NAME = "INSERT INTO mart.customer_totals SELECT customer_id, name, 0.0, 0, 'x' FROM sales.customers"
SMALL_BOUND = 3500
"""Bytes: the events of runs 1 and 2 are 3,600 to 5,900."""
FLAGS = "INSERT INTO mart.customer_flags SELECT customer_id, status FROM sales.orders"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def run_id(n: int) -> str:
    return f"01930000-0000-7000-8000-{n:012d}"


def step_events(n: int, sql: str, outcome: RunState, started: str, ended: str) -> list[dict[str, Any]]:
    """START and the outcome of one stage B step, as the stage functions emit them."""
    return [event_to_dict(event) for event in step_run_events(n, sql, outcome, started, ended)]


def step_run_events(n: int, sql: str, outcome: RunState, started: str, ended: str) -> list[RunEvent]:
    settings = OpenLineageSettings(
        namespace=NAMESPACE,
        dataset_namespace=DATASETS,
        parent=RunReference(NAMESPACE, "stage_b.mart.customer_totals", run_id(100 + n)),
        root=ROOT,
    )
    step = sql_step_run(
        sql, catalog=CATALOG, job_name=f"stage_b.mart.step{n}", run_id=run_id(n), settings=settings, engine="athena"
    )
    error = "HIVE_BAD_DATA: bad row" if outcome is RunState.FAIL else None
    return [run_event(step, RunState.START, at=at(started)), run_event(step, outcome, at=at(ended), error=error)]


def put_in_parts(archive: EventArchive, events: list[RunEvent], limit: int) -> list[str]:
    """Store ``events`` as an event over the bound is stored: each in parts of at most ``limit`` bytes
    (here small, so that a run of five columns is split as one of thousands would be). Returns their names."""
    parts = [part for event in events for part in in_order(split_event(event, limit))]
    assert any(part.number for part in parts)
    archive.put([event_to_dict(part.event) for part in parts], [part.archive_name for part in parts])
    return [part.archive_name for part in parts]


@pytest.fixture(scope="module")
def events_database(spark_engine: SparkEngine, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Four runs stored by the functions' event archive into a local folder, registered as the table."""
    folder = tmp_path_factory.mktemp("lineage-archive") / "openlineage"
    archive = EventArchive(LocalArchiveStore(folder))
    # Runs 1 and 2 stored in parts (RUNNING events beside their START and end): the query reads the column
    # lineage of a completed run's parts, never of a failed one's.
    first = step_run_events(1, TOTALS_BY_REGION, RunState.COMPLETE, "2024-01-20T06:30:00", "2024-01-20T06:35:00")
    split = put_in_parts(archive, first, SMALL_BOUND)
    second = step_run_events(2, TOTALS_BY_NAME, RunState.FAIL, "2024-01-21T06:30:00", "2024-01-21T06:31:00")
    split += put_in_parts(archive, second, SMALL_BOUND)
    # Started one day, completed the next: its two events are in two partitions.
    archive.put(step_events(3, TOTALS_PER_ORDER, RunState.COMPLETE, "2024-01-21T23:59:00", "2024-01-22T00:01:00"))
    archive.put(step_events(4, FLAGS, RunState.COMPLETE, "2024-01-22T01:00:00", "2024-01-22T01:02:00"))
    stored = sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*.json"))
    day = {run_id(1): "2024-01-20", run_id(2): "2024-01-21"}
    assert [name for name in stored if ".part" in name] == sorted(
        f"dt={day[name.split('.')[0]]}/{name}.json" for name in split if ".part" in name
    )
    assert [name for name in stored if ".part" not in name] == [
        f"dt=2024-01-20/{run_id(1)}.COMPLETE.json",
        f"dt=2024-01-20/{run_id(1)}.START.json",
        f"dt=2024-01-21/{run_id(2)}.FAIL.json",
        f"dt=2024-01-21/{run_id(2)}.START.json",
        f"dt=2024-01-21/{run_id(3)}.START.json",
        f"dt=2024-01-22/{run_id(3)}.COMPLETE.json",
        f"dt=2024-01-22/{run_id(4)}.COMPLETE.json",
        f"dt=2024-01-22/{run_id(4)}.START.json",
    ]
    database = f"ol_events_{uuid.uuid4().hex[:8]}"
    register_local_events(spark_engine, folder, database)
    return database


def test_the_column_lineage_query_lists_each_output_column_and_its_inputs(
    spark_engine: SparkEngine, events_database: str
) -> None:
    sql = bind_column_lineage_query(COLUMN_LINEAGE_QUERY.read_text(), "mart.customer_totals", database=events_database)
    result = spark_engine.execute(sql)
    assert result.columns == [
        "output_dataset",
        "output_column",
        "input_dataset",
        "input_field",
        "transformation_type",
        "transformation_subtype",
        "last_seen",
    ]
    first, third = "2024-01-20T06:35:00+00:00", "2024-01-22T00:01:00+00:00"
    # Completed runs only (run 2 failed: its customers.name -> region is not there); COUNT(*) and the
    # literal 'all' read no column; a column written the same way by two runs is one row, last seen in the later.
    assert result.rows == [
        ("mart.customer_totals", "customer_id", "sales.orders", "customer_id", "DIRECT", "IDENTITY", third),
        ("mart.customer_totals", "dt", "sales.orders", "dt", "DIRECT", "IDENTITY", third),
        ("mart.customer_totals", "region", "sales.customers", "region", "DIRECT", "IDENTITY", first),
        ("mart.customer_totals", "total_amount", "sales.orders", "amount", "DIRECT", "AGGREGATION", first),
        ("mart.customer_totals", "total_amount", "sales.orders", "amount", "DIRECT", "IDENTITY", third),
    ]


def test_runs_jobs_parents_sql_and_errors_read_back_by_partition(
    spark_engine: SparkEngine, events_database: str
) -> None:
    result = spark_engine.execute(
        "SELECT dt, run.runid, eventtype, job.namespace, job.name, run.facets.parent.run.runid, "
        "run.facets.parent.job.name, run.facets.parent.root.run.runid, run.facets.parent.root.job.name, "
        "job.facets.sql.query, run.facets.errormessage.message, cardinality(inputs), outputs[1].name "
        f'FROM "{events_database}"."openlineage_events" WHERE dt >= \'2024-01-21\' '
        "AND eventtype NOT IN ('START', 'RUNNING') ORDER BY eventtime"
    )
    parent = "stage_b.mart.customer_totals"
    assert result.rows == [
        ("2024-01-21", run_id(2), "FAIL", NAMESPACE, "stage_b.mart.step2", run_id(102), parent, ROOT.run_id,
         "pipeline", TOTALS_BY_NAME, "HIVE_BAD_DATA: bad row", 1, "AwsDataCatalog.mart.customer_totals"),
        ("2024-01-22", run_id(3), "COMPLETE", NAMESPACE, "stage_b.mart.step3", run_id(103), parent, ROOT.run_id,
         "pipeline", TOTALS_PER_ORDER, None, 1, "AwsDataCatalog.mart.customer_totals"),
        ("2024-01-22", run_id(4), "COMPLETE", NAMESPACE, "stage_b.mart.step4", run_id(104), parent, ROOT.run_id,
         "pipeline", FLAGS, None, 1, "AwsDataCatalog.mart.customer_flags"),
    ]  # fmt: skip
