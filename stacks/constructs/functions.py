"""Lambda functions from this repository's code: one shared code asset and the layers (packaged by
``stacks.constructs.bundling``), tracing, structured logs and a log retention."""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from lakeline.names import METRICS_NAMESPACE
from stacks.constructs.bundling import (
    CODE_EXCLUDES,
    REPO_ROOT,
    LambdaCodeBundle,
    OpenLineageLayerBundle,
    local_asset,
    settings_document,
)
from stacks.nag import acknowledge

RUNTIME = lambda_.Runtime.PYTHON_3_13
BASIC_EXECUTION_ROLE = (
    "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]"
)
# The handlers that emit OpenLineage events through openlineage-python: they get the OpenLineage layer.
OPENLINEAGE_HANDLERS = frozenset(
    {"stage_a_post_update", "stage_a_failure", "stage_b_post_update", "stage_b_failure", "stranded_run"}
)


class SharedLambdaCode(Construct):
    """One code asset and one Powertools layer reference per stack, shared by every function, and the
    OpenLineage layer, created with the first function that needs it. The code asset carries the project's
    table settings (``lambdas.table_settings``), which outgrow Lambda's 4 KB of environment once tables have
    quality checks: in the asset, each deployment's settings are its code's, replaced with it in one update."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        powertools_layer_parameter: str,
        log_key: kms.IKey,
        table_settings: dict[str, Any],
        default_table_settings: dict[str, Any],
    ) -> None:
        super().__init__(scope, construct_id)
        # The functions log SQL, keys and partition values: their logs are encrypted with the data key (#40).
        self.log_key = log_key
        settings = settings_document(table_settings, default_table_settings)
        self.code = local_asset(LambdaCodeBundle(settings), runtime=RUNTIME, exclude=CODE_EXCLUDES, content=settings)
        # The public layer's ARN is published in SSM by the Powertools team; resolved at deploy time.
        layer_arn = ssm.StringParameter.value_for_string_parameter(self, powertools_layer_parameter)
        self.powertools = lambda_.LayerVersion.from_layer_version_arn(self, "PowertoolsLayer", layer_arn)
        self._openlineage: lambda_.LayerVersion | None = None

    def openlineage_layer(self) -> lambda_.LayerVersion:
        if self._openlineage is None:
            self._openlineage = lambda_.LayerVersion(
                self,
                "OpenLineageLayer",
                description="openlineage-python and its dependencies that the runtime and Powertools lack",
                compatible_runtimes=[RUNTIME],
                # Nothing of the repository: the bundle is copied from the installed packages.
                code=local_asset(OpenLineageLayerBundle(), runtime=RUNTIME, exclude=["*"]),
            )
        return self._openlineage

    @classmethod
    def of(cls, scope: Construct) -> SharedLambdaCode:
        stack = Stack.of(scope)
        found = stack.node.try_find_child("SharedLambdaCode")
        if not isinstance(found, SharedLambdaCode):
            raise RuntimeError("create SharedLambdaCode in the stack before any LakelineFunction")
        return found


class LakelineFunction(Construct):
    """A thin handler ``lambdas/<name>/handler.py`` with tracing, structured logs and a log retention;
    with the OpenLineage layer when it is one of ``OPENLINEAGE_HANDLERS``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        handler_package: str,
        description: str,
        environment: dict[str, str] | None = None,
        timeout: Duration | None = None,
        memory_size: int = 512,
    ) -> None:
        super().__init__(scope, construct_id)
        self.handler_package = handler_package
        if not (REPO_ROOT / "lambdas" / handler_package / "handler.py").is_file():
            raise FileNotFoundError(f"no handler at lambdas/{handler_package}/handler.py")
        shared = SharedLambdaCode.of(self)
        layers: list[lambda_.ILayerVersion] = [shared.powertools]
        if handler_package in OPENLINEAGE_HANDLERS:
            layers.append(shared.openlineage_layer())
        # Kept for the app's log_retention_days (stacks/app.py LogRetention).
        self.log_group = logs.LogGroup(self, "Logs", encryption_key=shared.log_key)
        self.function = lambda_.Function(
            self,
            "Function",
            description=description,
            runtime=RUNTIME,
            handler=f"lambdas.{handler_package}.handler.handler",
            code=shared.code,
            layers=layers,
            timeout=timeout or Duration.minutes(1),
            memory_size=memory_size,
            tracing=lambda_.Tracing.ACTIVE,
            log_group=self.log_group,
            environment={
                "POWERTOOLS_SERVICE_NAME": handler_package.replace("_", "-"),
                "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
                **(environment or {}),
            },
        )
        assert self.function.role is not None
        acknowledge(
            self.function.role,
            {
                BASIC_EXECUTION_ROLE: "AWSLambdaBasicExecutionRole only lets the function write its own logs.",
            },
        )
        acknowledge(
            self.function,
            {
                "AwsSolutions-L1": f"{RUNTIME.name} is the newest runtime the public Powertools layer and Lakeline's "
                "CI cover; the runtime is one constant (stacks/constructs/functions.py RUNTIME) to move up."
            },
        )
