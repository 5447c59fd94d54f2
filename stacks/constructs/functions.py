"""Lambda functions from this repository's code, without Docker.

Code ships with ``Code.from_asset`` and a *local* bundling step (no Docker, no network): it copies the
packages handlers import (``lambdas/``, ``lakeline/``, ``stage_a/``, ``stage_b/``) and vendors the one
pure-Python library they need that no layer provides (sqlglot, for stage B's step SQL) from the
installed environment. Everything else comes from the public Powertools layer (pydantic, aws-xray-sdk)
and the runtime (boto3, python-dateutil); a unit test imports every handler with nothing else available.
"""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path
from typing import Any, cast

import aws_cdk as cdk
import jsii
from aws_cdk import Duration, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from stacks.nag import acknowledge

REPO_ROOT = Path(__file__).resolve().parents[2]
RUNTIME = lambda_.Runtime.PYTHON_3_13
BASIC_EXECUTION_ROLE = (
    "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]"
)
CODE_PACKAGES = ("lambdas", "lakeline", "stage_a", "stage_b")
VENDORED_PACKAGES = ("sqlglot",)
CODE_EXCLUDES = [
    "*",
    *(pattern for package in CODE_PACKAGES for pattern in (f"!{package}", f"!{package}/**")),
    "**/__pycache__",
    "**/*.pyc",
]


def _copy_package(source: Path, target: Path) -> None:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.pyi"))


@jsii.implements(cdk.ILocalBundling)
class LambdaCodeBundle:
    """Local bundling of the Lambda code: our packages plus vendored pure-Python dependencies."""

    def try_bundle(self, output_dir: str, options: Any) -> bool:
        del options  # the Docker image and command are never used: bundling is always local
        output = Path(output_dir)
        for package in CODE_PACKAGES:
            _copy_package(REPO_ROOT / package, output / package)
        for name in VENDORED_PACKAGES:
            module = importlib.import_module(name)
            assert module.__file__ is not None
            _copy_package(Path(module.__file__).parent, output / name)
        return True


class SharedLambdaCode(Construct):
    """One code asset and one Powertools layer reference per stack, shared by every function."""

    def __init__(self, scope: Construct, construct_id: str, *, powertools_layer_parameter: str) -> None:
        super().__init__(scope, construct_id)
        self.code = lambda_.Code.from_asset(
            str(REPO_ROOT),
            exclude=CODE_EXCLUDES,
            # Hash what is shipped, so a different vendored version is a different asset.
            asset_hash_type=cdk.AssetHashType.OUTPUT,
            bundling=cdk.BundlingOptions(
                image=RUNTIME.bundling_image,
                # jsii calls try_bundle(output_dir, options) positionally, unlike the typed protocol.
                local=cast(cdk.ILocalBundling, LambdaCodeBundle()),
                command=["false"],
            ),
        )
        # The public layer's ARN is published in SSM by the Powertools team; resolved at deploy time.
        layer_arn = ssm.StringParameter.value_for_string_parameter(self, powertools_layer_parameter)
        self.powertools = lambda_.LayerVersion.from_layer_version_arn(self, "PowertoolsLayer", layer_arn)

    @classmethod
    def of(cls, scope: Construct) -> SharedLambdaCode:
        stack = Stack.of(scope)
        found = stack.node.try_find_child("SharedLambdaCode")
        if not isinstance(found, SharedLambdaCode):
            raise RuntimeError("create SharedLambdaCode in the stack before any LakelineFunction")
        return found


class LakelineFunction(Construct):
    """A thin handler ``lambdas/<name>/handler.py`` with tracing, structured logs and a log retention."""

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
        if not (REPO_ROOT / "lambdas" / handler_package / "handler.py").is_file():
            raise FileNotFoundError(f"no handler at lambdas/{handler_package}/handler.py")
        shared = SharedLambdaCode.of(self)
        self.log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.ONE_MONTH)
        self.function = lambda_.Function(
            self,
            "Function",
            description=description,
            runtime=RUNTIME,
            handler=f"lambdas.{handler_package}.handler.handler",
            code=shared.code,
            layers=[shared.powertools],
            timeout=timeout or Duration.minutes(1),
            memory_size=memory_size,
            tracing=lambda_.Tracing.ACTIVE,
            log_group=self.log_group,
            environment={
                "POWERTOOLS_SERVICE_NAME": handler_package.replace("_", "-"),
                "POWERTOOLS_METRICS_NAMESPACE": "Lakeline",
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
