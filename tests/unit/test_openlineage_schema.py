"""The schema check every test's events go through (``tests/conftest.py``) catches what it must."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from openlineage.client.event_v2 import RunState

from lakeline.catalog_json import CatalogFile
from lakeline.lineage.openlineage.config import OpenLineageSettings, RunReference
from lakeline.lineage.openlineage.events import event_to_dict, run_event, sql_step_run
from tests.openlineage_schema import EventSchemaError, is_absolute_uri, validate_event, validate_events_file

CATALOG = CatalogFile.load(Path(__file__).parent / "data" / "column_lineage_catalog.json")
PARENT = RunReference("lakeline", "stage_b.mart.daily_sales", "01930000-0000-7000-8000-000000000001")
SETTINGS = OpenLineageSettings(
    dataset_namespace="awsathena://athena.eu-west-1.amazonaws.com",
    glue_catalog="arn:aws:glue:eu-west-1:123456789012",
    parent=PARENT,
    root=RunReference("lakeline", "pipeline", "01930000-0000-7000-8000-000000000002"),
)


@pytest.fixture
def event() -> dict[str, Any]:
    step = sql_step_run(
        'INSERT INTO mart.daily_sales SELECT o."date", c.region, SUM(o.amount) FROM sales.orders o '
        "JOIN sales.customers c USING (customer_id) WHERE o.status = 'paid' GROUP BY 1, 2",
        catalog=CATALOG,
        job_name="daily",
        run_id="01930000-0000-7000-8000-000000000003",
        settings=SETTINGS,
        engine="athena",
    )
    return event_to_dict(run_event(step, RunState.FAIL, at=datetime(2024, 1, 20, tzinfo=UTC), error="boom"))


def test_a_full_event_is_valid(event: dict[str, Any]) -> None:
    validate_event(event)
    output = event["outputs"][0]["facets"]
    assert {"schema", "symlinks", "columnLineage"} <= set(output)
    assert {"parent", "processing_engine", "errorMessage"} <= set(event["run"]["facets"])


def _broken(event: dict[str, Any], change: str) -> dict[str, Any]:
    broken = copy.deepcopy(event)
    facets = broken["outputs"][0]["facets"]
    if change == "transformation type":
        facets["columnLineage"]["fields"]["revenue"]["inputFields"][0]["transformations"][0]["type"] = 7
    elif change == "input field without name":
        del facets["columnLineage"]["fields"]["revenue"]["inputFields"][0]["name"]
    elif change == "symlink without type":
        del facets["symlinks"]["identifiers"][1]["type"]
    elif change == "facet without producer":
        del facets["schema"]["_producer"]
    elif change == "parent run id":
        broken["run"]["facets"]["parent"]["run"]["runId"] = "not-a-uuid"
    elif change == "unknown facet schema":
        facets["schema"]["_schemaURL"] = "https://openlineage.io/spec/facets/9-9-9/SchemaDatasetFacet.json#/$defs/X"
    elif change == "event time":
        broken["eventTime"] = "yesterday"
    elif change == "producer not a URI":
        broken["producer"] = "not a uri at all"
    elif change == "facet producer not a URI":
        facets["schema"]["_producer"] = "lakeline"
    elif change == "relative producer":
        broken["run"]["facets"]["parent"]["_producer"] = "//github.com/lakeline/lakeline"
    return broken


@pytest.mark.parametrize(
    "change",
    [
        "transformation type",
        "input field without name",
        "symlink without type",
        "facet without producer",
        "parent run id",
        "unknown facet schema",
        "event time",
        "producer not a URI",
        "facet producer not a URI",
        "relative producer",
    ],
)
def test_a_malformed_event_or_facet_fails(event: dict[str, Any], change: str) -> None:
    with pytest.raises(EventSchemaError):
        validate_event(_broken(event, change))


@pytest.mark.parametrize(
    ("text", "absolute"),
    [
        ("https://github.com/lakeline/lakeline/tree/v0.1.0", True),
        ("urn:lakeline:producer", True),
        ("awsathena://athena.eu-west-1.amazonaws.com", True),
        ("not a uri at all", False),
        ("lakeline", False),
        ("https://github.com/lake line", False),
        ("1http://x", False),
        ("https://", False),
    ],
)
def test_a_uri_is_absolute_with_a_scheme(text: str, absolute: bool) -> None:
    assert is_absolute_uri(text) is absolute


def test_every_event_of_a_file_is_checked(event: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "openlineage.jsonl"
    path.write_text(json.dumps(event) + "\n")
    assert validate_events_file(path) == 1
    path.write_text(json.dumps(event) + "\n" + json.dumps(_broken(event, "producer not a URI")) + "\n")
    with pytest.raises(EventSchemaError, match=r"openlineage\.jsonl, line 2: event .* at 'producer'"):
        validate_events_file(path)
    # Valid, but over the bound every event Lakeline emits is held to (DataZone's).
    large = {**event, "job": {**event["job"], "name": "j" * 300_000}}
    path.write_text(json.dumps(event) + "\n" + json.dumps(large) + "\n")
    with pytest.raises(EventSchemaError, match=r"line 2: 30\d{4} bytes, over the 300000"):
        validate_events_file(path)


def test_a_facet_with_no_vendored_schema_is_checked_against_openlineage_pythons_class(event: dict[str, Any]) -> None:
    """The dataset version facet (1-0-1) has no file in openlineage_spec/: openlineage-python's generated class
    for its schema URL says what it holds (``datasetVersion``, a string, required)."""
    url = "https://openlineage.io/spec/facets/1-0-1/DatasetVersionDatasetFacet.json#/$defs/DatasetVersionDatasetFacet"
    producer = event["producer"]
    output = event["outputs"][0]
    output.setdefault("facets", {})["version"] = {"_producer": producer, "_schemaURL": url, "datasetVersion": "v2.x"}
    validate_event(event)
    for wrong in ({"datasetVersion": 2}, {}, {"datasetVersion": "v2", "_producer": None}):
        bad = copy.deepcopy(event)
        facet = {"_producer": producer, "_schemaURL": url, **wrong}
        bad["outputs"][0]["facets"]["version"] = {key: value for key, value in facet.items() if value is not None}
        with pytest.raises(EventSchemaError, match="version"):
            validate_event(bad)
    unknown = copy.deepcopy(event)
    unknown["outputs"][0]["facets"]["version"]["_schemaURL"] = url.replace("1-0-1", "9-9-9")
    with pytest.raises(EventSchemaError, match="no OpenLineage schema known"):
        validate_event(unknown)
