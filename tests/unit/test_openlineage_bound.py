"""Every event under DataZone's 300,000 characters, sent in parts; each part's client token; Glue ARN symlinks.

DataZone is reached through its real boto3 client (botocore's own service model serialises and validates
the request) against a local HTTP endpoint that records what it receives: moto 5.2 has no ``datazone``
service, and an endpoint sees what goes over the wire (the ``Client-Token`` header, the body's size),
which a Stubber does not.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from openlineage.client.event_v2 import RunEvent, RunState

from lakeline.catalog_json import CatalogFile
from lakeline.engines.base import Column, TableSchema
from lakeline.lineage.openlineage.archive import EventArchive
from lakeline.lineage.openlineage.bound import (
    EVENT_SIZE_LIMIT,
    EventTooLarge,
    client_token,
    event_size,
    in_order,
    split_event,
)
from lakeline.lineage.openlineage.config import OpenLineageSettings, load_openlineage_settings
from lakeline.lineage.openlineage.datazone import DataZoneTransport, token_of
from lakeline.lineage.openlineage.emitter import LineageEmitter, build_transport
from lakeline.lineage.openlineage.events import StepRun, event_to_dict, run_event, sql_step_run
from lakeline.lineage.records.archive import LocalArchiveStore
from tests.openlineage_schema import validate_event

AT = datetime(2024, 1, 20, 6, 30, tzinfo=UTC)
RUN_ID = "01930000-0000-7000-8000-000000000003"
COLUMNS = 2000
GLUE = "arn:aws:glue:eu-west-1:123456789012"
CLIENT_TOKEN = re.compile(r"[\x21-\x7E]{1,128}")
"""botocore's ``ClientToken`` shape for ``PostLineageEvent`` (pattern and length)."""


@pytest.fixture(scope="module")
def wide() -> StepRun:
    """A step writing 2,000 columns, each from a column of a 2,000-column table, joined to a small one."""
    columns = tuple(Column(f"column_{i:04d}", "string") for i in range(COLUMNS))
    catalog = CatalogFile(
        {
            ("sales", "wide"): TableSchema("sales", "wide", columns, (Column("dt", "string"),)),
            ("sales", "dim"): TableSchema("sales", "dim", (Column("k", "string"), Column("v", "string"))),
        }
    )
    select = ", ".join(f"upper(w.column_{i:04d}) AS column_{i:04d}" for i in range(COLUMNS))
    sql = (
        f"CREATE TABLE mart.wide AS SELECT {select}, d.v FROM sales.wide w "
        "JOIN sales.dim d ON w.column_0000 = d.k WHERE w.dt = '20240101'"
    )
    settings = OpenLineageSettings(dataset_namespace="awsathena://athena.eu-west-1.amazonaws.com", glue_catalog=GLUE)
    return sql_step_run(
        sql, catalog=catalog, job_name="stage_b.mart.wide.step0", run_id=RUN_ID, settings=settings, engine="athena"
    )


def _lineage_fields(events: list[dict[str, Any]]) -> list[str]:
    return [
        column
        for event in events
        for output in event.get("outputs", [])
        for column in output["facets"].get("columnLineage", {}).get("fields", {})
    ]


def test_the_client_token_names_the_run_the_event_and_the_part_not_the_time() -> None:
    token = client_token(RUN_ID, "COMPLETE")
    assert token == client_token(RUN_ID, "COMPLETE", 0)  # stable: the same event, the same token
    assert CLIENT_TOKEN.fullmatch(token)
    # A retried post-update dates its end event anew: the same event for DataZone, kept once.
    assert token_of(event_body(RUN_ID, "COMPLETE", AT.isoformat())) == token_of(
        event_body(RUN_ID, "COMPLETE", "2024-01-20T06:30:01+00:00")
    )
    others = {
        client_token(RUN_ID, "START"),
        client_token(RUN_ID, "COMPLETE", 1),
        client_token("01930000-0000-7000-8000-000000000004", "COMPLETE"),
    }
    assert token not in others and len(others) == 3


