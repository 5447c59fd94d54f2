"""From an arrival to the target partition and its SQL, with each item's own masks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lakeline.dependencies.model import DependencyItem, parse_dependency_item
from lakeline.dependencies.resolve import (
    destination_partitions,
    resolve_arrival,
    substitution_values,
    team_sql_reader,
)
from lakeline.errors import InvalidInputError

REPO = Path(__file__).parents[2]
SEED_ITEM = REPO / "tests" / "fixtures" / "dependencies" / "seed_item.json"


@pytest.fixture
def seed() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SEED_ITEM.read_text())
    return data


def no_files(name: str) -> str:
    raise AssertionError(f"no sql_file expected, asked for {name}")


def test_seed_example_end_to_end(seed: dict[str, Any]) -> None:
    item = parse_dependency_item(seed)
    (resolved,) = resolve_arrival(item, "engineering_mysql_dev.customers", {"date": "20220120"}, no_files)
    assert resolved.to_dict() == {
        "dataset": "engineering_analytics_dev.destination_table",
        "partition": {"date": "20220115"},
        "steps": [
            {
                "db": "engineering_analytics_dev",
                "info": "SQL to insert into destination_table",
                "sql": "insert into engineering_analytics_dev.destination_table ( SELECT *, '20220114' "
                "FROM TABLE_X where date = '20220110' )",
            }
        ],
    }


def test_the_built_in_tokens_a_run_provides_are_known(seed: dict[str, Any]) -> None:
    # Issue 17: `deps resolve` refused $partition_value, which a real run provides.
    seed["steps"][0]["sql"] = (
        "INSERT INTO $target_database.$target_table SELECT '$partition_value', '$partition_column', "
        "'$environment' FROM t"
    )
    item = parse_dependency_item(seed)
    (resolved,) = resolve_arrival(item, "engineering_mysql_dev.customers", {"date": "20220120"}, no_files, "dev")
    assert resolved.steps[0].sql == (
        "INSERT INTO engineering_analytics_dev.destination_table SELECT '20220115', 'date', 'dev' FROM t"
    )


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "INSERT INTO engineering_analytics_dev.destination_table SELECT 1; DROP TABLE engineering_mysql_dev.c",
            "a step holds exactly one statement, found 2",
        ),
        ("INSERT INTO side_table SELECT '$end_date'", "writes engineering_analytics_dev.side_table; a step may write"),
        ("DROP TABLE IF EXISTS engineering_mysql_dev.customers", "writes engineering_mysql_dev.customers"),
        ("SELECT '$nope'", r"no value for \$nope"),
    ],
)
def test_sql_files_are_checked_when_resolved(seed: dict[str, Any], tmp_path: Path, sql: str, message: str) -> None:
    (tmp_path / "engineering").mkdir()
    (tmp_path / "engineering" / "step.sql").write_text(sql)
    seed["steps"] = [{"db": "engineering_analytics_dev", "sql_file": "step.sql", "info": "from a file"}]
    item = parse_dependency_item(seed)
    reader = team_sql_reader(tmp_path, "engineering")
    with pytest.raises(InvalidInputError, match=rf"destination_table steps\[0\] \(from a file\): {message}"):
        resolve_arrival(item, "engineering_mysql_dev.customers", {"date": "20220120"}, reader)


def test_multi_level_source_partitions_use_the_field_column(seed: dict[str, Any]) -> None:
    dependency = parse_dependency_item(seed).dependencies[0]
    source = {"region": "eu-west-1", "date": "20220120", "hour": "07"}
    assert destination_partitions(dependency, "date", "%Y%m%d", source) == [{"date": "20220115"}]
    with pytest.raises(InvalidInputError, match=r"no partition column 'date' \(FieldColumn\).*region, hour"):
        destination_partitions(dependency, "date", "%Y%m%d", {"region": "eu", "hour": "07"})
    with pytest.raises(InvalidInputError, match="not partitioned"):
        destination_partitions(dependency, "date", "%Y%m%d", {})
    with pytest.raises(InvalidInputError, match="does not match the date mask"):
        destination_partitions(dependency, "date", "%Y%m%d", {"date": "2022-01-20"})
    with pytest.raises(InvalidInputError, match="not allowed"):
        destination_partitions(dependency, "date", "%Y%m%d", {"date": "2022'01"})


def test_masks_other_than_the_seeds(seed: dict[str, Any]) -> None:
    seed["dependencies"][0].update(
        FieldColumn="dt", DateExpression="%Y-%m-%d", relativedelta_attributes={"day": 1, "months": -1}
    )
    seed.update(partitionColumn="month", partitionPythonMask="%Y%m")
    seed["date_substitutions"] = [
        {"token": "$first", "format": "%Y-%m-%d", "relativedelta_attributes": {}},
        {"token": "$last", "format": "%Y-%m-%d", "relativedelta_attributes": {"months": 1, "days": -1}},
    ]
    seed["steps"][0]["sql"] = "SELECT * FROM t WHERE dt BETWEEN '$first' AND '$last'"
    item = parse_dependency_item(seed)
    (resolved,) = resolve_arrival(item, "engineering_mysql_dev.customers", {"dt": "2024-03-05"}, no_files)
    assert resolved.partition == {"month": "202402"}
    assert resolved.steps[0].sql == "SELECT * FROM t WHERE dt BETWEEN '2024-02-01' AND '2024-02-29'"


def test_substitutions_are_computed_from_the_destination_partition(seed: dict[str, Any]) -> None:
    item = parse_dependency_item(seed)
    assert substitution_values(item, {"date": "20220301"}) == {"$start_date": "20220228", "$end_date": "20220224"}
    with pytest.raises(InvalidInputError, match="has no 'date'"):
        substitution_values(item, {"day": "20220301"})


def test_sql_file_is_read_from_the_team_folder(seed: dict[str, Any]) -> None:
    seed["steps"] = [
        {"db": "engineering_analytics_dev", "sql": "", "sql_file": "destination_table.sql", "info": "from file"},
        {"db": "engineering_analytics_dev", "sql": "SELECT '$end_date'", "sql_file": "ignored.sql"},
    ]
    item = parse_dependency_item(seed)
    reader = team_sql_reader(REPO / "athena_queries", "engineering")
    (resolved,) = resolve_arrival(item, "engineering_mysql_dev.customers", {"date": "20220120"}, reader)
    assert "'20220114' AS start_date" in resolved.steps[0].sql
    assert "\"date\" = '20220110'" in resolved.steps[0].sql
    assert resolved.steps[1].sql == "SELECT '20220110'"  # inline sql wins over sql_file


def test_missing_sql_file_and_bad_team(seed: dict[str, Any], tmp_path: Path) -> None:
    seed["steps"] = [{"db": "engineering_analytics_dev", "sql_file": "absent.sql"}]
    item = parse_dependency_item(seed)
    with pytest.raises(InvalidInputError, match=r"sql_file 'absent\.sql': cannot read"):
        resolve_arrival(item, "engineering_mysql_dev.customers", {"date": "20220120"}, team_sql_reader(tmp_path, "t"))
    with pytest.raises(InvalidInputError, match=r"team '\.\./x' is not a valid name"):
        team_sql_reader(tmp_path, "../x")


def test_a_token_left_over_is_an_error(seed: dict[str, Any], tmp_path: Path) -> None:
    sql = "SELECT '$start_date', '$start_date_x', $other FROM t"
    (tmp_path / "engineering").mkdir()
    (tmp_path / "engineering" / "step.sql").write_text(sql)
    seed["steps"] = [{"db": "engineering_analytics_dev", "sql_file": "step.sql"}]
    item: DependencyItem = parse_dependency_item(seed)
    reader = team_sql_reader(tmp_path, "engineering")
    with pytest.raises(InvalidInputError, match=r"steps\[0\].*no value for \$start_date_x, \$other"):
        resolve_arrival(item, "engineering_mysql_dev.customers", {"date": "20220120"}, reader)
    # inline, the same SQL is refused when the item is validated
    seed["steps"] = [{"db": "engineering_analytics_dev", "sql": sql}]
    with pytest.raises(InvalidInputError, match=r"steps\[0\]\.sql: no value for \$start_date_x, \$other"):
        parse_dependency_item(seed)


def test_arrival_of_a_table_that_is_not_a_source(seed: dict[str, Any]) -> None:
    item = parse_dependency_item(seed)
    with pytest.raises(InvalidInputError, match=r"does not depend on engineering_mysql_dev\.orders"):
        resolve_arrival(item, "engineering_mysql_dev.orders", {"date": "20220120"}, no_files)
