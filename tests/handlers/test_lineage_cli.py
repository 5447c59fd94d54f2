"""``lakeline lineage trace --table`` against the moto lineage table."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from typer.testing import CliRunner

from lakeline.aws.retry import NO_WAIT
from lakeline.cli import app
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
    assert (archive / "dt=2026-11-23" / "trace-run-7.jsonl").is_file()
    marker = dynamodb.get_item(TableName=TABLE, Key=key_item(traced_marker_key("run-7")))
    assert TRACED_AT in marker["Item"]

    shown = runner.invoke(app, ["lineage", "show", "--root", "run-7", "--archive", str(archive), "--json"])
    assert json.loads(shown.stdout)["lines"] == tree["lines"]

    missing_table = runner.invoke(app, ["lineage", "trace", "--root", "run-7", "--table", "nope", "--region", REGION])
    assert missing_table.exit_code == 2 and "AWS call failed" in missing_table.stderr
