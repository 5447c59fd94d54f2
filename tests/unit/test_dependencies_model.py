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
from lakeline.errors import InvalidInputError

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
        with pytest.raises(InvalidInputError):
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
    with pytest.raises(InvalidInputError, match=r"does not depend on db\.other"):
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


# -- issue 17: items that validated and then did the wrong thing -------------------------------------------


@pytest.mark.parametrize(
    ("field", "mask", "example"),
    [
        ("partitionPythonMask", "%Y%U", "parses back to 1999-01-01"),  # week number ignored without a weekday
        ("partitionPythonMask", "%j", "parses back to 1900-"),  # every year's day 358 in one partition
        ("partitionPythonMask", "%Y%m%d%I", "one partition would hold dates apart"),  # 1am and 1pm together
        ("partitionPythonMask", "%y%m%d", "2099-12-24 12:00:00 formats to '991224', which parses back to 1999"),
        ("DateExpression", "%d", "parses back to 1900-"),
        ("DateExpression", "%Y%U", "parses back to 1999-01-01"),
    ],
)
def test_masks_that_do_not_round_trip_are_refused(seed: dict[str, Any], field: str, mask: str, example: str) -> None:
    if field == "DateExpression":
        seed["dependencies"][0]["DateExpression"] = mask
        path = "dependencies[0].DateExpression"
    else:
        seed["partitionPythonMask"] = mask
        path = "partitionPythonMask"
    [problem] = problems(seed)
    assert problem.startswith(f"{path}: {field} {mask!r} does not round-trip: ")
    assert example in problem
    assert "\n" not in problem


@pytest.mark.parametrize("mask", ["%Y%m%d", "%Y-%m-%d", "%Y%m", "%Y", "%Y-%m-%dT%H", "%G-%V-%u", "%Y%j"])
def test_masks_that_round_trip_are_accepted(seed: dict[str, Any], mask: str) -> None:
    seed["partitionPythonMask"] = mask
    seed["dependencies"][0]["DateExpression"] = mask
    seed["dependencies"][0]["relativedelta_attributes"] = {}
    assert parse_dependency_item(seed).partition_python_mask == mask


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        ({"years": 1000}, "relativedelta_attributes.years: Input should be less than or equal to 100"),
        ({"year": 9999, "months": 1}, "relativedelta_attributes: {'months': 1, 'year': 9999} moves 1999-12-24"),
        ({"year": 1, "month": 1, "day": 1, "days": -1}, "out of range"),
        ({"year": 500}, "which '%Y%m%d' writes '5001224'"),  # a 3-digit year does not parse back
    ],
)
def test_date_arithmetic_is_checked_for_overflow(
    seed: dict[str, Any], attributes: dict[str, Any], message: str
) -> None:
    seed["dependencies"][0]["relativedelta_attributes"] = attributes
    [problem] = problems(seed)
    assert problem.startswith("dependencies[0].relativedelta_attributes")
    assert message in problem


def test_substitution_shifts_are_checked_for_overflow(seed: dict[str, Any]) -> None:
    seed["date_substitutions"][0]["relativedelta_attributes"] = {"year": 9999, "days": 1}
    [problem] = problems(seed)
    assert problem.startswith("date_substitutions[0].relativedelta_attributes: {'days': 1, 'year': 9999} moves")


def with_sql(seed: dict[str, Any], sql: str) -> dict[str, Any]:
    seed["steps"] = [{"db": "engineering_analytics_dev", "sql": sql, "info": "load"}]
    return seed


TARGET = "engineering_analytics_dev.destination_table"


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (f"INSERT INTO {TARGET} SELECT '$start_date'; SELECT 1", "a step holds exactly one statement, found 2"),
        (f"INSERT INTO {TARGET} SELECT 1 FROM t; DROP TABLE t", "a step holds exactly one statement, found 2"),
        ("INSERT INTO side SELECT '$end_date'", "writes engineering_analytics_dev.side; a step may write only"),
        ("DROP TABLE engineering_mysql_dev.customers", "writes engineering_mysql_dev.customers"),
        ("DELETE FROM engineering_mysql_dev.customers WHERE 1 = 1", "writes engineering_mysql_dev.customers"),
        ("CREATE TABLE other.t AS SELECT 1 AS x", "writes other.t"),
        (f"ALTER TABLE {TARGET} RENAME TO other.t", "writes other.t"),
        ("DROP DATABASE engineering_mysql_dev", "DROP DATABASE changes something other than a table"),
        (f"insert into {TARGET} ( SELECT 1", "SQL does not parse: Expecting )"),
    ],
)
def test_steps_are_one_statement_writing_only_the_dataset(seed: dict[str, Any], sql: str, message: str) -> None:
    [problem] = problems(with_sql(seed, sql))
    assert problem.startswith("steps[0].sql: ")
    assert message in problem


def test_declared_scratch_tables_may_be_written(seed: dict[str, Any]) -> None:
    seed["scratchTables"] = ["Engineering_Analytics_Dev.Scratch"]
    item = parse_dependency_item(with_sql(seed, "CREATE TABLE scratch AS SELECT '$start_date' AS d"))
    assert item.scratch_tables == ("engineering_analytics_dev.scratch",)
    assert item.to_item()["scratchTables"] == ["engineering_analytics_dev.scratch"]
    assert parse_dependency_item(item.to_item()) == item
    seed["scratchTables"] = ["db.a", "DB.A", "bad"]
    [problem] = problems(seed)
    assert problem.startswith("scratchTables: ")


@pytest.mark.parametrize(
    ("sql", "undefined"),
    [
        (f"INSERT INTO {TARGET} SELECT 'v_$day' FROM t", "$day"),
        (f"INSERT INTO {TARGET} SELECT 'x$end_date_v2' FROM t", "$end_date_v2"),
        (f"INSERT INTO {TARGET} SELECT x$nope FROM t", "$nope"),
    ],
)
def test_every_token_is_defined_or_reported(seed: dict[str, Any], sql: str, undefined: str) -> None:
    [problem] = problems(with_sql(seed, sql))
    assert problem.startswith(f"steps[0].sql: no value for {undefined}; define it in date_substitutions")


def test_glued_and_escaped_tokens_and_built_ins_are_accepted(seed: dict[str, Any]) -> None:
    sql = f"INSERT INTO {TARGET} SELECT 'x$end_date', '$$start_date', '$partition_value', \"$path\" FROM t"
    assert parse_dependency_item(with_sql(seed, sql)).steps[0].sql == sql


def test_problems_name_the_item(seed: dict[str, Any]) -> None:
    seed["partitionPythonMask"] = "%j"
    with pytest.raises(DependencyItemError, match=r"^dependency item engineering_analytics_dev\.destination_table is"):
        parse_dependency_item(seed)


def test_stored_edges_are_checked_for_overflow_on_read(seed: dict[str, Any]) -> None:
    [edge] = edges_of(parse_dependency_item(seed))
    stored = edge.to_item()
    stored["dependency"]["relativedelta_attributes"] = {"year": 9999, "months": 1}
    with pytest.raises(DependencyItemError, match=r"dependency\.relativedelta_attributes: .* out of range"):
        parse_dependency_edge(stored)
