"""``lakeline glue extract`` against moto's Glue and S3, then ``lakeline glue lineage`` on what it wrote.

The account is built from the hand-written fixture folder: its catalog JSON becomes moto tables, its
scripts and extra files are uploaded to S3, its job configurations become moto jobs. Extracting that
account must give back the same folder, and the same lineage.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from typer.testing import CliRunner

from lakeline.cli import app
from lakeline.glue_scanner.extract import extract
from lakeline.glue_scanner.folder import load_folder
from lakeline.lineage.viewer.column_graph import load_events

REGION = "eu-west-1"
MANUAL = Path(__file__).parents[1] / "fixtures" / "glue" / "manual"
WHEEL = "s3://lake-code/wheels/segment_tools-0.1-py3-none-any.whl"
runner = CliRunner()

TABLE_INPUT_KEYS = ("Name", "TableType", "StorageDescriptor", "PartitionKeys", "Parameters", "TargetTable")


def _job_config(name: str) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((MANUAL / "jobs" / name / "job.json").read_text())["Job"]
    return config


@pytest.fixture
def account(tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    """moto Glue and S3 holding the fixture folder's catalog, jobs, scripts and extra files."""
    with mock_aws():
        glue = boto3.client("glue", region_name=REGION)
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket="lake-code", CreateBucketConfiguration={"LocationConstraint": REGION})
        for path in sorted(MANUAL.glob("tables.*.json")):
            tables = json.loads(path.read_text())["TableList"]
            database = tables[0]["DatabaseName"]
            glue.create_database(DatabaseInput={"Name": database, "Description": f"{database} tables"})
            for table in tables:
                glue.create_table(
                    DatabaseName=database, TableInput={k: table[k] for k in TABLE_INPUT_KEYS if k in table}
                )
        for job in ("orders_to_curated", "customer_metrics", "daily_events"):
            config = _job_config(job)
            s3.put_object(
                Bucket="lake-code", Key=f"scripts/{job}.py", Body=(MANUAL / "jobs" / job / f"{job}.py").read_bytes()
            )
            if job == "customer_metrics":
                config["DefaultArguments"]["--additional-python-modules"] = f"holidays==0.40,{WHEEL}"
            glue.create_job(
                Name=config["Name"],
                Role="arn:aws:iam::123456789012:role/glue-jobs",
                Command=config["Command"],
                DefaultArguments=config.get("DefaultArguments", {}),
                NonOverridableArguments=config.get("NonOverridableArguments", {}),
                GlueVersion=config["GlueVersion"],
            )
        glue.create_connection(
            ConnectionInput={
                "Name": "pg-sales",
                "ConnectionType": "JDBC",
                "ConnectionProperties": {
                    "JDBC_CONNECTION_URL": "jdbc:postgresql://pg.internal:5432/sales",
                    "USERNAME": "etl",
                    "PASSWORD": "hunter2",
                },
            }
        )
        shared = MANUAL / "jobs" / "customer_metrics" / "extra-py-files" / "shared_tables.py"
        s3.put_object(Bucket="lake-code", Key="libs/shared_tables.py", Body=shared.read_bytes())
        wheel = tmp_path / "segment_tools.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr("segment_tools/__init__.py", "SEGMENTS = 's3://lake-ref/segments/'\n")
        s3.put_object(Bucket="lake-code", Key=WHEEL.split("/", 3)[3], Body=wheel.read_bytes())
        yield glue, s3


def glue_cli(*args: str) -> Any:
    return runner.invoke(app, ["glue", *args], env={"COLUMNS": "200"})


