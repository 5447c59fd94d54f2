"""Routing plans (pure): destination partitions for every target of a finished partition."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pydantic
import pytest

from lakeline.dependencies.model import DependencyEdge, edges_of, parse_dependency_item
from stage_b.messages import SourceArrival, StageBMessage
from stage_b.routing import RoutingError, plan_routes

SEED_ITEM = Path(__file__).parents[1] / "fixtures" / "dependencies" / "seed_item.json"
CUSTOMERS = "engineering_mysql_dev.customers"


def item_edges(changes: dict[str, Any] | None = None, **dependency: Any) -> list[DependencyEdge]:
    data: dict[str, Any] = json.loads(SEED_ITEM.read_text())
    data["dependencies"][0].update(dependency)
    data.update(changes or {})
    return edges_of(parse_dependency_item(data))


def test_seed_arrival_routes_to_the_saturday_partition() -> None:
    arrival = SourceArrival(table=CUSTOMERS, partition={"date": "20220120"})
    [route] = plan_routes(arrival, item_edges())
    assert route.edge.target_dataset == "engineering_analytics_dev.destination_table"
    assert route.partition == {"date": "20220115"}
    assert route.node == "engineering_analytics_dev.destination_table/date=20220115"


def test_several_targets_and_multi_level_source_partitions() -> None:
    weekly = item_edges()
    daily = item_edges(
        {"dataset": "engineering_analytics_dev.daily", "partitionColumn": "dt", "partitionPythonMask": "%Y-%m-%d"},
        relativedelta_attributes={"days": -1},
    )
    arrival = SourceArrival(table=CUSTOMERS, partition={"region": "eu", "date": "20220301"})
    routes = plan_routes(arrival, weekly + daily)
    assert [(r.edge.target_dataset, r.partition) for r in routes] == [
        ("engineering_analytics_dev.daily", {"dt": "2022-02-28"}),
        ("engineering_analytics_dev.destination_table", {"date": "20220226"}),
    ]


def test_every_failing_target_is_reported_together() -> None:
    good = item_edges()
    other = item_edges({"dataset": "engineering_analytics_dev.other"}, FieldColumn="day")
    third = item_edges({"dataset": "engineering_analytics_dev.third"}, DateExpression="%Y-%m-%d")
    arrival = SourceArrival(table=CUSTOMERS, partition={"date": "20220120"})
    with pytest.raises(RoutingError) as caught:
        plan_routes(arrival, good + other + third)
    assert [problem.split(":")[0] for problem in caught.value.problems] == [
        "engineering_analytics_dev.other",
        "engineering_analytics_dev.third",
    ]


def test_a_node_already_in_the_chain_is_a_loop() -> None:
    arrival = SourceArrival(table=CUSTOMERS, partition={"date": "20220120"})
    path = ["engineering_analytics_dev.destination_table/date=20220115", f"{CUSTOMERS}/date=20220120"]
    with pytest.raises(RoutingError, match="already built in this chain"):
        plan_routes(arrival, item_edges(), path)


def test_messages_are_validated() -> None:
    arrival = SourceArrival(table="Engineering_MySQL_dev.Customers", partition={"date": "20220120"})
    assert arrival.node == f"{CUSTOMERS}/date=20220120"
    message = StageBMessage(
        target_dataset="engineering_analytics_dev.destination_table",
        partition={"date": "20220115"},
        trigger=arrival,
        usage="overwrite",
    )
    again = StageBMessage.model_validate_json(message.model_dump_json())
    assert again == message
    assert again.deduplication_id() == message.deduplication_id()
    broken: dict[str, Any] = copy.deepcopy(message.model_dump())
    broken["partition"] = {"date": "2022/01/15"}
    broken["usage"] = "upsert"
    with pytest.raises(pydantic.ValidationError) as caught:
        StageBMessage.model_validate(broken)
    assert [error["loc"] for error in caught.value.errors()] == [("partition",), ("usage",)]
