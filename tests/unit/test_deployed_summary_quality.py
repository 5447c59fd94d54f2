"""A deployed run's ``summary.json`` carries the quality report of each execution that ran checks and published
(#41), read from beside its run in the deployment's S3 (moto here; the deployment's own S3 in ``lakeline run``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from moto import mock_aws

from lakeline.quality.evaluate import CheckResult, QualityReport
from lakeline.runtimes.deployed.local_aws.executions import ExecutionRecord
from lakeline.runtimes.deployed.run import _quality_reports
from stage_end.quality import report_location, report_to_json

RUN = "s3://stage/eng/t/date=1/lakeline_run=20261130t000000000000_aaaaaaaaaa/"
SWEPT = "s3://stage/eng/t/date=2/lakeline_run=20261130t000000000000_bbbbbbbbbb/"


@pytest.fixture
def operator() -> Iterator[Any]:
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="stage")
        report = QualityReport("eng_dev.t (date=1)", (CheckResult("RowCount > 0", "block", True, 4.0),))
        s3.put_object(Bucket="stage", Key=report_location(RUN).removeprefix("s3://stage/"), Body=report_to_json(report))
        yield SimpleNamespace(
            deployment=SimpleNamespace(client=lambda name: boto3.client(name, region_name="us-east-1"))
        )


def record(name: str, location: str, *, quality: bool = True, status: str = "SUCCEEDED") -> ExecutionRecord:
    plan = {"target_location": location, "quality": {"rules": []} if quality else None}
    return ExecutionRecord(arn=f"arn:aws:states:us-east-1:1:execution:a:{name}", input={"plan": plan}, status=status)


def test_each_checked_and_published_runs_report_and_no_other(operator: Any) -> None:
    records = [
        record("checked", RUN),
        record("unchecked", RUN, quality=False),  # no checks: its report is not looked for
        record("blocked", RUN, status="FAILED"),  # its rules are in its cause; its report went with its prefix
        record("swept", SWEPT),  # no report left: nothing to say
        ExecutionRecord(arn="arn:x", input=None),
    ]
    # As summary.json holds it (JSON).
    assert json.loads(json.dumps(_quality_reports(operator, records))) == [
        {
            "table": "eng_dev.t (date=1)",
            "blocked": False,
            "results": [
                {"rule": "RowCount > 0", "severity": "block", "passed": True, "metric": 4.0, "sample": [], "note": ""}
            ],
        }
    ]
