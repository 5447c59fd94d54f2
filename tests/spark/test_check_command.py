"""``lakeline check`` (#41): a table's checks (its table settings' or its target item's, from the project's
lakeline.yml) run on real Spark over what is published, with the command's exit codes: 1 on a failed block
rule, 0 with only warn failures (printed), 2 when the table has no checks or an option is wrong. Where the
queries run (the workspace's SQL server, a `lakeline up`'s Athena) is the one thing replaced: by the shared
Spark session's engine, which the embedded SQL server runs too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import lakeline.cli.check as check_command
from lakeline.cli import app
from lakeline.engines.spark import SparkEngine
from lakeline.storage import local_root
from tests.rehearsal.support import daily_item

pytestmark = pytest.mark.spark

DATABASE = "check_cmd"
ROWS = {"20220120": [(1, 10.0), (2, 20.0), (3, 30.0)], "20220121": [(4, 10.0), (4, 20.0), (None, 5.0)]}


@pytest.fixture(scope="module")
def engine(spark_engine: SparkEngine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkEngine]:
    session = spark_engine.session
    session.sql(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    for table in ("orders", "daily"):
        session.sql(
            f"CREATE TABLE {DATABASE}.{table} (id BIGINT, amount DOUBLE, `date` STRING) USING parquet "
            f"PARTITIONED BY (`date`) LOCATION '{local_root(tmp_path_factory.mktemp(table))}'"
        )
    for day, rows in ROWS.items():
        session.createDataFrame(rows, "id BIGINT, amount DOUBLE").createOrReplaceTempView("check_rows")
        session.sql(f"INSERT INTO {DATABASE}.orders PARTITION (`date` = '{day}') SELECT * FROM check_rows")
    session.sql(f"INSERT INTO {DATABASE}.daily PARTITION (`date` = '20220120') SELECT 3, 60.0")
    yield spark_engine
    for table in ("orders", "daily"):
        session.sql(f"DROP TABLE IF EXISTS {DATABASE}.{table}")


@pytest.fixture
def project(engine: SparkEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    item = daily_item(
        f"{DATABASE}.daily", "overwrite", [{"db": DATABASE, "sql": "SELECT 1"}], source=f"{DATABASE}.orders"
    )
    item["checks"] = [{"rule": "RowCount = 1"}, {"rule": 'ColumnValues "amount" < 50', "severity": "warn"}]
    (tmp_path / "deps").mkdir()
    (tmp_path / "deps" / "daily.json").write_text(json.dumps(item))
    settings = {
        f"{DATABASE}.orders": {
            "checks": [
                {"rule": 'IsComplete "id"'},
                {"rule": 'IsUnique "id"'},
                {"rule": 'ColumnValues "amount" <= 20', "severity": "warn"},
                {"rule": 'RowCountMatch "reference" >= 0.9'},
            ]
        }
    }
    config = tmp_path / "lakeline.yml"
    config.write_text(json.dumps({"workspace": "ws", "dependencies": ["deps"], "tables_settings": settings}))
    ran: list[str] = []

    def statements(*_: Any) -> Any:
        def run(sql: str) -> Any:
            ran.append(sql)
            return engine.execute(sql)

        return run

    monkeypatch.setattr(check_command, "_statements", statements)
    return config


def check(config: Path, *arguments: str) -> Any:
    return CliRunner().invoke(app, ["check", "--config", str(config), "--embedded", *arguments])


def test_a_partition_that_passes_its_block_rules_exits_0_and_prints_the_warn_that_failed(project: Path) -> None:
    result = check(project, "--table", f"{DATABASE}.orders", "--partition", "date=20220120")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f'{DATABASE}.orders (date=20220120): 3/4 passed; failed: ColumnValues "amount" <= 20 (warn)'
    assert '  passed IsUnique "id" (metric 1)' in lines
    assert '  failed (warn) ColumnValues "amount" <= 20 (metric 0.666667)' in lines
    assert '    {"id":"3","amount":"30.0","date":"20220120"}' in lines
    # RowCountMatch compares a new version with the published one: on demand there is none to compare.
    assert any(line.startswith('  passed RowCountMatch "reference" >= 0.9 (no published') for line in lines)


def test_a_partition_that_breaks_a_block_rule_exits_1_with_its_failing_rows(project: Path) -> None:
    result = check(project, "--table", f"{DATABASE}.orders", "--partition", "date=20220121")
    assert result.exit_code == 1, result.output
    assert '  failed (block) IsComplete "id" (metric 0.666667)' in result.output
    assert '  failed (block) IsUnique "id" (metric 0)' in result.output
    assert '{"id":null,"amount":"5.0","date":"20220121"}' in result.output


def test_the_whole_table_is_checked_as_one_without_a_partition(project: Path) -> None:
    result = check(project, "--table", f"{DATABASE}.orders")
    assert result.exit_code == 1, result.output
    assert result.output.splitlines()[0].startswith(f"{DATABASE}.orders: 1/4 passed")


def test_a_targets_checks_are_its_items(project: Path) -> None:
    result = check(project, "--table", f"{DATABASE}.daily", "--partition", "date=20220120")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == f"{DATABASE}.daily (date=20220120): 1/2 passed; failed: " + (
        'ColumnValues "amount" < 50 (warn)'
    )


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["--table", f"{DATABASE}.stores"], f"{DATABASE}.stores has no checks"),
        (["--table", f"{DATABASE}.orders", "--partition", "20220120"], "expected column=value"),
        (["--table", f"{DATABASE}.orders", "--partition", "date=1", "--partition", "date=2"], "given twice"),
    ],
)
def test_usage_errors_exit_2(project: Path, arguments: list[str], said: str) -> None:
    result = check(project, *arguments)
    assert result.exit_code == 2, result.output
    assert said in " ".join(result.output.split())


def test_a_missing_project_file_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["check", "--config", str(tmp_path / "lakeline.yml"), "--table", "a.b"])
    assert result.exit_code == 2 and "no project file" in " ".join(result.output.split())
