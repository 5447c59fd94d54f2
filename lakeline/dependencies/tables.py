"""Key schemas of the dependency tables, and creating them on a local endpoint (tests, local runs).

The CDK stack defines the same keys for the cloud: ``dependencies`` (``dataset``, with a
NEW_AND_OLD_IMAGES stream), ``dependencies-by-table`` (``source_table`` + ``target_dataset``) and the
pipeline-state table of trigger mode ``all`` (``target_partition``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

DEPENDENCIES_KEY = "dataset"
BY_TABLE_PARTITION_KEY = "source_table"
BY_TABLE_SORT_KEY = "target_dataset"
PIPELINE_STATE_KEY = "target_partition"
# Pairs by target (keys only): lets a change of one item find every pair it wrote before, even pairs
# of a version whose successor was refused, so no pair is orphaned.
BY_TARGET_INDEX = "by-target"


@dataclass(frozen=True)
class DependencyTableNames:
    dependencies: str = "dependencies"
    by_table: str = "dependencies-by-table"
    pipeline_state: str = "pipeline-state"


def create_dependency_tables(client: DynamoDBClient, names: DependencyTableNames) -> str:
    """Create the three tables (on-demand) and wait for them; return the dependencies stream ARN."""
    created = client.create_table(
        TableName=names.dependencies,
        KeySchema=[{"AttributeName": DEPENDENCIES_KEY, "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": DEPENDENCIES_KEY, "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    client.create_table(
        TableName=names.by_table,
        KeySchema=[
            {"AttributeName": BY_TABLE_PARTITION_KEY, "KeyType": "HASH"},
            {"AttributeName": BY_TABLE_SORT_KEY, "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": BY_TABLE_PARTITION_KEY, "AttributeType": "S"},
            {"AttributeName": BY_TABLE_SORT_KEY, "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
        GlobalSecondaryIndexes=[
            {
                "IndexName": BY_TARGET_INDEX,
                "KeySchema": [
                    {"AttributeName": BY_TABLE_SORT_KEY, "KeyType": "HASH"},
                    {"AttributeName": BY_TABLE_PARTITION_KEY, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
    )
    client.create_table(
        TableName=names.pipeline_state,
        KeySchema=[{"AttributeName": PIPELINE_STATE_KEY, "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": PIPELINE_STATE_KEY, "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    waiter = client.get_waiter("table_exists")
    for name in (names.dependencies, names.by_table, names.pipeline_state):
        waiter.wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 30})
    return created["TableDescription"].get("LatestStreamArn", "")
