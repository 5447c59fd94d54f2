"""lineage.html: the graph model and the self-contained page, from real RunEvents.

The layout is done in the browser (dagre, vendored into the package): ``tests/e2e/test_lineage_html_browser.py``
checks where the nodes go."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from openlineage.client.event_v2 import RunState

from lakeline.catalog_json import CatalogFile
from lakeline.errors import InvalidInputError
from lakeline.lineage.openlineage.config import OpenLineageSettings, RunReference
from lakeline.lineage.openlineage.events import event_to_dict, run_event, sql_step_run, stable_run_id
from lakeline.lineage.viewer import html as viewer_html
from lakeline.lineage.viewer.column_graph import ColumnGraph, load_events
from lakeline.lineage.viewer.html import (
    build_lineage_graph,
    dataset_id,
    graph_document,
    job_id,
    render_lineage_html,
    write_lineage_html,
)

DATA = Path(__file__).parent / "data"
NAMESPACE = "awsathena://athena.eu-west-1.amazonaws.com"
JOBS = "lakeline"
PIPELINE = RunReference("lakeline", "pipeline.sales", "01930000-0000-7000-8000-000000000001")
START = datetime(2024, 1, 20, 6, 0, tzinfo=UTC)
SCRIPT_BREAKER = "</script><script>document.title='pwned'</script><!--"

STAGE_A = """
INSERT INTO sales.orders
SELECT CAST(order_id AS bigint), CAST(customer_id AS bigint), CAST(amount AS double), status,
       CAST("date" AS date), dt
FROM raw.orders
"""
STAGE_B_TOTALS = f"""
-- totals per customer; this comment holds {SCRIPT_BREAKER} to prove the page survives it
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
STAGE_B_FLAGS = """
INSERT INTO mart.customer_flags
SELECT customer_id, CASE WHEN SUM(total_amount) > 1000 THEN 'gold' ELSE 'std' END
FROM mart.customer_totals GROUP BY customer_id
"""


def lineage_sample_events() -> list[dict[str, Any]]:
    """A pipeline's events as the emitter writes them: stage A, three stage B steps, retries and failures.

    - ``stage_b.daily`` fails once, then a second run completes (its latest state is COMPLETE);
    - ``stage_b.flags`` completes once, then its latest run fails;
    - ``stage_b.totals`` carries ``</script>`` in its SQL.
    """
    catalog = CatalogFile.load(DATA / "column_lineage_catalog.json")
    settings = OpenLineageSettings(namespace=JOBS, dataset_namespace=NAMESPACE, parent=PIPELINE)
    plan = [
        ("stage_a.orders", STAGE_A, [RunState.COMPLETE]),
        ("stage_b.totals", STAGE_B_TOTALS, [RunState.COMPLETE]),
        ("stage_b.daily", STAGE_B_DAILY, [RunState.FAIL, RunState.COMPLETE]),
        ("stage_b.flags", STAGE_B_FLAGS, [RunState.COMPLETE, RunState.FAIL]),
    ]
    events = []
    at = START
    for job, sql, outcomes in plan:
        for attempt, outcome in enumerate(outcomes):
            step = sql_step_run(
                sql,
                catalog=catalog,
                job_name=job,
                run_id=stable_run_id(START, f"{job}#{attempt}"),
                settings=settings,
                engine="athena",
                engine_version="3",
            )
            events.append(event_to_dict(run_event(step, RunState.START, at=at)))
            at += timedelta(minutes=1)
            error = "Athena query failed: HIVE_BAD_DATA" if outcome is RunState.FAIL else None
            events.append(event_to_dict(run_event(step, outcome, at=at, error=error)))
            at += timedelta(minutes=1)
    return events


@pytest.fixture(scope="module")
def events() -> list[dict[str, Any]]:
    return lineage_sample_events()


def ds(name: str) -> str:
    """The node of catalog table ``db.table``, named as Athena names it."""
    return dataset_id(NAMESPACE, f"AwsDataCatalog.{name}")


def job(name: str) -> str:
    return job_id(JOBS, name)


