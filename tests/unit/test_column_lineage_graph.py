"""Following a column back through stage A and several stage B steps, from stored RunEvents."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lakeline.catalog_json import CatalogFile
from lakeline.errors import InvalidInputError
from lakeline.lineage.columns.model import Subtype, Transformation, TransformationType
from lakeline.lineage.openlineage.config import OpenLineageSettings, RunReference, file_transport
from lakeline.lineage.openlineage.emitter import LineageEmitter
from lakeline.lineage.openlineage.events import new_run_id, sql_step_run
from lakeline.lineage.viewer.column_graph import ColumnGraph, FieldRef, load_events, render_tree

DATA = Path(__file__).parent / "data"
NAMESPACE = "awsathena://athena.eu-west-1.amazonaws.com"
PIPELINE = RunReference("lakeline", "pipeline.sales", "01930000-0000-7000-8000-000000000001")

STAGE_A = """
INSERT INTO sales.orders
SELECT CAST(order_id AS bigint), CAST(customer_id AS bigint), CAST(amount AS double), status,
       CAST("date" AS date), dt
FROM raw.orders
"""
STAGE_B_TOTALS = """
CREATE TABLE mart.tmp_totals AS
SELECT o.customer_id, c.region, SUM(o.amount) AS total, COUNT(*) AS n, o.dt
FROM sales.orders o JOIN sales.customers c ON o.customer_id = c.customer_id
WHERE o.status = 'paid'
GROUP BY o.customer_id, c.region, o.dt;
INSERT INTO mart.customer_totals SELECT customer_id, region, total, n, dt FROM mart.tmp_totals;
"""
STAGE_B_DAILY = """
INSERT INTO mart.daily_sales
SELECT CAST(dt AS date), region, SUM(total_amount) FROM mart.customer_totals GROUP BY dt, region
"""


def _clock() -> datetime:
    _clock.now += timedelta(seconds=1)  # type: ignore[attr-defined]
    return _clock.now  # type: ignore[attr-defined, no-any-return]


_clock.now = datetime(2024, 1, 20, tzinfo=UTC)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def stored_events(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run three steps through an emitter writing JSON lines, as the pipeline's file transport would."""
    catalog = CatalogFile.load(DATA / "column_lineage_catalog.json")
    path = tmp_path_factory.mktemp("events") / "events.jsonl"
    settings = OpenLineageSettings(
        dataset_namespace=NAMESPACE, parent=PIPELINE, transport=file_transport(path, append=True)
    )
    emitter = LineageEmitter(settings, clock=_clock)
    for job, sql in (("stage_a.orders", STAGE_A), ("stage_b.totals", STAGE_B_TOTALS), ("stage_b.daily", STAGE_B_DAILY)):
        step = sql_step_run(sql, catalog=catalog, job_name=job, run_id=new_run_id(), settings=settings)
        with emitter.run(step):
            pass
    failing = sql_step_run(
        'INSERT INTO mart.daily_sales SELECT "date", status, amount FROM raw.orders',
        catalog=catalog,
        job_name="stage_b.broken",
        run_id=new_run_id(),
        settings=settings,
    )
    with pytest.raises(RuntimeError), emitter.run(failing):
        raise RuntimeError("Athena query failed")
    emitter.close()
    assert emitter.failures == 0
    assert len(emitter.drain()) == 8
    return path


def test_events_are_stored_as_json_lines(stored_events: Path) -> None:
    events = load_events(stored_events)
    assert [(e["job"]["name"], e["eventType"]) for e in events] == [
        ("stage_a.orders", "START"),
        ("stage_a.orders", "COMPLETE"),
        ("stage_b.totals", "START"),
        ("stage_b.totals", "COMPLETE"),
        ("stage_b.daily", "START"),
        ("stage_b.daily", "COMPLETE"),
        ("stage_b.broken", "START"),
        ("stage_b.broken", "FAIL"),
    ]


def test_a_column_is_followed_back_to_raw_columns(stored_events: Path) -> None:
    graph = ColumnGraph.from_events(load_events(stored_events))
    revenue = FieldRef(NAMESPACE, "AwsDataCatalog.mart.daily_sales", "revenue")
    direct = graph.origins(revenue, indirect=False)
    assert direct == {
        FieldRef(NAMESPACE, "AwsDataCatalog.raw.orders", "amount"): {
            Transformation(TransformationType.DIRECT, Subtype.AGGREGATION)
        }
    }
    everything = graph.origins(revenue)
    by_field = {str(ref): {f"{t.type} {t.subtype}" for t in kinds} for ref, kinds in everything.items()}
    # The filter on status reaches revenue twice: through the rows summed (FILTER) and through the
    # rows grouped by the next step (GROUP_BY, the INDIRECT step nearest the output).
    assert by_field == {
        "raw.orders.amount": {"DIRECT AGGREGATION"},
        "raw.orders.customer_id": {"INDIRECT JOIN", "INDIRECT GROUP_BY"},
        "raw.orders.status": {"INDIRECT FILTER", "INDIRECT GROUP_BY"},
        "raw.orders.dt": {"INDIRECT GROUP_BY"},
        "sales.customers.customer_id": {"INDIRECT JOIN", "INDIRECT GROUP_BY"},
        "sales.customers.region": {"INDIRECT GROUP_BY"},
    }


