"""``lakeline lineage sql`` and ``lakeline lineage tree``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lakeline.cli import app

CATALOG = Path(__file__).parent / "data" / "column_lineage_catalog.json"
ROOT = Path(__file__).parents[2]
STAGE_A_SQL = (
    "INSERT INTO sales.orders SELECT CAST(order_id AS bigint), CAST(customer_id AS bigint),"
    ' CAST(amount AS double), status, CAST("date" AS date), dt FROM raw.orders'
)
RUN_ID = "01930000-0000-7000-8000-000000000001"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No openlineage.yml or OPENLINEAGE_* setting of the machine may leak into these runs."""
    import os

    for key in list(os.environ):
        if key.startswith("OPENLINEAGE"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)


def _write(tmp_path: Path, name: str, sql: str) -> Path:
    path = tmp_path / name
    path.write_text(sql)
    return path


def test_sql_prints_a_run_event_with_column_lineage(tmp_path: Path) -> None:
    sql = _write(
        tmp_path,
        "daily.sql",
        'INSERT INTO mart.daily_sales SELECT o."date", c.region, SUM(o.amount)\n'
        "FROM orders o JOIN customers c USING (customer_id) GROUP BY 1, 2",
    )
    result = CliRunner().invoke(
        app,
        [
            "lineage", "sql", str(sql), "--catalog", str(CATALOG), "--database", "sales",
            "--dataset-namespace", "awsathena://athena.eu-west-1.amazonaws.com",
            "--parent-job-name", "pipeline", "--parent-run-id", RUN_ID, "--run-id", RUN_ID.replace("1", "2"),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    event = json.loads(result.stdout)
    assert event["eventType"] == "COMPLETE"
    assert event["job"] == {"namespace": "lakeline", "name": "daily", "facets": event["job"]["facets"]}
    assert event["run"]["facets"]["parent"]["job"]["name"] == "pipeline"
    assert [d["name"] for d in event["inputs"]] == ["AwsDataCatalog.sales.customers", "AwsDataCatalog.sales.orders"]
    (output,) = event["outputs"]
    assert output["name"] == "AwsDataCatalog.mart.daily_sales"
    fields = output["facets"]["columnLineage"]["fields"]
    assert {
        (column, f["name"], f["field"], t["type"], t["subtype"])
        for column, facet in fields.items()
        for f in facet["inputFields"]
        for t in f["transformations"]
    } == {
        ("day", "AwsDataCatalog.sales.orders", "date", "DIRECT", "IDENTITY"),
        ("region", "AwsDataCatalog.sales.customers", "region", "DIRECT", "IDENTITY"),
        ("revenue", "AwsDataCatalog.sales.orders", "amount", "DIRECT", "AGGREGATION"),
    }
    assert {f["namespace"] for f in fields["day"]["inputFields"]} == {"awsathena://athena.eu-west-1.amazonaws.com"}


def test_sql_in_spark_dialect_and_emitting_to_a_file(tmp_path: Path) -> None:
    events = tmp_path / "sent.jsonl"
    (tmp_path / "openlineage.yml").write_text(f"transport:\n  type: file\n  log_file_path: {events}\n  append: true\n")
    sql = _write(
        tmp_path, "flags.sql", "INSERT INTO mart.customer_flags SELECT `customer_id`, 'x' FROM sales.customers"
    )
    result = CliRunner().invoke(
        app, ["lineage", "sql", str(sql), "--catalog", str(CATALOG), "--dialect", "spark", "--emit"]
    )
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    (sent,) = [json.loads(line) for line in events.read_text().splitlines()]
    assert sent["run"]["runId"] == printed["run"]["runId"]
    assert printed["job"]["facets"]["sql"]["dialect"] == "spark"


def _stage_a_events(tmp_path: Path) -> Path:
    """The stored event of a stage A step that loads sales.orders from raw.orders."""
    stage_a = _write(tmp_path, "stage_a.sql", STAGE_A_SQL)
    first = CliRunner().invoke(app, ["lineage", "sql", str(stage_a), "--catalog", str(CATALOG)])
    assert first.exit_code == 0, first.output
    return _write(tmp_path, "events.json", first.stdout)


def test_tree_follows_stored_events_back(tmp_path: Path) -> None:
    events = _stage_a_events(tmp_path)
    stage_b = _write(tmp_path, "stage_b.sql", "SELECT SUM(amount) AS total FROM sales.orders WHERE status = 'paid'")
    result = CliRunner().invoke(
        app, ["lineage", "tree", str(stage_b), "--catalog", str(CATALOG), "--events", str(events)]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "query_1.total = SUM(orders.amount) AS total",
        "+- sales.orders.amount  DIRECT AGGREGATION",
        "   +- raw.orders.amount  DIRECT IDENTITY  [job lakeline/stage_a]",
        "+- sales.orders.status  INDIRECT FILTER  [dataset]",
        "   +- raw.orders.status  DIRECT IDENTITY  [job lakeline/stage_a]",
    ]
    direct = CliRunner().invoke(
        app, ["lineage", "tree", str(stage_b), "--catalog", str(CATALOG), "--events", str(events), "--direct-only"]
    )
    assert "status" not in direct.stdout


@pytest.mark.parametrize(
    ("sql", "options", "code", "message"),
    [
        ("SELECT a FROM sales.missing", [], 1, "sales.missing is not in the catalog"),
        ("SELECT name FROM sales.customers", ["--dialect", "mysql"], 2, "--dialect 'mysql'"),
        ("SELECT name FROM sales.customers", ["--parent-job-name", "p", "--parent-run-id", "7"], 2, "not a UUID"),
        ("SELECT name FROM sales.customers", ["--event-type", "DONE"], 2, "START, COMPLETE or FAIL"),
    ],
)
def test_sql_errors(tmp_path: Path, sql: str, options: list[str], code: int, message: str) -> None:
    path = _write(tmp_path, "bad.sql", sql)
    result = CliRunner().invoke(app, ["lineage", "sql", str(path), "--catalog", str(CATALOG), *options])
    assert result.exit_code == code
    assert message in " ".join(result.stderr.split())


def test_column_follows_a_stored_column_back_through_a_folder_of_events(tmp_path: Path) -> None:
    steps = {
        "stage_a.sql": STAGE_A_SQL,
        "stage_b.sql": "INSERT INTO sales.customers SELECT customer_id, 'x', status, 'e' FROM sales.orders",
    }
    folder = tmp_path / "openlineage" / "dt=2022-01-20"
    folder.mkdir(parents=True)
    for name, sql in steps.items():
        printed = CliRunner().invoke(
            app, ["lineage", "sql", str(_write(tmp_path, name, sql)), "--catalog", str(CATALOG)]
        )
        assert printed.exit_code == 0, printed.output
        (folder / f"{name}.json").write_text(printed.stdout)
    result = CliRunner().invoke(app, ["lineage", "column", "sales.customers.region", "--events", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "sales.customers.region",
        "+- sales.orders.status  DIRECT IDENTITY  [job lakeline/stage_b]",
        "   +- raw.orders.status  DIRECT IDENTITY  [job lakeline/stage_a]",
    ]
    unknown = CliRunner().invoke(app, ["lineage", "column", "sales.customers.nope", "--events", str(tmp_path)])
    assert unknown.exit_code == 1
    assert "no stored event writes sales.customers.nope" in unknown.stderr
    malformed = CliRunner().invoke(app, ["lineage", "column", "customers.region", "--events", str(tmp_path)])
    assert malformed.exit_code == 2
    assert "DATABASE.TABLE.COLUMN" in malformed.stderr


USHAS_EXAMPLE = (
    "CREATE TABLE mart.t_out AS\nselect * from (select substr(a+1,0,1) as c, a+3 as d from (select 1 as a, 2 as b))\n"
)


def test_tree_shows_the_whole_expression_chain_of_the_ushas_example(tmp_path: Path) -> None:
    sql = _write(tmp_path, "ushas.sql", USHAS_EXAMPLE)
    result = CliRunner().invoke(app, ["lineage", "tree", str(sql), "--catalog", str(CATALOG)])
    assert result.exit_code == 0, result.output
    assert result.stdout.split("\n\n")[0].splitlines() == [
        "mart.t_out.c = _1.c AS c",
        "+- _1.c = SUBSTRING(_0.a + 1, 0, 1) AS c",
        "   +- _0.a = 1 AS a  [literal]",
    ]


def test_each_leaf_of_the_tree_shows_the_transformation_of_its_own_path(tmp_path: Path) -> None:
    sql = _write(
        tmp_path,
        "paths.sql",
        "INSERT INTO mart.customer_flags SELECT customer_id, f FROM (SELECT customer_id, name AS f FROM "
        "sales.customers UNION ALL SELECT customer_id, upper(name) FROM sales.customers WHERE name <> '')",
    )
    result = CliRunner().invoke(app, ["lineage", "tree", str(sql), "--catalog", str(CATALOG)])
    assert result.exit_code == 0, result.output
    assert result.stdout.split("\n\n")[1].splitlines() == [
        "mart.customer_flags.flag = _0.f AS f",
        "+- _0.f = UNION ALL",
        "   +- _0.f = customers.name AS f",
        "      +- sales.customers.name  DIRECT IDENTITY",
        "   +- _0._col_1 = UPPER(customers.name) AS _col_1",
        "      +- sales.customers.name  DIRECT TRANSFORMATION",
        "+- sales.customers.name  INDIRECT FILTER  [dataset]",
    ]


def test_tree_goes_through_subqueries_to_table_columns_and_stored_events(tmp_path: Path) -> None:
    events = _stage_a_events(tmp_path)
    sql = _write(
        tmp_path,
        "nested.sql",
        "INSERT INTO mart.customer_flags SELECT t.customer_id, CAST(t.total AS varchar) FROM "
        "(SELECT customer_id, SUM(amount) AS total FROM sales.orders GROUP BY customer_id) t",
    )
    result = CliRunner().invoke(
        app, ["lineage", "tree", str(sql), "--catalog", str(CATALOG), "--events", str(events), "--direct-only"]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.split("\n\n")[1].splitlines() == [
        "mart.customer_flags.flag = CAST(t.total AS VARCHAR) AS total",
        "+- t.total = SUM(orders.amount) AS total",
        "   +- sales.orders.amount  DIRECT AGGREGATION",
        "      +- raw.orders.amount  DIRECT IDENTITY  [job lakeline/stage_a]",
    ]


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT * FROM sales.empty", "table sales.empty has no columns in the catalog"),
        ("SELECT FROM WHERE (", "cannot parse SQL as athena: line 1, column 17"),
        ("DROP TABLE sales.orders", "has no statement that reads or writes rows"),
        ("CALL system.expire_snapshots('sales.orders')", "CALL statements are not supported"),
        ("INSERT INTO sales.empty SELECT name FROM sales.customers", "table sales.empty has no columns in the catalog"),
        ("UNLOAD (SELECT name FROM sales.customers) TO 's3://b/x/'", "UNLOAD statements are not supported"),
    ],
)
def test_unsupported_sql_is_one_clean_line(tmp_path: Path, sql: str, message: str) -> None:
    path = _write(tmp_path, "bad.sql", sql)
    for command in ("sql", "tree"):
        result = CliRunner().invoke(app, ["lineage", command, str(path), "--catalog", str(CATALOG)])
        assert result.exit_code == 1, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert message in result.stderr
        assert "\x1b" not in result.stderr and "Traceback" not in result.stderr
        assert result.stdout == ""


def test_merge_gives_an_event_with_inputs_outputs_and_column_lineage(tmp_path: Path) -> None:
    sql = _write(
        tmp_path,
        "merge.sql",
        "MERGE INTO mart.customer_flags t USING sales.customers s ON t.customer_id = s.customer_id\n"
        "WHEN MATCHED THEN UPDATE SET flag = s.region\n"
        "WHEN NOT MATCHED THEN INSERT (customer_id, flag) VALUES (s.customer_id, s.name)",
    )
    result = CliRunner().invoke(app, ["lineage", "sql", str(sql), "--catalog", str(CATALOG), "--dialect", "trino"])
    assert result.exit_code == 0, result.output
    event = json.loads(result.stdout)
    assert [d["name"] for d in event["inputs"]] == [
        "AwsDataCatalog.mart.customer_flags",
        "AwsDataCatalog.sales.customers",
    ]
    (output,) = event["outputs"]
    fields = output["facets"]["columnLineage"]["fields"]
    assert {f["field"] for f in fields["flag"]["inputFields"]} == {"region", "name"}


def test_the_installed_command_says_why_on_one_line(tmp_path: Path) -> None:
    """As a user runs it: sqlglot's own warnings (a statement kept as a Command, a construct the dialect
    cannot write) reach a terminal through logging's last-resort handler, which CliRunner does not show."""
    refused = _write(tmp_path, "unload.sql", "UNLOAD (SELECT name FROM sales.customers) TO 's3://b/x/'")
    recursive = _write(
        tmp_path,
        "recursive.sql",
        "WITH RECURSIVE r (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r",
    )
    runs = [
        subprocess.run(
            [sys.executable, "-m", "lakeline", "lineage", "sql", str(path), "--catalog", str(CATALOG), *options],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        for path, options in ((refused, []), (recursive, ["--dialect", "hive"]))
    ]
    assert runs[0].returncode == 1
    assert runs[0].stderr.splitlines() == [
        "error: UNLOAD statements are not supported for column lineage "
        "(in: UNLOAD (SELECT name FROM sales.customers) TO 's3://b/x/')"
    ]
    assert runs[1].returncode == 0, runs[1].stderr
    assert runs[1].stderr == ""


def test_sql_gives_a_created_table_the_types_it_has(tmp_path: Path) -> None:
    sql = _write(
        tmp_path, "ctas.sql", "CREATE TABLE mart.tmp3 AS SELECT customer_id, NULL AS nothing FROM sales.orders"
    )
    result = CliRunner().invoke(app, ["lineage", "sql", str(sql), "--catalog", str(CATALOG)])
    assert result.exit_code == 0, result.output
    (output,) = json.loads(result.stdout)["outputs"]
    fields = [(f["name"], f.get("type")) for f in output["facets"]["schema"]["fields"]]
    assert fields == [("customer_id", "bigint"), ("nothing", None)]  # an unknown type is left out