DATASETS = [
    "raw.orders",
    "sales.orders",
    "sales.customers",
    "mart.tmp_totals",
    "mart.customer_totals",
    "mart.daily_sales",
    "mart.customer_flags",
]
JOB_NAMES = ["stage_a.orders", "stage_b.totals", "stage_b.daily", "stage_b.flags"]


def embedded_document(page: str) -> dict[str, Any]:
    """The graph JSON as the browser reads it: the text of the one application/json script element."""

    class Scripts(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.scripts: list[tuple[dict[str, str | None], str]] = []
            self._open: dict[str, str | None] | None = None

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "script":
                self._open = dict(attrs)
                self.scripts.append((self._open, ""))

        def handle_data(self, data: str) -> None:
            if self._open is not None:
                attrs, text = self.scripts[-1]
                self.scripts[-1] = (attrs, text + data)

        def handle_endtag(self, tag: str) -> None:
            if tag == "script":
                self._open = None

    parser = Scripts()
    parser.feed(page)
    blocks = [text for attrs, text in parser.scripts if attrs.get("type") == "application/json"]
    assert len(blocks) == 1
    document: dict[str, Any] = json.loads(blocks[0])
    return document


# ------------------------------------------------------------------------------------------- the model


def test_one_node_per_dataset_and_job_merged_across_runs(events: list[dict[str, Any]]) -> None:
    graph = build_lineage_graph(events)
    assert sorted(graph.datasets) == sorted(ds(name) for name in DATASETS)
    # The parent named by every run's parent facet is a job too, though it sent no events of its own.
    assert sorted(graph.jobs) == sorted(job(name) for name in [*JOB_NAMES, PIPELINE.name])
    # The temp table is written and read back inside one step: an output of it, never an input.
    assert ds("mart.tmp_totals") in graph.datasets
    assert graph.edges == {
        (ds("raw.orders"), job("stage_a.orders")),
        (job("stage_a.orders"), ds("sales.orders")),
        (ds("sales.orders"), job("stage_b.totals")),
        (ds("sales.customers"), job("stage_b.totals")),
        (job("stage_b.totals"), ds("mart.tmp_totals")),
        (job("stage_b.totals"), ds("mart.customer_totals")),
        (ds("mart.customer_totals"), job("stage_b.daily")),
        (job("stage_b.daily"), ds("mart.daily_sales")),
        (ds("mart.customer_totals"), job("stage_b.flags")),
        (job("stage_b.flags"), ds("mart.customer_flags")),
    }


def test_jobs_show_their_latest_run(events: list[dict[str, Any]]) -> None:
    jobs = build_lineage_graph(events).jobs
    daily, flags, totals = jobs[job("stage_b.daily")], jobs[job("stage_b.flags")], jobs[job("stage_b.totals")]
    assert (daily.state, daily.runs, daily.failed_runs, daily.failed, daily.error) == ("COMPLETE", 2, 1, False, None)
    assert (flags.state, flags.runs, flags.failed_runs, flags.failed) == ("FAIL", 2, 1, True)
    assert flags.error == "Athena query failed: HIVE_BAD_DATA"
    assert flags.run_id == stable_run_id(START, "stage_b.flags#1")
    assert (totals.state, totals.runs, totals.sql, totals.dialect) == ("COMPLETE", 1, STAGE_B_TOTALS, "athena")


def test_latest_run_is_chosen_by_event_time_not_by_file_order(events: list[dict[str, Any]]) -> None:
    flags = [e for e in events if e["job"]["name"] == "stage_b.flags"]
    graph = build_lineage_graph(list(reversed(flags)))
    node = graph.jobs[job("stage_b.flags")]
    assert node.state == "FAIL" and node.runs == 2


def test_columns_come_from_schemas_and_column_lineage(events: list[dict[str, Any]]) -> None:
    datasets = build_lineage_graph(events).datasets
    orders = datasets[ds("sales.orders")].columns
    assert list(orders) == ["order_id", "customer_id", "amount", "status", "date", "dt"]
    assert orders["amount"].type == "double"
    assert list(datasets[ds("raw.orders")].columns) == ["order_id", "customer_id", "amount", "status", "date", "dt"]
    assert list(datasets[ds("mart.daily_sales")].columns) == ["day", "region", "revenue"]


def edge_set(events: list[dict[str, Any]]) -> set[tuple[str, str, str, str | None, str, str, str]]:
    return {
        (e.source, e.source_field, e.target, e.target_field, e.job, e.transformation.type, e.transformation.subtype)
        for e in build_lineage_graph(events).column_edges
    }


def test_column_edges_follow_the_column_lineage_facets(events: list[dict[str, Any]]) -> None:
    edges = edge_set(events)
    stage_a, totals, daily, flags = (
        job(name) for name in ("stage_a.orders", "stage_b.totals", "stage_b.daily", "stage_b.flags")
    )
    expected = [
        ("raw.orders", "amount", "sales.orders", "amount", stage_a, "DIRECT", "IDENTITY"),
        ("sales.orders", "amount", "mart.tmp_totals", "total", totals, "DIRECT", "AGGREGATION"),
        ("mart.tmp_totals", "total", "mart.customer_totals", "total_amount", totals, "DIRECT", "IDENTITY"),
        ("mart.customer_totals", "total_amount", "mart.daily_sales", "revenue", daily, "DIRECT", "AGGREGATION"),
        # Dataset-wide inputs (the join, the filter) have no target field: they shape every column.
        ("sales.customers", "customer_id", "mart.tmp_totals", None, totals, "INDIRECT", "JOIN"),
        ("sales.orders", "status", "mart.tmp_totals", None, totals, "INDIRECT", "FILTER"),
        # A CASE condition belongs to the one column it decides.
        ("mart.customer_totals", "total_amount", "mart.customer_flags", "flag", flags, "INDIRECT", "CONDITIONAL"),
    ]
    for source, source_field, target, target_field, via, kind, subtype in expected:
        assert (ds(source), source_field, ds(target), target_field, via, kind, subtype) in edges


def test_column_edges_come_only_from_complete_events(events: list[dict[str, Any]]) -> None:
    failed_only = [e for e in events if e["job"]["name"] == "stage_b.flags" and e["eventType"] != "COMPLETE"]
    graph = build_lineage_graph(failed_only)
    assert graph.column_edges == set()
    assert (job("stage_b.flags"), ds("mart.customer_flags")) in graph.edges
    assert graph.jobs[job("stage_b.flags")].state == "FAIL"


def test_edges_are_deduplicated_across_runs(events: list[dict[str, Any]]) -> None:
    daily = [e for e in events if e["job"]["name"] == "stage_b.daily"]
    assert edge_set(daily) == edge_set(daily + daily)
    assert len(build_lineage_graph(daily + daily).edges) == 2


def test_facets_without_transformations_count_as_direct() -> None:
    event = {
        "eventType": "COMPLETE",
        "eventTime": "2024-01-20T06:00:00Z",
        "run": {"runId": "01930000-0000-7000-8000-00000000000a"},
        "job": {"namespace": "old", "name": "legacy"},
        "inputs": [{"namespace": "hive", "name": "a.src"}],
        "outputs": [
            {
                "namespace": "hive",
                "name": "a.dst",
                "facets": {
                    "columnLineage": {
                        "fields": {"x": {"inputFields": [{"namespace": "hive", "name": "a.src", "field": "y"}]}}
                    }
                },
            }
        ],
    }
    (edge,) = build_lineage_graph([event]).column_edges
    assert (edge.source_field, edge.target_field, str(edge.transformation)) == ("y", "x", "DIRECT TRANSFORMATION")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda e: e["job"].pop("name"), "event 1 job.name must be a non-empty string"),
        (lambda e: e.update(eventTime="yesterday"), "event 1 eventTime 'yesterday' is not an ISO 8601 time"),
        (lambda e: e.update(inputs={"name": "x"}), "inputs must be a JSON array"),
        (lambda e: e["outputs"][0].pop("namespace"), "outputs[0] namespace must be a non-empty string"),
        (
            lambda e: e["outputs"][0]["facets"]["columnLineage"]["fields"]["customer_id"]["inputFields"][0].update(
                transformations=[{"type": "SIDEWAYS"}]
            ),
            "transformation {'type': 'SIDEWAYS'} is not valid",
        ),
    ],
)
def test_bad_events_are_rejected_with_the_place_named(events: list[dict[str, Any]], change: Any, message: str) -> None:
    event = json.loads(json.dumps(next(e for e in events if e["eventType"] == "COMPLETE" and e["outputs"])))
    change(event)
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        build_lineage_graph([event])


