"""Builds the Lakeline stacks into a CDK app; used by ``app.py`` and by the infrastructure tests."""

from __future__ import annotations

import os

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from stacks.config import LakelineConfig
from stacks.nag import AcknowledgeGrantWildcards
from stacks.pipeline_stack import PipelineStack
from stacks.storage_stack import StorageStack

CONTEXT_KEYS = (
    "environment",
    "engine",
    "lineage_ttl_hours",
    "table_settings",
    "default_table_settings",
    "powertools_layer_parameter",
    "glue_version",
    "glue_workers",
    "alarm_email",
    "trace_schedule",
    "trace_settle_seconds",
    "router_max_concurrency",
    "openlineage_environment",
)


def config_from_app(app: cdk.App) -> LakelineConfig:
    context = {key: app.node.try_get_context(key) for key in CONTEXT_KEYS}
    return LakelineConfig.from_context({key: value for key, value in context.items() if value is not None})


def build_app(app: cdk.App, config: LakelineConfig | None = None) -> tuple[StorageStack, PipelineStack]:
    config = config or config_from_app(app)
    account, region = os.environ.get("CDK_DEFAULT_ACCOUNT"), os.environ.get("CDK_DEFAULT_REGION")
    env = cdk.Environment(account=account, region=region) if account and region else None
    prefix = f"Lakeline-{config.environment}"
    storage = StorageStack(app, f"{prefix}-Storage", config=config, env=env, description="Lakeline data (stateful)")
    pipeline = PipelineStack(
        app, f"{prefix}-Pipeline", config=config, storage=storage, env=env, description="Lakeline pipeline (stateless)"
    )
    pipeline.add_stack_dependency(storage)
    cdk.Tags.of(app).add("project", "lakeline")
    cdk.Tags.of(app).add("lakeline:environment", config.environment)
    cdk.Aspects.of(app).add(AcknowledgeGrantWildcards())
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return storage, pipeline
