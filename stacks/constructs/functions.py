"""Lambda functions from this repository's code, without Docker.

Code ships with ``Code.from_asset`` and a *local* bundling step (no Docker, no network): it copies the
packages handlers import (``lambdas/``, ``lakeline/``, ``stage_a/``, ``stage_b/``) and vendors the one
pure-Python library they need that no layer provides (sqlglot, for stage B's step SQL) from the
installed environment. Everything else comes from the public Powertools layer (pydantic, aws-xray-sdk)
and the runtime (boto3, python-dateutil); a unit test imports every handler with nothing else available.

The handlers that emit OpenLineage events (``OPENLINEAGE_HANDLERS``) also get the OpenLineage layer, built
the same way: the installed distributions in openlineage-python's requirement closure for the Lambda runtime,
less those the runtime or the Powertools layer provide. The venv's Python is older than the runtime's, so no
compiled module is ever shipped; every dependency in the closure runs without its compiled parts (PyYAML and
charset_normalizer have pure-Python fallbacks, and bundling fails on a compiled module that has none).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import shutil
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any, cast

import aws_cdk as cdk
import jsii
from aws_cdk import Duration, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_ssm as ssm
from constructs import Construct
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from stacks.nag import acknowledge

REPO_ROOT = Path(__file__).resolve().parents[2]
RUNTIME = lambda_.Runtime.PYTHON_3_13
BASIC_EXECUTION_ROLE = (
    "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]"
)
CODE_PACKAGES = ("lambdas", "lakeline", "stage_a", "stage_b", "stage_lineage")
VENDORED_PACKAGES = ("sqlglot",)
CODE_EXCLUDES = [
    "*",
    *(pattern for package in CODE_PACKAGES for pattern in (f"!{package}", f"!{package}/**")),
    "**/__pycache__",
    "**/*.pyc",
]


# The handlers that emit OpenLineage events through openlineage-python: they get the OpenLineage layer.
OPENLINEAGE_HANDLERS = frozenset({"stage_a_post_update", "stage_a_failure", "stage_b_post_update", "stage_b_failure"})
OPENLINEAGE_DISTRIBUTION = "openlineage-python"
# Distributions already on the function's path, left out of the OpenLineage layer so that one copy (theirs)
# is imported: the Python 3.13 runtime's AWS SDK (boto3, botocore, s3transfer, jmespath, urllib3,
# python-dateutil, six) and the public Powertools layer (Powertools itself, pydantic with pydantic-core,
# annotated-types, aws-xray-sdk with wrapt). typing-extensions is shipped although Powertools has it:
# anyio needs a recent one, and this layer comes after Powertools', so its (backward compatible) copy wins.
PROVIDED_DISTRIBUTIONS = frozenset(
    canonicalize_name(name)
    for name in (
        "boto3",
        "botocore",
        "s3transfer",
        "jmespath",
        "urllib3",
        "python-dateutil",
        "six",
        "aws-lambda-powertools",
        "pydantic",
        "pydantic-core",
        "annotated-types",
        "aws-xray-sdk",
        "wrapt",
    )
)
# The runtime the requirement markers are evaluated for: RUNTIME on x86_64 (the Powertools layer's architecture).
RUNTIME_MARKERS = {
    "python_version": "3.13",
    "python_full_version": "3.13.0",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "os_name": "posix",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
}
COMPILED_SUFFIXES = (".so", ".pyd")
# Compiled modules without a .py next to them whose package imports fine without them.
COMPILED_WITH_FALLBACK = frozenset({"yaml/_yaml"})  # PyYAML uses its pure-Python loader and emitter instead


def requirement_closure(root: str, markers: Mapping[str, str] = RUNTIME_MARKERS) -> list[str]:
    """Canonical names of ``root`` and every distribution it requires, transitively, on the target
    described by ``markers`` (requirements of extras are not followed). Each must be installed here."""
    # This machine's values stand in for the markers the runtime does not pin (platform_release, ...).
    environment = {**{key: str(value) for key, value in default_environment().items()}, **markers, "extra": ""}
    found: list[str] = []
    pending = [canonicalize_name(root)]
    while pending:
        name = pending.pop(0)
        if name in found:
            continue
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise RuntimeError(
                f"{name} (needed by {root}) is not installed: install the project's dependencies"
            ) from None
        found.append(name)
        for text in distribution.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate(environment):
                pending.append(canonicalize_name(requirement.name))
    return found


def openlineage_layer_distributions() -> list[str]:
    return [name for name in requirement_closure(OPENLINEAGE_DISTRIBUTION) if name not in PROVIDED_DISTRIBUTIONS]


def copy_distribution(name: str, target: Path) -> None:
    """Copy an installed distribution's files (its modules and its ``.dist-info``, which
    ``importlib.metadata`` reads) into ``target``, leaving out compiled modules and bytecode."""
    distribution = importlib.metadata.distribution(name)
    if distribution.files is None:
        raise RuntimeError(f"{name} does not list its files (no RECORD): cannot copy it into a layer")
    shipped = {PurePosixPath(str(file)) for file in distribution.files}
    for file in sorted(shipped):
        if file.parts[0] == ".." or "__pycache__" in file.parts or file.suffix == ".pyc":
            continue  # console scripts outside site-packages, bytecode of another Python
        if file.suffix in COMPILED_SUFFIXES:
            module = file.parent / file.name.split(".", 1)[0]
            if module.with_suffix(".py") not in shipped and str(module) not in COMPILED_WITH_FALLBACK:
                raise RuntimeError(
                    f"{name} ships {file}, compiled for this venv's Python and without a pure-Python module next "
                    "to it: the layer cannot provide it for the Lambda runtime"
                )
            continue
        destination = target.joinpath(*file.parts)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(str(distribution.locate_file(file))), destination)


def bundle_openlineage_layer(output: Path) -> Path:
    """Write the OpenLineage layer's content into ``output`` (``python/...``); returns the python folder."""
    site = output / "python"
    for name in openlineage_layer_distributions():
        copy_distribution(name, site)
    return site


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


@jsii.implements(cdk.ILocalBundling)
class OpenLineageLayerBundle:
    """Local bundling of the OpenLineage layer (see ``bundle_openlineage_layer``)."""

    def try_bundle(self, output_dir: str, options: Any) -> bool:
        del options  # always local, like LambdaCodeBundle
        bundle_openlineage_layer(Path(output_dir))
        return True


class SharedLambdaCode(Construct):
    """One code asset and one Powertools layer reference per stack, shared by every function, and the
    OpenLineage layer, created with the first function that needs it."""

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
        self._openlineage: lambda_.LayerVersion | None = None

    def openlineage_layer(self) -> lambda_.LayerVersion:
        if self._openlineage is None:
            self._openlineage = lambda_.LayerVersion(
                self,
                "OpenLineageLayer",
                description="openlineage-python and its dependencies that the runtime and Powertools lack",
                compatible_runtimes=[RUNTIME],
                code=lambda_.Code.from_asset(
                    str(REPO_ROOT),
                    exclude=["*"],  # nothing of the repository: the bundle is copied from the installed packages
                    asset_hash_type=cdk.AssetHashType.OUTPUT,
                    bundling=cdk.BundlingOptions(
                        image=RUNTIME.bundling_image,
                        local=cast(cdk.ILocalBundling, OpenLineageLayerBundle()),
                        command=["false"],
                    ),
                ),
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
        self.log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.ONE_MONTH)
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
