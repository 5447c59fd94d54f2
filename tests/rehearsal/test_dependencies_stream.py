"""A dependency item put into the deployed dependencies table, as users do: the table's stream runs the
bundled dependencies-by-table function, which writes one routing item per source (#20)."""

from __future__ import annotations

import json
from pathlib import Path

from boto3.dynamodb.types import TypeSerializer

from lakeline.local.rehearsal.deploy import Deployment
from lakeline.local.rehearsal.functions import FunctionHost

ITEMS = Path(__file__).parents[2] / "examples" / "demo" / "dependencies.json"


def test_a_dependency_item_reaches_dependencies_by_table_through_the_deployed_stream(
    deployment: Deployment, functions: FunctionHost
) -> None:
    outputs = deployment.outputs["Lakeline-dev-Pipeline"]
    item = json.loads(ITEMS.read_text())[0]
    serializer = TypeSerializer()
    dynamodb = deployment.client("dynamodb")
    dynamodb.put_item(
        TableName=outputs["DependenciesTable"],
        Item={key: serializer.serialize(value) for key, value in item.items()},
    )
    streamed = [(name, result) for name, _, result in functions.invocations if "-DependenciesStream" in name]
    assert streamed and not isinstance(streamed[-1][1], Exception), streamed
    routed = dynamodb.scan(TableName=outputs["DependenciesByTableTable"])["Items"]
    assert [(i["source_table"]["S"], i["target_dataset"]["S"]) for i in routed] == [
        ("engineering_mysql_dev.customers", "engineering_analytics_dev.customers_by_country")
    ]
