"""The one delete function refuses a run prefix the catalog points at (#37), whatever the caller believes:
a published version is never deleted by a failure path, a sweep or a superseded-prefix cleanup, even when
the pipeline state that should have said so was lost. On S3 the catalog is Glue (moto)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from moto import mock_aws

from lakeline.catalog_locations import CatalogUnreadable, GlueLocations
from lakeline.commits import PartitionCommits, PartitionState, commit_key, sweep_partition
from lakeline.dependencies.tables import DependencyTableNames, create_dependency_tables
from lakeline.partitions import delete_run_files
from lakeline.storage import DeleteRefused, S3ObjectStore

OLD = "lakeline_run=20220101t000000000000_0000000000"
NEW = "lakeline_run=20220102t000000000000_0000000000"
TABLE_ROOT = "s3://lake/stage/orders/"


@dataclass
class Lake:
    s3: Any
    glue: Any
    store: S3ObjectStore

    def files(self) -> list[str]:
        return self.store.list_data_files("s3://lake/")


@pytest.fixture
def lake() -> Iterator[Lake]:
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        glue = boto3.client("glue", region_name="us-east-1")
        s3.create_bucket(Bucket="lake")
        for run in (OLD, NEW):
            s3.put_object(Bucket="lake", Key=f"stage/orders/date=1/{run}/part-0.parquet", Body=b"x")
            s3.put_object(Bucket="lake", Key=f"stage/totals/{run}/part-0.parquet", Body=b"x")
        glue.create_database(DatabaseInput={"Name": "sales"})
        glue.create_table(
            DatabaseName="sales",
            TableInput={
                "Name": "orders",
                "StorageDescriptor": {"Columns": [{"Name": "id", "Type": "int"}], "Location": TABLE_ROOT},
                "PartitionKeys": [{"Name": "date", "Type": "string"}],
            },
        )
        glue.create_partition(  # the catalog points the partition at the OLDER prefix (a swap that did not go)
            DatabaseName="sales",
            TableName="orders",
            PartitionInput={"Values": ["1"], "StorageDescriptor": {"Location": f"{TABLE_ROOT}date=1/{OLD}"}},
        )
        glue.create_table(
            DatabaseName="sales",
            TableInput={"Name": "totals", "StorageDescriptor": {"Location": f"s3://lake/stage/totals/{NEW}/"}},
        )
        yield Lake(s3, glue, S3ObjectStore(s3, GlueLocations(glue)))


def test_the_prefix_a_partition_points_at_is_refused_and_kept(lake: Lake) -> None:
    before = lake.files()
    with pytest.raises(DeleteRefused, match=r"the catalog points sales.orders \(date=1\) at it"):
        lake.store.delete_prefix(f"{TABLE_ROOT}date=1/{OLD}/", table_root=TABLE_ROOT, table="sales.orders")
    assert lake.files() == before
    # Another run prefix of the same partition is not published: it goes.
    assert lake.store.delete_prefix(f"{TABLE_ROOT}date=1/{NEW}/", table_root=TABLE_ROOT, table="sales.orders") == 1


def test_the_prefix_an_unpartitioned_table_points_at_is_refused(lake: Lake) -> None:
    root = "s3://lake/stage/totals/"
    with pytest.raises(DeleteRefused, match=r"sales.totals \(the table\)"):
        lake.store.delete_prefix(f"{root}{NEW}/", table_root=root, table="sales.totals")
    assert lake.store.delete_prefix(f"{root}{OLD}/", table_root=root, table="sales.totals") == 1


def test_a_failure_path_reports_the_refusal_and_a_cleanup_skips_it(lake: Lake) -> None:
    deleted, left = delete_run_files(lake.store, f"{TABLE_ROOT}date=1/{OLD}/", TABLE_ROOT, "sales.orders")
    assert deleted == 0 and "is a published version" in left
    # The grace-period sweep of a partition whose state knows neither prefix (both look like crashed runs'
    # leftovers, long ago): NEW goes, OLD stays because the catalog still reads it, and the sweep goes on.
    client = boto3.client("dynamodb", region_name="us-east-1")
    names = DependencyTableNames()
    create_dependency_tables(client, names)
    commits = PartitionCommits(client, names.pipeline_state, lists=lake.store)
    state = PartitionState(key=commit_key("sales.orders", "date=1"), root=f"{TABLE_ROOT}date=1/")
    swept = sweep_partition(
        commits, state, lake.store, grace_seconds=3600, run_prefix="lakeline_run=", token_time=lambda _: 0.0
    )
    assert swept == [f"{TABLE_ROOT}date=1/{NEW}/"]
    assert lake.files() == [
        f"{TABLE_ROOT}date=1/{OLD}/part-0.parquet",
        f"s3://lake/stage/totals/{OLD}/part-0.parquet",
        f"s3://lake/stage/totals/{NEW}/part-0.parquet",
    ]


def test_a_catalog_that_cannot_answer_refuses_the_delete(lake: Lake) -> None:
    """Fail closed: a partition the catalog cannot be asked about is kept (the run reports it left)."""

    class Unreadable:
        def catalog_location(self, database: str, table: str, partition: Any) -> str | None:
            raise CatalogUnreadable("cannot read sales.orders from the Glue catalog: AccessDenied")

    store = S3ObjectStore(lake.s3, Unreadable())
    with pytest.raises(DeleteRefused, match="AccessDenied"):
        store.delete_prefix(f"{TABLE_ROOT}date=1/{NEW}/", table_root=TABLE_ROOT, table="sales.orders")


def test_glue_access_denied_is_unreadable_not_absent(lake: Lake) -> None:
    from botocore.exceptions import ClientError

    class Denied:
        def get_table(self, **_: Any) -> Any:
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "GetTable")

    with pytest.raises(CatalogUnreadable, match="AccessDenied"):
        GlueLocations(Denied()).catalog_location("sales", "orders", {"date": "1"})  # type: ignore[arg-type]
    assert GlueLocations(lake.glue).catalog_location("sales", "missing", {"date": "1"}) is None
    assert GlueLocations(lake.glue).catalog_location("sales", "orders", {"date": "2"}) is None