def test_the_page_and_the_column_graph_read_events_alike(events: list[dict[str, Any]]) -> None:
    # One reader (lineage.openlineage.reader): the same bad event is refused by both, in the same words.
    event = json.loads(json.dumps(next(e for e in events if e["eventType"] == "COMPLETE" and e["outputs"])))
    fields = event["outputs"][0]["facets"]["columnLineage"]["fields"]
    next(iter(fields.values()))["inputFields"][0]["transformations"] = [{"type": "SIDEWAYS"}]
    with pytest.raises(InvalidInputError) as page_error:
        build_lineage_graph([event])
    with pytest.raises(InvalidInputError) as graph_error:
        ColumnGraph.from_events([event])
    assert str(page_error.value).removeprefix("event 1") == str(graph_error.value).removeprefix("event")
    assert "transformation {'type': 'SIDEWAYS'} is not valid" in str(graph_error.value)


# ------------------------------------------------------------------------------------------- graph shapes


def synthetic_event(job_name: str, inputs: list[str], outputs: list[str], minute: int = 0) -> dict[str, Any]:
    return {
        "eventType": "COMPLETE",
        "eventTime": (START + timedelta(minutes=minute)).isoformat(),
        "run": {"runId": f"run-{job_name}-{minute}"},
        "job": {"namespace": JOBS, "name": job_name},
        "inputs": [{"namespace": NAMESPACE, "name": name} for name in inputs],
        "outputs": [{"namespace": NAMESPACE, "name": name} for name in outputs],
    }


