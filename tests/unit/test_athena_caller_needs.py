"""What a statement makes Athena do with its caller's credentials (``athena_caller.needed_for``, #20): the Glue and S3
actions, on which resources, that ``athena_caller.authorize`` checks. Pure: a Glue catalog of fakes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lakeline.runtimes.deployed.local_aws.athena_caller import needed_for
from lakeline.runtimes.deployed.local_aws.athena_statements import Rewriter

REGION, ACCOUNT = "us-east-1", "123456789012"
OUTPUT = "s3://results/athena/q1.csv"


@dataclass
class Entry:
    definition: dict[str, Any]
    _current_version: int = 1
    partitions: dict[str, Any] = field(default_factory=dict)  # moto's: the partitions ADDed, by their values

    def get_version(self, _version: str) -> dict[str, Any]:
        return self.definition


@dataclass
class Database:
    tables: dict[str, Entry] = field(default_factory=dict)


@dataclass
class Glue:
    databases: dict[str, Database]


def catalog() -> Glue:
    orders = Entry(
        {"StorageDescriptor": {"Location": "s3://stage/orders/"}, "PartitionKeys": [{"Name": "date"}], "Parameters": {}}
    )
    stores = Entry({"StorageDescriptor": {"Location": "s3://stage/stores/"}, "Parameters": {}})
    archive = Entry(
        {
            "StorageDescriptor": {"Location": "s3://archive/archive/"},
            "PartitionKeys": [{"Name": "dt"}],
            "Parameters": {"projection.enabled": "true"},
        }
    )
    return Glue({"shop_dev": Database({"orders": orders, "stores": stores}), "lineage_dev": Database({"a": archive})})


def needs(sql: str) -> list[tuple[str, str]]:
    statement = Rewriter(Path("/mirror"), "p__").statement(sql, "shop_dev", ctas_root="s3://results/tables/q1/")
    return [
        (need.action, resource)
        for need in needed_for(catalog(), statement, REGION, ACCOUNT, OUTPUT)
        for resource in need.resources
    ]


TABLE = f"arn:aws:glue:{REGION}:{ACCOUNT}:table/shop_dev"


def test_a_select_reads_the_tables_glue_entries_and_data_and_writes_its_result() -> None:
    found = needs("SELECT * FROM orders JOIN stores USING (store)")
    assert ("glue:GetTable", f"{TABLE}/orders") in found and ("glue:GetPartitions", f"{TABLE}/orders") in found
    assert ("glue:GetTable", f"{TABLE}/stores") in found and ("glue:GetPartitions", f"{TABLE}/stores") not in found
    assert ("s3:GetObject", "arn:aws:s3:::stage/orders/*") in found and ("s3:ListBucket", "arn:aws:s3:::stage") in found
    assert found[-1] == ("s3:PutObject", "arn:aws:s3:::results/athena/q1.csv")


def test_a_projected_table_s_partitions_are_not_read_from_glue() -> None:
    found = needs("SELECT * FROM lineage_dev.a")
    assert ("glue:GetTable", f"arn:aws:glue:{REGION}:{ACCOUNT}:table/lineage_dev/a") in found
    assert not [action for action, _ in found if action == "glue:GetPartitions"]


def test_a_ctas_creates_its_table_and_writes_where_it_says_not_where_a_literal_points() -> None:
    found = needs("CREATE TABLE shop_dev.copy WITH (external_location = 's3://stage/copy/') AS SELECT 's3://x/y' AS a")
    assert ("glue:CreateTable", f"{TABLE}/copy") in found
    assert ("s3:PutObject", "arn:aws:s3:::stage/copy/*") in found
    assert ("s3:PutObject", "arn:aws:s3:::x/y/*") not in found
    unplaced = needs("CREATE TABLE shop_dev.copy2 AS SELECT 's3://x/y' AS a")
    assert ("s3:PutObject", "arn:aws:s3:::results/tables/q1/*") in unplaced


@pytest.mark.parametrize(
    ("sql", "actions"),
    [
        ("INSERT INTO orders SELECT * FROM orders", {"glue:GetTable", "glue:BatchCreatePartition"}),
        ("INSERT INTO stores SELECT * FROM stores", {"glue:GetTable"}),
        (
            "ALTER TABLE orders ADD PARTITION (date = '1') LOCATION 's3://stage/orders/x/'",
            {"glue:GetTable", "glue:BatchCreatePartition"},
        ),
        ("ALTER TABLE orders DROP PARTITION (date = '1')", {"glue:GetTable", "glue:BatchDeletePartition"}),
        (
            "ALTER TABLE orders PARTITION (date = '1') SET LOCATION 's3://stage/orders/y/'",
            {"glue:GetTable", "glue:UpdatePartition"},
        ),
        ("DROP TABLE orders", {"glue:GetTable", "glue:DeleteTable"}),
        ("DROP TABLE IF EXISTS gone", {"glue:GetTable"}),
    ],
)
def test_what_a_change_asks_of_glue(sql: str, actions: set[str]) -> None:
    target = sql.split("INTO ")[-1].split()[0] if "INTO" in sql else sql.split("TABLE ")[-1].split()[0]
    target = target if target != "IF" else "gone"
    changed = {
        action for action, resource in needs(sql) if resource == f"{TABLE}/{target}" and action.startswith("glue:")
    }
    assert changed == actions


def test_an_insert_writes_under_its_table() -> None:
    assert ("s3:PutObject", "arn:aws:s3:::stage/orders/*") in needs("INSERT INTO orders SELECT * FROM orders")


# -- Gaps, pinned (docs/development.md "Gaps, said plainly"; athena_caller's docstring): Athena asks these of
#    its caller in AWS, the local Athena does not check them. A test that fails means a gap closed: say so there too.


def test_gap_msck_repair_lists_no_s3_as_its_caller() -> None:
    """MSCK REPAIR TABLE lists the table's location in S3 (s3:ListBucket) to find partitions."""
    asked = needs("MSCK REPAIR TABLE orders")
    assert ("glue:BatchCreatePartition", f"{TABLE}/orders") in asked
    assert not any(action.startswith("s3:") and action != "s3:PutObject" for action, _ in asked)


def test_gap_no_kms_or_lake_formation_action_is_asked() -> None:
    """Reading SSE-KMS data asks kms:Decrypt; a Lake Formation table asks lakeformation:GetDataAccess."""
    asked = {action for action, _ in needs("SELECT * FROM orders")}
    assert asked and not any(action.startswith(("kms:", "lakeformation:")) for action in asked)
