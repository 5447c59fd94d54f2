"""``lakeline lineage trace --table`` against the moto lineage table."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from typer.testing import CliRunner

from lakeline.aws.retry import NO_WAIT
from lakeline.cli import app
from lakeline.lineage.records.archive import bucket_object_key
from lakeline.lineage.records.load import LineageLoader
from lakeline.lineage.records.table import TRACED_AT, key_item, traced_marker_key
from tests.handlers.test_lineage_support import REGION, TABLE, chain_records, create_table

runner = CliRunner()


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        create_table(client)
        yield client


def test_trace_reads_the_table_prints_the_tree_and_archives_it(dynamodb: Any, tmp_path: Path) -> None:
    records = chain_records(
        "run-7", ["RAW_DATA_INPUT", "STAGE_A_COMPLETE"], now=datetime(2026, 11, 22, tzinfo=UTC), fan_out=3
    )
    assert not LineageLoader(dynamodb, TABLE, backoff=NO_WAIT).load([(str(i), r) for i, r in enumerate(records)]).failed
    archive = tmp_path / "lineage-archive"
    result = runner.invoke(
        app,
        ["lineage", "trace", "--root", "run-7", "--table", TABLE, "--region", REGION,
         "--archive", str(archive), "--date", "2026-11-23", "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    tree = json.loads(result.stdout)
    assert tree["nodes"] == 4 and tree["statuses"] == {"complete": 3}
    # Compacted right after the trace: in its day object, nothing left staged.
    assert [p.relative_to(archive).as_posix() for p in archive.rglob("*.jsonl")] == [
        bucket_object_key(date(2026, 11, 23), "run-7")
    ]
    marker = dynamodb.get_item(TableName=TABLE, Key=key_item(traced_marker_key("run-7")))
    assert TRACED_AT in marker["Item"]

    shown = runner.invoke(app, ["lineage", "show", "--root", "run-7", "--archive", str(archive), "--json"])
    assert json.loads(shown.stdout)["lines"] == tree["lines"]

    missing_table = runner.invoke(app, ["lineage", "trace", "--root", "run-7", "--table", "nope", "--region", REGION])
    assert missing_table.exit_code == 2 and "AWS call failed" in missing_table.stderr


def test_show_a_partition_version_from_an_archive_folder_and_say_what_is_not_there(tmp_path: Path) -> None:
    """#43: ``lineage show --table --partition [--version]`` over an archive folder (s3:// reads the same way)."""
    from harness.versions_archive import DAILY, ORDERS, partition_of, write_history
    from lakeline.lineage.records.archive import LocalArchiveStore

    archive = tmp_path / "lineage-archive"
    write_history(LocalArchiveStore(archive), partitions=2, versions=3)
    show = ["lineage", "show", "--archive", str(archive), "--table", DAILY, "--partition", partition_of(1)]
    shown = runner.invoke(app, [*show, "--version", "v2", "--json"])
    assert shown.exit_code == 0, shown.output
    answer = json.loads(shown.stdout)
    assert (answer["version"]["number"], answer["before"]["number"], answer["after"]["number"]) == (2, 1, 3)
    [read] = answer["version"]["inputs"]
    assert read["dataset"] == ORDERS and read["version"].startswith("v2.")
    assert answer["version"]["raw_files"] == [f"s3://raw/sales/orders/{partition_of(1)}/file-2.csv"]
    printed = runner.invoke(app, show)
    assert printed.exit_code == 0 and "(3 of 3 archived, the newest)" in printed.stdout, printed.output
    assert "before: v2." in printed.stdout and "after: none archived" in printed.stdout
    missing = runner.invoke(app, [*show[:-1], "date=19990101"])
    assert missing.exit_code == 1 and f"archived partitions: {partition_of(0)}, {partition_of(1)}" in missing.output
    assert runner.invoke(app, [*show, "--version", "7"]).exit_code == 1
    assert runner.invoke(app, [*show, "--version", "seven"]).exit_code == 2
    assert runner.invoke(app, [*show, "--root", "r"]).exit_code == 2
    # The same query file through `lineage query`: its three ? need three values (checked before Spark starts).
    sql = ["lineage", "query", "--archive", str(archive), "--sql", "athena_queries/lineage/partition_version.sql"]
    refused = runner.invoke(app, [*sql, "--parameter", DAILY])
    assert refused.exit_code == 2 and "has 3 '?' for one value" in refused.output, refused.output