def event_body(run_id: str, event_type: str, at: str) -> bytes:
    return json.dumps({"run": {"runId": run_id}, "eventType": event_type, "eventTime": at}).encode()


def test_a_small_event_is_one_part(wide: StepRun) -> None:
    small = run_event(StepRun("job", RUN_ID, "lakeline", "ns"), RunState.COMPLETE, at=AT)
    (part,) = split_event(small)
    assert part.event is small and part.number == 0 and part.archive_name == f"{RUN_ID}.COMPLETE"


@pytest.mark.parametrize("state", [RunState.START, RunState.COMPLETE, RunState.FAIL])
def test_2000_columns_split_into_valid_parts_under_the_bound(wide: StepRun, state: RunState) -> None:
    event = run_event(wide, state, at=AT, error="boom" if state is RunState.FAIL else None)
    whole = event_to_dict(event)
    assert event_size(event) > EVENT_SIZE_LIMIT  # the case: this event does not fit whole
    parts = in_order(split_event(event))
    sent = [event_to_dict(part.event) for part in parts]
    assert len(parts) >= 3
    for part, body in zip(parts, sent, strict=True):
        assert len(json.dumps(body, sort_keys=True).encode()) <= EVENT_SIZE_LIMIT
        validate_event(body)
        assert body["run"]["runId"] == RUN_ID and body["eventTime"] == whole["eventTime"]
        assert body["job"] == {**whole["job"], "facets": body["job"]["facets"]}
        # Every part names the tables by their Glue ARN too (DataZone matches Glue assets by it).
        for dataset in body["inputs"] + body["outputs"]:
            glue = dataset["facets"]["symlinks"]["identifiers"][1]
            assert glue["namespace"] == GLUE and glue["name"] == "table/" + dataset["name"].split(".", 1)[1].replace(
                ".", "/"
            )
        assert part.event.eventType is (state if part.number == 0 else RunState.RUNNING)
    # One START and one end event per run (the spec): the others are RUNNING, after a START, before an end.
    types = [body["eventType"] for body in sent]
    expected = [state.value] + ["RUNNING"] * (len(parts) - 1)
    assert types == (expected if state is RunState.START else expected[1:] + expected[:1])
    # Nothing lost, nothing doubled: each column's lineage once, in order, as in the whole event.
    in_parts = sorted(parts, key=lambda part: part.number)
    assert _lineage_fields([event_to_dict(part.event) for part in in_parts]) == _lineage_fields([whole])
    assert len(_lineage_fields([whole])) == COLUMNS + 1
    # Facets other than column lineage travel whole, once; the run's error and the SQL stay on the event itself.
    schemas = [(o["name"], len(o["facets"]["schema"]["fields"])) for b in sent for o in b["outputs"] + b["inputs"]
               if "schema" in o["facets"]]  # fmt: skip
    assert sorted(schemas) == sorted(
        (d["name"], len(d["facets"]["schema"]["fields"])) for d in whole["inputs"] + whole["outputs"]
    )
    head = sent[0] if state is RunState.START else sent[-1]
    assert head["job"]["facets"]["sql"] == whole["job"]["facets"]["sql"]
    assert ("errorMessage" in head["run"]["facets"]) is (state is RunState.FAIL)
    assert all(
        "sql" not in b["job"]["facets"] and "errorMessage" not in b["run"]["facets"] for b in sent if b is not head
    )
    datasets = [d for b in sent for d in b["outputs"] if "columnLineage" in d["facets"]]
    assert sum(len(d["facets"]["columnLineage"].get("dataset", [])) > 0 for d in datasets) == 1


def test_an_event_too_large_without_its_dataset_facets_is_refused(wide: StepRun) -> None:
    event = run_event(wide, RunState.START, at=AT)
    with pytest.raises(EventTooLarge, match="with no dataset facets"):
        split_event(event, limit=50_000)  # its SQL text alone is ~60,000


