"""RunEvents of pipeline steps and their emission through openlineage-python transports."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from openlineage.client.event_v2 import RunState
from openlineage.client.transport import AmazonDataZoneTransport

import lakeline
from lakeline.catalog_json import CatalogFile
from lakeline.errors import ConfigError
from lakeline.lineage.openlineage.config import OpenLineageSettings, RunReference, load_openlineage_settings
from lakeline.lineage.openlineage.emitter import LineageEmitter, build_transport
from lakeline.lineage.openlineage.events import (
    PRODUCER,
    StepRun,
    event_to_dict,
    new_run_id,
    run_event,
    sql_step_run,
    stable_run_id,
)
from lakeline.lineage.openlineage.naming import table_of
from tests.openlineage_schema import facets_of, validate_event

DATA = Path(__file__).parent / "data"
AT = datetime(2024, 1, 20, 6, 30, tzinfo=UTC)
PARENT = RunReference("lakeline", "pipeline.sales", "01930000-0000-7000-8000-000000000001")
ROOT = RunReference("scheduler", "nightly", "01930000-0000-7000-8000-000000000002")
RUN_ID = "01930000-0000-7000-8000-000000000003"
SQL = """
CREATE TABLE mart.tmp AS
SELECT o.customer_id, c.region, SUM(o.amount) AS total, COUNT(*) AS n, o.dt
FROM sales.orders o JOIN sales.customers c ON o.customer_id = c.customer_id
WHERE o.status = 'paid' GROUP BY o.customer_id, c.region, o.dt;
INSERT INTO mart.customer_totals SELECT * FROM mart.tmp;
"""


@pytest.fixture(scope="module")
def step() -> StepRun:
    catalog = CatalogFile.load(DATA / "column_lineage_catalog.json")
    settings = OpenLineageSettings(
        dataset_namespace="awsathena://athena.eu-west-1.amazonaws.com", parent=PARENT, root=ROOT
    )
    return sql_step_run(
        SQL,
        catalog=catalog,
        job_name="stage_b.sales.totals",
        run_id=RUN_ID,
        settings=settings,
        engine="athena",
        engine_version="3",
    )


def _input_fields(facet: dict[str, Any]) -> set[tuple[str, str, str, str]]:
    return {
        (table_of(f["name"]), f["field"], t["type"], t["subtype"])
        for f in facet["inputFields"]
        for t in f["transformations"]
    }


def test_complete_event_carries_the_standard_facets(step: StepRun) -> None:
    event = event_to_dict(run_event(step, RunState.COMPLETE, at=AT))
    assert event["eventType"] == "COMPLETE"
    assert event["eventTime"] == "2024-01-20T06:30:00+00:00"
    assert event["run"]["runId"] == RUN_ID
    parent = event["run"]["facets"]["parent"]
    assert parent["run"]["runId"] == PARENT.run_id
    assert parent["job"] == {"namespace": "lakeline", "name": "pipeline.sales", "facets": {}}
    assert parent["root"]["job"]["name"] == "nightly"
    assert event["run"]["facets"]["processing_engine"]["name"] == "athena"
    assert event["job"]["name"] == "stage_b.sales.totals"
    assert event["job"]["facets"]["sql"]["query"] == SQL
    assert event["job"]["facets"]["sql"]["dialect"] == "athena"
    assert event["job"]["facets"]["jobType"]["processingType"] == "BATCH"
    # mart.tmp is written before it is read: an output of the step, not one of its inputs.
    assert [d["name"] for d in event["inputs"]] == ["AwsDataCatalog.sales.customers", "AwsDataCatalog.sales.orders"]
    assert [d["name"] for d in event["outputs"]] == ["AwsDataCatalog.mart.tmp", "AwsDataCatalog.mart.customer_totals"]
    # Lakeline's producer on the event and on every facet, openlineage-python's nowhere.
    assert event["producer"] == PRODUCER
    producers = {facet["_producer"] for facet in event["run"]["facets"].values()}
    producers |= {facet["_producer"] for facet in event["job"]["facets"].values()}
    producers |= {f["_producer"] for d in (*event["inputs"], *event["outputs"]) for f in d["facets"].values()}
    assert producers == {PRODUCER}
    assert PRODUCER.startswith("https://")
    assert event["run"]["facets"]["processing_engine"]["version"] == "3"
    orders = event["inputs"][1]
    assert {f["name"]: f["type"] for f in orders["facets"]["schema"]["fields"]}["amount"] == "double"

    tmp, totals = event["outputs"]
    assert [f["name"] for f in tmp["facets"]["schema"]["fields"]] == ["customer_id", "region", "total", "n", "dt"]
    lineage = tmp["facets"]["columnLineage"]
    assert set(lineage["fields"]) == {"customer_id", "region", "total", "dt"}, "n = COUNT(*) reads no column"
    assert _input_fields(lineage["fields"]["total"]) == {("sales.orders", "amount", "DIRECT", "AGGREGATION")}
    assert _input_fields({"inputFields": lineage["dataset"]}) == {
        ("sales.orders", "customer_id", "INDIRECT", "JOIN"),
        ("sales.orders", "customer_id", "INDIRECT", "GROUP_BY"),
        ("sales.customers", "customer_id", "INDIRECT", "JOIN"),
        ("sales.customers", "region", "INDIRECT", "GROUP_BY"),
        ("sales.orders", "dt", "INDIRECT", "GROUP_BY"),
        ("sales.orders", "status", "INDIRECT", "FILTER"),
    }
    assert {f["namespace"] for f in lineage["fields"]["total"]["inputFields"]} == {
        "awsathena://athena.eu-west-1.amazonaws.com"
    }
    total_amount = totals["facets"]["columnLineage"]["fields"]["total_amount"]
    assert _input_fields(total_amount) == {("mart.tmp", "total", "DIRECT", "IDENTITY")}
    assert totals["facets"]["schema"]["fields"][2] == {"name": "total_amount", "type": "double", "fields": []}


def test_fail_event_has_the_error(step: StepRun) -> None:
    try:
        raise RuntimeError("Athena: TABLE_NOT_FOUND")
    except RuntimeError as error:
        event = event_to_dict(run_event(step, RunState.FAIL, at=AT, error=error, stack_trace="trace"))
    facet = event["run"]["facets"]["errorMessage"]
    assert facet["message"] == "RuntimeError: Athena: TABLE_NOT_FOUND"
    assert facet["programmingLanguage"] == "SQL"
    assert facet["stackTrace"] == "trace"


def test_emitter_keeps_start_and_complete_in_process(step: StepRun) -> None:
    emitter = LineageEmitter(OpenLineageSettings(), clock=lambda: AT)
    assert not emitter.sends_events
    with emitter.run(step):
        pass
    with pytest.raises(ValueError), emitter.run(step):
        raise ValueError("bad partition")
    events = emitter.drain()
    assert [e.eventType for e in events] == [RunState.START, RunState.COMPLETE, RunState.START, RunState.FAIL]
    assert "ValueError: bad partition" in event_to_dict(events[-1])["run"]["facets"]["errorMessage"]["stackTrace"]
    assert emitter.drain() == []


def test_run_ids() -> None:
    assert stable_run_id(AT, "exec-1/step-2") == stable_run_id(AT, "exec-1/step-2")
    assert stable_run_id(AT, "exec-1/step-2") != stable_run_id(AT, "exec-1/step-3")
    assert new_run_id() != new_run_id()
    with pytest.raises(ValueError, match="not a UUID"):
        StepRun(job_name="j", run_id="step-2", job_namespace="n", dataset_namespace="d")
    with pytest.raises(ValueError, match="timezone-aware"):
        run_event(StepRun("j", RUN_ID, "n", "d"), RunState.START, at=datetime(2024, 1, 1))


def test_http_transport_from_openlineage_variables(
    step: StepRun, lineage_server: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    url, requests = lineage_server
    environ = {"OPENLINEAGE_URL": url, "OPENLINEAGE_API_KEY": "secret", "OPENLINEAGE_URL_PARAM_CODE": "abc"}
    settings = load_openlineage_settings(environ, cwd=tmp_path, home=tmp_path)
    emitter = LineageEmitter(settings, clock=lambda: AT)
    assert emitter.sends_events
    with emitter.run(step):
        pass
    emitter.close()
    assert [r["path"] for r in requests] == ["/api/v1/lineage?code=abc"] * 2
    assert requests[0]["headers"]["Authorization"] == "Bearer secret"
    assert [r["body"]["eventType"] for r in requests] == ["START", "COMPLETE"]
    # What is sent is what is kept, plus the client's tags (in Lakeline's facet).
    sent = requests[1]["body"]
    assert sent["run"]["facets"].pop("tags")["_producer"] == PRODUCER
    assert sent == event_to_dict(emitter.drain()[1])


def test_amazon_datazone_transport(step: StepRun, lineage_server: tuple[str, list[dict[str, Any]]]) -> None:
    url, requests = lineage_server
    transport = build_transport(
        {"type": "amazon_datazone_api", "domainId": "dzd_test", "region": "eu-west-1", "endpointOverride": url}
    )
    assert isinstance(transport, AmazonDataZoneTransport)
    emitter = LineageEmitter(OpenLineageSettings(), transport=transport, clock=lambda: AT)
    emitter.emit(run_event(step, RunState.COMPLETE, at=AT))
    assert emitter.failures == 0
    (request,) = requests
    assert request["path"] == "/v2/domains/dzd_test/lineage/events"
    assert request["body"]["run"]["runId"] == RUN_ID


def test_a_failing_transport_never_fails_the_step(step: StepRun, tmp_path: Path) -> None:
    # Port 9 (discard) has no listener here; no retries, so the failure is immediate.
    transport = {"type": "http", "url": "http://127.0.0.1:9", "retry": {"total": 0}, "timeout": 1}
    emitter = LineageEmitter(OpenLineageSettings(transport=transport), clock=lambda: AT)
    with emitter.run(step):
        pass
    assert emitter.failures == 2
    assert len(emitter.drain()) == 2


def test_file_transport_and_disabled(step: StepRun, tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    settings = OpenLineageSettings(transport={"type": "file", "log_file_path": str(path), "append": True})
    emitter = LineageEmitter(settings, clock=lambda: AT)
    emitter.emit(run_event(step, RunState.START, at=AT))
    emitter.emit(run_event(step, RunState.COMPLETE, at=AT))
    lines = path.read_text().splitlines()
    assert [json.loads(line)["eventType"] for line in lines] == ["START", "COMPLETE"]
    disabled = LineageEmitter(OpenLineageSettings(transport=settings.transport, disabled=True))
    assert not disabled.sends_events


def test_unknown_transport_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="cannot build OpenLineage transport 'carrier_pigeon'"):
        build_transport({"type": "carrier_pigeon"})


def test_the_engine_version_is_the_engines_own() -> None:
    from importlib import metadata

    step = StepRun(job_name="j", run_id=RUN_ID, job_namespace="n", dataset_namespace="d", engine="spark")
    engine = event_to_dict(run_event(step, RunState.START, at=AT))["run"]["facets"]["processing_engine"]
    assert engine["name"] == "spark"
    assert engine["version"] == metadata.version("pyspark")
    assert engine["openlineageAdapterVersion"] == lakeline.__version__


def test_the_producer_version_needs_no_installed_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    # A Lambda bundle is Lakeline's code without its dist-info: the version must still be Lakeline's own.
    import importlib
    from importlib import metadata

    from lakeline.lineage.openlineage import producer

    def no_distribution(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    with monkeypatch.context() as patched:
        patched.setattr(metadata, "version", no_distribution)
        bundled = importlib.reload(producer)
        version, url = bundled.LAKELINE_VERSION, bundled.PRODUCER
    importlib.reload(producer)
    assert version == lakeline.__version__
    assert url == f"https://github.com/lakeline/lakeline/tree/v{lakeline.__version__}"


@pytest.mark.parametrize(("glue", "spark"), [("5.0", "3.5.4"), ("4.0", "3.3.0"), ("3.0", "3.1.1"), ("9.9", None)])
def test_a_glue_version_runs_the_spark_aws_documents(glue: str, spark: str | None) -> None:
    from lakeline.lineage.openlineage.producer import glue_spark_version

    assert glue_spark_version(glue) == spark


def test_a_configured_client_never_changes_kept_events_and_sends_only_lakeline_facets(
    step: StepRun, tmp_path: Path
) -> None:
    # openlineage-python's client adds a tags run facet (its default tag, and tags from the config) to
    # the event it is given, in place: the events Lakeline keeps must not change, and what is sent must
    # name Lakeline as the producer of every facet.
    path = tmp_path / "events.jsonl"
    settings = OpenLineageSettings(
        transport={"type": "file", "log_file_path": str(path), "append": True},
        client_config={"tags": {"run": {"team": "sales"}, "job": {"owner": "data"}}},
    )
    emitter = LineageEmitter(settings, clock=lambda: AT)
    event = run_event(step, RunState.START, at=AT)
    made = event_to_dict(event)
    emitter.emit(event)
    assert event_to_dict(event) == made
    assert [event_to_dict(kept) for kept in emitter.drain()] == [made]
    sent = json.loads(path.read_text())
    # No official 1-0-0 TagsJobFacet schema is vendored (tests/openlineage_spec/README.md): the rest is checked.
    job_facets = {name: facet for name, facet in sent["job"]["facets"].items() if name != "tags"}
    validate_event({**sent, "job": {**sent["job"], "facets": job_facets}})
    run_tags = {tag["key"]: tag["source"] for tag in sent["run"]["facets"]["tags"]["tags"]}
    assert run_tags == {"team": "USER", "openlineage_client_version": "OPENLINEAGE_CLIENT"}
    assert [tag["key"] for tag in sent["job"]["facets"]["tags"]["tags"]] == ["owner"]
    producers = {sent["producer"]} | {facet["_producer"] for _, facet in facets_of(sent)}
    assert producers == {PRODUCER}
