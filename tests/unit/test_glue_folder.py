"""The connection folder: hand-written (manual mode) or extracted, catalog, jobs and their arguments."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lakeline.engines.base import TableNotFound
from lakeline.errors import InvalidInputError
from lakeline.glue_scanner.arguments import python_modules, run_arguments_document, split_s3_uri
from lakeline.glue_scanner.folder import load_folder, safe_name

MANUAL = Path(__file__).parents[1] / "fixtures" / "glue" / "manual"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    target = tmp_path / "connection"
    shutil.copytree(MANUAL, target)
    return target


def test_the_hand_written_folder_loads_catalog_and_jobs() -> None:
    loaded = load_folder(MANUAL)
    assert [job.name for job in loaded.jobs] == ["customer_metrics", "daily_events", "orders_to_curated"]
    assert loaded.region is None
    orders = loaded.catalog.describe_table("sales_raw", "orders")
    assert orders.column_names == ["order_id", "customer_id", "amount", "status", "order_ts"]
    assert orders.partition_names == ["dt"]
    # A resource link reads as the table it points at.
    assert loaded.catalog.resolve_link("sales_raw", "clients") == ("sales_raw", "customers")
    assert loaded.catalog.describe_table("sales_raw", "clients").column_names == ["id", "name", "email"]
    assert loaded.catalog.table_at("s3://lake-curated/orders/") == ("curated", "orders")
    with pytest.raises(TableNotFound):
        loaded.catalog.describe_table("sales_raw", "missing")


def test_non_overridable_arguments_win_over_run_arguments_which_win_over_defaults() -> None:
    job = {job.name: job for job in load_folder(MANUAL).jobs}["orders_to_curated"]
    # arguments.json tries to move TARGET_PATH; NonOverridableArguments keeps it.
    assert job.run_arguments == {"--TARGET_PATH": "s3://somewhere-else/orders/"}
    arguments = job.arguments({"--SOURCE_DATABASE": "staging"})
    assert arguments["--TARGET_PATH"] == "s3://lake-curated/orders/"
    assert arguments["--SOURCE_DATABASE"] == "staging"
    assert arguments["--JOB_NAME"] == "orders_to_curated"
    assert job.arguments()["--SOURCE_DATABASE"] == "sales_raw"


def test_run_arguments_files_may_be_flat_wrapped_or_get_job_run_output() -> None:
    expected = {"--DAY": "2024-01-01", "--LIMIT": "5"}
    assert run_arguments_document({"DAY": "2024-01-01", "--LIMIT": 5}, "f") == expected
    assert run_arguments_document({"Arguments": {"--DAY": "2024-01-01", "--LIMIT": "5"}}, "f") == expected
    assert run_arguments_document({"JobRun": {"Arguments": {"--DAY": "2024-01-01", "--LIMIT": "5"}}}, "f") == expected
    with pytest.raises(InvalidInputError, match="argument --X must be a string"):
        run_arguments_document({"--X": ["a"]}, "f")


def test_extra_files_and_modules_of_a_job() -> None:
    job = {job.name: job for job in load_folder(MANUAL).jobs}["customer_metrics"]
    assert [path.name for path in job.module_files()] == ["shared_tables.py"]
    assert job.missing_extra_files(job.arguments()) == []
    modules = python_modules("holidays==0.40, s3://code/wheels/x-1.0-py3-none-any.whl,requests")
    assert modules.requirements == ("holidays==0.40", "requests")
    assert modules.s3_paths == ("s3://code/wheels/x-1.0-py3-none-any.whl",)


def test_a_job_folder_with_only_a_script_is_named_after_the_folder(folder: Path) -> None:
    bare = folder / "jobs" / "bare_job"
    bare.mkdir()
    (bare / "anything.py").write_text("print('hello')\n")
    job = {job.name: job for job in load_folder(folder).jobs}["bare_job"]
    assert job.script == bare / "anything.py"
    assert job.config == {}
    assert job.problems == ()


def test_missing_or_ambiguous_scripts_are_problems_of_their_job(folder: Path) -> None:
    (folder / "jobs" / "daily_events" / "daily_events.py").unlink()
    two = folder / "jobs" / "two_scripts"
    two.mkdir()
    (two / "a.py").write_text("")
    (two / "b.py").write_text("")
    jobs = {job.name: job for job in load_folder(folder).jobs}
    assert jobs["daily_events"].script is None
    assert jobs["daily_events"].problems == (
        f"the job's script (s3://lake-code/scripts/daily_events.py) is not in {folder / 'jobs' / 'daily_events'}",
    )
    assert jobs["two_scripts"].problems == (
        f"{two} holds several scripts (a.py, b.py) and job.json names none of them",
    )


def test_scala_jobs_are_not_analysed(folder: Path) -> None:
    scala = folder / "jobs" / "scala_job"
    scala.mkdir()
    (scala / "Main.scala").write_text("object Main")
    assert {job.name: job for job in load_folder(folder).jobs}["scala_job"].problems == (
        "Scala scripts are not analysed",
    )


def test_bad_files_are_named_in_the_error(folder: Path) -> None:
    (folder / "notes.json").write_text(json.dumps({"hello": "world"}))
    with pytest.raises(InvalidInputError, match="get-tables"):
        load_folder(folder)
    (folder / "notes.json").unlink()
    (folder / "jobs" / "daily_events" / "job.json").write_text(json.dumps({"Job": {"Command": {}}}))
    with pytest.raises(InvalidInputError, match=r"daily_events/job.json must be 'aws glue get-job' output"):
        load_folder(folder)


def test_safe_names_never_collide() -> None:
    assert safe_name("orders_to_curated") == "orders_to_curated"
    assert safe_name("team/job") != safe_name("team job")
    assert safe_name("team/job").startswith("team_job-")
    assert split_s3_uri("s3://bucket/a/b.py") == ("bucket", "a/b.py")
    with pytest.raises(InvalidInputError, match="not an S3 path"):
        split_s3_uri("/local/file.py")


def test_a_linked_database_reads_its_target_database(folder: Path) -> None:
    databases = {
        "DatabaseList": [
            {"Name": "sales_raw"},
            {"Name": "shared_sales", "TargetDatabase": {"CatalogId": "210987654321", "DatabaseName": "sales_raw"}},
        ]
    }
    (folder / "databases.json").write_text(json.dumps(databases))
    catalog = load_folder(folder).catalog
    assert catalog.resolve_link("shared_sales", "orders") == ("sales_raw", "orders")
    assert catalog.describe_table("shared_sales", "customers").column_names == ["id", "name", "email"]