def test_the_emitter_keeps_and_sends_the_same_parts_each_under_the_bound_as_sent(wide: StepRun, tmp_path: Path) -> None:
    # The client adds its tags (here 40,000 characters of them) to what it sends: the bound holds for that.
    path = tmp_path / "events.jsonl"
    settings = OpenLineageSettings(
        transport={"type": "file", "log_file_path": str(path), "append": True},
        client_config={"tags": {"run": {f"tag{i:03d}": "x" * 190 for i in range(200)}}},
    )
    emitter = LineageEmitter(settings, clock=lambda: AT)
    with emitter.run(wide):
        pass
    assert emitter.failures == 0
    lines = path.read_text().splitlines()
    kept = [event_to_dict(event) for event in emitter.drain()]
    assert len(lines) == len(kept) > 4
    assert all(len(line.encode()) <= EVENT_SIZE_LIMIT for line in lines)
    for line, made in zip(lines, kept, strict=True):
        sent = json.loads(line)
        assert len(sent["run"]["facets"].pop("tags")["tags"]) == 201
        assert sent == made  # what is kept is what was sent, but the client's tags
    assert kept[0]["eventType"] == "START" and kept[-1]["eventType"] == "COMPLETE"


def test_parts_are_archived_under_their_own_names_and_a_retry_rewrites_them(wide: StepRun, tmp_path: Path) -> None:
    archive = EventArchive(LocalArchiveStore(tmp_path / "openlineage"))
    for _ in range(2):
        emitter = LineageEmitter(OpenLineageSettings(), clock=lambda: AT)
        emitter.emit(run_event(wide, RunState.COMPLETE, at=AT))
        parts = emitter.drain_parts()
        archive.put([event_to_dict(part.event) for part in parts], [part.archive_name for part in parts])
    names = sorted(path.name for path in (tmp_path / "openlineage").rglob("*.json"))
    assert names == sorted(
        [f"{RUN_ID}.COMPLETE.json"] + [f"{RUN_ID}.COMPLETE.part{n}.json" for n in range(1, len(parts))]
    )
    assert _lineage_fields(archive.events()) and len(_lineage_fields(archive.events())) == COLUMNS + 1


