"""Checks declared where tables are declared (#41): on a table's settings and on a target's dependency item,
validated with the rest, an invalid rule refused naming it, the item stored as before when it has none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from lakeline.dependencies.model import DependencyItemError, parse_dependency_item
from lakeline.errors import ConfigError
from lakeline.quality.checks import MAX_CHECKS_BYTES, Check, parse_checks
from lakeline.settings import PipelineSettings

SEED_ITEM = Path(__file__).parents[1] / "fixtures" / "dependencies" / "seed_item.json"


def seed() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SEED_ITEM.read_text())
    return data


def settings_with(checks: Any) -> dict[str, Any]:
    return {"raw_root": "s3://raw/", "stage_root": "s3://stage/", "tables": {"shop.orders": {"checks": checks}}}


def test_table_settings_carry_checks() -> None:
    settings = PipelineSettings.model_validate(
        settings_with([{"rule": 'IsComplete "order_id"'}, {"rule": "RowCount > 0", "severity": "warn"}])
    )
    checks = settings.table_settings("shop", "orders").checks
    assert checks == (Check(rule='IsComplete "order_id"'), Check(rule="RowCount > 0", severity="warn"))
    assert settings.table_settings("shop", "other").checks == ()  # the default table has none


def test_an_invalid_rule_in_the_settings_file_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "lakeline.yml"
    path.write_text(
        "pipeline:\n  raw_root: s3://raw/\n  stage_root: s3://stage/\n  tables:\n    shop.orders:\n"
        "      checks:\n        - rule: 'RowCount >'\n        - rule: 'IsComplete \"id\"'\n          severity: never\n"
    )
    with pytest.raises(ConfigError) as caught:
        PipelineSettings.from_yaml(path)
    assert str(caught.value) == (
        f"{path}: tables.shop.orders.checks[0].rule: rule 'RowCount >': expected a value at the end; "
        "tables.shop.orders.checks[1].severity: Input should be 'block' or 'warn' (got 'never')"
    )


def test_rules_are_bounded_together() -> None:
    rule = 'CustomSql "select count(*) from primary where ' + "x = 1 or " * 2_000 + 'x = 2" > 0'
    many = [{"rule": rule.replace("x = 2", f"x = {n}")} for n in range(5)]
    assert sum(len(check["rule"]) for check in many) > MAX_CHECKS_BYTES
    with pytest.raises(ValueError, match=f"over the {MAX_CHECKS_BYTES} allowed"):
        parse_checks(many)


def test_a_target_item_carries_checks_through_dynamodb() -> None:
    data = {**seed(), "checks": [{"rule": 'ColumnValues "country" in ["FR", "DE"]', "severity": "warn"}]}
    item = parse_dependency_item(data)
    assert item.checks == (Check(rule='ColumnValues "country" in ["FR", "DE"]', severity="warn"),)
    serializer, deserializer = TypeSerializer(), TypeDeserializer()
    stored = {key: deserializer.deserialize(serializer.serialize(value)) for key, value in item.to_item().items()}
    assert stored["checks"] == [{"rule": 'ColumnValues "country" in ["FR", "DE"]', "severity": "warn"}]
    assert parse_dependency_item(stored) == item


def test_an_item_without_checks_is_stored_as_before() -> None:
    assert "checks" not in parse_dependency_item(seed()).to_item()


def test_an_invalid_rule_in_an_item_is_refused_by_name() -> None:
    data = {**seed(), "checks": [{"rule": "RowCount > 0"}, {"rule": 'IsComplete "Order Id"'}]}
    with pytest.raises(DependencyItemError) as caught:
        parse_dependency_item(data)
    assert any(
        problem.startswith("checks[1].rule: rule 'IsComplete \"Order Id\"'") for problem in caught.value.problems
    ), caught.value.problems


def test_the_cdk_contexts_table_settings_are_validated_at_synth() -> None:
    from stacks.config import LakelineConfig

    good = {"shop.orders": {"checks": [{"rule": "RowCount > 0", "severity": "warn"}]}}
    assert LakelineConfig.from_context({"table_settings": good}).table_settings == good
    with pytest.raises(ConfigError) as caught:
        LakelineConfig.from_context({"table_settings": {"shop.orders": {"checks": [{"rule": "RowCount"}]}}})
    assert str(caught.value) == (
        "context table_settings: shop.orders.checks[0].rule: "
        "rule 'RowCount': expected a condition (e.g. > 0) at the end"
    )