def cycle_events() -> list[dict[str, Any]]:
    return [
        synthetic_event("grow", ["db.a"], ["db.b"]),
        synthetic_event("feed_back", ["db.b"], ["db.a"]),
        synthetic_event("self", ["db.c"], ["db.c"]),
    ]


def chain_events(chains: int = 20, steps: int = 5) -> list[dict[str, Any]]:
    """``chains`` chains of ``steps`` jobs, plus a shared dimension read by every first step."""
    events = []
    for chain in range(chains):
        for step in range(steps):
            inputs = [f"c{chain}.t{step}"] + (["dim.shared"] if step == 0 else [])
            events.append(synthetic_event(f"chain{chain}_step{step}", inputs, [f"c{chain}.t{step + 1}"], step))
    return events


def test_cycles_are_tolerated() -> None:
    graph = build_lineage_graph(cycle_events())
    assert (job("self"), dataset_id(NAMESPACE, "db.c")) in graph.edges
    assert (dataset_id(NAMESPACE, "db.c"), job("self")) in graph.edges
    page = render_lineage_html(cycle_events())
    assert {node["id"] for node in embedded_document(page)["nodes"]} == set(graph.node_ids)


def test_two_hundred_nodes_make_one_document() -> None:
    graph = build_lineage_graph(chain_events())
    assert len(graph.node_ids) == 221
    document = graph_document(graph)
    assert len(document["nodes"]) == 221 and len(document["edges"]) == len(graph.edges) == 220


# ------------------------------------------------------------------------------------------- the page


def test_page_is_self_contained(events: list[dict[str, Any]]) -> None:
    page = render_lineage_html(events, title="Demo lineage")
    assert page.startswith("<!DOCTYPE html>")
    assert "<title>Demo lineage</title>" in page
    assert "<style>" in page and '<script type="application/json" id="lineage-data">' in page and "<svg" in page
    # No resource is loaded from anywhere: no src/href pointing out, no external stylesheet or font.
    assert not re.search(r"""\b(?:src|href|xlink:href)\s*=\s*["']?\s*(?:https?:)?//""", page, re.IGNORECASE)
    assert not re.search(r"<link\b", page, re.IGNORECASE)
    assert "@import" not in page and "url(http" not in page and "@font-face" not in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page


