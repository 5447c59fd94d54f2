"""The dependency item model: the seed's fields, validated with every problem named by its field."""

from __future__ import annotations

import copy
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from lakeline.dependencies.model import (
    MAX_SOURCES,
    DependencyItemError,
    edges_of,
    normalise_table_name,
    parse_dependency_edge,
    parse_dependency_item,
)
from lakeline.errors import ValidationError

SEED_ITEM = Path(__file__).parents[1] / "fixtures" / "dependencies" / "seed_item.json"


@pytest.fixture
def seed() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SEED_ITEM.read_text())
    return data


def problems(data: Any) -> list[str]:
    with pytest.raises(DependencyItemError) as caught:
        parse_dependency_item(data)
    return caught.value.problems


def test_seed_item_is_valid(seed: dict[str, Any]) -> None:
    item = parse_dependency_item(seed)
    assert item.dataset == "engineering_analytics_dev.destination_table"
    assert item.source_tables == ("engineering_mysql_dev.customers",)
    dependency = item.dependency_on("ENGINEERING_MYSQL_DEV.customers")
    assert dependency.usage == "overwrite"
    assert dependency.relativedelta_attributes.weekday == "SA(-1)"
    assert item.partition_column == "date"
    assert item.trigger_mode == "any"  # the Lakeline extension defaults to the seed's behaviour
    assert [s.token for s in item.date_substitutions] == ["$start_date", "$end_date"]


def test_to_item_round_trips_through_dynamodb_types(seed: dict[str, Any]) -> None:
    item = parse_dependency_item(seed)
    serializer, deserializer = TypeSerializer(), TypeDeserializer()
    stored = {key: serializer.serialize(value) for key, value in item.to_item().items()}
    read = {key: deserializer.deserialize(value) for key, value in stored.items()}
    assert read["date_substitutions"][1]["relativedelta_attributes"]["days"] == Decimal(-5)
    assert parse_dependency_item(read) == item


def test_table_names_are_normalised_one_way(seed: dict[str, Any]) -> None:
    seed["dataset"] = "Engineering_Analytics_Dev.Destination_Table"
    seed["dependencies"][0]["TableName"] = "ENGINEERING_MYSQL_DEV.CUSTOMERS"
    item = parse_dependency_item(seed)
    assert item.dataset == "engineering_analytics_dev.destination_table"
    assert item.source_tables == ("engineering_mysql_dev.customers",)
    assert normalise_table_name("A.B") == "a.b"
    for bad in ("a", "a.b.c", "a-b.c", "1a.b", "a.", 5):
        with pytest.raises(ValidationError):
            normalise_table_name(bad)


def test_every_problem_is_listed_with_its_field(seed: dict[str, Any]) -> None:
    seed["dependencies"][0]["relativedelta_attributes"] = {"weekday": "SA(0)", "dayz": 1, "days": 1.5}
    seed["dependencies"][0]["Usage"] = "replace"
    seed["dependencies"][0]["DateExpression"] = "yyyyMMdd"
    seed["partitionPythonMask"] = "%Y/%m/%d"
    seed["partitionColumn"] = "Date"
    seed["steps"][0]["sql"] = ""
    seed["date_substitutions"][0]["format"] = "'%Y'"
    seed["date_substitutions"][1]["token"] = "end_date"
    seed["triggerMode"] = "sometimes"
    seed["comment"] = "not a seed field"
    found = problems(seed)
    fields = [problem.split(":")[0] for problem in found]
    assert fields == [
        "dependencies[0].Usage",
        "dependencies[0].DateExpression",
        "dependencies[0].relativedelta_attributes.days",
        "dependencies[0].relativedelta_attributes.weekday",
        "dependencies[0].relativedelta_attributes.dayz",
        "partitionColumn",
        "partitionPythonMask",
        "steps[0]",
        "date_substitutions[0].format",
        "date_substitutions[1].token",
        "triggerMode",
        "comment",
    ]
    text = "\n".join(found)
    assert "unknown relativedelta attribute; use one of years, months" in text
    assert "the occurrence must not be 0" in text
    assert "a step needs 'sql' or 'sql_file'" in text
    assert "comment: unknown field" in text


