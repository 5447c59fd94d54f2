"""Routing plans (pure): destination partitions for every target of a finished partition."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pydantic
import pytest

from lakeline.dependencies.model import DependencyEdge, edges_of, parse_dependency_item
from stage_b.messages import SourceArrival, StageBMessage
from stage_b.routing import plan_routes
from tests.seed_items import seed_item

SEED_ITEM = Path(__file__).parents[1] / "fixtures" / "dependencies" / "seed_item.json"
CUSTOMERS = "engineering_mysql_dev.customers"


def item_edges(changes: dict[str, Any] | None = None, **dependency: Any) -> list[DependencyEdge]:
    data = seed_item(**(changes or {}))
    data["dependencies"][0].update(dependency)
    return edges_of(parse_dependency_item(data))


def test_seed_arrival_routes_to_the_saturday_partition() -> None:
    arrival = SourceArrival(table=CUSTOMERS, partition={"date": "20220120"})
    [route], [] = plan_routes(arrival, item_edges())
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
    routes, unrouted = plan_routes(arrival, weekly + daily)
    assert unrouted == []
    assert [(r.edge.target_dataset, r.partition) for r in routes] == [
        ("engineering_analytics_dev.daily", {"dt": "2022-02-28"}),
        ("engineering_analytics_dev.destination_table", {"date": "20220226"}),
    ]


def test_failing_targets_are_set_aside_with_their_reason_and_the_others_are_routed() -> None:
    good = item_edges()
    other = item_edges({"dataset": "engineering_analytics_dev.other"}, FieldColumn="day")
    third = item_edges({"dataset": "engineering_analytics_dev.third"}, DateExpression="%Y-%m-%d")
    arrival = SourceArrival(table=CUSTOMERS, partition={"date": "20220120"})
    routes, unrouted = plan_routes(arrival, good + other + third)
    assert [route.edge.target_dataset for route in routes] == ["engineering_analytics_dev.destination_table"]
    assert [target.target_dataset for target in unrouted] == [
        "engineering_analytics_dev.other",
        "engineering_analytics_dev.third",
    ]
    assert "no partition column 'day'" in unrouted[0].reason
    assert unrouted[0].describe().startswith(f"{CUSTOMERS}/date=20220120 → engineering_analytics_dev.other: ")


def test_a_shift_out_of_the_calendar_fails_only_its_own_target() -> None:
    # Issue 17: a shift valid on every sampled date overflows for a far-future arrival; that arrival's
    # other targets must still be routed.
    good = item_edges({"dataset": "engineering_analytics_dev.daily"}, relativedelta_attributes={"days": 0})
    late = item_edges({"dataset": "engineering_analytics_dev.later"}, relativedelta_attributes={"years": 100})
    arrival = SourceArrival(table=CUSTOMERS, partition={"date": "99500101"})
    routes, unrouted = plan_routes(arrival, late + good)
    assert [(route.edge.target_dataset, route.partition) for route in routes] == [
        ("engineering_analytics_dev.daily", {"date": "99500101"})
    ]
    [target] = unrouted
    assert target.target_dataset == "engineering_analytics_dev.later"
    assert "out of range" in target.reason


def test_a_node_already_in_the_chain_is_a_loop() -> None:
    arrival = SourceArrival(table=CUSTOMERS, partition={"date": "20220120"})
    path = ["engineering_analytics_dev.destination_table/date=20220115", f"{CUSTOMERS}/date=20220120"]
    routes, [loop] = plan_routes(arrival, item_edges(), path)
    assert routes == [] and "already built in this chain" in loop.reason


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