def test_content_security_policy_allows_exactly_the_inline_style_and_script(events: list[dict[str, Any]]) -> None:
    import base64
    import hashlib

    page = render_lineage_html(events)
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert policy is not None
    scripts = re.findall(r"<script>(.*?)</script>", page, re.DOTALL)
    style = re.search(r"<style>(.*?)</style>", page, re.DOTALL)
    assert len(scripts) == 2 and style is not None  # the layout library, then the page's own script
    allowed = re.findall(r"'(sha256-[^']+)'", policy.group(1).replace("&#x27;", "'"))
    digests = [
        "sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode()
        for source in (*scripts, style.group(1))
    ]
    assert sorted(allowed) == sorted(digests)
    assert "'unsafe-inline'" not in policy.group(1) and "'unsafe-eval'" not in policy.group(1)


def test_nodes_are_built_by_the_script_not_written_into_the_page(events: list[dict[str, Any]]) -> None:
    page = render_lineage_html(events)
    assert "data-node-id=" not in page.split("<script")[0]
    assert "data-node-id" in page  # the script sets it


def test_embedded_json_survives_script_tags_in_sql(events: list[dict[str, Any]]) -> None:
    page = render_lineage_html(events)
    # The only closing script tags are those of the three script elements (data, dagre, the page's own).
    assert page.lower().count("</script") == 3
    assert SCRIPT_BREAKER not in page
    document = embedded_document(page)
    totals = next(node for node in document["nodes"] if node["id"] == job("stage_b.totals"))
    assert totals["sql"] == STAGE_B_TOTALS
    assert SCRIPT_BREAKER in totals["sql"]


def test_title_is_escaped(events: list[dict[str, Any]]) -> None:
    page = render_lineage_html(events, title="<b>Sales & co</b>")
    assert "<title>&lt;b&gt;Sales &amp; co&lt;/b&gt;</title>" in page
    assert embedded_document(page)["title"] == "<b>Sales & co</b>"


def test_document_carries_what_the_page_draws(events: list[dict[str, Any]]) -> None:
    document = graph_document(build_lineage_graph(events), title="t")
    nodes = {node["id"]: node for node in document["nodes"]}
    assert set(nodes) == {ds(n) for n in DATASETS} | {job(n) for n in [*JOB_NAMES, PIPELINE.name]}
    flags = nodes[job("stage_b.flags")]
    assert (flags["kind"], flags["state"], flags["failed"], flags["runs"], flags["failedRuns"]) == (
        "job",
        "FAIL",
        True,
        2,
        1,
    )
    orders = nodes[ds("sales.orders")]
    assert (orders["kind"], orders["name"], orders["namespace"], orders["label"]) == (
        "dataset",
        "AwsDataCatalog.sales.orders",
        NAMESPACE,
        "sales.orders",
    )
    assert (orders["parent"], orders["group"]) == (job(PIPELINE.name), False)
    assert (nodes[job(PIPELINE.name)]["group"], nodes[job(PIPELINE.name)]["runs"]) == (True, 0)
    assert nodes[ds("raw.orders")]["parent"] is None  # written by no job of the pipeline
    assert {"name": "amount", "type": "double"} in orders["columns"]
    assert {"source": ds("raw.orders"), "target": job("stage_a.orders")} in document["edges"]
    assert {
        "source": ds("sales.orders"),
        "sourceField": "status",
        "target": ds("mart.tmp_totals"),
        "targetField": None,
        "job": job("stage_b.totals"),
        "type": "INDIRECT",
        "subtype": "FILTER",
        "masking": False,
    } in document["columnEdges"]


def parented(job_name: str, parent: str | None, inputs: list[str], outputs: list[str], **run: Any) -> dict[str, Any]:
    event = synthetic_event(job_name, inputs, outputs, run.pop("minute", 0))
    if parent is not None:
        event["run"]["facets"] = {"parent": {"job": {"namespace": JOBS, "name": parent}, "run": {"runId": "r"}}}
    if "error" in run:
        event["eventType"] = "FAIL"
        event["run"].setdefault("facets", {})["errorMessage"] = {"message": run.pop("error")}
    return event