def test_extract_writes_the_catalog_and_jobs_as_the_aws_cli_prints_them(
    account: tuple[Any, Any], tmp_path: Path
) -> None:
    out = tmp_path / "extract"
    result = glue_cli("extract", "--region", REGION, "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "extracted 2 databases, 4 tables, 1 connections and 3 jobs" in result.stdout

    assert json.loads((out / "connection.json").read_text()) == {"Region": REGION, "AccountId": "123456789012"}
    (connection,) = json.loads((out / "connections.json").read_text())["ConnectionList"]
    # The JDBC URL names the data of JDBC sources and sinks; the password is never written.
    assert connection["ConnectionProperties"] == {
        "JDBC_CONNECTION_URL": "jdbc:postgresql://pg.internal:5432/sales",
        "USERNAME": "etl",
    }
    assert "hunter2" not in (out / "connections.json").read_text()
    databases = json.loads((out / "databases.json").read_text())["DatabaseList"]
    assert sorted(d["Name"] for d in databases) == ["curated", "sales_raw"]
    assert all(isinstance(d["CreateTime"], str) for d in databases)
    tables = {t["Name"]: t for t in json.loads((out / "tables.sales_raw.json").read_text())["TableList"]}
    assert sorted(tables) == ["clients", "customers", "orders"]
    assert tables["orders"]["PartitionKeys"] == [{"Name": "dt", "Type": "string"}]
    assert tables["orders"]["StorageDescriptor"]["Location"] == "s3://lake-raw/sales/orders/"
    assert tables["clients"]["TargetTable"] == {
        "CatalogId": "123456789012",
        "DatabaseName": "sales_raw",
        "Name": "customers",
    }
    assert isinstance(tables["orders"]["CreateTime"], str)

    job_dir = out / "jobs" / "customer_metrics"
    job = json.loads((job_dir / "job.json").read_text())["Job"]
    assert job["Command"]["ScriptLocation"] == "s3://lake-code/scripts/customer_metrics.py"
    assert job["GlueVersion"] == "4.0"
    assert isinstance(job["CreatedOn"], str)
    assert (job_dir / "customer_metrics.py").read_bytes() == (
        MANUAL / "jobs" / "customer_metrics" / "customer_metrics.py"
    ).read_bytes()
    assert (job_dir / "extra-py-files" / "shared_tables.py").is_file()
    assert (job_dir / "libraries" / "segment_tools-0.1-py3-none-any.whl").is_file()
    assert (job_dir / "requirements.txt").read_text() == "holidays==0.40\n"
    non_overridable = json.loads((out / "jobs" / "orders_to_curated" / "job.json").read_text())["Job"]
    assert non_overridable["NonOverridableArguments"] == {"--TARGET_PATH": "s3://lake-curated/orders/"}


def without_symlinks(datasets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for dataset in datasets:
        facets = dict(dataset.get("facets", {}))
        symlinks = facets.pop("symlinks", None)
        if symlinks is not None:
            (arn,) = [i for i in symlinks["identifiers"] if i["namespace"].startswith("arn:aws:glue:")]
            assert arn["name"] == "table/" + dataset["name"].removeprefix("AwsDataCatalog.").replace(".", "/")
        found.append({**dataset, "facets": facets})
    return found


def test_extract_then_lineage_end_to_end(account: tuple[Any, Any], tmp_path: Path) -> None:
    out = tmp_path / "extract"
    assert glue_cli("extract", "--region", REGION, "--out", str(out)).exit_code == 0
    # Per-run arguments are the user's to add, as in manual mode.
    for job in ("orders_to_curated", "customer_metrics"):
        (out / "jobs" / job / "arguments.json").write_text((MANUAL / "jobs" / job / "arguments.json").read_text())

    result = glue_cli("lineage", str(out))
    assert result.exit_code == 0, result.output
    extracted = {e["job"]["name"]: e for e in load_events(out / "lineage" / "openlineage.jsonl")}
    assert sorted(extracted) == ["customer_metrics", "daily_events", "orders_to_curated"]
    athena = "awsathena://athena.eu-west-1.amazonaws.com"
    assert {(o["namespace"], o["name"]) for o in extracted["orders_to_curated"]["outputs"]} == {
        (athena, "AwsDataCatalog.curated.orders")
    }
    metrics = extracted["customer_metrics"]["outputs"][0]["facets"]["columnLineage"]["fields"]
    assert metrics["email"]["inputFields"][0]["name"] == "AwsDataCatalog.sales_raw.customers"

    # The same lineage as from the hand-written folder: extraction loses nothing the analysis uses.
    manual = tmp_path / "manual"
    shutil.copytree(MANUAL, manual)
    result = runner.invoke(app, ["glue", "lineage", str(manual), "--dataset-namespace", athena])
    assert result.exit_code == 0, result.output
    by_hand = {e["job"]["name"]: e for e in load_events(manual / "lineage" / "openlineage.jsonl")}
    for name, event in extracted.items():
        # The extracted catalog says its account (CatalogId), so its datasets also get the Glue ARN symlink
        # (the hand-written folder has no account to say); the rest is the same.
        assert without_symlinks(event["inputs"]) == by_hand[name]["inputs"]
        assert without_symlinks(event["outputs"]) == by_hand[name]["outputs"]
        assert event["run"]["facets"].get("extractionError") == by_hand[name]["run"]["facets"].get("extractionError")
    assert "symlinks" in extracted["orders_to_curated"]["outputs"][0]["facets"]


def test_a_missing_script_fails_its_job_only(account: tuple[Any, Any], tmp_path: Path) -> None:
    glue, _ = account
    glue.create_job(
        Name="broken_job",
        Role="arn:aws:iam::123456789012:role/glue-jobs",
        Command={"Name": "glueetl", "ScriptLocation": "s3://lake-code/scripts/gone.py"},
        DefaultArguments={"--extra-py-files": "s3://lake-code/libs/missing.py"},
    )
    out = tmp_path / "extract"
    result = glue_cli("extract", "--region", REGION, "--out", str(out))
    assert result.exit_code == 1
    assert "job broken_job: cannot fetch script s3://lake-code/scripts/gone.py: NoSuchKey" in result.stderr
    assert "job broken_job: cannot fetch extra file s3://lake-code/libs/missing.py: NoSuchKey" in result.stderr
    assert "extracted 2 databases, 4 tables, 1 connections and 4 jobs" in result.stdout
    # The configuration is kept, so the script can be added by hand.
    assert (out / "jobs" / "broken_job" / "job.json").is_file()
    assert not list((out / "jobs").glob(".*"))

    result = glue_cli("lineage", str(out))
    assert result.exit_code == 1
    assert "error: broken_job: the job's script (s3://lake-code/scripts/gone.py) is not in" in result.stderr
    assert len(load_events(out / "lineage" / "openlineage.jsonl")) == 6  # START and COMPLETE of 3 jobs


def test_jobs_pattern_and_pages_of_jobs(account: tuple[Any, Any], tmp_path: Path) -> None:
    glue, _ = account
    for index in range(105):  # more than one page of get_jobs
        glue.create_job(
            Name=f"bulk_{index:03d}",
            Role="arn:aws:iam::123456789012:role/glue-jobs",
            Command={"Name": "glueetl", "ScriptLocation": "s3://lake-code/scripts/orders_to_curated.py"},
        )
    out = tmp_path / "extract"
    result = glue_cli("extract", "--region", REGION, "--out", str(out), "--jobs", "bulk_*")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (out / "jobs").iterdir()) == [f"bulk_{i:03d}" for i in range(105)]


def test_access_denied_on_one_database_is_reported_and_the_rest_continues(
    account: tuple[Any, Any], tmp_path: Path
) -> None:
    glue, s3 = account

    def deny(params: dict[str, Any], **_: Any) -> None:
        if params.get("DatabaseName") == "curated":
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "not allowed"}}, "GetTables")

    glue.meta.events.register("before-parameter-build.glue.GetTables", deny)
    out = tmp_path / "extract"
    report = extract(glue, s3, out, region=REGION)
    assert [str(error) for error in report.errors] == [
        "database curated: cannot list tables: AccessDeniedException: not allowed"
    ]
    assert report.tables == 3 and len(report.jobs) == 3
    assert not (out / "tables.curated.json").exists()
    assert len(load_folder(out).jobs) == 3


def test_an_unknown_profile_is_a_usage_error(tmp_path: Path) -> None:
    result = glue_cli("extract", "--region", REGION, "--profile", "no-such-profile", "--out", str(tmp_path / "x"))
    assert result.exit_code == 2
    assert "no-such-profile" in result.stderr
    assert not (tmp_path / "x").exists()