def test_the_failed_run_adds_no_lineage(stored_events: Path) -> None:
    graph = ColumnGraph.from_events(load_events(stored_events))
    origins = graph.origins(FieldRef(NAMESPACE, "AwsDataCatalog.mart.daily_sales", "region"), indirect=False)
    assert set(origins) == {FieldRef(NAMESPACE, "AwsDataCatalog.sales.customers", "region")}


def test_tree_shows_each_step(stored_events: Path) -> None:
    graph = ColumnGraph.from_events(load_events(stored_events))
    text = render_tree(
        graph.tree(FieldRef(NAMESPACE, "AwsDataCatalog.mart.customer_totals", "total_amount"), indirect=False)
    )
    assert text.splitlines() == [
        "mart.customer_totals.total_amount",
        "+- mart.tmp_totals.total  DIRECT IDENTITY  [job lakeline/stage_b.totals]",
        "   +- sales.orders.amount  DIRECT AGGREGATION  [job lakeline/stage_b.totals]",
        "      +- raw.orders.amount  DIRECT IDENTITY  [job lakeline/stage_a.orders]",
    ]


def test_a_table_written_from_itself_does_not_loop() -> None:
    event = {
        "eventType": "COMPLETE",
        "job": {"namespace": "n", "name": "dedupe"},
        "outputs": [
            {
                "namespace": "n",
                "name": "db.t",
                "facets": {
                    "columnLineage": {
                        "fields": {
                            "a": {
                                "inputFields": [
                                    {"namespace": "n", "name": "db.t", "field": "a", "transformations": []},
                                    {"namespace": "n", "name": "db.src", "field": "a"},
                                ]
                            }
                        }
                    }
                },
            }
        ],
    }
    graph = ColumnGraph.from_events([event])
    origins = graph.origins(FieldRef("n", "db.t", "a"))
    assert origins == {
        FieldRef("n", "db.src", "a"): {Transformation(TransformationType.DIRECT, Subtype.TRANSFORMATION)}
    }
    assert "cycle" in render_tree(graph.tree(FieldRef("n", "db.t", "a")))


def test_invalid_events_are_refused(tmp_path: Path) -> None:
    bad = {
        "eventType": "COMPLETE",
        "job": {"namespace": "n", "name": "j"},
        "outputs": [
            {
                "namespace": "n",
                "name": "db.t",
                "facets": {
                    "columnLineage": {
                        "fields": {
                            "a": {
                                "inputFields": [
                                    {
                                        "namespace": "n",
                                        "name": "db.s",
                                        "field": "a",
                                        "transformations": [{"type": "DIRECT", "subtype": "JOIN"}],
                                    }
                                ]
                            }
                        }
                    }
                },
            }
        ],
    }
    with pytest.raises(InvalidInputError, match=r"event of n/j, output db\.t"):
        ColumnGraph.from_events([bad])
    path = tmp_path / "events.jsonl"
    path.write_text("{not json\n")
    with pytest.raises(InvalidInputError, match="not JSON"):
        load_events(path)


def test_following_a_column_reads_only_the_outputs_column_lineage_of_another_producers_event() -> None:
    """What the graph does not use is not checked: a number as eventTime, no job, inputs without schema
    names or with column lineage of their own; a START event's partial lineage is not read at all."""
    lineage = {
        "fields": {"v": {"inputFields": [{"namespace": "ns", "name": "db.src", "field": "a"}]}},
    }
    complete = {
        "eventType": "COMPLETE",
        "eventTime": 1714557600,
        "inputs": [
            {"namespace": "ns", "name": "db.src", "facets": {"schema": {"fields": [{"type": "int"}]}}},
            {
                "namespace": "ns",
                "name": "db.other",
                "facets": {"columnLineage": {"fields": {"q": {"inputFields": [{}]}}}},
            },
        ],
        "outputs": [{"namespace": "ns", "name": "db.out", "facets": {"columnLineage": lineage}}],
    }
    start = {"eventType": "START", "outputs": [{"namespace": "ns", "name": "db.out", "facets": {"columnLineage": {}}}]}
    graph = ColumnGraph.from_events([complete, start])
    assert [(link.source.dataset, link.source.field) for link in graph.links(FieldRef("ns", "db.out", "v"))] == [
        ("db.src", "a")
    ]


def test_a_malformed_column_lineage_the_graph_reads_is_refused_naming_its_place() -> None:
    bad = {
        "eventType": "COMPLETE",
        "job": {"namespace": "ns", "name": "job1"},
        "outputs": [
            {
                "namespace": "ns",
                "name": "db.out",
                "facets": {"columnLineage": {"fields": {"v": {"inputFields": [{"name": "x"}]}}}},
            }
        ],
    }
    with pytest.raises(InvalidInputError, match=r"event of ns/job1, output db\.out columnLineage field v input field"):
        ColumnGraph.from_events([bad])