def test_parents_are_groups_and_labels_name_tables() -> None:
    events = [
        parented("pipeline", None, [], []),
        parented("stage_a", "pipeline", [], []),
        parented("stage_a.db.t", "stage_a", ["AwsDataCatalog.db_raw.t"], ["AwsDataCatalog.db.t"]),
        parented("stage_b.mart.u", "pipeline", [], []),
        parented("stage_b.mart.u.step0", "stage_b.mart.u", ["AwsDataCatalog.db.t"], ["AwsDataCatalog.mart.tmp"]),
        parented("stage_b.mart.u.step1", "stage_b.mart.u", ["AwsDataCatalog.mart.tmp"], ["AwsDataCatalog.mart.u"]),
        # Written by jobs of two groups: it sits in the group around both.
        parented("stage_b.mart.v", "pipeline", [], []),
        parented("stage_b.mart.v.step0", "stage_b.mart.v", [], ["AwsDataCatalog.mart.u"]),
    ]
    graph = build_lineage_graph(events)
    assert graph.groups == {job("pipeline"), job("stage_a"), job("stage_b.mart.u"), job("stage_b.mart.v")}

    def table(name: str) -> str:
        return dataset_id(NAMESPACE, f"AwsDataCatalog.{name}")

    assert graph.group_of(job("stage_a")) == job("pipeline") and graph.group_of(job("pipeline")) is None
    assert graph.group_of(job("stage_a.db.t")) == job("stage_a")
    assert graph.group_of(table("db.t")) == job("stage_a")
    assert graph.group_of(table("mart.tmp")) == job("stage_b.mart.u")
    assert graph.group_of(table("mart.u")) == job("pipeline")
    assert graph.group_of(table("db_raw.t")) is None
    # database.table, without the catalog; a job without its group's name in front.
    assert graph.display_label(table("db_raw.t")) == "db_raw.t"
    assert graph.display_label(job("stage_a.db.t")) == "db.t"
    assert graph.display_label(job("stage_b.mart.u.step1")) == "step1"
    assert graph.display_label(job("stage_b.mart.u")) == "stage_b.mart.u"


def test_a_parent_that_reads_or_writes_is_a_node_and_cycles_end() -> None:
    events = [
        parented("outer", "inner", [], [], minute=0),
        parented("inner", "outer", [], [], minute=1),  # would make a cycle: ignored
        parented("step", "loader", ["db.a"], ["db.b"]),
        parented("loader", None, ["db.b"], ["db.c"]),  # a parent that has edges of its own
    ]
    graph = build_lineage_graph(events)
    assert graph.jobs[job("outer")].parent == job("inner") and graph.jobs[job("inner")].parent is None
    assert graph.groups == {job("inner")}
    assert graph.group_of(job("step")) is None and graph.display_label(job("step")) == "step"


def test_failed_runs_blocked_by_quality_are_told_apart() -> None:
    events = [
        parented("a", None, [], ["db.a"], error="quality failed: QualityBlocked: quality checks blocked db.a: ..."),
        parented("b", None, [], ["db.b"], error="Athena query failed: HIVE_BAD_DATA"),
        # The check itself crashed (nothing was judged), or the table's name says quality: failed, not blocked.
        parented("c", None, [], ["db.c"], error="quality failed: Sandbox.Timedout: Task timed out"),
        parented("d", None, [], ["db.quality"], error="ctas failed: blocked by a lock on db.quality"),
    ]
    nodes = {node["id"]: node for node in graph_document(build_lineage_graph(events))["nodes"]}
    assert (nodes[job("a")]["failed"], nodes[job("a")]["blocked"]) == (True, True)
    for other in ("b", "c", "d"):
        assert (nodes[job(other)]["failed"], nodes[job(other)]["blocked"]) == (True, False), other


def test_no_events_give_an_empty_page() -> None:
    document = embedded_document(render_lineage_html([]))
    assert document["nodes"] == [] and document["edges"] == [] and document["columnEdges"] == []


def test_write_is_atomic_and_reads_back(events: list[dict[str, Any]], tmp_path: Path) -> None:
    target = tmp_path / "workspace" / "lineage.html"
    assert write_lineage_html(events, target, title="Demo") == target
    assert target.read_text(encoding="utf-8") == render_lineage_html(events, title="Demo")
    assert [p.name for p in target.parent.iterdir()] == ["lineage.html"]
    bad = [{"eventType": "COMPLETE", "eventTime": "soon", "job": {"namespace": "n", "name": "j"}}]
    with pytest.raises(InvalidInputError):
        write_lineage_html(bad, target)
    assert target.read_text(encoding="utf-8") == render_lineage_html(events, title="Demo")
    assert [p.name for p in target.parent.iterdir()] == ["lineage.html"]


