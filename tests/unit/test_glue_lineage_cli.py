"""``lakeline glue lineage`` in manual mode: a hand-written folder, no AWS access at all."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lakeline.cli import app
from lakeline.lineage.columns.model import Subtype, Transformation, TransformationType
from lakeline.lineage.openlineage.naming import LOCAL_DATASET_NAMESPACE as LOCAL
from lakeline.lineage.openlineage.naming import table_of
from lakeline.lineage.viewer.column_graph import ColumnGraph, FieldRef, load_events

MANUAL = Path(__file__).parents[1] / "fixtures" / "glue" / "manual"
runner = CliRunner()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    target = tmp_path / "connection"
    shutil.copytree(MANUAL, target)
    return target


def lineage(*args: str, env: dict[str, str] | None = None) -> Any:
    return runner.invoke(app, ["glue", "lineage", *args], env={"COLUMNS": "200", **(env or {})})


def events_by_job(path: Path) -> dict[str, dict[str, Any]]:
    return {event["job"]["name"]: event for event in load_events(path)}


def column_lineage(event: dict[str, Any], output: str) -> dict[str, set[tuple[str, str, str, str]]]:
    found = next(o for o in event["outputs"] if table_of(o["name"]) == output)
    return {
        name: {
            (table_of(item["name"]), item["field"], t["type"], t["subtype"])
            for item in field["inputFields"]
            for t in item["transformations"]
        }
        for name, field in found["facets"]["columnLineage"]["fields"].items()
    }


def test_lineage_of_a_hand_written_folder(folder: Path) -> None:
    result = lineage(str(folder))
    assert result.exit_code == 0, result.output
    assert "orders_to_curated" in result.stdout and "customer_metrics" in result.stdout
    assert "6 events written to" in result.stderr  # a START and a COMPLETE per job
    events = events_by_job(folder / "lineage" / "openlineage.jsonl")
    assert sorted(events) == ["customer_metrics", "daily_events", "orders_to_curated"]

    curated = events["orders_to_curated"]
    assert curated["eventType"] == "COMPLETE"
    assert [(d["namespace"], d["name"]) for d in curated["inputs"]] == [
        (LOCAL, "AwsDataCatalog.sales_raw.customers"),
        (LOCAL, "AwsDataCatalog.sales_raw.orders"),
    ]
    # The non-overridable TARGET_PATH is the location of curated.orders: the job writes that table.
    assert [(d["namespace"], d["name"]) for d in curated["outputs"]] == [(LOCAL, "AwsDataCatalog.curated.orders")]
    assert column_lineage(curated, "curated.orders")["amount"] == {
        ("sales_raw.orders", "amount", "DIRECT", "TRANSFORMATION")
    }
    assert column_lineage(curated, "curated.orders")["customer_name"] == {
        ("sales_raw.customers", "name", "DIRECT", "IDENTITY")
    }
    assert curated["job"]["facets"]["sourceCodeLocation"]["url"] == "s3://lake-code/scripts/orders_to_curated.py"
    assert curated["job"]["facets"]["jobType"]["integration"] == "GLUE"
    # A Glue 4.0 job runs Spark 3.3.0 (AWS's table of Glue versions).
    engine = curated["run"]["facets"]["processing_engine"]
    assert (engine["name"], engine["version"]) == ("spark", "3.3.0")
    assert "extractionError" not in curated["run"]["facets"]

    metrics = events["customer_metrics"]
    assert [(d["namespace"], d["name"]) for d in metrics["inputs"]] == [
        (LOCAL, "AwsDataCatalog.curated.orders"),
        ("s3://lake-ref", "segments"),
        (LOCAL, "AwsDataCatalog.sales_raw.customers"),
    ]
    assert column_lineage(metrics, "curated.customer_metrics") == {
        "customer_id": {("curated.orders", "customer_id", "DIRECT", "IDENTITY")},
        "customer_name": {("curated.orders", "customer_name", "DIRECT", "IDENTITY")},
        "email": {("sales_raw.customers", "email", "DIRECT", "IDENTITY")},
        "segment": {("segments", "segment", "DIRECT", "IDENTITY")},
        "revenue_eur": {("curated.orders", "amount", "DIRECT", "AGGREGATION")},
        "last_order_day": {("curated.orders", "order_ts", "DIRECT", "AGGREGATION")},
    }


def test_columns_can_be_followed_across_jobs(folder: Path) -> None:
    assert lineage(str(folder)).exit_code == 0
    graph = ColumnGraph.from_events(load_events(folder / "lineage" / "openlineage.jsonl"))
    revenue = FieldRef(LOCAL, "AwsDataCatalog.curated.customer_metrics", "revenue_eur")
    assert graph.origins(revenue, indirect=False) == {
        FieldRef(LOCAL, "AwsDataCatalog.sales_raw.orders", "amount"): {
            Transformation(TransformationType.DIRECT, Subtype.AGGREGATION)
        }
    }


def test_unresolved_parts_are_reported_not_guessed(folder: Path) -> None:
    result = lineage(str(folder))
    assert result.exit_code == 0, result.output
    reported = [line for line in result.stdout.splitlines() if line.startswith("daily_events: ")]
    assert reported == [
        "daily_events: line 9: job argument --RUN_DATE has no value: it is not in "
        "DefaultArguments, the run arguments or NonOverridableArguments",
        "daily_events: line 13: catalog table name is not resolved: call to datetime.date.today is not analysed",
        "daily_events: line 16: name 'score_udf' is not defined where it is used",
        "daily_events: line 19: target path is not resolved: job argument --RUN_DATE has no value: it is not in "
        "DefaultArguments, the run arguments or NonOverridableArguments",
    ]
    event = events_by_job(folder / "lineage" / "openlineage.jsonl")["daily_events"]
    errors = event["run"]["facets"]["extractionError"]
    assert errors["failedTasks"] == 3 and errors["totalTasks"] == 3
    assert [(e["taskNumber"], e["task"]) for e in errors["errors"]] == [
        (9, "script line 9"),
        (13, "script line 13"),
        (16, "script line 16"),
        (19, "script line 19"),
    ]
    # The unresolved score column is left out; the columns that are known are there.
    fields = column_lineage(event, "scored")
    assert "score" not in fields
    assert fields["bucket"] == {("sales_raw.orders", "amount", "DIRECT", "TRANSFORMATION")}


def test_run_arguments_file_changes_what_a_job_reads(folder: Path, tmp_path: Path) -> None:
    arguments = tmp_path / "run.json"
    arguments.write_text(json.dumps({"daily_events": {"--RUN_DATE": "2024-02-01"}}))
    result = lineage(str(folder), "--arguments", str(arguments), "--json", "--jobs", "daily_*")
    assert result.exit_code == 0, result.output
    start, event = json.loads(result.stdout)
    assert (start["eventType"], event["eventType"]) == ("START", "COMPLETE")
    assert start["run"]["runId"] == event["run"]["runId"]
    assert event["job"]["name"] == "daily_events"
    assert {(o["namespace"], o["name"]) for o in event["outputs"]} == {
        ("s3://lake-curated", "scored"),
        ("s3://lake-curated", "events/2024-02-01"),
    }

    arguments.write_text(json.dumps({"no_such_job": {"--X": "1"}}))
    result = lineage(str(folder), "--arguments", str(arguments))
    assert result.exit_code == 1
    assert "run arguments are given for jobs not in" in result.stderr


def test_a_job_without_script_fails_alone(folder: Path) -> None:
    (folder / "jobs" / "daily_events" / "daily_events.py").unlink()
    result = lineage(str(folder))
    assert result.exit_code == 1
    assert "error: daily_events: the job's script" in result.stderr
    assert sorted(events_by_job(folder / "lineage" / "openlineage.jsonl")) == ["customer_metrics", "orders_to_curated"]


def test_namespaces_follow_the_region_and_the_configured_transport_gets_the_events(
    folder: Path, tmp_path: Path
) -> None:
    (folder / "connection.json").write_text(json.dumps({"Region": "eu-west-1"}))
    sent = tmp_path / "sent.jsonl"
    env = {
        "OPENLINEAGE__TRANSPORT__TYPE": "file",
        "OPENLINEAGE__TRANSPORT__LOG_FILE_PATH": str(sent),
        "OPENLINEAGE__TRANSPORT__APPEND": "true",
        "OPENLINEAGE_NAMESPACE": "glue-prod",
    }
    result = lineage(str(folder), "--jobs", "orders_*", env=env)
    assert result.exit_code == 0, result.output
    assert "sent through the configured transport" in result.stderr
    start, event = load_events(sent)
    assert [start["eventType"], event["eventType"]] == ["START", "COMPLETE"]
    assert start["eventTime"] <= event["eventTime"]
    assert event["job"]["namespace"] == "glue-prod"
    assert event["outputs"][0]["namespace"] == "awsathena://athena.eu-west-1.amazonaws.com"
    assert event["outputs"][0]["name"] == "AwsDataCatalog.curated.orders"
    assert "symlinks" not in event["outputs"][0]["facets"]  # the account is not known
    # The client adds its own tags facet; the rest is the stored events.
    for sent_event in (start, event):
        sent_event["run"]["facets"].pop("tags", None)
    assert load_events(folder / "lineage" / "openlineage.jsonl") == [start, event]

    env["OPENLINEAGE_GLUE_CATALOG"] = "arn:aws:glue:eu-west-1:123456789012"
    result = lineage(str(folder), "--jobs", "orders_*", "--json", env=env)
    output = json.loads(result.stdout)[1]["outputs"][0]
    assert output["facets"]["symlinks"]["identifiers"] == [
        {
            "namespace": "awsathena://athena.eu-west-1.amazonaws.com",
            "name": "AwsDataCatalog.curated.orders",
            "type": "TABLE",
        },
        {"namespace": "arn:aws:glue:eu-west-1:123456789012", "name": "table/curated/orders", "type": "TABLE"},
    ]

    result = lineage(str(folder), "--jobs", "orders_*", "--dataset-namespace", "glue", "--json")
    assert json.loads(result.stdout)[0]["inputs"][0]["namespace"] == "glue"


def test_a_glue_dumps_tables_have_one_identity_whatever_command_reads_them(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The dumps carry each table's account (CatalogId); the region is the connection's for `glue lineage`
    # and the AWS CLI's (AWS_REGION) for `lineage sql`. Nothing is configured.
    for key in list(os.environ):
        if key.startswith("OPENLINEAGE"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    for path in folder.glob("tables.*.json"):
        document = json.loads(path.read_text())
        for table in document["TableList"]:
            table["CatalogId"] = "123456789012"
        path.write_text(json.dumps(document))
    (folder / "connection.json").write_text(json.dumps({"Region": "eu-west-1"}))
    scanned = lineage(str(folder), "--jobs", "orders_*", "--json")
    assert scanned.exit_code == 0, scanned.output
    (by_glue,) = json.loads(scanned.stdout)[1]["outputs"]

    sql = tmp_path / "curated.sql"
    sql.write_text(
        "INSERT INTO curated.orders SELECT order_id, customer_id, CAST(amount AS decimal(10, 2)), 'n/a', status, "
        "order_ts, dt FROM sales_raw.orders"
    )
    # Both dumps in one file (a list of get-tables outputs), as --catalog reads them.
    merged = tmp_path / "tables.json"
    merged.write_text(json.dumps([json.loads(p.read_text()) for p in sorted(folder.glob("tables.*.json"))]))
    command = ["lineage", "sql", str(sql), "--catalog", str(merged)]
    printed = runner.invoke(app, command, env={"AWS_REGION": "eu-west-1"})
    assert printed.exit_code == 0, printed.output
    (by_sql,) = json.loads(printed.stdout)["outputs"]

    athena = "awsathena://athena.eu-west-1.amazonaws.com"
    for output in (by_glue, by_sql):
        assert (output["namespace"], output["name"]) == (athena, "AwsDataCatalog.curated.orders")
        assert output["facets"]["symlinks"]["identifiers"] == [
            {"namespace": athena, "name": "AwsDataCatalog.curated.orders", "type": "TABLE"},
            {"namespace": "arn:aws:glue:eu-west-1:123456789012", "name": "table/curated/orders", "type": "TABLE"},
        ]
    # No region known: the local namespace, and no Glue catalog to name.
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    printed = runner.invoke(app, command)
    (local,) = json.loads(printed.stdout)["outputs"]
    assert local["namespace"] == LOCAL and "symlinks" not in local["facets"]
