"""Builds the Lakeline stacks into a CDK app; used by ``app.py`` and by the infrastructure tests."""

from __future__ import annotations

import json
import os
from pathlib import Path

import aws_cdk as cdk
import jsii
from aws_cdk import aws_logs as logs
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

from stacks.config import LakelineConfig
from stacks.environment_bound import EnvironmentBound
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
    "runs_in_flight",
    "openlineage_environment",
    "athena_scan_cutoff_gb",
    "derived_noncurrent_days",
    "noncurrent_days",
    "incomplete_upload_days",
    "athena_results_days",
    "log_retention_days",
)


@jsii.implements(cdk.IAspect)
class LogRetention:
    """Every log group of the app keeps ``days`` (``log_retention_days``, #40): the functions', the state machines',
    the Glue job's and any a construct adds later, set in one place rather than in each construct."""

    def __init__(self, days: int) -> None:
        self.days = days

    def visit(self, node: IConstruct) -> None:
        if isinstance(node, logs.CfnLogGroup):
            node.retention_in_days = self.days


CDK_JSON = Path(__file__).resolve().parents[1] / "cdk.json"
FEATURE_FLAG_PREFIX = "@aws-cdk/"


def apply_feature_flags(app: cdk.App, cdk_json: Path = CDK_JSON) -> None:
    """cdk.json's feature flags, which ``cdk synth`` gives the app as context, set on an app made in-process that
    lacks them (the tests', the rehearsal's): without them ``@aws-cdk/aws-iam:minimizePolicies`` and the others are
    off there, and the templates tested are not the ones deployed. A flag the app was given is kept."""
    for key, value in json.loads(cdk_json.read_text())["context"].items():
        if key.startswith(FEATURE_FLAG_PREFIX) and app.node.try_get_context(key) is None:
            app.node.set_context(key, value)


def config_from_app(app: cdk.App) -> LakelineConfig:
    context = {key: app.node.try_get_context(key) for key in CONTEXT_KEYS}
    return LakelineConfig.from_context({key: value for key, value in context.items() if value is not None})


def build_app(app: cdk.App, config: LakelineConfig | None = None) -> tuple[StorageStack, PipelineStack]:
    apply_feature_flags(app)  # before the stacks: context cannot be set once the app has children
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
    cdk.Aspects.of(app).add(LogRetention(config.log_retention_days))
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), EnvironmentBound())
    return storage, pipeline