def test_events_stored_as_json_lines_render_the_same(events: list[dict[str, Any]], tmp_path: Path) -> None:
    stored = tmp_path / "events.jsonl"
    stored.write_text("".join(json.dumps(event) + "\n" for event in events))
    assert render_lineage_html(load_events(stored)) == render_lineage_html(events)


# ------------------------------------------------------------------------------------------- the assets

REPO = Path(__file__).parents[2]
NODE_MODULES = REPO / "node_modules"


def test_document_carries_no_geometry(events: list[dict[str, Any]]) -> None:
    # Sizes and places are the page's business (viewer.js and dagre): Python holds none of them.
    document = graph_document(build_lineage_graph(events))
    for node in document["nodes"]:
        assert not {"x", "y", "width", "height", "layer"} & set(node), node
    assert not any(name.isupper() and ("GAP" in name or "WIDTH" in name) for name in vars(viewer_html))


def test_page_inlines_its_assets_whole(events: list[dict[str, Any]]) -> None:
    page = render_lineage_html(events, title="{{style}}")
    assets = viewer_html.resources.files(viewer_html.__package__).joinpath(viewer_html.ASSETS)
    for name in (viewer_html.STYLE, *viewer_html.SCRIPTS):
        assert assets.joinpath(name).read_text(encoding="utf-8") in page, name
    # Every slot of the template is filled, and a title that looks like one is not read as one.
    assert not re.search(r"\{\{\w+\}\}", page.replace("{{style}}", ""))
    assert "<title>{{style}}</title>" in page
    assert page.index("dagre.min.js.LEGAL.txt") < page.index("new dagre.graphlib.Graph")


@pytest.mark.skipif(
    not (NODE_MODULES / ".installed").exists(), reason="node_modules is absent: run `make install` (npm ci)"
)
@pytest.mark.parametrize(("asset", "package_file"), sorted(viewer_html.VENDORED.items()))
def test_vendored_files_are_the_ones_package_json_pins(asset: str, package_file: str) -> None:
    # An upgrade goes through package.json: `npm install --save-exact`, then copy the file over.
    shipped = viewer_html.resources.files(viewer_html.__package__).joinpath(viewer_html.ASSETS, asset).read_bytes()
    assert shipped == (NODE_MODULES / package_file).read_bytes(), f"copy node_modules/{package_file} to {asset}"
    package = package_file.split("/dist/")[0]
    pinned = json.loads((REPO / "package.json").read_text())["devDependencies"][package]
    assert json.loads((NODE_MODULES / package / "package.json").read_text())["version"] == pinned
    licences = (REPO / "lakeline/lineage/viewer/assets/vendor/LICENSES.md").read_text()
    assert f"{package} {pinned}" in licences


def test_a_script_that_would_end_its_element_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    real = viewer_html._asset
    monkeypatch.setattr(viewer_html, "_asset", lambda name: "x = '</SCRIPT>';" if name == "viewer.js" else real(name))
    with pytest.raises(InvalidInputError, match=r"asset viewer\.js cannot be inlined"):
        render_lineage_html([])


def test_column_lineage_the_page_does_not_draw_is_not_read() -> None:
    """Only a COMPLETE event's outputs say what was written: a START event's partial facet and an input's
    own facet (as other producers send them) are neither drawn nor refused."""
    job = {"namespace": "ns", "name": "job1"}
    junk = {"columnLineage": {"fields": {"q": {"inputFields": [{}]}}}}
    events = [
        {"eventType": "START", "eventTime": "2024-05-01T10:00:00+00:00", "run": {"runId": "r1"}, "job": job,
         "inputs": [{"namespace": "ns", "name": "db.src", "facets": junk}],
         "outputs": [{"namespace": "ns", "name": "db.out", "facets": junk}]},
    ]  # fmt: skip
    graph = viewer_html.build_lineage_graph(events)
    assert graph.column_edges == set()
    assert {node.name for node in graph.datasets.values()} == {"db.src", "db.out"}