def test_datazone_gets_each_part_with_its_token_and_the_same_tokens_again_on_redelivery(
    wide: StepRun, lineage_server: tuple[str, list[dict[str, Any]]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, requests = lineage_server
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    # Configured the way OpenLineage is configured: variables (lower-cased on the way, as the client does).
    environ = {
        "OPENLINEAGE__TRANSPORT__TYPE": "amazon_datazone_api",
        "OPENLINEAGE__TRANSPORT__DOMAINID": "dzd_test",
        "OPENLINEAGE__TRANSPORT__ENDPOINTOVERRIDE": url,
    }
    settings = load_openlineage_settings(environ, cwd=tmp_path, home=tmp_path)
    tokens = []
    for _ in range(2):  # the same events sent twice (a redelivered function): the same tokens
        emitter = LineageEmitter(settings, clock=lambda: AT)
        with emitter.run(wide):
            pass
        assert emitter.failures == 0
        parts = emitter.drain_parts()
        tokens.append([part.client_token for part in parts])
    assert tokens[0] == tokens[1] and len(set(tokens[0])) == len(tokens[0]) == len(requests) // 2
    assert all(CLIENT_TOKEN.fullmatch(token) for token in tokens[0])
    assert [request["headers"]["Client-Token"] for request in requests] == tokens[0] + tokens[1]
    assert {request["path"] for request in requests} == {"/v2/domains/dzd_test/lineage/events"}
    for request, part in zip(requests, parts, strict=False):
        assert len(request["raw"]) <= EVENT_SIZE_LIMIT
        sent = request["body"]
        assert sent["eventType"] == part.event.eventType.value and sent["run"]["runId"] == RUN_ID


def test_datazone_from_openlineage_yml_and_run_events_only(
    lineage_server: tuple[str, list[dict[str, Any]]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, requests = lineage_server
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    (tmp_path / "openlineage.yml").write_text(
        f"transport:\n  type: amazon_datazone_api\n  domainId: dzd_test\n  endpointOverride: {url}\n"
    )
    settings = load_openlineage_settings({}, cwd=tmp_path, home=tmp_path)
    transport = build_transport(settings.transport or {})
    assert isinstance(transport, DataZoneTransport)
    # Sent by other code than the emitter: the token of the event's run, type and time.
    event = run_event(StepRun("job", RUN_ID, "lakeline", "ns"), RunState.COMPLETE, at=AT)
    transport.emit(event)
    from openlineage.client.event_v2 import DatasetEvent, StaticDataset

    transport.emit(DatasetEvent(eventTime=AT.isoformat(), producer="https://x", dataset=StaticDataset("ns", "n")))
    (request,) = requests
    assert request["headers"]["Client-Token"] == client_token(RUN_ID, "COMPLETE")
    assert request["body"]["eventType"] == "COMPLETE"


def test_an_event_over_the_bound_is_never_posted(
    lineage_server: tuple[str, list[dict[str, Any]]], wide: StepRun
) -> None:
    url, requests = lineage_server
    transport = build_transport({"type": "amazon_datazone_api", "domainId": "dzd_test", "endpointOverride": url})
    event: RunEvent = run_event(wide, RunState.COMPLETE, at=AT)
    with pytest.raises(RuntimeError, match="DataZone"):
        transport.emit(event)
    assert requests == []


@pytest.mark.parametrize("outcome", [RunState.COMPLETE, RunState.FAIL])
def test_readers_take_a_completed_run_s_column_lineage_from_all_its_parts(wide: StepRun, outcome: RunState) -> None:
    from lakeline.lineage.viewer.column_graph import ColumnGraph
    from lakeline.lineage.viewer.html import build_lineage_graph

    emitter = LineageEmitter(OpenLineageSettings(), clock=lambda: AT)
    emitter.emit(run_event(wide, RunState.START, at=AT))
    emitter.emit(run_event(wide, outcome, at=AT, error="boom" if outcome is RunState.FAIL else None))
    events = [event_to_dict(event) for event in emitter.drain()]
    assert sum(event["eventType"] == "RUNNING" for event in events) >= 4
    graph = ColumnGraph.from_events(events)
    page = build_lineage_graph(events)
    if outcome is RunState.FAIL:  # what a failed run would have written is not lineage
        assert graph.fields == [] and page.column_edges == set()
        return
    assert [ref.field for ref in graph.fields] == sorted([f"column_{i:04d}" for i in range(COLUMNS)] + ["v"])
    written = {(edge.target_field, edge.source_field) for edge in page.column_edges if edge.target_field}
    assert len(written) == COLUMNS + 1


def test_the_datazone_domains_a_deployment_configures_are_read_from_its_variables() -> None:
    from lakeline.lineage.openlineage.config import environment_transport
    from lakeline.lineage.openlineage.datazone import datazone_domains

    variables = {"OPENLINEAGE__TRANSPORT__TYPE": "amazon_datazone_api", "OPENLINEAGE__TRANSPORT__DOMAINID": "dzd_a"}
    assert datazone_domains(environment_transport(variables)) == [("dzd_a", None)]
    composite = {
        "OPENLINEAGE__TRANSPORT": json.dumps(
            {
                "type": "composite",
                "transports": [
                    {"type": "amazon_datazone_api", "domainId": "dzd_b", "region": "us-east-1"},
                    {"type": "http", "url": "https://marquez.example.com"},
                ],
            }
        )
    }
    assert datazone_domains(environment_transport(composite)) == [("dzd_b", "us-east-1")]
    assert datazone_domains(environment_transport({"OPENLINEAGE_URL": "https://marquez.example.com"})) == []
    assert datazone_domains(environment_transport({})) == []


def test_datazone_without_a_region_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from lakeline.errors import ConfigError

    for name in ("AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")  # no profile's region either
    with pytest.raises(ConfigError, match=r"amazon_datazone_api.*region"):
        build_transport({"type": "amazon_datazone_api", "domainId": "dzd_test"})