def test_missing_fields_are_named() -> None:
    assert problems({"dataset": "a.b"}) == [
        "dependencies: required field is missing",
        "partitionColumn: required field is missing",
        "partitionPythonMask: required field is missing",
        "steps: required field is missing",
    ]
    assert problems([]) == ["item: must be a JSON object, got list"]


def test_sources_must_be_distinct_and_not_the_target(seed: dict[str, Any]) -> None:
    dependency = seed["dependencies"][0]
    seed["dependencies"] = [
        dependency,
        dict(dependency, TableName="Engineering_MySQL_dev.customers"),
        dict(dependency, TableName="engineering_analytics_dev.destination_table"),
    ]
    assert problems(seed) == [
        "dependencies: engineering_mysql_dev.customers is listed twice; "
        "engineering_analytics_dev.destination_table cannot depend on itself"
    ]


def test_tokens_must_be_distinct(seed: dict[str, Any]) -> None:
    seed["date_substitutions"][1]["token"] = "$start_date"
    assert problems(seed) == ["date_substitutions: $start_date defined more than once"]


def test_too_many_sources(seed: dict[str, Any]) -> None:
    dependency = seed["dependencies"][0]
    seed["dependencies"] = [dict(dependency, TableName=f"db.t{n}") for n in range(MAX_SOURCES + 1)]
    assert problems(seed)[0].startswith("dependencies: List should have at most 50 items")


@pytest.mark.parametrize(
    ("sql_file", "valid"),
    [
        ("destination_table.sql", True),
        ("weekly/destination_table.sql", True),
        ("../secrets.sql", False),
        ("/etc/passwd.sql", False),
        ("query.txt", False),
        ("a//b.sql", False),
    ],
)
def test_sql_files_stay_under_the_team_folder(seed: dict[str, Any], sql_file: str, valid: bool) -> None:
    seed["steps"][0].update(sql="", sql_file=sql_file)
    if valid:
        assert parse_dependency_item(seed).steps[0].sql_file == sql_file
    else:
        assert problems(seed)[0].startswith("steps[0].sql_file:")


def test_step_db_must_be_an_identifier(seed: dict[str, Any]) -> None:
    seed["steps"][0]["db"] = "engineering analytics"
    assert problems(seed)[0].startswith("steps[0].db: db 'engineering analytics' is not a valid name")


def test_dependency_on_a_table_that_is_not_a_source(seed: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match=r"does not depend on db\.other"):
        parse_dependency_item(seed).dependency_on("db.other")


def test_edges_carry_what_routing_needs(seed: dict[str, Any]) -> None:
    dependency = seed["dependencies"][0]
    seed["dependencies"].append(dict(dependency, TableName="engineering_mysql_dev.orders", Usage="append"))
    seed["triggerMode"] = "all"
    item = parse_dependency_item(seed)
    edges = edges_of(item)
    assert [edge.key for edge in edges] == [
        ("engineering_mysql_dev.customers", "engineering_analytics_dev.destination_table"),
        ("engineering_mysql_dev.orders", "engineering_analytics_dev.destination_table"),
    ]
    assert all(edge.trigger_mode == "all" for edge in edges)
    assert edges[1].sources == ("engineering_mysql_dev.customers", "engineering_mysql_dev.orders")
    assert edges[1].dependency.usage == "append"
    assert parse_dependency_edge(edges[0].to_item()) == edges[0]


def test_edges_are_validated_on_read(seed: dict[str, Any]) -> None:
    edge = edges_of(parse_dependency_item(seed))[0].to_item()
    broken = copy.deepcopy(edge)
    broken["dependency"]["relativedelta_attributes"] = {"weekday": "Saturday"}
    broken["source_table"] = "engineering_mysql_dev.orders"
    with pytest.raises(DependencyItemError) as caught:
        parse_dependency_edge(broken)
    assert [problem.split(":")[0] for problem in caught.value.problems] == [
        "dependency.relativedelta_attributes.weekday"
    ]
    mismatched = dict(edge, source_table="engineering_mysql_dev.orders")
    with pytest.raises(DependencyItemError, match="differs from source_table"):
        parse_dependency_edge(mismatched)
