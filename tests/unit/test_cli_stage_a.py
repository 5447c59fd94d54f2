from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from lakeline.cli import app

runner = CliRunner()


def test_plan_prints_the_statements_as_json() -> None:
    result = runner.invoke(
        app,
        [
            "stage-a", "plan",
            "--key", "engineering/mysql/customers/date=20220120/file_name.csv",
            "--raw-bucket", "my-raw", "--stage-bucket", "my-stage",
            "--environment", "dev", "--columns", "customer_id,name",
            "--run-token", "20220120t000000000000_abcdef0123",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)
    assert {k: plan[k] for k in ("team", "dataset", "table", "source_database", "target_database", "partition")} == {
        "team": "engineering",
        "dataset": "mysql",
        "table": "customers",
        "source_database": "engineering_mysql_raw_dev",
        "target_database": "engineering_mysql_dev",
        "partition": {"date": "20220120"},
    }
    assert len(plan["statements"]) == 5
    assert plan["statements"][0].startswith("ALTER TABLE `engineering_mysql_raw_dev`.`customers` ADD IF NOT EXISTS")
    assert "s3://my-stage/engineering/mysql/customers/date=20220120/lakeline_run=" in plan["statements"][1]


def test_plan_takes_columns_from_a_glue_get_tables_file(tmp_path: Path) -> None:
    catalog = tmp_path / "tables.json"
    catalog.write_text(
        json.dumps(
            {
                "TableList": [
                    {
                        "Name": "customers",
                        "DatabaseName": "engineering_mysql_raw",
                        "StorageDescriptor": {"Columns": [{"Name": "id", "Type": "int"}, {"Name": "email"}]},
                        "PartitionKeys": [{"Name": "date", "Type": "string"}],
                    }
                ]
            }
        )
    )
    key = "engineering/mysql/customers/date=20220120/f.csv"
    result = runner.invoke(app, ["stage-a", "plan", "--key", key, "--catalog", str(catalog), "--bucket-count", "2"])
    assert result.exit_code == 0, result.stderr
    (ctas,) = [s for s in json.loads(result.stdout)["statements"] if s.startswith("CREATE TABLE")]
    assert 'SELECT "id", "email" FROM "engineering_mysql_raw"."customers"' in ctas
    assert "bucket_count = 2" in ctas


def test_invalid_key_exits_2_with_the_reason_and_no_statements() -> None:
    key = "engineering/mysql/customers/date=2022';DROP TABLE x;--/f.csv"
    result = runner.invoke(app, ["stage-a", "plan", "--key", key, "--columns", "a"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "partition 'date' value" in result.stderr
    assert "DROP TABLE" not in result.stdout


def test_plan_without_columns_says_how_to_give_them() -> None:
    result = runner.invoke(app, ["stage-a", "plan", "--key", "engineering/mysql/customers/f.csv"])
    assert result.exit_code == 2
    assert "--columns" in result.stderr


def test_invalid_table_settings_are_reported() -> None:
    args = ["stage-a", "plan", "--key", "engineering/mysql/customers/f.csv", "--columns", "a"]
    result = runner.invoke(app, [*args, "--format", "JSON", "--compression", "SNAPPY"])
    assert result.exit_code == 2
    assert "compression SNAPPY is not available for JSON" in result.stderr


SHOP = Path(__file__).resolve().parents[2] / "examples" / "shop" / "lakeline.yml"


def test_plan_reads_the_projects_lakeline_yml() -> None:
    """The same file ``lakeline run`` reads: its environment and table settings, not a traceback."""
    key = "shop/pos/sales/day=2024-03-01/sales.csv"
    result = runner.invoke(app, ["stage-a", "plan", "--key", key, "--columns", "store,amount", "--config", str(SHOP)])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert (plan["source_database"], plan["target_database"]) == ("shop_pos_raw_dev", "shop_pos_dev")
    assert "bucketed_by = ARRAY['store'], bucket_count = 2" in plan["statements"][1]


def test_a_settings_file_that_does_not_validate_is_one_line_naming_it(tmp_path: Path) -> None:
    settings = tmp_path / "settings.yml"
    settings.write_text("pipeline:\n  raw_root: s3://raw/\n  stage_root: s3://stage/\n  colour: blue\n")
    result = runner.invoke(
        app, ["stage-a", "plan", "--key", "a/b/c/f.csv", "--columns", "x", "--config", str(settings)]
    )
    assert result.exit_code == 2
    assert str(settings) in result.output and "colour" in result.output and "Traceback" not in result.output
    project = tmp_path / "lakeline.yml"
    project.write_text("workspace: .\nnot_a_setting: 1\n")
    result = runner.invoke(app, ["stage-a", "plan", "--key", "a/b/c/f.csv", "--columns", "x", "--config", str(project)])
    assert result.exit_code == 2
    assert "not_a_setting" in result.output and "Traceback" not in result.output


DEMO_ITEMS = str(Path(__file__).parents[2] / "examples" / "demo" / "dependencies.json")


def test_stage_b_run_refuses_a_bad_dataset_name_in_one_line_before_starting_spark(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["stage-b", "run", "--dataset", "nodot", "--partition", "date=2024-01-01", "--deps", DEMO_ITEMS,
         "--workspace", str(tmp_path / "ws")],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "invalid stage B message: target_dataset: target_dataset 'nodot' must be written database.table" in (
        result.stderr
    )
    assert "Traceback" not in result.output and "pydantic" not in result.output


def test_an_environment_that_is_not_a_name_is_one_line_naming_it(tmp_path: Path) -> None:
    """The environment reaches the settings through the workspace (``Workspace.settings``), not only the file."""
    result = runner.invoke(
        app,
        ["stage-b", "run", "--dataset", "engineering_analytics_dev.daily_sales", "--partition", "date=2024-01-01",
         "--deps", DEMO_ITEMS, "--workspace", str(tmp_path / "ws"), "--environment", "Dev-1"],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "invalid settings: environment: environment 'Dev-1' is not a valid name" in result.stderr
    assert "Traceback" not in result.output


def test_stage_b_run_of_a_target_no_dependency_item_builds_says_so_before_starting_spark(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["stage-b", "run", "--dataset", "engineering_analytics_dev.nothing_builds_it", "--partition",
         "date=2024-01-01", "--deps", DEMO_ITEMS, "--workspace", str(tmp_path / "ws")],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "no dependency item builds engineering_analytics_dev.nothing_builds_it in " in result.stderr
    assert not (tmp_path / "ws" / "metastore").exists()  # refused before the embedded runtime started


def test_stage_b_run_of_a_partition_the_target_is_not_partitioned_by_says_so_before_starting_spark(
    tmp_path: Path,
) -> None:
    """A mistyped partition column is refused at once (exit 2), not left as a failure every later run repeats."""
    result = runner.invoke(
        app,
        ["stage-b", "run", "--dataset", "engineering_analytics_dev.daily_sales", "--partition", "dte=2024-01-01",
         "--deps", DEMO_ITEMS, "--workspace", str(tmp_path / "ws")],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "engineering_analytics_dev.daily_sales is partitioned by " in result.stderr
    assert "not dte" in result.stderr
    assert not (tmp_path / "ws" / "metastore").exists()
