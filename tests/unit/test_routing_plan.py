"""Routing plans (pure): destination partitions for every target of a finished partition."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pydantic
import pytest

from lakeline.dependencies.model import DependencyEdge, DependencyItemError, edges_of, parse_dependency_item
from lakeline.dependencies.store import from_dynamodb, to_dynamodb
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


def daily_window_edges(**target_range: Any) -> list[DependencyEdge]:
    return item_edges(
        {
            "dataset": "engineering_analytics_dev.trailing_7d",
            "partitionColumn": "dt",
            "partitionPythonMask": "%Y-%m-%d",
        },
        relativedelta_attributes={"days": 0},
        TargetRange=target_range,
    )


def test_a_target_range_routes_a_day_to_every_trailing_window_that_contains_it() -> None:
    arrival = SourceArrival(table=CUSTOMERS, partition={"date": "20211229"})
    routes, unrouted = plan_routes(arrival, daily_window_edges(count=7, step={"days": 1}))
    assert unrouted == []
    assert [route.partition["dt"] for route in routes] == [
        "2021-12-29", "2021-12-30", "2021-12-31", "2022-01-01", "2022-01-02", "2022-01-03", "2022-01-04"
    ]  # fmt: skip
    # The pair keeps the range through dependencies-by-table, as DynamoDB gives it back (Decimal numbers).
    (edge,) = daily_window_edges(count=7, step={"days": 1})
    stored = from_dynamodb(to_dynamodb(edge.to_item()))
    assert DependencyEdge.model_validate(stored).dependency.target_range == edge.dependency.target_range


def test_partitions_a_range_gives_twice_are_routed_once() -> None:
    monthly = item_edges(
        {"dataset": "engineering_analytics_dev.monthly", "partitionColumn": "m", "partitionPythonMask": "%Y-%m"},
        TargetRange={"count": 40, "step": {"days": 1}},
    )
    routes, _ = plan_routes(SourceArrival(table=CUSTOMERS, partition={"date": "20220120"}), monthly)
    assert [route.partition["m"] for route in routes] == ["2022-01", "2022-02"]  # Jan 15 + 39 days
    # From the shifted date itself, not from the month it is written as: Jan 30 + 6 days is February.
    week = item_edges(
        {"dataset": "engineering_analytics_dev.monthly", "partitionColumn": "m", "partitionPythonMask": "%Y-%m"},
        relativedelta_attributes={"days": 0},
        TargetRange={"count": 7, "step": {"days": 1}},
    )
    routes, _ = plan_routes(SourceArrival(table=CUSTOMERS, partition={"date": "20220130"}), week)
    assert [route.partition["m"] for route in routes] == ["2022-01", "2022-02"]


@pytest.mark.parametrize(
    ("target_range", "problem"),
    [
        ({"count": 0, "step": {"days": 1}}, "greater than or equal to 1"),
        ({"count": 367, "step": {"days": 1}}, "less than or equal to 366"),
        ({"count": 3, "step": {"day": 1}}, "step takes relative attributes only"),
        ({"count": 3, "step": {"days": 0}}, "step must move the date"),
        ({"count": 3, "step": {}}, "step must move the date"),
        ({"count": 3, "step": {"days": 1, "hours": -24}}, "step must move the date"),
        ({"count": True, "step": {"days": 1}}, "TargetRange.count: must be a whole number, not a boolean"),
        ({"count": 366, "step": {"years": 27}}, "TargetRange: 366 partitions {'years': 27} apart reach too far"),
    ],
)
def test_a_target_range_that_cannot_work_is_refused_with_its_reason(target_range: dict[str, Any], problem: str) -> None:
    with pytest.raises(DependencyItemError) as refused:
        daily_window_edges(**target_range)
    assert problem in str(refused.value)


def test_a_target_range_needs_an_overwrite_target() -> None:
    with pytest.raises(DependencyItemError, match="TargetRange: needs Usage overwrite"):
        item_edges(
            {"dataset": "engineering_analytics_dev.w", "partitionColumn": "dt", "partitionPythonMask": "%Y-%m-%d"},
            Usage="append",
            TargetRange={"count": 3, "step": {"days": 1}},
        )


def test_a_failed_queue_record_is_named_by_its_subject_so_its_line_splits_at_the_first_colon() -> None:
    """The embedded runtime's failure lines read ``<subject>: <error>`` (``lakeline stage-b run --json`` splits
    them into node and error): a stage B message is named by its target partition, not by its JSON body."""
    from stage_end.waiting import queued_subject

    arrival = SourceArrival(table="engineering_raw_dev.table_1", partition={"date": "20220115"})
    message = StageBMessage(
        target_dataset="engineering_analytics_dev.destination_table",
        partition={"date": "20220115"},
        trigger=arrival,
        usage="overwrite",
    )
    assert queued_subject(message.model_dump_json()) == "engineering_analytics_dev.destination_table/date=20220115"
    assert ": " not in queued_subject('{"not": "a message"}')
