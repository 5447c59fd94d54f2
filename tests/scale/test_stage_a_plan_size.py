"""A stage A plan's size depends neither on what waits nor on its batch (#39): the batch is an object the plan names
(``lakeline.commits.batch``), so the whole state machine input stays well under a quarter of Step Functions'
256 KiB with realistic keys and with the longest keys the door accepts, and a run takes a full batch."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from moto import mock_aws

from lakeline.commits import Lease
from lakeline.engines.base import Column, TableSchema
from lakeline.partitions import run_location
from lakeline.quality.checks import MAX_CHECKS, MAX_CHECKS_BYTES
from lakeline.settings import PipelineSettings, TableSettings
from lakeline.storage import S3ObjectStore
from stage_a.arrivals import Arrival, pending_entry
from stage_a.keys import parse_raw_key
from stage_a.plan import MAX_RUN_ARRIVALS, plan_stage_a

TOKEN = "20220120t101500000000_0123456789"
BUCKET = "lakeline-raw-landing-zone-123456789012-eu-central-1-production"
STAGE = "lakeline-stage-123456789012-eu-central-1-production"  # S3 names are at most 63 characters
SETTINGS = PipelineSettings(raw_root=f"s3://{BUCKET}/", stage_root=f"s3://{STAGE}/", environment="dev")
QUARTER_OF_THE_QUOTA = 256 * 1024 // 4


@pytest.fixture(autouse=True)
def s3() -> Iterator[S3ObjectStore]:
    """Where the plans write their manifests (stage_a.manifest): moto's S3."""
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=STAGE)
        yield S3ObjectStore(client)


def waiting_plan_input(
    s3: S3ObjectStore,
    team: str,
    dataset: str,
    table: str,
    file_name: str,
    waiting: int,
    settings: PipelineSettings = SETTINGS,
) -> tuple[int, int]:
    """(bytes of the state machine input, arrivals its run takes) with ``waiting`` arrivals on one partition."""
    prefix = f"{team}/{dataset}/{table}/date=20220120/"
    start = datetime(2022, 1, 20, 10, tzinfo=UTC)
    entries = tuple(
        pending_entry(
            Arrival(bucket=BUCKET, key=f"{prefix}{i:05d}{file_name}", sequencer=f"{i:018X}", event_time=start)
        )
        for i in range(waiting)
    )
    root = f"s3://{STAGE}/{prefix}"
    lease = Lease("commit#p", TOKEN, run_location(root, TOKEN), 0, None, 0, entries, frozenset(), 1)
    schema = TableSchema(
        f"{team}_{dataset}_raw_dev",
        table,
        (Column("customer_id", "bigint"), Column("name", "string")),
        (Column("date", "string"),),
    )
    raw = parse_raw_key(f"{prefix}00000{file_name}")
    plan = plan_stage_a(raw, settings, schema, run_token=TOKEN, lease=lease, manifests=s3)
    assert plan.lease is not None
    document = json.dumps({"plan": plan.to_dict(), "arrival": None})
    return len(document.encode()), len(plan.lease["pending"])


def test_a_realistic_burst_gives_a_full_batch_well_under_the_quota(s3: S3ObjectStore) -> None:
    name = "-8f14e45f-ceea-4c7a-9d1b-00.csv"  # 70-character keys with the prefix below
    size, taken = waiting_plan_input(s3, "eng", "mysql", "customers", name, 2_000)
    assert len(f"eng/mysql/customers/date=20220120/00000{name}") == 70
    assert taken == MAX_RUN_ARRIVALS
    assert size < QUARTER_OF_THE_QUOTA
    # The input of a run that takes one arrival is as large: the batch costs it nothing.
    alone, _ = waiting_plan_input(s3, "eng", "mysql", "customers", name, 1)
    assert abs(size - alone) < 100 and size < 8 * 1024, (size, alone)


@pytest.mark.parametrize("waiting", [1, 150, 2_000])
def test_the_longest_keys_the_door_accepts_make_smaller_batches_under_the_same_bound(
    s3: S3ObjectStore, waiting: int
) -> None:
    """The longest names a database and table take and a file name of 255: a key of over 500 characters."""
    team, dataset, table = "t" * 59, "d" * 59, "c" * 128  # <team>_<dataset>_raw_dev: at most 128
    size, taken = waiting_plan_input(s3, team, dataset, table, "f" * 250, waiting)
    assert 1 <= taken < min(waiting + 1, MAX_RUN_ARRIVALS)
    assert size < QUARTER_OF_THE_QUOTA


def test_the_most_checks_a_table_may_declare_travel_in_the_plan_under_the_quota(s3: S3ObjectStore) -> None:
    """A table's quality checks travel in its runs' plans (``QualityGate``): at their bound (100 checks, 64,000 bytes
    of rules) and quoted at every other character, so JSON escapes half of them again, with the longest keys and a
    full batch, the input stays under half of Step Functions' 256 KiB (the table settings themselves travel in the
    functions' code asset, not their 4 KB environment: lambdas.table_settings)."""
    team, dataset, table = "t" * 59, "d" * 59, "c" * 128
    values = ", ".join(f'"{n:x}"' for n in range(104))
    rules = [{"rule": f'ColumnValues "c{n:02d}" in [{values}]'} for n in range(MAX_CHECKS)]
    assert MAX_CHECKS_BYTES - 1_000 <= sum(len(rule["rule"]) for rule in rules) <= MAX_CHECKS_BYTES
    checked = SETTINGS.model_copy(
        update={"tables": {f"{team}_{dataset}_dev.{table}": TableSettings.model_validate({"checks": rules})}}
    )
    plain, _ = waiting_plan_input(s3, team, dataset, table, "f" * 250, 2_000)
    size, _ = waiting_plan_input(s3, team, dataset, table, "f" * 250, 2_000, checked)
    assert size - plain > MAX_CHECKS_BYTES  # the rules are in it
    assert size < 2 * QUARTER_OF_THE_QUOTA, size


def test_the_oldest_arrivals_are_taken_first(s3: S3ObjectStore) -> None:
    """A run's batch is the oldest of what waits, so no arrival waits behind ever newer ones."""
    start = datetime(2022, 1, 20, 10, tzinfo=UTC)
    prefix = "eng/mysql/customers/date=20220120/"
    arrivals = [
        Arrival(bucket=BUCKET, key=f"{prefix}f{i:04d}.csv", sequencer=f"{i:018X}", event_time=start - timedelta(i))
        for i in range(MAX_RUN_ARRIVALS + 100)
    ]
    root = f"s3://{STAGE}/{prefix}"
    entries = tuple(sorted(pending_entry(arrival) for arrival in arrivals))
    lease = Lease("commit#p", TOKEN, run_location(root, TOKEN), 0, None, 0, entries, frozenset(), 1)
    schema = TableSchema("eng_mysql_raw_dev", "customers", (Column("id", "bigint"),), (Column("date", "string"),))
    plan = plan_stage_a(
        parse_raw_key(f"{prefix}f0000.csv"), SETTINGS, schema, run_token=TOKEN, lease=lease, manifests=s3
    )
    assert plan.arrival_keys == [arrival.key for arrival in reversed(arrivals[100:])]
    # The arrival that started the run waits for a follow-up: the run is known by the oldest one it takes.
    assert plan.raw_key == arrivals[-1].key
