"""Stage runs as OpenLineage runs: ids derived from the plan, parent and root facets, lineage as a facet."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from openlineage.client.event_v2 import RunState

from lakeline.catalog_json import CatalogFile
from lakeline.engines.base import Column, TableSchema
from lakeline.errors import InvalidInputError, LakelineError
from lakeline.lineage.openlineage.archive import EventArchive, event_object_key
from lakeline.lineage.openlineage.config import OpenLineageSettings, RunReference
from lakeline.lineage.openlineage.events import event_to_dict, run_event
from lakeline.lineage.records.archive import LocalArchiveStore
from lakeline.lineage.viewer.column_graph import load_events
from lakeline.settings import PipelineSettings
from stage_a.keys import parse_raw_key
from stage_a.plan import StageAPlan, plan_stage_a
from stage_lineage.events import run_started_at, stage_a_run, stage_a_steps
from stage_lineage.records import stage_a_root_id

TOKEN = "20220120t101500123456_0123456789"
SETTINGS = OpenLineageSettings(namespace="lakeline-dev", dataset_namespace="awsathena://athena.eu-west-1.amazonaws.com")
COLUMNS = (Column("customer_id", "bigint"), Column("name", "string"))
PARTITIONS = (Column("date", "string"),)
RAW = TableSchema("engineering_mysql_raw_dev", "customers", COLUMNS, PARTITIONS)
STAGE = TableSchema("engineering_mysql_dev", "customers", COLUMNS, PARTITIONS)
CATALOG = CatalogFile({(t.database, t.table): t for t in (RAW, STAGE)})


def plan(token: str = TOKEN) -> StageAPlan:
    raw = parse_raw_key("engineering/mysql/customers/date=20220120/file.csv")
    settings = PipelineSettings(raw_root="s3://raw/", stage_root="s3://stage/", environment="dev")
    return plan_stage_a(raw, settings, RAW, run_token=token)


def test_the_run_started_when_its_token_was_made() -> None:
    assert run_started_at(TOKEN) == datetime(2022, 1, 20, 10, 15, 0, 123456, tzinfo=UTC)
    with pytest.raises(LakelineError, match="does not start with its planning time"):
        run_started_at("yesterday_0123456789")


def test_every_function_of_one_execution_names_the_same_runs() -> None:
    (first,) = stage_a_steps(plan(), catalog=CATALOG, settings=SETTINGS, engine="athena")
    (again,) = stage_a_steps(plan(), catalog=CATALOG, settings=SETTINGS, engine="athena")
    (other,) = stage_a_steps(plan("20220120t101600000000_0123456789"), catalog=CATALOG, settings=SETTINGS, engine="x")
    assert first.run_id == again.run_id != other.run_id
    assert first.parent == again.parent and first.parent != other.parent
    # Time-ordered ids (UUIDv7), from the planning time.
    assert uuid.UUID(first.run_id).version == 7
    assert first.parent == RunReference("lakeline-dev", "stage_a", stage_a_run(plan(), SETTINGS).execution.run_id)
    assert first.root == RunReference("lakeline-dev", "pipeline", stage_a_root_id(plan()))


def test_a_configured_parent_becomes_the_root() -> None:
    orchestrator = RunReference("airflow", "daily_load", str(uuid.uuid4()))
    settings = OpenLineageSettings(namespace="lakeline-dev", parent=orchestrator)
    (step,) = stage_a_steps(plan(), catalog=CATALOG, settings=settings, engine="athena")
    assert step.root == orchestrator
    assert step.parent is not None and step.parent.name == "stage_a"


def test_stage_a_is_the_raw_partition_inserted_into_the_stage_table() -> None:
    (step,) = stage_a_steps(plan(), catalog=CATALOG, settings=SETTINGS, engine="athena")
    assert step.sql == (
        'INSERT INTO "engineering_mysql_dev"."customers" SELECT "customer_id", "name", "date" '
        'FROM "engineering_mysql_raw_dev"."customers" WHERE "date" = \'20220120\''
    )
    assert step.input_names == ["engineering_mysql_raw_dev.customers"]
    event = event_to_dict(run_event(step, RunState.COMPLETE, at=datetime(2022, 1, 20, tzinfo=UTC)))
    fields = event["outputs"][0]["facets"]["columnLineage"]["fields"]
    assert sorted(fields) == ["customer_id", "date", "name"]
    assert fields["name"]["inputFields"][0]["field"] == "name"


def test_the_output_carries_the_version_the_run_commits_and_a_run_without_a_lease_none() -> None:
    """#43: the version facet names the partition version the run's commit makes (its lease's next), the token
    the lineage records and ``lakeline status`` (its number) name too."""
    leased = replace(
        plan(), lease={"key": "commit#x", "owner": TOKEN, "location": plan().target_location, "version": 2}
    )
    (step,) = stage_a_steps(leased, catalog=CATALOG, settings=SETTINGS, engine="athena")
    event = event_to_dict(run_event(step, RunState.COMPLETE, at=datetime(2022, 1, 20, tzinfo=UTC)))
    assert event["outputs"][0]["facets"]["version"]["datasetVersion"] == f"v3.{TOKEN}"
    assert "version" not in event["inputs"][0]["facets"]  # the raw table: its files are the records' roots
    (unleased,) = stage_a_steps(plan(), catalog=CATALOG, settings=SETTINGS, engine="athena")
    assert (
        "version"
        not in event_to_dict(run_event(unleased, RunState.START, at=datetime(2022, 1, 20, tzinfo=UTC)))["outputs"][0][
            "facets"
        ]
    )
    nothing = replace(leased, mode="none")  # a run with nothing new commits no version
    (idle,) = stage_a_steps(nothing, catalog=CATALOG, settings=SETTINGS, engine="athena")
    assert idle.versions == {}


def test_a_raw_table_missing_from_the_catalog_still_gets_its_run() -> None:
    (step,) = stage_a_steps(plan(), catalog=CatalogFile({}), settings=SETTINGS, engine="athena")
    assert step.statements == ()
    assert step.input_names == ["engineering_mysql_raw_dev.customers"]
    assert step.output_names == ["engineering_mysql_dev.customers"]


def test_sql_the_analyser_cannot_resolve_keeps_the_sql_without_column_lineage() -> None:
    # The stage table is missing a column the raw table has: the insert cannot be mapped onto it.
    narrow = TableSchema("engineering_mysql_dev", "customers", COLUMNS[:1], PARTITIONS)
    catalog = CatalogFile({(t.database, t.table): t for t in (RAW, narrow)})
    (step,) = stage_a_steps(plan(), catalog=catalog, settings=SETTINGS, engine="athena")
    assert step.sql is not None and step.sql.startswith("INSERT INTO")
    assert step.statements == ()


def _event(state: str = "COMPLETE", at: str = "2022-01-20T23:59:59+00:00") -> dict[str, object]:
    return {"eventType": state, "eventTime": at, "run": {"runId": "01a2045e-5934-744b-a44f-26fa48331de6"}}


def test_each_event_has_one_object_named_by_its_run_type_and_day() -> None:
    assert event_object_key(_event()) == "dt=2022-01-20/01a2045e-5934-744b-a44f-26fa48331de6.COMPLETE.json"
    # The day is the UTC day of the event.
    assert event_object_key(_event(at="2022-01-21T01:00:00+02:00")).startswith("dt=2022-01-20/")
    for bad, problem in (
        ({"eventType": "COMPLETE"}, "runId, eventType and eventTime"),
        (_event(state="DONE"), "eventType 'DONE'"),
        (_event(at="2022-01-20T10:00:00"), "no time zone"),
        ({**_event(), "run": {"runId": "not-a-uuid"}}, "runId, eventType and eventTime"),
    ):
        with pytest.raises(InvalidInputError, match=problem):
            event_object_key(bad)


def test_archive_writes_nothing_when_one_event_is_bad(tmp_path: Path) -> None:
    archive = EventArchive(LocalArchiveStore(tmp_path / "openlineage"))
    with pytest.raises(InvalidInputError):
        archive.put([_event(), _event(state="DONE")])
    assert archive.events() == []
    archive.put([_event(), _event()])
    assert archive.events() == [_event()], "the same event twice is one object"
    assert archive.events(day="2022-01-21") == []


def test_stored_events_load_from_a_synced_folder(tmp_path: Path) -> None:
    archive = EventArchive(LocalArchiveStore(tmp_path / "openlineage"))
    archive.put([_event("START", "2022-01-19T23:00:00+00:00"), _event()])
    assert [e["eventType"] for e in load_events(tmp_path / "openlineage")] == ["START", "COMPLETE"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidInputError, match=r"holds no \.json or \.jsonl files"):
        load_events(tmp_path / "empty")
    (tmp_path / "openlineage" / "broken.json").write_text("{not json")
    with pytest.raises(InvalidInputError, match=r"broken\.json"):
        load_events(tmp_path / "openlineage")
    assert json.loads((tmp_path / "openlineage" / event_object_key(_event())).read_text()) == _event()


class RecordingS3:
    """The one S3 call the event archive makes."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    def put_object(self, **request: object) -> None:
        self.keys.append(str(request["Key"]))


def test_deployed_functions_report_the_engine_the_stack_runs(tmp_path: Path) -> None:
    # A function runs no Spark (or whatever PySpark this process has): the stack names the Glue job's Spark.
    from stage_lineage.steps import StepEvents

    environ = {
        "OPENLINEAGE_EVENTS_LOCATION": "s3://archive/openlineage/",
        "OPENLINEAGE_DATASET_NAMESPACE": SETTINGS.dataset_namespace,
        "PIPELINE_ENGINE": "spark",
        "PIPELINE_ENGINE_VERSION": "3.5.4",
    }
    s3 = RecordingS3()
    events = StepEvents.from_environment(environ, s3=s3, catalog=CATALOG, cwd=tmp_path, home=tmp_path)  # type: ignore[arg-type]
    emitted = events.stage_a(plan(), "COMPLETE")
    engines = {json.dumps(event["run"]["facets"]["processing_engine"], sort_keys=True) for event in emitted}
    assert [json.loads(engine)["version"] for engine in engines] == ["3.5.4"]
    assert {json.loads(engine)["name"] for engine in engines} == {"spark"}
    assert len(s3.keys) == len(emitted)
