"""``lakeline deps`` commands: validate, put, list, backfill, resolve (DynamoDB via moto)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.server import ThreadedMotoServer
from typer.testing import CliRunner

from lakeline.cli import app
from lakeline.dependencies.store import to_dynamodb
from lakeline.dependencies.tables import DependencyTableNames, create_dependency_tables
from tests.seed_items import seed_item

REPO = Path(__file__).parents[2]
SEED_ITEM = REPO / "tests" / "fixtures" / "dependencies" / "seed_item.json"
TARGET = "engineering_analytics_dev.destination_table"
CUSTOMERS = "engineering_mysql_dev.customers"
runner = CliRunner()


def with_sources(*sources: str, **changes: Any) -> dict[str, Any]:
    data = seed_item(**changes)
    data["dependencies"] = [dict(data["dependencies"][0], TableName=source) for source in sources]
    return data


def write(path: Path, data: Any) -> str:
    path.write_text(json.dumps(data))
    return str(path)


def deps(*args: str) -> Any:
    return runner.invoke(app, ["deps", *args])


# --- validate and resolve (no AWS) ----------------------------------------------------------------


def test_validate_the_seed_item() -> None:
    result = deps("validate", str(SEED_ITEM))
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {"valid": True, "datasets": [TARGET]}


def test_validate_lists_every_error(tmp_path: Path) -> None:
    bad = seed_item(partitionPythonMask="%Y/%m/%d", triggerMode="first")
    bad["dependencies"][0]["relativedelta_attributes"] = {"weekday": "SA(0)", "days": "1"}
    result = deps("validate", write(tmp_path / "bad.json", [seed_item(), bad]))
    assert result.exit_code == 1
    assert result.stdout == ""
    errors = [line.strip() for line in result.stderr.splitlines() if line.strip().startswith("- ")]
    # One line each: the item (its place in the file and its dataset), the field, what is wrong.
    assert [error.split(": ")[:2] for error in errors] == [
        [f"- [1] {TARGET}", "dependencies[0].relativedelta_attributes.days"],
        [f"- [1] {TARGET}", "dependencies[0].relativedelta_attributes.weekday"],
        [f"- [1] {TARGET}", "partitionPythonMask"],
        [f"- [1] {TARGET}", "triggerMode"],
    ]


@pytest.mark.parametrize(("content", "message"), [("{not json", "is not JSON"), ("[]", "holds no dependency item")])
def test_validate_unreadable_files(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "item.json"
    path.write_text(content)
    result = deps("validate", str(path))
    assert result.exit_code == 1
    assert message in result.stderr
    assert deps("validate", str(tmp_path / "absent.json")).exit_code == 1


def test_resolve_the_seed_example() -> None:
    result = deps("resolve", "--item", str(SEED_ITEM), "--table", CUSTOMERS, "--partition", "date=20220120")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {
        "dataset": TARGET,
        "partition": {"date": "20220115"},
        "steps": [
            {
                "db": "engineering_analytics_dev",
                "info": "SQL to insert into destination_table",
                "sql": "insert into engineering_analytics_dev.destination_table ( SELECT *, '20220114' "
                "FROM TABLE_X where date = '20220110' )",
            }
        ],
    }


def test_resolve_reads_sql_files_and_multi_level_partitions(tmp_path: Path) -> None:
    item = seed_item()
    item["steps"] = [{"db": "engineering_analytics_dev", "sql_file": "weekly/load.sql", "info": "load"}]
    (tmp_path / "queries" / "eng" / "weekly").mkdir(parents=True)
    (tmp_path / "queries" / "eng" / "weekly" / "load.sql").write_text("SELECT '$end_date', \"$path\"")
    args = ["--item", write(tmp_path / "item.json", item), "--table", CUSTOMERS.upper()]
    args += ["--partition", "region=eu", "--partition", "date=20220121"]
    result = deps("resolve", *args, "--team", "eng", "--queries-root", str(tmp_path / "queries"))
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["steps"] == [
        {"db": "engineering_analytics_dev", "info": "load", "sql": "SELECT '20220110', \"$path\""}
    ]
    # the default team is the first word of the target database, read from ./athena_queries
    result = deps("resolve", *args, "--queries-root", str(tmp_path / "queries"))
    assert result.exit_code == 1
    assert "sql_file 'weekly/load.sql': cannot read" in result.stderr
    assert "queries/engineering/weekly/load.sql" in result.stderr


def test_resolve_errors(tmp_path: Path) -> None:
    item = seed_item()
    item["steps"][0]["sql"] = "SELECT '$start_date', '$start_date_x'"
    path = write(tmp_path / "item.json", item)
    result = deps("resolve", "--item", path, "--table", CUSTOMERS, "--partition", "date=20220120")
    assert result.exit_code == 1
    assert "no value for $start_date_x" in result.stderr
    result = deps("resolve", "--item", str(SEED_ITEM), "--table", CUSTOMERS, "--partition", "date")
    assert result.exit_code == 2  # a wrong option: the command could not run as asked
    assert "must be written COLUMN=VALUE" in result.stderr
    result = deps("resolve", "--item", str(SEED_ITEM), "--table", "db.other", "--partition", "date=20220120")
    assert result.exit_code == 1
    assert "does not depend on db.other" in result.stderr


def test_validate_refuses_cycles_of_any_length(tmp_path: Path) -> None:
    # Issue 17: a 3-cycle passed `deps validate`; only `put` refused it.
    ring = [
        with_sources("db.b", dataset="db.a"),
        with_sources("db.c", dataset="db.b"),
        with_sources("db.a", dataset="db.c"),
    ]
    result = deps("validate", write(tmp_path / "ring.json", [*ring, seed_item()]))
    assert result.exit_code == 1
    assert result.stdout == ""
    [cycle] = [line.strip() for line in result.stderr.splitlines() if line.strip().startswith("- ")]
    assert cycle.startswith("- dependency cycle: db.a needs db.b needs db.c needs db.a;")
    assert deps("validate", write(tmp_path / "chain.json", ring[:2])).exit_code == 0


def test_resolve_knows_the_built_in_tokens(tmp_path: Path) -> None:
    # Issue 17: `deps resolve` refused $partition_value, which a real run provides.
    item = seed_item()
    item["steps"][0]["sql"] = f"INSERT INTO {TARGET} SELECT '$partition_value', '$environment' FROM t"
    args = ["--item", write(tmp_path / "item.json", item), "--table", CUSTOMERS, "--partition", "date=20220120"]
    result = deps("resolve", *args, "--environment", "dev")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["steps"][0]["sql"] == f"INSERT INTO {TARGET} SELECT '20220115', 'dev' FROM t"


# --- put, list, backfill (DynamoDB) -----------------------------------------------------------------


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_dependency_tables(client, DependencyTableNames())
        yield client


def test_put_list_backfill(dynamodb: Any) -> None:
    result = deps("put", str(SEED_ITEM), "--region", "us-east-1")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {"stored": [TARGET]}

    result = deps("list", "--region", "us-east-1")
    assert result.exit_code == 0, result.stderr
    listed = json.loads(result.stdout)
    assert [item["dataset"] for item in listed["items"]] == [TARGET]
    assert listed["items"][0]["dependencies"][0]["relativedelta_attributes"] == {"weekday": "SA(-1)"}
    assert listed["invalid"] == []

    stale = {"source_table": "db.gone", "target_dataset": "db.old", "sources": ["db.gone"]}
    dynamodb.put_item(TableName="dependencies-by-table", Item=to_dynamodb(stale))
    result = deps("backfill", "--region", "us-east-1")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {"items": 1, "written": 1, "deleted": 1, "invalid": []}
    pairs = dynamodb.scan(TableName="dependencies-by-table")["Items"]
    assert [(p["source_table"]["S"], p["target_dataset"]["S"]) for p in pairs] == [(CUSTOMERS, TARGET)]


def test_put_refuses_cycles_and_writes_nothing(dynamodb: Any, tmp_path: Path) -> None:
    assert deps("put", str(SEED_ITEM)).exit_code == 0
    cyclic = with_sources(TARGET, dataset=CUSTOMERS)
    result = deps("put", write(tmp_path / "cyclic.json", cyclic))
    assert result.exit_code == 1
    assert f"dependency cycle: {CUSTOMERS} needs {TARGET} needs {CUSTOMERS}" in result.stderr
    # a file whose items form a cycle among themselves is refused whole
    pair = [with_sources("db.b", dataset="db.a"), with_sources("db.a", dataset="db.b"), seed_item(dataset="db.c")]
    result = deps("put", write(tmp_path / "pair.json", pair))
    assert result.exit_code == 1
    assert "db.a needs db.b needs db.a" in result.stderr
    assert [i["dataset"]["S"] for i in dynamodb.scan(TableName="dependencies")["Items"]] == [TARGET]


def test_put_refuses_invalid_items(dynamodb: Any, tmp_path: Path) -> None:
    result = deps("put", write(tmp_path / "bad.json", seed_item(steps=[])))
    assert result.exit_code == 1
    assert "steps: List should have at least 1 item" in result.stderr
    assert dynamodb.scan(TableName="dependencies")["Count"] == 0


def test_list_and_backfill_report_invalid_items(dynamodb: Any) -> None:
    assert deps("put", str(SEED_ITEM)).exit_code == 0
    invalid = seed_item(dataset="db.invalid", partitionColumn="Bad Column")
    dynamodb.put_item(TableName="dependencies", Item=to_dynamodb(invalid))
    existing = {"source_table": CUSTOMERS, "target_dataset": "db.invalid", "sources": [CUSTOMERS]}
    dynamodb.put_item(TableName="dependencies-by-table", Item=to_dynamodb(existing))

    result = deps("list")
    assert result.exit_code == 1
    listed = json.loads(result.stdout)
    assert [item["dataset"] for item in listed["items"]] == [TARGET]
    assert listed["invalid"][0]["dataset"] == "db.invalid"
    assert listed["invalid"][0]["errors"][0].startswith("partitionColumn: partitionColumn 'Bad Column'")

    result = deps("backfill")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert (report["written"], report["deleted"]) == (1, 0)  # the invalid item's pair is left alone
    assert report["invalid"][0]["dataset"] == "db.invalid"


def test_missing_table_is_an_operational_error(dynamodb: Any) -> None:
    result = deps("list", "--table", "no-such-table")
    assert result.exit_code == 2
    assert "ResourceNotFoundException" in result.stderr


def test_endpoint_url_against_a_local_server(tmp_path: Path) -> None:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    names = DependencyTableNames("cli-deps", "cli-deps-by-table", "cli-state")
    try:
        client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=endpoint)
        create_dependency_tables(client, names)
        common = ["--endpoint-url", endpoint, "--region", "us-east-1", "--table", names.dependencies]
        result = deps("put", str(SEED_ITEM), *common)
        assert result.exit_code == 0, result.stderr
        result = deps("backfill", *common, "--by-table-table", names.by_table)
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout)["written"] == 1
        result = deps("list", *common)
        assert [item["dataset"] for item in json.loads(result.stdout)["items"]] == [TARGET]
        assert client.scan(TableName=names.by_table)["Count"] == 1
    finally:
        urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"))
        server.stop()


def test_validate_takes_folders_and_many_files_and_lists_every_problem(tmp_path: Path) -> None:
    # Issue 18: `deps validate` took one file, not a folder.
    folder = tmp_path / "items"
    folder.mkdir()
    write(folder / "a.json", seed_item())
    write(folder / "b.json", with_sources("db.x", dataset="db.y"))
    result = deps("validate", str(folder))
    assert result.exit_code == 0, result.stderr
    assert sorted(json.loads(result.stdout)["datasets"]) == sorted([TARGET, "db.y"])

    other = tmp_path / "other"
    other.mkdir()
    write(other / "twice.json", seed_item())  # the same dataset as a.json
    write(other / "broken.json", seed_item(triggerMode="first"))
    result = deps("validate", str(folder), str(other), str(tmp_path / "absent.json"))
    assert result.exit_code == 1
    problems = [line.strip() for line in result.stderr.splitlines() if line.strip().startswith("- ")]
    assert len(problems) == 3, result.stderr
    assert any("broken.json" in p and "triggerMode" in p for p in problems)
    assert any("twice.json" in p and "defined in" in p and "a.json" in p for p in problems)
    assert any("absent.json" in p and "cannot read" in p for p in problems)
    # Each folder must hold items: an empty one is a mistake in the path, not "nothing to check".
    (tmp_path / "empty").mkdir()
    assert "no *.json file" in deps("validate", str(tmp_path / "empty")).stderr
