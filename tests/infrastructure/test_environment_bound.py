"""Lambda's 4 KB bound on a function's environment (``stacks.environment_bound``): the project's table settings,
quality checks included, travel in the code asset (``lambdas.table_settings``), so a project of many checked tables
synthesizes with small router environments; a function over the bound fails the synth naming it and its biggest
variables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

from lakeline.aws.lambda_limits import ENVIRONMENT_LIMIT_BYTES, environment_bytes
from lambdas.table_settings import TABLE_SETTINGS_FILE, read_table_settings
from stacks.app import build_app
from stacks.constructs.functions import LakelineFunction
from stacks.environment_bound import REFERENCE_BYTES, estimated_environment

RULES = ('IsComplete "order_id"', 'IsUnique "order_id"', 'ColumnValues "store" in ["north", "south", "east", "west"]')


def thirty_checked_tables() -> dict[str, Any]:
    return {
        f"shop_pos_dev.table_{n:02}": {"bucket_count": 4, "checks": [{"rule": rule} for rule in RULES]}
        for n in range(30)
    }


def test_thirty_checked_tables_synthesize_and_reach_the_routers_through_the_code_asset(tmp_path: Path) -> None:
    tables = thirty_checked_tables()
    assert len(json.dumps(tables)) > ENVIRONMENT_LIMIT_BYTES  # what the routers' environments used to carry
    app = cdk.App(context={"environment": "dev", "engine": "athena", "table_settings": tables}, outdir=str(tmp_path))
    _, pipeline = build_app(app)
    assembly = app.synth()  # runs every function's bound (a validation error raises here)
    template = assembly.get_stack_artifact(pipeline.artifact_id).template
    functions = {
        logical_id: resource["Properties"]
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Lambda::Function"
    }
    routers = {logical_id: properties for logical_id, properties in functions.items() if "Router" in logical_id}
    assert len(routers) == 2
    for logical_id, properties in functions.items():
        variables = properties.get("Environment", {}).get("Variables", {})
        assert "TABLE_SETTINGS" not in variables and "DEFAULT_TABLE_SETTINGS" not in variables
        size = environment_bytes(estimated_environment(variables))
        # Small: references at their longest and the router's names, far under the bound.
        assert size < ENVIRONMENT_LIMIT_BYTES // 2 if logical_id in routers else size <= ENVIRONMENT_LIMIT_BYTES
    # Every router runs the one code asset, which carries the settings as the context gave them.
    code_keys = {properties["Code"]["S3Key"] for properties in routers.values()}
    assert len(code_keys) == 1
    asset = tmp_path / f"asset.{code_keys.pop().removesuffix('.zip')}"
    deployed = read_table_settings((asset / "lambdas" / TABLE_SETTINGS_FILE).read_text())
    assert sorted(deployed.tables) == sorted(tables)
    assert [check.rule for check in deployed.tables["shop_pos_dev.table_29"].checks] == list(RULES)
    assert deployed.tables["shop_pos_dev.table_07"].bucket_count == 4


def test_other_settings_are_another_code_asset(tmp_path: Path) -> None:
    """The settings are part of what the asset's hash covers, so a change redeploys the code with them (and CDK's
    cache of bundled assets does not hand a second app in the process the first one's settings)."""
    keys = []
    for count in (1, 2):
        tables = dict(list(thirty_checked_tables().items())[:count])
        app = cdk.App(
            context={"environment": "dev", "engine": "athena", "table_settings": tables},
            outdir=str(tmp_path / str(count)),
        )
        _, pipeline = build_app(app)
        template = app.synth().get_stack_artifact(pipeline.artifact_id).template
        keys.append(
            {
                resource["Properties"]["Code"]["S3Key"]
                for logical_id, resource in template["Resources"].items()
                if resource["Type"] == "AWS::Lambda::Function" and "Router" in logical_id
            }
        )
    assert len(keys[0]) == len(keys[1]) == 1 and keys[0] != keys[1]


def test_a_function_over_the_bound_fails_the_synth_naming_it_and_its_biggest_variables(tmp_path: Path) -> None:
    app = cdk.App(context={"environment": "dev", "engine": "athena"}, outdir=str(tmp_path))
    _, pipeline = build_app(app)
    LakelineFunction(  # acknowledged for cdk-nag as every function is, so the bound is what fails
        pipeline,
        "Oversized",
        handler_package="stage_a_router",
        description="a router given its settings the old way",
        environment={
            "SMALL": "x",
            "RULES": "r" * 3_000,
            "SETTINGS": "s" * 1_000,
            "QUEUE": pipeline.queue_b.queue.queue_url,
        },
    )
    with pytest.raises(Exception) as caught:
        app.synth()
    message = str(caught.value)
    assert "Oversized" in message and f"over Lambda's {ENVIRONMENT_LIMIT_BYTES}-byte (4 KB) limit" in message
    assert f"the biggest variables: RULES (3005 bytes), SETTINGS (1008 bytes), QUEUE ({5 + REFERENCE_BYTES} bytes)" in (
        message
    )
