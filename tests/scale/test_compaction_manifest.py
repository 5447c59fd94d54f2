"""A compaction or a rewrite of a partition that has loaded 10,000 files (#39): its state machine input and every
statement it runs stay under a quarter of their AWS limits (Step Functions' 256 KiB, Athena's 262,144 bytes),
because the files it reads are listed in a manifest in S3 (moto's here), not in the SQL or the plan."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime

import boto3
import pytest
from moto import mock_aws

from lakeline.commits import Lease
from lakeline.engines.base import Column, TableSchema
from lakeline.partitions import run_location
from lakeline.settings import PipelineSettings, TableSettings
from lakeline.storage import MANIFEST_OBJECT, S3ObjectStore
from stage_a.arrivals import Arrival, pending_entry
from stage_a.keys import parse_raw_key
from stage_a.plan import StageAPlan, arrival_id, plan_stage_a

TOKEN = "20220120t101500000000_0123456789"
BUCKET = "lakeline-raw-landing-zone-123456789012-eu-central-1-production"  # 63 characters, S3's longest
STAGE = "lakeline-stage-zone-123456789012-eu-central-1-production-stage"
SETTINGS = PipelineSettings(raw_root=f"s3://{BUCKET}/", stage_root=f"s3://{STAGE}/", environment="dev")
PREFIX = "eng/mysql/customers/date=20220120/"
NAME = "-8f14e45f-ceea-4c7a-9d1b-00.csv"  # with the prefix, 70-character keys
LOADED = 10_000
QUARTER_OF_THE_INPUT_QUOTA = 256 * 1024 // 4
QUARTER_OF_THE_QUERY_QUOTA = 262_144 // 4


@pytest.fixture
def s3() -> Iterator[S3ObjectStore]:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=STAGE)
        yield S3ObjectStore(client)


def key(number: int) -> str:
    return f"{PREFIX}{number:05d}{NAME}"


def plan_over_history(policy: str, store: S3ObjectStore, *, file_format: str = "csv", arriving: int = 7) -> StageAPlan:
    """The plan of a run that takes one arrival into a partition whose published version loaded ``LOADED`` files:
    the arrival replaces a loaded file (new content), so an incremental table compacts."""
    assert len(key(0)) == 70
    loaded = frozenset(arrival_id(key(n), f"{n:018X}") for n in range(LOADED))
    when = datetime(2022, 1, 21, tzinfo=UTC)
    arrival = Arrival(bucket=BUCKET, key=key(arriving), sequencer="F" * 18, event_time=when)
    root = f"s3://{STAGE}/{PREFIX}"
    published = run_location(root, "20220119t101500000000_0123456789")
    lease = Lease(
        "commit#p", TOKEN, run_location(root, TOKEN), 40, published, 4, (pending_entry(arrival),), loaded, 41, 40
    )
    schema = TableSchema(
        "eng_mysql_raw_dev",
        "customers",
        (Column("customer_id", "bigint"), Column("name", "string"), Column("amount", "decimal(12,2)")),
        (Column("date", "string"),),
        format=file_format,
    )
    table = TableSettings(write_policy=policy, bucket_count=4)  # type: ignore[arg-type]
    raw = parse_raw_key(key(arriving))
    return plan_stage_a(raw, SETTINGS, schema, run_token=TOKEN, lease=lease, table_settings=table, manifests=store)


def manifest_lines(store: S3ObjectStore, plan: StageAPlan, folder: str | None = None) -> list[str]:
    """The lines of the manifest in ``folder`` (default: the one the run's CTAS reads)."""
    assert plan.source is not None
    where = (folder or plan.source.manifest) + MANIFEST_OBJECT
    bucket, _, object_key = where.removeprefix("s3://").partition("/")
    body = store._s3.get_object(Bucket=bucket, Key=object_key)["Body"].read().decode()
    return body.splitlines()


@pytest.mark.parametrize(("policy", "mode"), [("incremental", "compact"), ("rewrite", "rewrite")])
@pytest.mark.parametrize("file_format", ["csv", "parquet"])
def test_a_run_over_10000_loaded_files_stays_under_a_quarter_of_every_limit(
    s3: S3ObjectStore, policy: str, mode: str, file_format: str
) -> None:
    plan = plan_over_history(policy, s3, file_format=file_format)
    assert plan.mode == mode
    document = json.dumps({"plan": plan.to_dict(), "arrival": None})
    assert len(document.encode()) < QUARTER_OF_THE_INPUT_QUOTA
    assert plan.statements, "the run has statements"
    for statement in plan.statements:
        assert len(statement.encode()) < QUARTER_OF_THE_QUERY_QUOTA, statement[:200]
    assert "$path" not in plan.ctas
    # What it reads is every loaded file, exactly once, named in its manifest.
    assert manifest_lines(s3, plan) == [f"s3://{BUCKET}/{key(n)}" for n in range(LOADED)]
    # Only the run's new file is type-checked (CSV), named in the check's own manifest, not in its SQL.
    if file_format == "csv":
        assert plan.type_check is not None and NAME not in plan.type_check.check + plan.type_check.create
        (folder,) = re.findall(r"LOCATION '([^']+)'", plan.type_check.create)
        assert [line for line in manifest_lines(s3, plan, folder) if NAME in line] == manifest_lines(s3, plan, folder)
        assert len(manifest_lines(s3, plan, folder)) == 1
    else:
        assert plan.type_check is None


def test_the_manifest_is_written_where_the_run_may_write_and_the_sweep_deletes(s3: S3ObjectStore) -> None:
    """Beside the run's prefix, as a run prefix of its own (``delete_prefix`` accepts it), in a folder named by
    its content: a plan made again with other files (a redelivery after more arrived) leaves it as it was."""
    plan = plan_over_history("rewrite", s3)
    assert plan.source is not None
    manifest = plan.source.manifest
    assert manifest.startswith(f"s3://{STAGE}/{PREFIX}lakeline_run=20220120t101500000000_")
    assert not manifest.startswith(plan.target_location)
    assert plan.source.table in plan.ctas and plan.source.create.count(manifest) == 1
    again = plan_over_history("rewrite", s3, arriving=LOADED)  # the same run token, one file more
    assert again.source is not None and again.source.manifest != manifest
    assert len(manifest_lines(s3, plan)) == LOADED
    assert len(manifest_lines(s3, again)) == LOADED + 1
